// nccl-tests output → collective samples. Every expected number below is read
// off the fixture text by eye (tests/fixtures/nccl-tests/, see its README),
// not from the parser.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "advisor/calibration/nccl_tests_log.hpp"
#include "tests/helpers.hpp"

using fftest::contains;
using fftest::input_error_of;
using fftest::rel;

namespace {

std::string fixture(const std::string& name) { return fftest::fixture("nccl-tests/" + name); }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line of every in-test log.
const std::string kHeader =
    "# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20\n";
// A two-row new-format table and its closing line.
const std::string kTable =
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "        1024           256     float     sum      -1    10.00    0.10    0.10      0    10.00    0.10    0.10      0\n"
    "        2048           512     float     sum      -1    12.50    0.16    0.16      0    12.40    0.17    0.17      0\n"
    "# Avg bus bandwidth    : 0.13\n";

ff::NcclTestsOptions per_node(int n) {
  ff::NcclTestsOptions o;
  o.gpus_per_node = n;
  return o;
}

const ff::CollectiveSample& at_bytes(const ff::NcclTestsRun& r, double bytes) {
  for (const auto& s : r.samples)
    if (s.bytes == bytes) return s;
  FAIL("no sample of " << bytes << " bytes");
  return r.samples.front();
}

}  // namespace

TEST_CASE("old text format: error column, no root, Rank lines without Group") {
  auto runs = ff::read_nccl_tests(fixture("all_reduce_perf-old.log"), per_node(4));
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.op == ff::Coll::AllReduce);  // the old header does not name its binary: the file name does
  CHECK(r.ranks == 4);
  CHECK(r.hosts == std::vector<std::string>{"nid001234"});
  CHECK(r.first_line == 1);
  CHECK_FALSE(r.geometry.inter);
  CHECK(r.geometry.stride == 1);
  CHECK(r.geometry.size == 4);
  CHECK(r.samples.size() == 13);  // 8 B to 128 MiB by 4x
  REQUIRE(at_bytes(r, 8).times_s.size() == 1);
  CHECK(at_bytes(r, 8).times_s[0] == rel(35.62e-6));
  CHECK(at_bytes(r, 2097152).times_s[0] == rel(51.97e-6));
  CHECK(at_bytes(r, 134217728).times_s[0] == rel(1020.38e-6));  // out-of-place, not the in-place 1018.72
  CHECK(at_bytes(r, 8).iters == 20);
  CHECK(r.notes.empty());
}

TEST_CASE("text with the leading '#' stripped by the launcher") {
  auto runs = ff::read_nccl_tests(fixture("all_reduce_perf-stripped.log"), per_node(8));
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.ranks == 8);
  CHECK(r.geometry.size == 8);
  CHECK(r.geometry.stride == 1);
  CHECK(r.samples.size() == 12);  // 32 B .. 128 MiB by 4x
  CHECK(at_bytes(r, 32).times_s[0] == rel(96.87e-6));
  CHECK(at_bytes(r, 134217728).times_s[0] == rel(1134.63e-6));
  CHECK(at_bytes(r, 32).iters == 20);  // "warmup iters: 5       iters: 20"
}

TEST_CASE("new text format: root and #wrong, version line, 8 ranks on 2 nodes") {
  auto runs = ff::read_nccl_tests(fixture("all_gather_perf-new.log"), per_node(4));
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.op == ff::Coll::AllGather);  // "# Collective test starting: all_gather_perf"
  CHECK(r.version == "2.17.1");
  CHECK(r.ranks == 8);
  CHECK(r.hosts.size() == 2);
  CHECK(r.geometry.inter);
  CHECK(r.geometry.size == 8);
  CHECK(r.geometry.groups_per_node == 1);
  // 11 rows, 1024 B .. 1 GiB by 4x; the 65536 B row (line 21) reports 3 wrong elements.
  CHECK(r.samples.size() == 10);
  for (const auto& s : r.samples) CHECK(s.bytes != 65536);
  REQUIRE(r.notes.size() == 1);
  CHECK(contains(r.notes[0], "all_gather_perf-new.log:21"));
  CHECK(at_bytes(r, 1024).times_s[0] == rel(86.43e-6));
  for (const auto& s : r.samples) CHECK(s.op == ff::Coll::AllGather);
}

TEST_CASE("Open MPI --tag-output prefixes, other ranks' NCCL INFO lines in between") {
  auto runs = ff::read_nccl_tests(fixture("reduce_scatter_perf-tagged.log"), per_node(4));
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.op == ff::Coll::ReduceScatter);
  CHECK(r.ranks == 2);
  CHECK(r.hosts == std::vector<std::string>{"gpu-a01", "gpu-a02"});
  CHECK(r.geometry.inter);
  CHECK(r.geometry.size == 2);
  CHECK(r.geometry.groups_per_node == 1);
  CHECK(r.samples.size() == 17);  // 4 KiB .. 256 MiB by 2x
  CHECK(at_bytes(r, 4096).times_s[0] == rel(9.13e-6));
  CHECK(at_bytes(r, 268435456).times_s[0] == rel(3007.61e-6));
  CHECK(at_bytes(r, 4096).iters == 50);
}

