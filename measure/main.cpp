// measure: microbenchmarks that calibrate a machine profile (MODEL.md §5).
//
//   mpirun -np 8 measure --backend mpi --gpus-per-node 4 --out local.json
//   srun -N 4 --ntasks-per-node 4 -m block measure --backend nccl --out mine.json
//
// Collectives on every group geometry the advisor prices, pairs (send-recv)
// inside and across nodes, the host link, GEMM throughput, memory bandwidth
// and the node's topology, fitted into a profile by
// ff::calibrate_profile and written once, atomically, at the very end.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/core/atomic_file.hpp"
#include "advisor/core/error.hpp"
#include "engine/runtime/check.hpp"
#include "measure/backend.hpp"
#include "measure/engine_step.hpp"
#include "measure/gemm.hpp"
#include "measure/gpu_kernels.hpp"
#include "measure/groups.hpp"
#include "measure/harness.hpp"
#include "measure/host_link.hpp"
#include "measure/p2p.hpp"
#include "measure/stream.hpp"
#include "measure/table.hpp"
#include "measure/topology.hpp"

namespace ff::measure {
namespace {

struct Options {
  std::string backend = "mpi";
  int gpus_per_node = 0;  // 0: from MPI_COMM_TYPE_SHARED
  std::string min_bytes, max_bytes;
  int iters = 20, warmup = 5, repeats = 5;
  std::string ops = "all-reduce,all-gather,reduce-scatter,send-recv";
  std::string intra, inter;
  bool quick = false, skip_gemm = false, skip_host = false, no_check = false, nonblocking = true;
  std::string model, gemm_grids;
  int micro_batch = 1;
  int engine_steps = 4;
  double poll_us = 0;  // Δ: 0 waits in MPI_Wait; > 0 MPI_Test + sleep Δ (a paced engine's wait)
  double gap_us = 0;   // 0: iterations back to back; > 0 each alone after this much idle time
  int nodes_per_group = 0;  // 0: one switch; else switch groups of this many nodes (the profile's switch_groups)
  std::string base, name, out, raw;
};

int g_rank = 0;

// Progress and errors: rank 0 speaks for everyone.
void say(const std::string& line) {
  if (g_rank == 0) std::fprintf(stderr, "%s\n", line.c_str());
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return fmt(b == std::floor(b) ? "%.0f" : "%.1f", b) + " " + units[u];
}

// "1K", "16M", "1G", "4096", "64KiB": powers of 1024.
size_t parse_bytes(const std::string& flag, const std::string& text) {
  std::string what = flag + " '" + text + "'";
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    throw InputError(what + ": expected a size such as 4096, 1K, 16M or 1G");
  }
  std::string unit = text.substr(used);
  double scale = 1;
  if (!unit.empty()) {
    char u = char(std::toupper(unit[0]));
    std::string rest = unit.substr(1);
    if ((u != 'K' && u != 'M' && u != 'G' && u != 'B') || (u != 'B' && !rest.empty() && rest != "B" && rest != "iB") ||
        (u == 'B' && !rest.empty()))
      throw InputError(what + ": unknown unit '" + unit + "' (use K, M or G, powers of 1024)");
    scale = u == 'K' ? 1024.0 : u == 'M' ? 1024.0 * 1024 : u == 'G' ? 1024.0 * 1024 * 1024 : 1;
  }
  double bytes = v * scale;
  if (!(bytes >= 1) || bytes != std::floor(bytes))
    throw InputError(what + ": a message size must be a positive whole number of bytes");
  size_t b = size_t(bytes);
  if ((b & (b - 1)) != 0) throw InputError(what + ": message sizes are swept in powers of two; " + human_bytes(bytes) +
                                           " is not one (try " + human_bytes(double(std::bit_floor(b))) + ")");
  if (b < sizeof(float)) throw InputError(what + ": the smallest message is one float, 4 bytes");
  return b;
}

// --ops: the collectives, and whether pairs (send-recv) are timed.
struct Ops {
  std::vector<Coll> colls;
  bool send_recv = false;
};

Ops parse_ops(const std::string& text) {
  Ops ops;
  std::stringstream ss(text);
  std::string op;
  while (std::getline(ss, op, ',')) {
    std::string k;
    for (char c : op)
      if (c != '-' && c != '_') k += char(std::tolower(c));
    if (k == "allreduce") ops.colls.push_back(Coll::AllReduce);
    else if (k == "allgather") ops.colls.push_back(Coll::AllGather);
    else if (k == "reducescatter") ops.colls.push_back(Coll::ReduceScatter);
    else if (k == "sendrecv") ops.send_recv = true;
    else
      throw InputError("--ops '" + text + "': unknown operation '" + op +
                       "' (all-reduce, all-gather, reduce-scatter, send-recv)");
  }
  if (ops.colls.empty() && !ops.send_recv) throw InputError("--ops '" + text + "': name at least one operation");
  return ops;
}

// A collective as timed: blocking, or issued non-blocking and waited for at once.
struct Form {
  Coll op;
  bool nonblocking = false;
};

std::string form_name(Coll op, bool nonblocking) {
  return std::string(ff::coll_name(op)) + (nonblocking ? " (non-blocking)" : "");
}

// Every rank evaluates `ok` for itself; all learn whether every rank is ok.
// Rank 0 prints `why` (its own, or a note that another rank failed).
void agree(bool ok, const std::string& why) {
  int all = ok ? 1 : 0, mine = all;
  MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  if (!all) throw InputError(ok ? "on another rank: " + why : why);
}

// The rank count a launcher announced, where it says more than 1: a binary
// started by a launcher of another MPI sees a world of 1 in every process.
std::string launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 1) return std::string(v) + " (" + name + ")";
  return "";
}

