#pragma once
// The configuration record every part reads and writes (MODEL.md §3).
#include <array>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "advisor/core/grid.hpp"

namespace ff {

// fp16 has bf16's bytes and tensor-core rate (V100 and older have no bf16:
// fp16 with dynamic loss scaling, as the AxoNN paper trained on Summit).
enum class Dtype { BF16, FP32, FP16 };
const char* dtype_name(Dtype t);
Dtype parse_dtype(const std::string& s);  // "bf16" | "fp16" | "fp32"; throws InputError
inline bool low_precision(Dtype t) { return t != Dtype::FP32; }
inline int dtype_bytes(Dtype t) { return low_precision(t) ? 2 : 4; }

struct Overlap {
  bool oar = false;  // input-gradient all-reduce under the weight-gradient GEMM
  bool ors = false;  // weight-gradient reduce-scatter under the next layers' backward
  bool oag = false;  // next layer's weight all-gather prefetched under this compute
  // Data-parallel gradients reduced in buckets, each started as the last
  // micro-step's backward produces it (MODEL.md §10).
  bool odp = false;
  // Sequence parallelism's collectives over Y pipelined with the GEMMs they
  // feed or drain (Megatron's --tp-comm-overlap, Transformer Engine's
  // userbuffers; MODEL.md §13).
  bool otp = false;
  std::string str() const;  // "oar,ors,oag,odp,otp" or "none"
  bool operator==(const Overlap&) const = default;
};
// "oar,ors", "none", "all" (oar, ors and oag: AxoNN's tensor-parallel
// overlaps, as records written before odp and otp mean it); throws InputError.
Overlap parse_overlap(const std::string& s);

// What backward recomputes (MODEL.md §13): nothing; the attention core
// (QKᵀ, softmax, ·V: Korthikanti et al.'s selective recompute, what
// Megatron's --recompute-granularity selective runs); or every block's
// forward from its kept input (full).
enum class Recompute : uint8_t { None, Selective, Full };
const char* recompute_name(Recompute r);  // "none", "selective", "full"
// One of those names; throws InputError.
Recompute parse_recompute(const std::string& s);

struct Config {
  Grid grid;
  Order order;
  int micro_batch = 1;  // sequences per rank per micro-step
  Recompute recompute = Recompute::None;
  Overlap overlap;
  Dtype dtype = Dtype::BF16;
  bool offload = false;  // master weights and Adam state in host memory (MODEL.md §9)
  bool shard_optimizer = false;  // master weights and Adam state divided over D (ZeRO-1, MODEL.md §10)
  // Megatron's sequence parallelism on Y (MODEL.md §13): the norm and residual
  // regions split over Y along the sequence.
  bool sequence_parallel = false;
  // Megatron's interleaved 1F1B (MODEL.md §9): v model chunks per stage, of
  // L/(P·v) blocks each, chunk c of stage i being virtual stage c·P + i.
  int virtual_stages = 1;
  bool operator==(const Config&) const = default;
};

nlohmann::json to_json(const Config& c);
// One line for people and report keys: "2,2,1,2 xyzd mb2 rc oar,ors".
std::string config_label(const Config& c);
// {"x", "y", "z", "data"}: how records spell a value per axis (exposed
// communication, bytes per step).
nlohmann::json per_axis_json(const PerAxis<double>& v);
class Fields;
// The reverse: every axis' number from such an object; throws InputError
// naming the field when one is missing or not a number.
PerAxis<double> per_axis_numbers(const Fields& f);
Config config_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace ff