TEST_CASE("srun -l and rank-bracket prefixes read like the plain log") {
  std::string plain = slurp(fixture("all_reduce_perf-old.log"));
  for (std::string tag : {"0: ", "[0] "}) {
    std::string tagged, line;
    std::istringstream in(plain);
    while (std::getline(in, line)) tagged += tag + line + "\n";
    auto runs = ff::parse_nccl_tests(tagged, "all_reduce_perf.log", per_node(4));
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].samples.size() == 13);
    CHECK(runs[0].geometry.size == 4);
    CHECK(at_bytes(runs[0], 134217728).times_s[0] == rel(1020.38e-6));
  }
}

TEST_CASE("host-prefixed lines and NCCL_TESTS_SPLIT groups: two groups {0,2} and {1,3}") {
  auto runs = ff::read_nccl_tests(fixture("all_reduce_perf-split-hostprefix.log"), per_node(4));
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.op == ff::Coll::AllReduce);  // all_reduce_perf_mpi
  CHECK(r.version == "2.13.9");
  CHECK(r.ranks == 4);
  CHECK_FALSE(r.geometry.inter);
  CHECK(r.geometry.size == 2);
  CHECK(r.geometry.stride == 2);
  CHECK(r.samples.size() == 11);
  CHECK(at_bytes(r, 65536).times_s[0] == rel(10.61e-6));
  CHECK(at_bytes(r, 67108864).times_s[0] == rel(951.77e-6));
}

TEST_CASE("nccl-tests -J JSON, per-iteration times as repeats") {
  auto runs = ff::read_nccl_tests(fixture("all_reduce_perf.json"), per_node(4));
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.op == ff::Coll::AllReduce);  // args[0] is .../all_reduce_perf
  CHECK(r.date == "2025-11-03 14:22:07");
  CHECK(r.ranks == 4);
  CHECK(r.hosts == std::vector<std::string>{"gh200-n17"});
  CHECK(r.geometry.size == 4);
  CHECK(r.geometry.stride == 1);
  REQUIRE(r.samples.size() == 6);
  REQUIRE(at_bytes(r, 1048576).times_s.size() == 1);
  CHECK(at_bytes(r, 1048576).times_s[0] == rel(28.311597e-6));
  CHECK(at_bytes(r, 1048576).iters == 20);
  const auto& last = at_bytes(r, 1073741824);
  REQUIRE(last.times_s.size() == 5);
  CHECK(last.times_s[3] == rel(4717.308e-6));
  CHECK(last.median_s() == rel(4579.911e-6));
  CHECK(last.iters == 1);
}

TEST_CASE("a given geometry wins; the collective given must agree with the log") {
  ff::NcclTestsOptions o = per_node(4);
  ff::Geometry g;
  g.inter = true;
  g.groups_per_node = 2;
  g.size = 0;  // the ranks listed
  o.geometry = g;
  auto runs = ff::read_nccl_tests(fixture("all_reduce_perf-old.log"), o);
  CHECK(runs[0].geometry.inter);
  CHECK(runs[0].geometry.size == 4);
  CHECK(runs[0].geometry.groups_per_node == 2);

  ff::NcclTestsOptions wrong = per_node(4);
  wrong.op = ff::Coll::AllReduce;
  std::string e = input_error_of([&] { ff::read_nccl_tests(fixture("all_gather_perf-new.log"), wrong); });
  CHECK(contains(e, "all_gather_perf-new.log:3"));
  CHECK(contains(e, "all_gather_perf"));
}

TEST_CASE("a log listing no devices needs the group size; a size given must agree with the devices listed") {
  std::string bare = kHeader + kTable;
  CHECK(contains(input_error_of([&] { ff::parse_nccl_tests(bare, "all_reduce_perf.log", per_node(4)); }),
                 "all_reduce_perf.log:1: the log lists no devices"));
  ff::NcclTestsOptions o = per_node(4);
  o.size = 4;  // fits in a node: one intra-node group, stride 1
  auto r = ff::parse_nccl_tests(bare, "all_reduce_perf.log", o)[0];
  CHECK_FALSE(r.geometry.inter);
  CHECK(r.geometry.size == 4);
  CHECK(r.geometry.stride == 1);
  CHECK(r.samples.size() == 2);
  CHECK(at_bytes(r, 2048).times_s[0] == rel(12.5e-6));
  o.size = 8;  // more than a node: one group across nodes
  r = ff::parse_nccl_tests(bare, "all_reduce_perf.log", o)[0];
  CHECK(r.geometry.inter);
  CHECK(r.geometry.size == 8);
  CHECK(r.geometry.groups_per_node == 1);

  ff::NcclTestsOptions two = per_node(4);
  two.size = 2;
  CHECK(contains(input_error_of([&] { ff::read_nccl_tests(fixture("all_reduce_perf-old.log"), two); }),
                 "groups of 4 ranks, but the group size was given as 2"));
}

