#pragma once
// What `measure` records on a machine, as taken, before any fitting. The same
// record comes from the MPI and NCCL backends and, for collectives, from an
// imported nccl-tests log; `calibrate` (calibrate.hpp) fits a profile from it.
// The JSON form is kept verbatim in a fitted profile's "raw" field.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/core/collective.hpp"
#include "advisor/core/config.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff {

// Where a collective's group sits: inside one node, (stride, size); or across
// nodes, `size` members, `members_per_node` on each of size / members_per_node
// nodes, with `groups_per_node` such groups active on every node at once
// (sharing its NICs). Across switch groups a group's nodes may lie
// `node_stride` apart, as an axis whose stride spans switch groups lays them.
struct Geometry {
  bool inter = false;
  long long stride = 1;     // intra: rank distance between consecutive members
  int size = 2;
  int groups_per_node = 1;  // inter only
  int members_per_node = 1; // inter only
  int node_stride = 1;      // inter only: node distance between a group's consecutive nodes
};

// One message size of one collective on one geometry. Each repeat is
// One message size timed nccl-tests' way: warm-up, `iters` back-to-back
// operations between two synchronizations, per-op time, maximum over ranks,
// one time per repeat (repeats interleaved with the other sizes and
// geometries). What collectives, pairs and host-link copies share.
struct TimedSize {
  double bytes = 0;
  int iters = 0;
  std::vector<double> times_s;  // one per repeat
  double median_s() const;
  double min_s() const;
  double max_s() const;
};

// `bytes` is nccl-tests' buffer size (all-gather: output, reduce-scatter: input).
struct CollectiveSample : TimedSize {
  Coll op = Coll::AllReduce;
  // Issued as MPI_Iallreduce & co. and waited for at once: what a collective
  // the engine overlaps (OAR, ORS, OAG) costs before any hiding. An MPI may
  // run these with other algorithms than the blocking ones (Open MPI: libnbc).
  bool nonblocking = false;
  Geometry geometry;
};