// Where rank 0 will write: checked before the run, not after an hour of it.
std::string output_problem(const std::string& flag, const std::string& path) {
  if (path.empty()) return "";
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
  if (dir.empty()) dir = "/";
  if (access(dir.c_str(), W_OK) != 0) return flag + " '" + path + "': directory '" + dir + "' does not exist or is not writable";
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0) return flag + " '" + path + "': not writable";
  return "";
}

struct Node {
  int per_node = 0;       // ranks per node used for placement
  int host_ranks = 0;     // ranks actually sharing this host
  MPI_Comm comm = MPI_COMM_NULL;
  std::string source;     // where per_node came from
};

// Ranks per node from MPI_COMM_TYPE_SHARED, checked to be equal and placed in
// blocks, unless --gpus-per-node sets it (one host standing for several nodes).
Node detect_node(const Options& o, int rank, int ranks) {
  Node n;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &n.comm));
  int local = 0;
  MPI_CHECK(MPI_Comm_rank(n.comm, &local));
  MPI_CHECK(MPI_Comm_size(n.comm, &n.host_ranks));
  if (o.gpus_per_node > 0) {
    n.per_node = o.gpus_per_node;
    n.source = "--gpus-per-node";
    if (ranks % n.per_node != 0)
      throw InputError("--gpus-per-node " + std::to_string(n.per_node) + ": " + std::to_string(ranks) +
                       " ranks do not fill whole nodes of " + std::to_string(n.per_node));
    return n;
  }
  int lo = 0, hi = 0, first = rank - local, first_seen = 0;
  MPI_CHECK(MPI_Allreduce(&n.host_ranks, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Allreduce(&n.host_ranks, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (lo != hi)
    throw InputError("nodes hold different numbers of ranks (" + std::to_string(lo) + " to " + std::to_string(hi) +
                     "); launch the same count on every node, or set --gpus-per-node");
  MPI_CHECK(MPI_Bcast(&first, 1, MPI_INT, 0, n.comm));  // world rank of the node's local rank 0
  first_seen = first;
  agree(first_seen == rank - local && rank % lo == local,
        "ranks are not placed on nodes in blocks (rank r on node r / " + std::to_string(lo) +
            "), so the groups measured would not be the ones the advisor prices; launch with "
            "`mpirun --map-by ppr:" + std::to_string(lo) + ":node` or `srun -m block`");
  n.per_node = lo;
  n.source = "MPI_COMM_TYPE_SHARED";
  return n;
}

// One geometry: all its groups, and this rank's part in them.
struct GeometryRun {
  ff::Geometry geometry;
  std::vector<std::vector<int>> groups;
  Membership mine;
};

// One row of the results: a collective, a geometry, a message size.
struct Row {
  ff::CollectiveSample sample;
  size_t count = 0;       // floats per rank passed to the backend
  int groups = 0;         // groups running at once
  std::vector<double> iterations;  // every timed iteration, max over ranks, all repeats
};

void print_table(const std::vector<Row>& rows) {
  if (g_rank != 0) return;
  std::vector<TableRow> table;
  for (const auto& r : rows) {
    const auto& s = r.sample;
    table.push_back({form_name(s.op, s.nonblocking) + "  " + geometry_name(s.geometry),
                     std::to_string(r.groups) + " group" + (r.groups == 1 ? "" : "s") + " at once", s.bytes, r.count,
                     s.iters, s.times_s, r.iterations, ff::busbw_factor(s.op, s.geometry.size)});
  }
  print_table(table);
}

// What --help says above the options.
constexpr const char* kAbout =
    "measure: microbenchmarks that calibrate a fourfold machine profile.\n\n"
    "Launch it like the training job, one rank per GPU, ranks placed on nodes in blocks:\n"
    "  srun -N 4 --ntasks-per-node 4 -m block measure --backend nccl --out mine.json\n"
    "  mpirun -np 8 --oversubscribe measure --backend mpi --gpus-per-node 4 --out local.json\n"
    "then: advisor recommend --model gpt-80b --gpus 1024 --machine mine.json\n\n"
    "It times all-reduce, all-gather and reduce-scatter on every group geometry the advisor prices\n"
    "(inside a node: each stride and size that fits; across nodes: each count of groups sharing a\n"
    "node, with one member or several on each node), with all groups of a geometry running at once,\n"
    "each blocking and (mpi backend) issued non-blocking then waited for, as the overlap flags issue it;\n"
    "pairs exchanging a message each way at once (send-recv: pipeline stages) on the 2-rank geometries;\n"
    "the host link (pinned host<->GPU copies, one GPU and all at once; a memcpy stands in on CPU ranks);\n"
    "then GEMM throughput (OpenBLAS sgemm, or cuBLAS bf16) and memory bandwidth with every rank busy.\n"
    "Progress goes to stderr, the results table to stdout, the fitted profile to --out (written once,\n"
    "at the end).";

// The flags, into `o`, whose initial values are the defaults --help shows.
void add_options(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  app.add_option("--backend", o.backend, "mpi (CPU buffers) or nccl (GPU buffers, one GPU per rank)");
  app.add_option("--gpus-per-node", o.gpus_per_node,
                 "ranks per node for placement [default: the ranks sharing a host, MPI_COMM_TYPE_SHARED]; "
                 "set it to let one host stand for several nodes")
      ->check(CLI::PositiveNumber)
      ->default_str("");
  app.add_option("--min-bytes", o.min_bytes, "smallest message, a power of two (K, M, G suffixes) [default 1K]");
  app.add_option("--max-bytes", o.max_bytes, "largest message [default 16M for mpi, 256M for nccl]");
  app.add_option("--iters", o.iters, "back-to-back operations per timing");
  app.add_option("--warmup", o.warmup, "untimed operations before each timing");
  app.add_option("--repeats", o.repeats, "timings per point, interleaved over sizes and geometries; the median is kept");
  app.add_option("--ops", o.ops,
                 "operations to time: collectives, and send-recv (pairs on the geometries of size 2: intra STRIDEx2, "
                 "inter Kx2; by default only where the geometries asked for hold one)");
  app.add_flag("--nonblocking,!--no-nonblocking", o.nonblocking,
               "also time each collective issued non-blocking (MPI_Iallreduce & co., then MPI_Wait), the form the "
               "overlap flags use; mpi backend only, NCCL's calls are all asynchronous");
  app.add_option("--intra", o.intra,
                 "intra-node geometries STRIDExSIZE,... (default: every one with stride·size <= ranks per node; 'none')");
  app.add_option("--inter", o.inter,
                 "inter-node geometries GROUPS_PER_NODExSIZE[xMEMBERS_PER_NODE][sNODE_STRIDE],... (default: "
                 "1..ranks-per-node groups, sizes the powers of two up to the node count and the node count; then M = "
                 "2..ranks-per-node members per node, sizes M times those, 1..ranks-per-node/M groups; with "
                 "--nodes-per-group K also one member a node on nodes K apart, 1..ranks-per-node groups; 'none')");
  app.add_option("--poll-us", o.poll_us,
                 "mpi backend: wait for every timed operation (collectives, blocking form included, and pairs) by "
                 "MPI_Test + sleep of this many µs, as the engine's ranks wait with --device paced --poll-us; give "
                 "the same Δ the validation will run with (recorded as poll_us). 0: MPI_Wait and blocking calls. "
                 "The nccl backend ignores it")
      ->capture_default_str();
  app.add_option("--gap-us", o.gap_us,
                 "mpi backend: time every iteration alone, after a barrier and this many µs of idle time, as a paced "
                 "engine's collectives follow time on its device clock (recorded as gap_us); 0: back to back, "
                 "nccl-tests' way. The nccl backend ignores it")
      ->capture_default_str();
  app.add_option("--nodes-per-group", o.nodes_per_group,
                 "the nodes sit in switch groups of this many consecutive nodes, joined by uplinks (a two-level "
                 "fabric; emulate.sh up ... --groups K): the node link is fitted on groups inside one switch group, "
                 "and the profile's switch_groups section on groups that leave theirs; groups on nodes K apart "
                 "(every one crossing) are timed as well, each keyed in the profile by its rings an uplink")
      ->check(CLI::PositiveNumber)
      ->default_str("");
  app.add_flag("--quick", o.quick, "a smoke run in seconds: 1K..64K, 5 iterations, 3 repeats, small GEMMs");
  app.add_flag("--skip-gemm", o.skip_gemm, "time no GEMMs (then --out needs --base for the GEMM table)");
  app.add_flag("--skip-host", o.skip_host, "time no host link (host<->GPU copies, or their memcpy stand-in)");
  app.add_flag("--no-check", o.no_check, "skip verifying each collective's result before timing it");
  app.add_option("--model", o.model, "also time the GEMMs the advisor prices for this model (preset name or file)");
  app.add_option("--gemm-grids", o.gemm_grids,
                 "with --model: G_x x G_y pairs, e.g. 1x1,2x2 [default: powers of two with G_x·G_y <= ranks per node]");
  app.add_option("--micro-batch", o.micro_batch, "with --model: sequences per rank per micro-step")
      ->check(CLI::PositiveNumber);
  app.add_option("--engine-steps", o.engine_steps,
                 "with --model on CPU ranks: time this many engine training steps on a one-rank grid, every rank "
                 "at once, to fit the element-wise efficiency (0: skip)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--base", o.base,
                 "profile (bundled name or file) the measured sections override; without it, unmeasured numbers "
                 "are stated CPU-rank assumptions");
  app.add_option("--name", o.name, "profile name [default: --out's file name without .json]");
  app.add_option("--out", o.out, "write the calibrated profile here (for advisor --machine FILE)");
  app.add_option("--raw", o.raw, "write the raw measurement record here (advisor calibrate --from FILE refits it)");
}

// What a run measures, settled from the options and the ranks' placement
// before anything is timed, so that the phases below only carry it out.
struct Plan {
  // As given, with --quick's and the backend's defaults filled in, --name
  // derived from --out and --gap-us 0 where the backend ignores it.
  Options o;
  int rank = 0, ranks = 1;
  bool gpu = false;    // --backend nccl
  bool alone = false;  // 1 rank: the host link, GEMMs and memory only
  Ops ops;
  size_t min_bytes = 0, max_bytes = 0;
  std::vector<size_t> sizes;  // min_bytes .. max_bytes, the powers of two
  SweepOptions sweep;
  Node node;
  int per_node = 0, nodes = 0;
  std::vector<ff::Geometry> geometries;      // the collectives' (none when pairs only)
  std::vector<ff::Geometry> pairs;           // send-recv's
  std::vector<std::pair<int, int>> gemm_xy;  // with --model: the grids whose GEMMs are timed
  ff::ModelSpec model;
  nlohmann::json base;
};

// The options checked, the ranks placed on nodes and the geometries chosen.
Plan make_plan(Options o, const CLI::App& app, int rank, int ranks) {
  // Arguments: every rank checks the same things the same way, so all agree
  // without talking.
  if (o.backend != "mpi" && o.backend != "nccl")
    throw InputError("--backend '" + o.backend + "': expected mpi (CPU buffers) or nccl (GPU buffers)");
  bool gpu = o.backend == "nccl";
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  if (o.quick) {
    if (!given("--min-bytes")) o.min_bytes = "1K";
    if (!given("--max-bytes")) o.max_bytes = "64K";
    if (!given("--iters")) o.iters = 5;
    if (!given("--warmup")) o.warmup = 1;
    if (!given("--repeats")) o.repeats = 3;
  }
  if (o.min_bytes.empty()) o.min_bytes = "1K";
  if (o.max_bytes.empty()) o.max_bytes = gpu ? "256M" : "16M";
  size_t min_bytes = parse_bytes("--min-bytes", o.min_bytes), max_bytes = parse_bytes("--max-bytes", o.max_bytes);
  if (min_bytes > max_bytes)
    throw InputError("--min-bytes " + o.min_bytes + " is larger than --max-bytes " + o.max_bytes);
  if (max_bytes > (size_t(1) << 32))
    throw InputError("--max-bytes " + o.max_bytes + ": at most 4G (an MPI count is a 32-bit int of floats)");
  if (o.iters < 1) throw InputError("--iters must be at least 1");
  if (o.warmup < 0) throw InputError("--warmup must be at least 0");
  if (o.repeats < 1) throw InputError("--repeats must be at least 1");
  if (!(o.poll_us >= 0) || !std::isfinite(o.poll_us))
    throw InputError("--poll-us " + fmt("%g", o.poll_us) + ": expected microseconds >= 0 (0: MPI_Wait)");
  if (gpu && o.poll_us > 0) say("note: --poll-us is ignored by the nccl backend (its waits are on GPU streams)");
  if (!(o.gap_us >= 0) || !std::isfinite(o.gap_us) || o.gap_us > 1e6)
    throw InputError("--gap-us " + fmt("%g", o.gap_us) + ": expected microseconds from 0 (back to back) to 1e6");
  if (gpu && o.gap_us > 0) {
    say("note: --gap-us is ignored by the nccl backend (its operations are timed back to back on GPU events)");
    o.gap_us = 0;
  }
  Ops ops = parse_ops(o.ops);
  if (!o.out.empty() && o.out == o.raw) throw InputError("--out and --raw name the same file '" + o.out + "'");
  if (o.name.empty()) {
    std::string file = o.out.substr(o.out.find_last_of('/') + 1);
    o.name = file.size() > 5 && file.ends_with(".json") ? file.substr(0, file.size() - 5) : file;
    if (o.name.empty()) o.name = "measured";
  }
  if (!o.gemm_grids.empty() && o.model.empty()) throw InputError("--gemm-grids needs --model");
  std::vector<std::pair<int, int>> gemm_xy;
  if (!o.gemm_grids.empty()) gemm_xy = parse_pairs("--gemm-grids", o.gemm_grids, "G_XxG_Y, e.g. 1x1,2x2");
  ff::ModelSpec model;
  if (!o.model.empty()) model = ff::load_model(o.model);  // same file on every rank: same verdict
  nlohmann::json base;
  if (!o.base.empty()) base = ff::profile_json(o.base);
  // One rank, as on a machine with one GPU: no group to time a collective
  // or a pair on, but the GEMMs, the memory and the host link are this
  // GPU's, and a one-GPU run needs nothing else; the links come from --base.
  const bool alone = ranks == 1;
  if (alone) {
    if (std::string n = launched_ranks(); !n.empty())
      throw InputError("MPI sees 1 rank but the launcher started " + n + "; this binary's MPI is not the launcher's, "
                       "so each process runs as a 1-rank job (launch it with this MPI's mpirun, or srun --mpi=pmix)");
    for (const char* flag : {"--ops", "--intra", "--inter"})
      if (given(flag))
        throw InputError(std::string(flag) + ": 1 rank has no group to time collectives or pairs on; launch 2 or "
                         "more (mpirun -np N), one per GPU");
    if (!o.out.empty() && o.base.empty())
      throw InputError("1 rank times no collective, so --out needs --base NAME|FILE to take the links from");
    ops.colls.clear();
    ops.send_recv = false;
    say("measure: 1 rank: no collective or pair to time (2 ranks at least); the host link, GEMMs and memory only");
  }
  std::string out_problem = output_problem("--out", o.out);
  if (out_problem.empty()) out_problem = output_problem("--raw", o.raw);
  agree(rank != 0 || out_problem.empty(), out_problem);

  // Placement and geometries.
  Node node = detect_node(o, rank, ranks);
  int per_node = node.per_node, nodes = ranks / per_node;
  if (o.nodes_per_group > 0 && (nodes % o.nodes_per_group != 0 || o.nodes_per_group >= nodes))
    throw InputError("--nodes-per-group " + std::to_string(o.nodes_per_group) + ": expected a divisor of the " +
                     std::to_string(nodes) + " nodes below it (at least 2 switch groups)");
  std::vector<ff::Geometry> geometries;
  if (alone) {
    // nothing to time on
  } else if (o.intra.empty() && o.inter.empty()) {
    geometries = default_geometries(ranks, per_node, o.nodes_per_group);
  } else {
    auto intra = parse_geometries(o.intra.empty() ? "none" : o.intra, false);
    auto inter = parse_geometries(o.inter.empty() ? "none" : o.inter, true);
    for (auto& g : inter) g.stride = per_node;
    geometries = intra;
    geometries.insert(geometries.end(), inter.begin(), inter.end());
  }
  for (const auto& g : geometries) {
    if (std::string why = geometry_problem(g, ranks, per_node); !why.empty()) throw InputError(why);
    // Nodes apart matter where they put a group's members in other switch
    // groups; the profile keys such entries by their rings an uplink.
    if (g.node_stride > 1 && (o.nodes_per_group <= 0 || g.node_stride % o.nodes_per_group != 0))
      throw InputError(geometry_name(g) + ": nodes apart need --nodes-per-group, and a multiple of it (every " +
                       "group then leaves its switch group)");
  }
  if (geometries.empty() && !alone)
    throw InputError("nothing to measure: no group geometry fits " + std::to_string(ranks) + " ranks with " +
                     std::to_string(per_node) + " per node");
  std::vector<ff::Geometry> pairs;
  if (ops.send_recv) {
    pairs = pair_geometries(geometries);
    // By default pairs come along where the geometries asked for hold one;
    // named in --ops, they must.
    if (pairs.empty() && !given("--ops")) ops.send_recv = false;
    else if (pairs.empty())
      throw InputError("--ops send-recv: no pair among the geometries measured (a pair is 2 ranks: --intra STRIDEx2 "
                       "inside a node, --inter Kx2 across nodes, K pairs sharing a node)");
  }
  if (ops.colls.empty()) geometries.clear();  // pairs only
  // What calibrate_profile cannot do without a base profile, said now rather
  // than after the run.
  bool any_intra = std::any_of(geometries.begin(), geometries.end(), [](const ff::Geometry& g) { return !g.inter; });
  if (!o.out.empty() && o.base.empty()) {
    if (ops.colls.empty())
      throw InputError("--ops " + o.ops + " times no collective, so --out needs --base NAME|FILE to take the "
                       "collectives' bandwidths from");
    if (o.skip_gemm) throw InputError("--skip-gemm with --out needs --base NAME|FILE to take the GEMM table from");
    if (!any_intra)
      throw InputError("no intra-node geometry is measured (" + std::to_string(per_node) +
                       " rank per node), so --out needs --base NAME|FILE to take intra-node bandwidths from");
  }
  if (gpu && !o.out.empty() && o.base.empty())
    say("note: without --base, what measure cannot time (attention efficiency, overlap, memory reserve) is filled "
        "with CPU-rank assumptions; on GPUs pass --base NAME|FILE (e.g. --base perlmutter)");
  if (o.nodes_per_group > 0) {
    bool inside = false, leaves = false;
    for (const auto& g : geometries) {
      if (!g.inter) continue;
      (ff::rings_per_uplink(g, nodes, o.nodes_per_group) > 0 ? leaves : inside) = true;
    }
    if (!o.out.empty() && !(inside && leaves))
      throw InputError("--nodes-per-group " + std::to_string(o.nodes_per_group) + ": the cross-node geometries " +
                       "measured need groups inside one switch group (the node link) and groups leaving theirs " +
                       "(the uplinks); --inter has " + (inside ? "none of the latter" : "none of the former"));
  }
  std::vector<size_t> sizes;
  for (size_t b = min_bytes; b <= max_bytes; b *= 2) sizes.push_back(b);
  // Without --gemm-grids, --model's GEMMs on every power-of-two grid within a node.
  if (!o.model.empty() && gemm_xy.empty())
    for (int x = 1; x <= per_node; x *= 2)
      for (int y = 1; x * y <= per_node; y *= 2) gemm_xy.push_back({x, y});
  SweepOptions sweep{o.warmup, o.iters, o.repeats, !o.no_check, o.gap_us * 1e-6};
  return Plan{.o = std::move(o),
              .rank = rank,
              .ranks = ranks,
              .gpu = gpu,
              .alone = alone,
              .ops = std::move(ops),
              .min_bytes = min_bytes,
              .max_bytes = max_bytes,
              .sizes = std::move(sizes),
              .sweep = sweep,
              .node = node,
              .per_node = per_node,
              .nodes = nodes,
              .geometries = std::move(geometries),
              .pairs = std::move(pairs),
              .gemm_xy = std::move(gemm_xy),
              .model = std::move(model),
              .base = std::move(base)};
}

// What the run measures with: the backend, and the memory each rank has.
struct Rig {
  std::unique_ptr<Backend> backend;
  double node_memory = 0;      // the host's RAM
  double memory_per_rank = 0;  // this rank's GPU, or its share of the host's RAM
};

// The backend, and memory for two buffers of the largest message.
Rig open_backend(const Plan& p) {
  Rig rig;
  std::string why;
  if (p.gpu) rig.backend = make_nccl_backend(p.node.comm, &why);
  else rig.backend = make_mpi_backend(p.o.poll_us * 1e-6);
  agree(rig.backend != nullptr, why);
  rig.node_memory = node_memory_bytes();
  rig.memory_per_rank = p.gpu ? gpu_memory_bytes() : rig.node_memory / p.node.host_ranks;
  if (rig.memory_per_rank > 0 && 2.0 * double(p.max_bytes) > 0.5 * rig.memory_per_rank)
    throw InputError("--max-bytes " + p.o.max_bytes + ": two buffers of it need more than half of the " +
                     human_bytes(rig.memory_per_rank) + " each rank has");
  return rig;
}

// Waiting by polling, the blocking form is the non-blocking call waited
// for: one form, timed once.
std::vector<Form> collective_forms(const Plan& p, const Backend& backend) {
  std::vector<Form> forms;
  for (bool nb : {false, true})
    if (!nb || (p.o.nonblocking && backend.has_nonblocking() && !(p.o.poll_us > 0)))
      for (Coll op : p.ops.colls) forms.push_back({op, nb});
  return forms;
}

// What the run will time, and how, in one line.
void announce(const Plan& p, const Backend& backend, const std::vector<Form>& forms) {
  const Options& o = p.o;
  say("measure: " + std::to_string(p.ranks) + (p.alone ? " rank, " : " ranks, ") + std::to_string(p.per_node) +
      " per node (" + p.node.source + "), " + std::to_string(p.nodes) + " node" + (p.nodes == 1 ? "" : "s") +
      "; backend " + backend.name() + "; " +
      (forms.empty() ? ""
                     : std::to_string(p.geometries.size()) + " geometries x " + std::to_string(forms.size()) +
                           " collectives" + (forms.size() > p.ops.colls.size() ? " (blocking and non-blocking)" : "")) +
      (p.ops.send_recv
           ? (forms.empty() ? "" : " and ") + std::to_string(p.pairs.size()) + " pair geometries (send-recv)"
           : "") +
      (p.alone ? (o.skip_host ? "no host link" : "the host link") : "") +
      (p.alone && o.skip_host ? ""
                              : " x " + std::to_string(p.sizes.size()) + " sizes (" + human_bytes(double(p.min_bytes)) +
                                    " .. " + human_bytes(double(p.max_bytes)) + "), " + std::to_string(o.repeats) +
                                    " repeats of " + std::to_string(o.iters) + " iterations after " +
                                    std::to_string(o.warmup) + " warm-up") +
      (!p.gpu && o.poll_us > 0 ? "; every wait MPI_Test + sleep " + fmt("%g", o.poll_us) + " us (--poll-us)" : "") +
      (o.gap_us > 0 ? "; each iteration alone after " + fmt("%g", o.gap_us) + " us idle (--gap-us)" : ""));
}

// Every geometry's groups, and this rank's part in them.
std::vector<GeometryRun> join_groups(const Plan& p, Backend& backend) {
  std::vector<GeometryRun> runs;
  for (const auto& geo : p.geometries) {
    GeometryRun r{geo, geometry_groups(geo, p.ranks, p.per_node), {}};
    r.mine = join_group(backend, r.groups, p.rank);
    runs.push_back(std::move(r));
  }
  return runs;
}

// Every form on every geometry at the smallest and the largest size; throws
// at the first wrong result.
void check_contents(const Plan& p, Backend& backend, const std::vector<GeometryRun>& runs,
                    const std::vector<Form>& forms, float* send, float* recv) {
  for (auto& r : runs)
    for (Form f : forms)
      for (size_t bytes : {p.min_bytes, p.max_bytes}) {
        size_t count = op_count(f.op, bytes, r.geometry.size);
        long long wrong = 0, total = 0;
        if (r.mine.group && count > 0)
          wrong = check_collective(backend, *r.mine.group, f.op, f.nonblocking, r.mine.members, send, recv, count);
        MPI_CHECK(MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        if (total > 0)
          throw std::runtime_error(form_name(f.op, f.nonblocking) + " " + geometry_name(r.geometry) + " at " +
                                   human_bytes(double(bytes)) + ": " + std::to_string(total) +
                                   " wrong elements; the " + backend.name() + " library or this machine is broken");
      }
  say("contents checked: every collective on every geometry, at " + human_bytes(double(p.min_bytes)) + " and " +
      human_bytes(double(p.max_bytes)));
}

// Timings. Repeats outermost, so each point's repeats are spread over the
// whole run and a noisy minute spoils one repeat of many points, not all
// repeats of one.
std::vector<Row> sweep_collectives(const Plan& p, Backend& backend, const std::vector<GeometryRun>& runs,
                                   const std::vector<Form>& forms, float* send, float* recv) {
  const Options& o = p.o;
  const std::vector<size_t>& sizes = p.sizes;
  std::vector<Row> rows;
  std::vector<std::vector<size_t>> row_of(runs.size() * forms.size(), std::vector<size_t>(sizes.size(), SIZE_MAX));
  for (size_t gi = 0; gi < runs.size(); ++gi)
    for (size_t oi = 0; oi < forms.size(); ++oi)
      for (size_t si = 0; si < sizes.size(); ++si) {
        int g = runs[gi].geometry.size;
        size_t count = op_count(forms[oi].op, sizes[si], g);
        if (count == 0) continue;  // less than a float per rank
        Row row;
        row.sample.op = forms[oi].op;
        row.sample.nonblocking = forms[oi].nonblocking;
        row.sample.geometry = runs[gi].geometry;
        row.sample.bytes = op_bytes(forms[oi].op, count, g);
        row.sample.iters = o.iters;
        row.count = count;
        row.groups = int(runs[gi].groups.size());
        row_of[gi * forms.size() + oi][si] = rows.size();
        rows.push_back(row);
      }
  int step = 0, steps = o.repeats * int(runs.size() * forms.size());
  double start = MPI_Wtime();
  for (int rep = 0; rep < o.repeats; ++rep)
    for (size_t gi = 0; gi < runs.size(); ++gi)
      for (size_t oi = 0; oi < forms.size(); ++oi) {
        Row* last = nullptr;
        for (size_t si = 0; si < sizes.size(); ++si) {
          size_t ri = row_of[gi * forms.size() + oi][si];
          if (ri == SIZE_MAX) continue;
          Row& row = rows[ri];
          Timing t = time_collective(backend, runs[gi].mine.group.get(), forms[oi].op, forms[oi].nonblocking, send, recv,
                                     row.count, p.sweep);
          row.sample.times_s.push_back(t.per_op_s);
          row.iterations.insert(row.iterations.end(), t.iter_s.begin(), t.iter_s.end());
          last = &row;
        }
        ++step;
        if (last) {
          double busbw = last->sample.bytes / last->sample.times_s.back() * ff::busbw_factor(forms[oi].op, last->sample.geometry.size);
          say("[" + std::to_string(step) + "/" + std::to_string(steps) + "] " + form_name(forms[oi].op, forms[oi].nonblocking) + " " +
              geometry_name(runs[gi].geometry) + ", repeat " + std::to_string(rep + 1) + "/" +
              std::to_string(o.repeats) + ": " + human_bytes(double(p.min_bytes)) + " .. " +
              human_bytes(last->sample.bytes) + ", busbw " + fmt("%.3g", busbw / 1e9) + " GB/s at " +
              human_bytes(last->sample.bytes) + "  (" + fmt("%.0f", MPI_Wtime() - start) + " s)");
        }
      }
  return rows;
}

// The collectives: every form checked, then timed, on every geometry's
// groups, in buffers of the largest message; the table on stdout.
std::vector<Row> time_collectives(const Plan& p, Backend& backend, const std::vector<GeometryRun>& runs,
                                  const std::vector<Form>& forms) {
  size_t max_floats = p.max_bytes / sizeof(float);
  float* send = backend.alloc(max_floats);
  float* recv = backend.alloc(max_floats);

  // Contents first (nccl-tests' -c): a wrong result makes every timing moot.
  if (!p.o.no_check && !forms.empty()) check_contents(p, backend, runs, forms, send, recv);
  std::vector<Row> rows = sweep_collectives(p, backend, runs, forms, send, recv);
  backend.release(send);
  backend.release(recv);
  print_table(rows);
  return rows;
}

// Pairs, then the host link (time_host_link): the same harness, sizes and
// conventions.
void time_pairs(const Plan& p, Backend& backend, ff::Measurement& m) {
  if (p.ops.send_recv) {
    PairResults p2p = measure_send_recv(backend, p.pairs, p.sizes, p.rank, p.ranks, p.per_node, p.sweep, say);
    m.p2p = p2p.samples;
    if (p.rank == 0) print_table(p2p.table);
  }
}

void time_host_link(const Plan& p, Backend& backend, ff::Measurement& m) {
  if (!p.o.skip_host) {
    HostLinkResults host = measure_host_link(backend, p.sizes, p.rank, p.ranks, p.per_node, p.sweep, say);
    m.host_link = host.samples;
    m.host_link_kind = backend.host_link_kind();
    if (p.rank == 0) print_table(host.table);
  }
}

// GEMM and memory bandwidth (time_memory), every rank at once.
void time_gemms(const Plan& p, ff::Measurement& m) {
  const Options& o = p.o;
  bool gpu = p.gpu;
  m.gemm_dtype = gpu ? ff::Dtype::BF16 : ff::Dtype::FP32;
  if (!o.skip_gemm) {
    std::vector<long long> dims = gpu ? (o.quick ? std::vector<long long>{256, 512, 1024}
                                                 : std::vector<long long>{512, 2048, 8192})
                                      : (o.quick ? std::vector<long long>{32, 64, 128}
                                                 : std::vector<long long>{64, 256, 1024});
    std::vector<GemmShape> shapes = grid_gemm_shapes(dims);
    if (!o.model.empty()) {
      auto more = model_gemm_shapes(p.model, p.gemm_xy, o.micro_batch);
      shapes.insert(shapes.end(), more.begin(), more.end());
    }
    int gemm_repeats = std::min(o.repeats, 3);
    double gemm_start = MPI_Wtime();
    auto progress = [&](int done, int total, const ff::GemmSample& s) {
      if (done % int(shapes.size()) != 0 && done != total) return;  // one line per pass over the shapes
      say("[gemm " + std::to_string(done) + "/" + std::to_string(total) + "] " + std::to_string(s.m) + "x" +
          std::to_string(s.n) + "x" + std::to_string(s.k) + " " + s.layout + ": " +
          fmt("%.3g", s.flops() / s.times_s.back() / 1e9) + " GFLOP/s per rank  (" +
          fmt("%.0f", MPI_Wtime() - gemm_start) + " s)");
    };
    say("gemm: " + std::to_string(shapes.size()) + " shapes x " + std::to_string(gemm_repeats) + " repeats, " +
        (gpu ? "cuBLAS bf16" : "OpenBLAS sgemm") + ", every rank at once");
    m.gemm = gpu ? measure_gemm_cuda(shapes, gemm_repeats, progress) : measure_gemm_cpu(shapes, gemm_repeats, progress);
    m.gemm_peak_flops = best_gemm_rate(m.gemm);
    say("gemm: best " + fmt("%.3g", m.gemm_peak_flops / 1e9) + " GFLOP/s per rank");
  }
}

void time_memory(const Plan& p, ff::Measurement& m) {
  const Options& o = p.o;
  if (p.gpu) {
    m.stream_bytes_per_s = measure_device_copy(o.quick ? (size_t(64) << 20) : (size_t(1) << 30), std::max(3, o.repeats));
    say("memory: device copy " + fmt("%.4g", m.stream_bytes_per_s / 1e9) + " GB/s per GPU (read + write)");
  } else {
    size_t doubles = o.quick ? (size_t(1) << 20) : (size_t(1) << 22);  // 3 arrays of 8 or 32 MiB
    m.stream_bytes_per_s = measure_stream(doubles, std::max(3, o.repeats));
    say("stream: triad " + fmt("%.3g", m.stream_bytes_per_s / 1e9) + " GB/s per rank with " +
        std::to_string(p.node.host_ranks) + " ranks on this host");
  }
}

// The engine's own steps on CPU ranks with --model, for the element-wise
// efficiency.
void time_engine_step(const Plan& p, double memory_per_rank, ff::Measurement& m) {
  const Options& o = p.o;
  if (!p.gpu && !o.model.empty() && o.engine_steps > 0) {
    int steps = o.engine_steps + 1;  // the first warms up
    std::string why = engine_step_problem(p.model, o.micro_batch, steps, memory_per_rank, m.gemm_peak_flops);
    if (!why.empty()) {
      say("engine step: skipped, " + why + "; the element-wise efficiency stays an assumption");
    } else {
      ff::EngineStepSample e = measure_engine_step(p.model, o.micro_batch, steps);
      double c = ff::median(std::vector<double>(e.compute_s.begin() + 1, e.compute_s.end()));
      double g = ff::median(std::vector<double>(e.gemm_s.begin() + 1, e.gemm_s.end()));
      say("engine step: " + p.model.name + ", micro-batch " + std::to_string(o.micro_batch) + " on one rank each, " +
          fmt("%.3g", c * 1e3) + " ms of compute per step, " + fmt("%.3g", g * 1e3) + " ms of it in GEMM (median of " +
          std::to_string(o.engine_steps) + " steps)");
      m.engine_steps.push_back(e);
    }
  }
}

// The engine's own kernels on GPU ranks with --model (every rank its own
// GPU at once): flash attention at 512, 1,024 and 4,096 tokens (the model's
// 2,048 left out, so that a step priced from the curve is priced out of
// sample), a block's memory-bound kernels, a launch.
void time_engine_kernels(const Plan& p, ff::Measurement& m) {
  const Options& o = p.o;
  if (!p.gpu || o.model.empty()) return;
  const std::vector<double> seqs = o.quick ? std::vector<double>{512, 1024} : std::vector<double>{512, 1024, 4096};
  m.gpu_kernels = time_gpu_kernels(p.model, o.micro_batch, seqs, std::max(3, o.repeats));
  m.launch_s = time_launch(std::max(3, o.repeats));
  if (m.gpu_kernels.empty()) {
    say("gpu kernels: skipped, this measure was built without the engine's GPU kernels (nvcc)");
    return;
  }
  for (const auto& k : m.gpu_kernels)
    say("gpu kernel: " + k.kernel + (k.kernel == "flash_attention" ? " S " + fmt("%g", k.seq) : "") + ": " +
        fmt("%.4g", k.median_s() * 1e6) + " us" +
        (k.flops > 0 ? ", " + fmt("%.4g", k.flops / k.median_s() / 1e12) + " TFLOP/s"
                     : ", " + fmt("%.4g", k.bytes / k.median_s() / 1e9) + " GB/s"));
  say("gpu kernel: a launch behind another " + fmt("%.3g", m.launch_s * 1e6) + " us");
  // NCCL's channels on a Hopper node: 16 over the NICs, up to 32 over NVLink.
  m.hiding = time_hiding(p.model, o.micro_batch, {16, 32}, std::max(3, o.repeats));
  for (const auto& h : m.hiding)
    say("hiding (proxy): FC1's GEMM " + fmt("%.4g", ff::median(h.alone_s) * 1e6) + " us alone, " +
        fmt("%.4g", ff::median(h.beside_s) * 1e6) + " us beside " + std::to_string(h.blocks) + " SMs " +
        (h.copying ? "copying" : "held") + " (" + fmt("%+.1f", 100 * h.slowdown()) + "%" +
        (h.copying ? "; the copy moved " + fmt("%.4g", h.copy_bytes_per_s / 1e9) + " GB/s" : "") + ")");
}

// The record; rank 0 holds the same maxima as everyone and writes
// (write_outputs).
void fill_record(const Plan& p, const Rig& rig, const std::vector<Row>& rows, int argc, char** argv,
                 ff::Measurement& m) {
  const Options& o = p.o;
  m.backend = rig.backend->name();
  if (!p.gpu) m.poll_s = o.poll_us * 1e-6;  // how every MPI wait was done; NCCL's are not MPI's
  if (!p.gpu) m.gap_s = o.gap_us * 1e-6;    // and how the iterations followed one another
  m.ranks = p.ranks;
  m.gpus_per_node = p.per_node;
  m.nodes = p.nodes;
  m.nodes_per_group = o.nodes_per_group;
  m.command = launch_command(argc, argv);
  m.host = host_name();
  m.date = utc_now();
  m.versions = library_versions();
  m.versions.update(cuda_versions());
  m.topology = node_topology();
  m.topology["ranks_per_node"] = p.per_node;
  m.topology["ranks_per_node_from"] = p.node.source;
  m.topology["ranks_on_this_host"] = p.node.host_ranks;
  m.memory_bytes_per_rank = rig.memory_per_rank;
  // A node's RAM; a host standing for several nodes shares its RAM among them.
  m.host_memory_bytes = rig.node_memory * std::min(1.0, double(p.per_node) / p.node.host_ranks);
  for (const auto& r : rows) m.collectives.push_back(r.sample);
}

void write_outputs(const Plan& p, const ff::Measurement& m) {
  const Options& o = p.o;
  if (!o.raw.empty()) {
    ff::write_file_atomic(o.raw, ff::to_json(m).dump(1) + "\n");
    say("wrote " + o.raw + " (raw measurement)");
  }
  if (!o.out.empty()) {
    nlohmann::json profile = ff::calibrate_profile(p.base, m, o.name);
    for (const std::string& n : ff::fit_notes(profile)) say("note: " + n);
    ff::write_file_atomic(o.out, profile.dump(1) + "\n");
    say("wrote " + o.out + " (profile '" + o.name + "'); use it with: advisor recommend --model MODEL --gpus N --machine " +
        o.out);
  }
}

int run(int argc, char** argv, int rank, int ranks) {
  Options o;
  CLI::App app{kAbout};
  add_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream quiet;
    return rank == 0 ? app.exit(e) : app.exit(e, quiet, quiet);
  }
  Plan p = make_plan(o, app, rank, ranks);
  Rig rig = open_backend(p);
  std::vector<Form> forms = collective_forms(p, *rig.backend);
  announce(p, *rig.backend, forms);
  // The groups' communicators are freed as run() returns, after every phase
  // and the record.
  std::vector<GeometryRun> runs = join_groups(p, *rig.backend);
  std::vector<Row> rows = time_collectives(p, *rig.backend, runs, forms);
  ff::Measurement m;
  time_pairs(p, *rig.backend, m);
  time_host_link(p, *rig.backend, m);
  time_gemms(p, m);
  time_memory(p, m);
  time_engine_step(p, rig.memory_per_rank, m);
  time_engine_kernels(p, m);
  fill_record(p, rig, rows, argc, argv, m);
  MPI_CHECK(MPI_Comm_free(&p.node.comm));
  if (rank != 0) return 0;
  write_outputs(p, m);
  return 0;
}

}  // namespace
}  // namespace ff::measure

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  ff::measure::g_rank = rank;
  // Errors come back to MPI_CHECK, which names the call site before aborting
  // (communicators split from the world inherit this).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int code = 0;
  try {
    code = ff::measure::run(argc, argv, rank, ranks);
  } catch (const ff::InputError& e) {
    ff::measure::say(std::string("measure: error: ") + e.what());
    code = 2;
  } catch (const std::exception& e) {
    ff::measure::say(std::string("measure: failed: ") + e.what());
    code = 1;
  }
  MPI_Finalize();
  return code;
}
