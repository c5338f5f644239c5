#pragma once
// A machine profile: what the cost model knows of a machine. Bundled profiles
// hold nominal and published figures; measure/ writes calibrated ones in the
// same format (profiles/README.md documents every field).
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "advisor/core/config.hpp"
#include "advisor/core/kernel_class.hpp"

namespace ff {

// One collective's measured times by message size on one geometry (a table
// entry's by_op "curve"), and the α and busbw fitted to them: pricing
// interpolates the times (MODEL.md §2), α·steps of each being latency.
struct MeasuredCurve {
  std::vector<double> bytes, seconds;  // ascending bytes; seconds as priced: padded_times of the file's
  double alpha_s = 0, busbw = 0;       // the fit's, as loaded (beyond the last size: that busbw)
};

struct LinkParams {
  double alpha_s = 0;  // latency per ring step
  double busbw = 0;    // bytes/s, nccl-tests' bus bandwidth
  // Collectives measured apart, indexed all-reduce, all-gather, reduce-scatter
  // (an MPI's reduce-scatter may run far below its all-reduce on the same
  // links); where by_op is false the joint figures above apply.
  std::array<bool, 3> by_op{};
  std::array<double, 3> op_alpha_s{}, op_busbw{};
  // The same collectives issued non-blocking and waited for at once (what
  // OAR, ORS and OAG issue); where nb_by_op is false the blocking figure applies.
  std::array<bool, 3> nb_by_op{};
  std::array<double, 3> nb_alpha_s{}, nb_busbw{};
  // Measured at this group size (a table entry of a measured section): the
  // fit holds whatever algorithm the library chose for small messages.
  // Otherwise an all-reduce is priced as the cheaper of ring and recursive
  // doubling (MODEL.md §2).
  bool measured_here = false;
  // Blocking collectives' measured curves, where the profile has them; what
  // scale_link does to α and busbw applies to their latency and the rest.
  std::array<std::shared_ptr<const MeasuredCurve>, 3> curve{};
  double curve_alpha_factor = 1, curve_bw_factor = 1;
  // Rings over many nodes (MODEL.md §2, "Rings at scale"): a fixed cost per
  // call, and the library's small-chunk protocol (NCCL's LL: less latency per
  // step at a fraction of the bandwidth), taken where it is faster. 0: none.
  // LL's share of the busbw: half, its wire efficiency (4 bytes of data and
  // a flag in each 8-byte line), unless a fit over enough LL points says.
  double call_s = 0;
  double ll_alpha_s = 0;
  double ll_bw_fraction = 0.5;
  // A table entry measured on switch groups (MODEL.md §2, "Switch groups"):
  // how many rings shared each uplink while it was timed. A group priced at
  // that count has the uplink in its figures already. -1: not stated.
  int rings_per_uplink = -1;
};
enum class CollectiveForm { Ring, TwoLevel, Pat };  // MachineProfile::collectives
const char* collective_form_name(CollectiveForm f);  // "ring", "two-level", "pat"
// Bandwidths × bw_factor, latencies × alpha_factor, per-op figures too.
void scale_link(LinkParams& l, double bw_factor, double alpha_factor);

struct IntraEntry {  // a group inside one node
  long long stride = 1;
  int size = 2;
  LinkParams link;
};

struct InterEntry {  // a group across nodes, `groups_per_node` groups sharing each node's NICs
  int groups_per_node = 1;
  int size = 2;
  LinkParams link;
  // Members of one group on each of its nodes: size / members_per_node nodes
  // per group. Not implied by the rest (4 ranks on 4 nodes or on 2).
  int members_per_node = 1;
};

// GEMM efficiency (achieved / peak) on a grid of (m, n, k), interpolated
// linearly in log2 of each dimension and clamped at the edges.
struct GemmTable {
  std::vector<double> m, n, k;  // ascending
  std::vector<double> eff;      // [i_m][i_n][i_k], row-major
};

// A low-precision GEMM's time as published rates follow it (MODEL.md §2,
// "Kernels"): t = 2mnk / (efficiency_max · peak) + fixed, the fixed part the
// launch, ramp and last wave a small GEMM cannot amortise.
struct GemmRate {
  double efficiency_max = 0;  // 0: no rate; the table prices
  double fixed_s = 0;
};

// A pair exchanging messages, both directions at once (a pipeline's forward
// activations and backward gradients): t = α + bytes / bw, bw per direction.
struct P2PLink {
  double alpha_s = 0;
  double bw = 0;  // bytes/s each way
};

// A flash-attention kernel's forward+backward rate against sequence length,
// for one head size and mask (MODEL.md §2, "Attention"): efficiency of peak
// = efficiency_max · S / (S + half_seq), the form published rates follow
// (launch and tile fill matter at short sequences, the math at long ones).
struct AttentionCurve {
  int head_dim = 128;
  bool causal = true;
  double efficiency_max = 0;  // of the dtype's peak, as S grows
  double half_seq = 0;        // S at which the kernel reaches half of it
};

// How far a profile's figures are trusted (MODEL.md §8, "Ranges"): each
// kind of term's relative error, from held-out measurements or a fit's
// spread where the profile states them ("uncertainty"), else these
// defaults, assumed.
struct Uncertainty {
  bool stated = false;
  double compute = 0.10;  // GEMM, attention and memory-bound kernels
  double intra = 0.15;    // collectives inside a node
  double inter = 0.20;    // collectives across nodes, up to checked_nodes
  int checked_nodes = 0;  // the largest span the inter figure was checked at; 0: no limit stated
  double beyond = 0.30;   // groups spanning more nodes than checked_nodes
};

// A two-level fabric (MODEL.md §2, "Switch groups"): nodes behind one
// switch in groups of nodes_per_group consecutive nodes, each group joined to
// the rest by one uplink that every ring crossing it shares.
struct SwitchGroups {
  int nodes_per_group = 0;  // 0: no such tier (one switch, or not described)
  double busbw = 0;         // bytes/s: one ring crossing the uplink alone
  double alpha_s = 0;       // per ring step across it; 0: not given (the node tier's)
};

struct MachineProfile {
  std::string name;
  std::string description;
  int gpus_per_node = 1;
  double peak_flops_bf16 = 0;        // FLOP/s per GPU, dense
  double peak_flops_fp32 = 0;
  double attention_efficiency = 0;   // fraction of peak a flash-attention kernel reaches
  // Published or measured flash-attention rates (bf16/fp16) by head size and
  // mask; where a profile has them they price flash attention instead.
  std::vector<AttentionCurve> flash_attention;
  double hbm_bandwidth = 0;          // bytes/s per GPU
  double elementwise_efficiency = 0; // fraction of hbm_bandwidth element-wise kernels reach
  double hbm_capacity = 0;           // bytes per GPU
  double memory_reserve = 0;         // bytes per GPU the framework, NCCL and fragmentation take
  double overlap_efficiency = 0;     // fraction of a compute window communication can hide under
  double nonblocking_slowdown = 1;   // a collective issued non-blocking (to be overlapped) takes this × its blocking time
  double dp_bucket_bytes = 25.0 * 1048576;  // ODP's gradient buckets (PyTorch DDP's default 25 MiB)
  LinkParams intra_default;          // a group inside a node absent from `intra`
  std::vector<IntraEntry> intra;
  LinkParams inter_node;             // one group per node: alpha and the node's busbw
  std::vector<InterEntry> inter;
  SwitchGroups switch_groups;        // "switch_groups"; absent: every node behind one switch
  GemmTable gemm_bf16, gemm_fp32;
  // Where set (gemm.rate), it prices bf16 and fp16 GEMMs instead of the table.
  GemmRate gemm_rate;
  // A memory-bound kernel's launch and ramp on top of its bytes, and the
  // least time the host takes to issue any kernel (compute.launch_us;
  // MODEL.md §2, "Kernels"). GEMM and attention rates include theirs.
  double launch_s = 0;
  // A memory-bound class's own efficiency and cost a launch where measured
  // (memory.elementwise_by_class; 0 and −1: elementwise_efficiency and
  // launch_s price it).
  std::array<double, kKernelClasses> elementwise_by_class{};
  std::array<double, kKernelClasses> launch_by_class_s = [] {
    std::array<double, kKernelClasses> a{};
    a.fill(-1);
    return a;
  }();
  // Compute under a collective in flight runs this fraction slower: the
  // collective's kernels take SMs and memory bandwidth (overlap.compute_slowdown).
  double compute_slowdown = 0;
  // How collectives of groups spanning nodes run (MODEL.md §2): NCCL's and
  // RCCL's rings; two-level where faster (inside each node, then one GPU a
  // node across: the PCCL library's form); or, as NCCL >= 2.23.4 does by
  // itself, PAT for the all-gathers and reduce-scatters of groups with one
  // GPU a node where faster. Set by the advisor's --collectives, not read
  // from a profile: it is the library's, not the machine's.
  CollectiveForm collectives = CollectiveForm::Ring;
  Uncertainty uncertainty;
  double peak_flops_fp16 = 0;        // 0: the profile gives none (the advisor refuses --dtype fp16); likewise bf16
  // Point-to-point, measured or stated ("p2p"); absent, a pair is priced as a
  // 2-rank all-gather on the same ranks, whose wire pattern it is (MODEL.md §9).
  bool has_p2p = false;
  P2PLink p2p_intra;  // a pair inside a node
  P2PLink p2p_inter;  // a pair across nodes, alone on its nodes' NICs; c pairs share them
  // The host link and host memory ("host"), for offload; absent, offload is refused.
  bool has_host = false;
  double host_link_bw = 0;   // bytes/s each way, one GPU copying alone
  double host_node_bw = 0;   // bytes/s each way, all of a node's GPUs copying at once, in total
  double host_memory = 0;    // bytes per node offloaded state may use
  // Δ the links were measured with (measure --poll-us: every MPI wait
  // MPI_Test + sleep Δ, as a paced engine waits; 0: MPI_Wait); unset when
  // the profile does not say ("poll_us" absent).
  std::optional<double> poll_s;
  // The idle time before each timed operation (measure --gap-us; 0: back to
  // back); unset when the profile does not say ("gap_us" absent).
  std::optional<double> gap_s;
  // The engine's device on this machine, for launch lines: "cpu", or "cuda"
  // where the GPUs are NVIDIA's ("engine_device"; absent: cpu).
  std::string engine_device = "cpu";