// One GEMM shape, timed with every rank of the node running the same shape at
// once. `layout` is "nn" (forward), "nt" (input gradient), "tn" (weight
// gradient): C[m,n] = op(A)[m,k] · op(B)[k,n].
struct GemmSample {
  long long m = 0, n = 0, k = 0;
  std::string layout = "nn";
  std::vector<double> times_s;  // one per repeat, slowest rank of the node
  double median_s() const;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// The engine's own training step of `model` on a one-rank grid (fp32, no
// recompute), every rank running its replica at once: per step, the mean
// over ranks of the time outside communication and of that, in GEMM. The
// first step warms up. Calibrate fits the element-wise efficiency to it.
struct EngineStepSample {
  ModelSpec model;
  int micro_batch = 1;
  std::vector<double> compute_s, gemm_s;
};

// One of the engine's own kernels timed alone on a GPU (measure --backend
// nccl --model): "flash_attention" (causal, bf16, forward then backward at
// sequence length `seq`, `flops` the engine level's count: 2·S²·d_h per
// sequence and head forward, 3.5 times that backward) or a memory-bound
// kernel by name with the bytes it reads and writes. Times per call.
struct GpuKernelSample {
  std::string kernel;
  double seq = 0;
  int head_dim = 0;
  double flops = 0, bytes = 0;
  std::vector<double> times_s;
  double median_s() const;
};

// A GEMM (bf16, m×n×k) timed alone and beside `blocks` blocks, one an SM,
// that copy or only hold their SMs, on one GPU: measure's proxy for a
// collective's kernels in flight under compute (MODEL.md §2, "Compute
// under a collective").
struct HidingSample {
  double m = 0, n = 0, k = 0;
  int blocks = 0;
  bool copying = true;                    // the blocks copy at full speed; false: they only hold their SMs
  std::vector<double> alone_s, beside_s;  // per GEMM, one per repeat
  double copy_bytes_per_s = 0;            // what the copy moved meanwhile (read + write)
  double slowdown() const;                // median beside / median alone − 1
};

// One message size on one pair geometry (`size` 2): every pair of it
// exchanging `bytes` each way at once, each rank posting MPI_Irecv and
// MPI_Isend to its partner (ncclRecv/ncclSend in one group) and waiting for
// both; nccl-tests' sendrecv loop otherwise. Inside a node a pair is `stride`
// ranks apart; across nodes it has one rank on each of 2 nodes and
// `groups_per_node` pairs share every node's links. `bytes`: what one rank
// sends (and receives) per exchange.
struct P2PSample : TimedSize {
  Geometry geometry;
};

// One size of one direction of the host link: `gpus` GPUs of a node (1, or
// all of them) each copying `bytes` between pinned host memory and its
// device at once, nccl-tests' timing (warm-up, back-to-back copies, slowest
// rank). On CPU ranks a host-to-host memcpy stands in (Measurement::host_link_kind).
// `bytes`: one GPU's copy.
struct HostLinkSample : TimedSize {
  bool to_device = true;      // "h2d", else "d2h"
  int gpus = 1;               // GPUs of one node copying at once
};

struct Measurement {
  std::string backend;      // "mpi", "nccl" or "nccl-tests"
  int ranks = 0;
  int gpus_per_node = 0;    // ranks per node used for placement
  int nodes = 0;
  std::string command;      // the command line that made it
  std::string host;
  std::string date;         // ISO 8601, UTC
  nlohmann::json versions = nlohmann::json::object();  // "mpi", "blas", "nccl", "cuda", "fourfold"
  nlohmann::json topology = nlohmann::json::object();  // hwloc: cores, numa_nodes, gpus, memory_bytes, cpu model
  std::vector<CollectiveSample> collectives;
  Dtype gemm_dtype = Dtype::FP32;         // fp32 on CPU BLAS, bf16 on cuBLAS
  std::vector<GemmSample> gemm;
  double gemm_peak_flops = 0;   // per rank, best large-GEMM rate with the node's ranks all running; 0 if not measured
  double stream_bytes_per_s = 0;  // per rank, triad-like copy with the node's ranks all running; 0 if not measured
  double memory_bytes_per_rank = 0;  // node memory / ranks per node; 0 if unknown
  std::vector<EngineStepSample> engine_steps;  // CPU ranks with a model given; empty otherwise
  std::vector<GpuKernelSample> gpu_kernels;    // GPU ranks with a model given; empty otherwise
  double launch_s = 0;  // GPU: a kernel launched back to back after another, per launch; 0 if not measured
  std::vector<HidingSample> hiding;  // GPU ranks with a model given; empty otherwise
  std::vector<P2PSample> p2p;             // pairs (send-recv); empty if not measured
  std::vector<HostLinkSample> host_link;  // empty if not measured
  // What the host-link samples time: "cuda-pinned" (cudaMemcpyAsync between
  // pinned host memory and the GPU) or "host-memcpy" (CPU ranks: a memcpy
  // between two host buffers stands in; it is not a GPU link).
  std::string host_link_kind;
  double host_memory_bytes = 0;  // a node's RAM (the host's, shared by the nodes it stands for); 0 if unknown
  // Δ (measure --poll-us): the MPI backend waited for every operation by
  // MPI_Test + sleep Δ, as a paced engine waits; 0: MPI_Wait. Unset where
  // the record does not say (NCCL, nccl-tests, records from before it).
  std::optional<double> poll_s;
  // measure --gap-us: each timed iteration followed a barrier and this much
  // idle time, as a paced engine's collectives follow device time; 0: back
  // to back. Unset where the record does not say.
  std::optional<double> gap_s;
  // measure --nodes-per-group: the nodes sit in switch groups of this many
  // consecutive nodes joined by uplinks (MODEL.md §2, "Switch groups"); 0:
  // not stated (one switch, as far as the record says).
  int nodes_per_group = 0;
};

// How many of an inter-node geometry's groups cross one switch group's
// uplink, the most over switch groups, as measure lays the geometry out
// (blocks of span · node_stride nodes from node 0, span = size /
// members_per_node; in each, node_stride lanes of groups whose nodes lie
// node_stride apart; ranks that do not tile sitting out); 0 when none leaves
// its switch group.
int rings_per_uplink(const Geometry& g, int nodes, int nodes_per_group);

// The "format" a measurement record carries.
inline constexpr const char* kMeasurementFormat = "fourfold-measurement/1";

// nccl-tests' bus-bandwidth factor: busbw = algbw × factor, all-reduce
// 2(g−1)/g, all-gather and reduce-scatter (g−1)/g.
double busbw_factor(Coll c, int group_size);
// "all-reduce", "all-gather", "reduce-scatter" (coll_name's spelling); false otherwise.
bool coll_from_name(const std::string& name, Coll& c);

// The record's spelling of a host-link kind, for people: what was timed.
std::string host_link_description(const std::string& kind);

// Adds `s` to `into`, as more repeats of a sample of the same collective,
// geometry and size when there is one.
void merge_sample(std::vector<CollectiveSample>& into, const CollectiveSample& s);
void merge_sample(std::vector<P2PSample>& into, const P2PSample& s);
void merge_sample(std::vector<HostLinkSample>& into, const HostLinkSample& s);
// Several records of one machine as one: collectives, pairs and host-link samples merged, GEMM samples
// joined (one dtype), the best peak and the first stream and memory figures
// kept. Throws InputError when they disagree on ranks per node, GEMM dtype or
// the poll interval Δ (links waited for in two ways are not one machine).
Measurement merge_measurements(const std::vector<Measurement>& ms);

// Middle value, or the mean of the two middle values; 0 for no data.
double median(std::vector<double> v);

nlohmann::json to_json(const Measurement& m);
// `origin` names the file in errors ("FILE: field 'collectives[3].bytes': ...").
// Accepts a measurement record or a profile whose "raw" holds one.
Measurement measurement_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace ff