TEST_CASE("foreign, truncated and inconsistent logs: InputError naming file and line") {
  std::string e = input_error_of([] { ff::read_nccl_tests(fixture("osu_allreduce.log"), per_node(4)); });
  CHECK(contains(e, "osu_allreduce.log"));
  CHECK(contains(e, "not nccl-tests output"));

  // Cut in the middle of line 21, the 2097152-byte row; the header is line 10.
  e = input_error_of([] { ff::read_nccl_tests(fixture("all_reduce_perf-truncated.log"), per_node(4)); });
  CHECK(contains(e, "all_reduce_perf-truncated.log:21"));
  CHECK(contains(e, "line 10"));

  e = input_error_of([] { ff::read_nccl_tests(fixture("all_reduce_perf-truncated.json"), per_node(4)); });
  CHECK(contains(e, "all_reduce_perf-truncated.json:133"));

  e = input_error_of([] { ff::read_nccl_tests(fixture("no-such-file.log"), per_node(4)); });
  CHECK(contains(e, "no-such-file.log: cannot open"));

  // Whole rows but no closing summary: the run ended early. The old fixture
  // has 27 lines; without its 3 closing lines the text ends at line 24.
  std::string text = slurp(fixture("all_reduce_perf-old.log"));
  text = text.substr(0, text.find("# Out of bounds"));
  e = input_error_of([&] { ff::parse_nccl_tests(text, "cut.log", per_node(4)); });
  CHECK(contains(e, "cut.log:24"));
  CHECK(contains(e, "Avg bus bandwidth"));

  // 4 ranks on one host, but a node said to hold 2.
  e = input_error_of([] { ff::read_nccl_tests(fixture("all_reduce_perf-old.log"), per_node(2)); });
  CHECK(contains(e, "4 ranks ran on nid001234"));
}

TEST_CASE("logs of the wrong launcher, of an unpriced collective, of one rank") {
  // nccl-tests issue #107's shape: two single-rank jobs, both rank 0.
  std::string dup = kHeader + "# Using devices\n" + kHeader + "# Using devices\n" +
                    "#   Rank  0 Pid   1320 on host-a device  0 [0x00] Tesla V100-SXM2-16GB\n"
                    "#   Rank  0 Pid   2066 on host-b device  0 [0x00] Tesla V100-SXM2-16GB\n";
  std::string e = input_error_of([&] { ff::parse_nccl_tests(dup, "all_reduce_perf.log", per_node(4)); });
  CHECK(contains(e, "all_reduce_perf.log:6"));
  CHECK(contains(e, "rank 0 is listed twice"));

  std::string two_ranks = "#  Rank  0 Group  0 Pid 1 on h device  0 [0x00] GPU\n"
                          "#  Rank  1 Group  0 Pid 2 on h device  1 [0x00] GPU\n";
  std::string bcast = "# Collective test starting: broadcast_perf\n" + kHeader + two_ranks + kTable;
  e = input_error_of([&] { ff::parse_nccl_tests(bcast, "b.log", per_node(4)); });
  CHECK(contains(e, "b.log:2"));
  CHECK(contains(e, "broadcast_perf"));

  // Nothing names the collective: neither the log nor the file.
  std::string anon = kHeader + two_ranks + kTable;
  e = input_error_of([&] { ff::parse_nccl_tests(anon, "run7.log", per_node(4)); });
  CHECK(contains(e, "cannot tell which collective"));
  ff::NcclTestsOptions given = per_node(4);
  given.op = ff::Coll::AllGather;
  auto runs = ff::parse_nccl_tests(anon, "run7.log", given);
  CHECK(runs[0].op == ff::Coll::AllGather);
  CHECK(runs[0].samples[0].times_s[0] == rel(10e-6));

  // One rank measures no link.
  std::string one = kHeader + "#  Rank  0 Group  0 Pid 1 on h device  0 [0x00] GPU\n" + kTable;
  e = input_error_of([&] { ff::parse_nccl_tests(one, "all_reduce_perf.log", per_node(4)); });
  CHECK(contains(e, "a group of 1 rank"));
}

TEST_CASE("runs of one geometry merge into one measurement, sizes as repeats") {
  auto a = ff::read_nccl_tests(fixture("all_reduce_perf-old.log"), per_node(4));
  auto b = ff::read_nccl_tests(fixture("all_reduce_perf-old.log"), per_node(4));
  auto c = ff::read_nccl_tests(fixture("all_gather_perf-new.log"), per_node(4));
  std::vector<ff::NcclTestsRun> runs{a[0], b[0], c[0]};
  ff::Measurement m = ff::measurement_from_nccl_tests(runs, 4, "nccl-tests logs x y z");
  CHECK(m.backend == "nccl-tests");
  CHECK(m.gpus_per_node == 4);
  CHECK(m.ranks == 8);
  CHECK(m.nodes == 2);  // nid001234, nid001235
  CHECK(m.host == "nid001234");
  CHECK(m.versions["nccl-tests"] == "2.17.1");
  CHECK(m.collectives.size() == 13 + 10);
  for (const auto& s : m.collectives)
    CHECK(s.times_s.size() == (s.op == ff::Coll::AllReduce ? 2u : 1u));
}