  double peak_flops(Dtype t) const {
    return t == Dtype::BF16 ? peak_flops_bf16 : t == Dtype::FP16 ? peak_flops_fp16 : peak_flops_fp32;
  }
  // fp16 and bf16 run on the same tensor cores at the same rate: one table.
  const GemmTable& gemm(Dtype t) const { return t == Dtype::FP32 ? gemm_fp32 : gemm_bf16; }
  // What one GPU gets each way when every GPU of its node copies at once.
  double host_bw_per_gpu() const { return std::min(host_link_bw, host_node_bw / gpus_per_node); }
};

// Bundled names (profiles/*.json compiled into the binary), default first.
std::vector<std::string> bundled_machines();
const char* default_machine();
// A bundled name or a path to a profile JSON; throws InputError naming the
// known machines, or the file and field that is wrong.
MachineProfile load_machine(const std::string& name_or_file);
// The same lookup, giving the JSON unparsed into a profile and, in `origin`,
// how errors should name it.
nlohmann::json machine_json(const std::string& name_or_file, std::string& origin);
MachineProfile machine_from_json(const nlohmann::json& j, const std::string& origin);

// For "how sure": the same machine with one tier's bandwidth (and, by
// alpha_factor, its latencies) or the GEMM efficiency scaled.
enum class Tier { Intra, Inter, Gemm };
const char* tier_name(Tier t);
MachineProfile scaled(const MachineProfile& p, Tier t, double factor, double alpha_factor = 1);

}  // namespace ff
