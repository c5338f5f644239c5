// Fitting a profile from measurements: the α-β fit on synthetic timings made
// here from known α and busbw, the GEMM grid on hand-computed cases, the
// measurement record's JSON, and whole profiles the advisor loads.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/model/compute_model.hpp"
#include "tests/helpers.hpp"

using fftest::contains;
using fftest::input_error_of;
using fftest::rel;

namespace {

constexpr double GB = 1e9, GiB = 1073741824.0, us = 1e-6;

// MODEL.md §2 by hand, any collective.
double ring_time(ff::Coll op, int g, double bytes, double alpha, double busbw) {
  return op == ff::Coll::AllReduce ? fftest::hand_all_reduce(g, bytes, alpha, busbw)
                                   : fftest::hand_gather_scatter(g, bytes, alpha, busbw);
}

// 1 KiB .. 1 GiB by 2x: 21 sizes.
std::vector<double> sweep() {
  std::vector<double> b;
  for (double x = 1024; x <= 1073741824.0; x *= 2) b.push_back(x);
  return b;
}

ff::CollectiveSample sample(ff::Coll op, ff::Geometry g, double bytes, double alpha, double busbw) {
  ff::CollectiveSample s;
  s.op = op;
  s.geometry = g;
  s.bytes = bytes;
  s.iters = 20;
  double t = ring_time(op, g.size, bytes, alpha, busbw);
  s.times_s = {1.1 * t, t, 0.9 * t};  // the median is t
  return s;
}

ff::Geometry intra(long long stride, int size) {
  ff::Geometry g;
  g.stride = stride;
  g.size = size;
  return g;
}

ff::Geometry inter(int groups_per_node, int size) {
  ff::Geometry g;
  g.inter = true;
  g.size = size;
  g.groups_per_node = groups_per_node;
  return g;
}

// `size` ranks, `members` of them on each of size / members nodes.
ff::Geometry inter_m(int groups_per_node, int size, int members) {
  ff::Geometry g = inter(groups_per_node, size);
  g.members_per_node = members;
  return g;
}

void add_sweep(ff::Measurement& m, ff::Coll op, ff::Geometry g, double alpha, double busbw) {
  for (double b = 4096; b <= 4194304; b *= 4) m.collectives.push_back(sample(op, g, b, alpha, busbw));
}

// A GEMM sample whose median runs at `eff` of `peak`.
ff::GemmSample gemm_at(long long m, long long n, long long k, double eff, double peak, const char* layout = "nn") {
  ff::GemmSample s;
  s.m = m, s.n = n, s.k = k;
  s.layout = layout;
  double t = 2.0 * m * n * k / (eff * peak);
  s.times_s = {t, 1.2 * t, 0.8 * t};
  return s;
}

// A record's identity: who ran it, where.
ff::Measurement run_of(const char* backend, int ranks, int per_node, const char* command) {
  ff::Measurement m;
  m.backend = backend;
  m.ranks = ranks;
  m.gpus_per_node = per_node;
  m.nodes = (ranks + per_node - 1) / per_node;
  m.command = command;
  return m;
}

// The CPU-rank run of the tests: 4 ranks on one node, three intra-node
// geometries, a 2×2×2 fp32 GEMM grid at 100 GFLOP/s peak.
//   efficiency(m, n, k) = 0.2 + 0.1·[m=512] + 0.2·[n=512] + 0.3·[k=512],
// plus a second layout of 64³ at 0.4 (so that cell is (0.2 + 0.4)/2 = 0.3).
ff::Measurement cpu_run() {
  ff::Measurement m = run_of("mpi", 4, 4, "mpirun -np 4 measure --out run.json");
  m.host = "ci-runner";
  m.date = "2026-11-22T01:00:00Z";
  m.versions = {{"mpi", "Open MPI 4.1.4"}};
  add_sweep(m, ff::Coll::AllReduce, intra(1, 2), 20 * us, 5 * GB);
  add_sweep(m, ff::Coll::AllGather, intra(1, 2), 20 * us, 5 * GB);
  add_sweep(m, ff::Coll::AllReduce, intra(1, 4), 30 * us, 4 * GB);
  add_sweep(m, ff::Coll::ReduceScatter, intra(2, 2), 25 * us, 3 * GB);
  m.gemm_dtype = ff::Dtype::FP32;
  m.gemm_peak_flops = 100e9;
  for (long long a : {64, 512})
    for (long long b : {64, 512})
      for (long long c : {64, 512})
        m.gemm.push_back(gemm_at(a, b, c, 0.2 + 0.1 * (a == 512) + 0.2 * (b == 512) + 0.3 * (c == 512), 100e9));
  m.gemm.push_back(gemm_at(64, 64, 64, 0.4, 100e9, "tn"));
  m.stream_bytes_per_s = 10 * GB;
  m.memory_bytes_per_rank = 8 * GiB;
  return m;
}

const nlohmann::json& entry(const nlohmann::json& table, const char* key, long long v, int size) {
  for (const auto& e : table)
    if (e[key] == v && e["size"] == size) return e;
  FAIL("no table entry " << key << " " << v << " size " << size);
  return table[0];
}

}  // namespace

TEST_CASE("fit_link recovers α and busbw from exact ring timings, every collective") {
  for (ff::Coll op : {ff::Coll::AllReduce, ff::Coll::AllGather, ff::Coll::ReduceScatter})
    for (int g : {2, 4, 8}) {
      std::vector<double> b = sweep(), t;
      for (double x : b) t.push_back(ring_time(op, g, x, 5 * us, 100 * GB));
      ff::LinkFit f = ff::fit_link(op, g, b, t);
      CHECK(f.link.alpha_s == rel(5 * us, 1e-9));
      CHECK(f.link.busbw == rel(100 * GB, 1e-9));
      CHECK(f.points == 21);
      CHECK(f.rel_rms < 1e-9);
    }
}

TEST_CASE("fit_link on noisy timings: α within 10%, busbw within 3%") {
  // Uniform ±3% noise on each time (a fixed seed: the test is repeatable).
  // With 21 sizes the latency-bound third pins α, the bandwidth-bound third
  // busbw; the stated tolerances are several standard errors wide.
  std::mt19937 rng(20261122);
  for (ff::Coll op : {ff::Coll::AllReduce, ff::Coll::AllGather, ff::Coll::ReduceScatter})
    for (auto [alpha, busbw] : {std::pair{5 * us, 100 * GB}, std::pair{40 * us, 2 * GB}}) {
      std::vector<double> b = sweep(), t;
      for (double x : b) {
        double noise = 0.03 * (2.0 * rng() / 4294967296.0 - 1.0);
        t.push_back(ring_time(op, 4, x, alpha, busbw) * (1 + noise));
      }
      ff::LinkFit f = ff::fit_link(op, 4, b, t);
      CHECK(f.link.alpha_s == doctest::Approx(alpha).epsilon(0.10).scale(0));
      CHECK(f.link.busbw == doctest::Approx(busbw).epsilon(0.03).scale(0));
      CHECK(f.rel_rms > 0.001);  // uniform ±3% has an rms of 1.7%
      CHECK(f.rel_rms < 0.03);
    }
}

TEST_CASE("fit_link clamps α at 0 and refits the bandwidth alone") {
  // g = 2 all-reduce: 2 steps, factor 1. The line through (1 MB, 10 µs) and
  // (2 MB, 30 µs) has intercept −10 µs, so α < 0 unconstrained. With α = 0,
  // minimising Σ((b·γ − t)/t)² gives γ = Σ v / Σ v², v = b/t:
  //   v = 1e11, 2e11/3  →  γ = (5e11/3) / (13e22/9) = 15/13 · 1e-11,
  //   busbw = 1/γ = 13/15 · 1e11 B/s; relative errors +2/13 and −3/13,
  //   rms = sqrt(13/338) = sqrt(1/26).
  ff::LinkFit f = ff::fit_link(ff::Coll::AllReduce, 2, {1e6, 2e6}, {10 * us, 30 * us});
  CHECK(f.link.alpha_s == 0);
  CHECK(f.link.busbw == rel(13.0 / 15.0 * 1e11, 1e-12));
  CHECK(f.rel_rms == rel(std::sqrt(1.0 / 26), 1e-12));
  CHECK(f.points == 2);
}

TEST_CASE("fit_link refuses what cannot be fitted") {
  CHECK(contains(input_error_of([] { ff::fit_link(ff::Coll::AllReduce, 4, {1e6}, {1e-3}); }), "at least 2"));
  CHECK(contains(input_error_of([] { ff::fit_link(ff::Coll::AllReduce, 4, {1e6, 0}, {1e-3, 1e-3}); }), "> 0"));
  CHECK(contains(input_error_of([] { ff::fit_link(ff::Coll::AllReduce, 4, {1e6, 2e6}, {1e-3, -1}); }), "> 0"));
  CHECK(contains(input_error_of([] { ff::fit_link(ff::Coll::AllReduce, 1, {1e6, 2e6}, {1e-3, 2e-3}); }), "fewer than 2"));
  CHECK(contains(input_error_of([] { ff::fit_link(ff::Coll::AllGather, 4, {1e6, 2e6}, {1e-3}); }), "2 sizes but 1 times"));
  CHECK(contains(input_error_of([] { ff::fit_link(ff::Coll::AllReduce, 4, {1e6, 1e6}, {1e-3, 2e-3}); }),
                 "at least 2 message sizes"));
}

TEST_CASE("fit_link bounds times that do not grow with size") {
  // All-gather of 4 (3 steps, factor 3/4): 1 MB in 2 ms, 2 MB in 1 ms. The
  // best busbw measured: 0.75 · 2e6 / 1e-3 = 1.5 GB/s. With it, the relative
  // rows leave 1 − 0.25 = 0.75 and 0 for α·steps/t (steps/t = 1500, 3000):
  // α = 1500 · 0.75 / (1500² + 3000²) = 100 µs.
  ff::LinkFit f = ff::fit_link(ff::Coll::AllGather, 4, {1e6, 2e6}, {2e-3, 1e-3});
  CHECK(f.link.busbw == doctest::Approx(1.5e9).epsilon(1e-12).scale(0));
  CHECK(f.link.alpha_s == doctest::Approx(100e-6).epsilon(1e-12).scale(0));
  CHECK(contains(f.note, "do not grow"));
  // Times that grow: no note.
  CHECK(ff::fit_link(ff::Coll::AllGather, 4, {1e6, 2e6}, {1e-3, 2e-3}).note.empty());
}

TEST_CASE("fit_notes names every bounded fit of a profile by its path") {
  nlohmann::json p = {
      {"intra_node", {{"table", {{{"fit", {{"rel_rms", 0.1}}}},
                                 {{"fit", {{"note", "times do not grow"}}}, {"by_op", {{"all-reduce", {{"fit", {{"note", "b"}}}}}}}}}}}},
      {"raw", {{"fit", {{"note", "the record's own, not a fit of the profile"}}}}}};
  // In the JSON's key order (by_op before fit).
  CHECK(ff::fit_notes(p) == std::vector<std::string>{"intra_node.table[1].by_op.all-reduce: b",
                                                      "intra_node.table[1]: times do not grow"});
}

TEST_CASE("a geometry whose times fall with size is calibrated with a note saying so") {
  // The CPU run plus pairs across nodes whose all-reduce took 2 ms at 1 MB
  // and 1 ms at 2 MB (noise larger than the transfers).
  ff::Measurement m = cpu_run();
  for (auto [bytes, t] : {std::pair{1e6, 2e-3}, std::pair{2e6, 1e-3}}) {
    ff::CollectiveSample s = sample(ff::Coll::AllReduce, inter(1, 2), bytes, 20 * us, 5 * GB);
    s.times_s = {t, t, t};
    m.collectives.push_back(s);
  }
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "noisy");
  // Pairs, all-reduce (2 steps, factor 1): the best busbw measured is
  // 2e6 / 1e-3 = 2 GB/s, in the joint fit and in the all-reduce's own.
  const nlohmann::json& e = j["inter_node"]["table"][0];
  CHECK(e["busbw_GBps"].get<double>() == doctest::Approx(2).epsilon(1e-9).scale(0));
  const std::string note = e["fit"]["note"].get<std::string>();
  CHECK(contains(note, "do not grow"));
  // Named wherever the bounded fit went: the entry, its all-reduce, and the
  // node's link the section derives from it.
  CHECK(ff::fit_notes(j) == std::vector<std::string>{"inter_node.by_op.all-reduce: " + note,
                                                      "inter_node.table[0].by_op.all-reduce: " + note,
                                                      "inter_node.table[0]: " + note});
}

TEST_CASE("one geometry's collectives are fitted jointly, each at its median") {
  // All-reduce and all-gather timed on one link (α 20 µs, 5 GB/s): one fit explains both exactly.
  ff::Measurement m = cpu_run();
  std::vector<ff::CollectiveSample> s;
  for (const auto& c : m.collectives)
    if (c.geometry.stride == 1 && c.geometry.size == 2) s.push_back(c);
  REQUIRE(s.size() == 12);  // 6 sizes each
  ff::LinkFit f = ff::fit_link(s);
  CHECK(f.link.alpha_s == rel(20 * us, 1e-9));
  CHECK(f.link.busbw == rel(5 * GB, 1e-9));
  CHECK(f.points == 12);
}

TEST_CASE("collectives that run at different speeds on one geometry get their own figures") {
  // Across nodes: all-reduce and all-gather at 25 MB/s, α 50 µs; reduce-scatter
  // at a third of that, α 100 µs (Open MPI's on an emulated cluster).
  ff::Measurement m = cpu_run();
  const ff::Geometry g = inter(1, 2);
  add_sweep(m, ff::Coll::AllReduce, g, 50 * us, 25e6);
  add_sweep(m, ff::Coll::AllGather, g, 50 * us, 25e6);
  add_sweep(m, ff::Coll::ReduceScatter, g, 100 * us, 25e6 / 3);
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "split");
  ff::MachineProfile p = ff::machine_from_json(j, "split.json");
  REQUIRE(p.inter.size() == 1);
  const ff::LinkParams& l = p.inter[0].link;
  const int rs = int(ff::Coll::ReduceScatter), ar = int(ff::Coll::AllReduce), ag = int(ff::Coll::AllGather);
  REQUIRE(l.by_op[rs]);
  CHECK(l.op_busbw[rs] == rel(25e6 / 3, 1e-6));
  CHECK(l.op_alpha_s[rs] == rel(100 * us, 1e-6));
  CHECK(l.op_busbw[ar] == rel(25e6, 1e-6));
  CHECK(l.op_busbw[ag] == rel(25e6, 1e-6));
  // The advisor then prices a 1 MiB reduce-scatter (a measured size: its
  // curve's point) on that link by hand: α + bytes/2/busbw.
  CHECK(ff::collective_time(ff::Coll::ReduceScatter, 2, 1048576, l) == rel(100 * us + 524288 / (25e6 / 3), 1e-6));
  // Each collective's entry carries its measured curve: one point a size,
  // 4 KiB .. 4 MiB in steps of 4, each the sample's median.
  const nlohmann::json& curve = j["inter_node"]["table"][0]["by_op"]["reduce-scatter"]["curve"];
  REQUIRE(curve.size() == 6);
  CHECK(curve[0][0].get<double>() == 4096);
  CHECK(curve[0][1].get<double>() == rel((100 * us + 2048 / (25e6 / 3)) / us, 1e-9));
  CHECK(curve[5][0].get<double>() == 4194304);
  // (The node's link, shared by its groups, carries none: its times are not a geometry's.)
  CHECK(!j["inter_node"]["by_op"]["reduce-scatter"].contains("curve"));
  // The node's link (one group per node) carries the same split.
  CHECK(p.inter_node.op_busbw[rs] == rel(25e6 / 3, 1e-6));
}

TEST_CASE("non-blocking collectives are fitted apart and leave the blocking fit alone") {
  // Across nodes: every collective blocking at α 50 µs, 25 MB/s; issued
  // non-blocking, all-reduce at α 200 µs, 10 MB/s and reduce-scatter at
  // 100 µs, 5 MB/s (libnbc's own algorithms); all-gather not measured so.
  ff::Measurement m = cpu_run();
  const ff::Geometry g = inter(1, 4);
  for (ff::Coll op : {ff::Coll::AllReduce, ff::Coll::AllGather, ff::Coll::ReduceScatter})
    add_sweep(m, op, g, 50 * us, 25e6);
  size_t first_nb = m.collectives.size();
  add_sweep(m, ff::Coll::AllReduce, g, 200 * us, 10e6);
  add_sweep(m, ff::Coll::ReduceScatter, g, 100 * us, 5e6);
  for (size_t i = first_nb; i < m.collectives.size(); ++i) m.collectives[i].nonblocking = true;
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "nb");
  const nlohmann::json& e = j["inter_node"]["table"][0];
  CHECK(e["fit"]["points"] == 18);  // the blocking samples only: 3 collectives × 6 sizes
  CHECK(e["fit"]["rel_rms"].get<double>() < 1e-9);
  CHECK_FALSE(e["nonblocking_by_op"].contains("all-gather"));
  ff::MachineProfile p = ff::machine_from_json(j, "nb.json");
  REQUIRE(p.inter.size() == 1);
  const ff::LinkParams& l = p.inter[0].link;
  const int ar = int(ff::Coll::AllReduce), ag = int(ff::Coll::AllGather), rs = int(ff::Coll::ReduceScatter);
  CHECK(l.busbw == rel(25e6, 1e-6));
  CHECK(l.alpha_s == rel(50 * us, 1e-6));
  REQUIRE(l.nb_by_op[ar]);
  REQUIRE(l.nb_by_op[rs]);
  CHECK_FALSE(l.nb_by_op[ag]);
  CHECK(l.nb_busbw[ar] == rel(10e6, 1e-6));
  CHECK(l.nb_alpha_s[ar] == rel(200 * us, 1e-6));
  CHECK(l.nb_busbw[rs] == rel(5e6, 1e-6));
  CHECK(l.nb_alpha_s[rs] == rel(100 * us, 1e-6));
  // The node's link (one group per node) carries them too.
  CHECK(p.inter_node.nb_busbw[ar] == rel(10e6, 1e-6));

  // In the record: the flag is written only when set, read back, and merges apart.
  nlohmann::json rec = ff::to_json(m);
  CHECK_FALSE(rec["collectives"][0].contains("nonblocking"));
  CHECK(rec["collectives"][first_nb]["nonblocking"] == true);
  ff::Measurement back = ff::measurement_from_json(rec, "run.json");
  CHECK(back.collectives[first_nb].nonblocking);
  CHECK_FALSE(back.collectives[0].nonblocking);
  std::vector<ff::CollectiveSample> merged;
  ff::CollectiveSample blocking = sample(ff::Coll::AllReduce, g, 4096, 50 * us, 25e6), nb = blocking;
  nb.nonblocking = true;
  ff::merge_sample(merged, blocking);
  ff::merge_sample(merged, nb);
  CHECK(merged.size() == 2);
  rec["collectives"][first_nb]["nonblocking"] = "yes";
  CHECK(contains(input_error_of([&] { ff::measurement_from_json(rec, "run.json"); }),
                 "field 'collectives[" + std::to_string(first_nb) + "].nonblocking': expected true or false"));

  // Non-blocking samples alone on a geometry: refused, naming it.
  ff::Measurement only = cpu_run();
  add_sweep(only, ff::Coll::AllReduce, inter(1, 2), 200 * us, 10e6);
  for (auto& s : only.collectives)
    if (s.geometry.inter) s.nonblocking = true;
  CHECK(contains(input_error_of([&] { ff::calibrate_profile(nullptr, only, "x"); }),
                 "only non-blocking collectives were measured"));
}

TEST_CASE("GEMM grid from scattered samples: on-cell means, inverse-distance² in log2 elsewhere") {
  // Axis m = 64, 128, 256 (n = k = 64). Samples at m = 64 (0.2 and 0.3, two
  // layouts), 256 (0.6) and 1024 (1.0). Cell 64: mean 0.25; cell 256: 0.6;
  // cell 128: distances² 1, 1, 1 (log2 2) and 9 (log2 8):
  //   (0.2 + 0.3 + 0.6 + 1.0/9) / (3 + 1/9) = 10.9/28.
  std::vector<ff::GemmPoint> pts{{64, 64, 64, 0.2}, {64, 64, 64, 0.3}, {256, 64, 64, 0.6}, {1024, 64, 64, 1.0}};
  auto e = ff::fit_gemm_grid({64, 128, 256}, {64}, {64}, pts);
  REQUIRE(e.size() == 3);
  CHECK(e[0] == rel(0.25));
  CHECK(e[1] == rel(10.9 / 28));
  CHECK(e[2] == rel(0.6));

  // Three dimensions at once, [m][n][k] order: a 1×2×2 grid, samples on two
  // opposite cells; each of the other two cells is distance² 1 from both.
  auto g = ff::fit_gemm_grid({64}, {64, 128}, {64, 128}, {{64, 64, 64, 0.4}, {64, 128, 128, 0.7}});
  REQUIRE(g.size() == 4);
  CHECK(g[0] == rel(0.4));                          // (64, 64, 64)
  CHECK(g[1] == rel((0.4 + 0.7) / 2));              // (64, 64, 128): distance² 1 to both
  CHECK(g[2] == rel((0.4 + 0.7) / 2));              // (64, 128, 64): likewise
  CHECK(g[3] == rel(0.7));                          // (64, 128, 128)

  // Efficiencies above 1 are clamped to 1.
  CHECK(ff::fit_gemm_grid({64}, {64}, {64}, {{64, 64, 64, 1.5}})[0] == 1.0);
  CHECK(contains(input_error_of([] { ff::fit_gemm_grid({64}, {64}, {64}, {}); }), "no samples"));
}

TEST_CASE("measurement record: JSON with derived columns, read back, errors naming file and field") {
  ff::Measurement m = run_of("mpi", 4, 4, "measure");
  ff::CollectiveSample s;
  s.op = ff::Coll::AllReduce;
  s.geometry = intra(1, 4);
  s.bytes = 4e6;
  s.iters = 10;
  s.times_s = {300 * us, 100 * us, 200 * us};
  m.collectives.push_back(s);
  m.gemm_dtype = ff::Dtype::FP32;
  m.gemm_peak_flops = 2e12;
  m.gemm.push_back(gemm_at(1000, 1000, 1000, 0.5, 2e12));  // 2e9 FLOP in 2 ms (median) = 1 TFLOP/s
  m.stream_bytes_per_s = 12.5e9;
  m.memory_bytes_per_rank = 4 * GiB;

  nlohmann::json j = ff::to_json(m);
  CHECK(j["format"] == "fourfold-measurement/1");
  const auto& c = j["collectives"][0];
  CHECK(c["op"] == "all-reduce");
  CHECK(c["tier"] == "intra");
  CHECK(c["median_us"].get<double>() == rel(200));
  CHECK(c["min_us"].get<double>() == rel(100));
  CHECK(c["max_us"].get<double>() == rel(300));
  CHECK(c["algbw_GBps"].get<double>() == rel(20));  // 4e6 B / 200 µs
  CHECK(c["busbw_GBps"].get<double>() == rel(30));  // × 2·3/4
  CHECK(j["gemm"]["samples"][0]["tflops"].get<double>() == rel(1.0));
  CHECK(j["gemm"]["peak_tflops"].get<double>() == rel(2.0));
  CHECK(j["stream_GBps"].get<double>() == rel(12.5));
  CHECK(j["memory_GiB_per_rank"].get<double>() == rel(4));

  ff::Measurement back = ff::measurement_from_json(j, "run.json");
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].times_s[0] == rel(300 * us));
  CHECK(back.collectives[0].median_s() == rel(200 * us));
  CHECK(back.collectives[0].geometry.size == 4);
  CHECK(back.gemm[0].median_s() == rel(2e-3));
  CHECK(back.gemm_peak_flops == rel(2e12));
  CHECK(back.memory_bytes_per_rank == rel(4 * GiB));
  CHECK(back.stream_bytes_per_s == rel(12.5e9));

  auto broken = [&](const char* pointer, nlohmann::json v) {
    nlohmann::json b = j;
    b[nlohmann::json::json_pointer(pointer)] = v;
    return input_error_of([&] { ff::measurement_from_json(b, "run.json"); });
  };
  CHECK(contains(broken("/collectives/0/bytes", "x"), "run.json: field 'collectives[0].bytes'"));
  CHECK(contains(broken("/collectives/0/op", "broadcast"), "field 'collectives[0].op'"));
  CHECK(contains(broken("/collectives/0/tier", "rack"), "field 'collectives[0].tier'"));
  CHECK(contains(broken("/collectives/0/times_us", nlohmann::json::array()), "field 'collectives[0].times_us'"));
  CHECK(contains(broken("/collectives/0/times_us/1", -5), "field 'collectives[0].times_us'"));
  CHECK(contains(broken("/gemm/samples/0/layout", "xx"), "field 'gemm.samples[0].layout'"));
  CHECK(contains(broken("/gemm/dtype", "fp8"), "field 'gemm.dtype'"));
  CHECK(contains(broken("/ranks", 0), "field 'ranks'"));
  CHECK(contains(broken("/format", "something/2"), "field 'format'"));
  CHECK(contains(input_error_of([] { ff::measurement_from_json(nlohmann::json::array(), "a.json"); }), "a.json"));
}

TEST_CASE("a CPU-rank profile from a measurement alone loads, every number as fitted or stated") {
  ff::Measurement m = cpu_run();
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "ci-cpu");
  ff::MachineProfile p = ff::machine_from_json(j, "ci-cpu.json");
  CHECK(p.name == "ci-cpu");
  CHECK(p.gpus_per_node == 4);
  CHECK(p.peak_flops_fp32 == rel(100e9));
  CHECK(p.peak_flops_bf16 == rel(100e9));
  CHECK(p.hbm_bandwidth == rel(10 * GB));
  CHECK(p.hbm_capacity == rel(8 * GiB));
  CHECK(p.memory_reserve == rel(0.8 * GiB));
  CHECK(p.overlap_efficiency == 0);

  // Intra table: each geometry's (α, busbw) as generated.
  REQUIRE(p.intra.size() == 3);
  for (const auto& e : p.intra) {
    double a = e.size == 4 ? 30 * us : e.stride == 2 ? 25 * us : 20 * us;
    double bw = e.size == 4 ? 4 * GB : e.stride == 2 ? 3 * GB : 5 * GB;
    CHECK(e.link.alpha_s == rel(a, 1e-9));
    CHECK(e.link.busbw == rel(bw, 1e-9));
  }
  // default = stride 1, smallest size; no cross-node data: inter = that, nominal.
  CHECK(p.intra_default.alpha_s == rel(20 * us, 1e-9));
  CHECK(p.intra_default.busbw == rel(5 * GB, 1e-9));
  CHECK(p.inter_node.busbw == rel(5 * GB, 1e-9));
  CHECK(j["inter_node"]["kind"] == "nominal");
  const auto& e12 = entry(j["intra_node"]["table"], "stride", 1, 2);
  CHECK(e12["fit"]["points"] == 12);
  CHECK(e12["fit"]["ops"] == nlohmann::json{"all-gather", "all-reduce"});

  // GEMM: axes are the measured dimensions; cells as designed.
  CHECK(p.gemm_fp32.m == std::vector<double>{64, 512});
  CHECK(ff::gemm_efficiency(p.gemm_fp32, 64, 64, 64) == rel(0.3));
  CHECK(ff::gemm_efficiency(p.gemm_fp32, 512, 64, 64) == rel(0.3));
  CHECK(ff::gemm_efficiency(p.gemm_fp32, 64, 512, 512) == rel(0.7));
  CHECK(ff::gemm_efficiency(p.gemm_fp32, 512, 512, 512) == rel(0.8));
  CHECK(p.gemm_bf16.eff == p.gemm_fp32.eff);

  for (const char* s : {"compute", "memory", "intra_node", "gemm"}) CHECK(j[s]["kind"] == "measured");
  CHECK(j["overlap"]["kind"] == "nominal");
  CHECK(contains(j["intra_node"]["source"], "mpirun -np 4 measure --out run.json"));
  CHECK(contains(j["intra_node"]["source"], "ci-runner"));
  CHECK(contains(j["intra_node"]["source"], "2026-11-22T01:00:00Z"));

  // The measurement rides along verbatim, and can be refitted from the profile.
  CHECK(j["raw"] == ff::to_json(m));
  ff::Measurement again = ff::measurement_from_json(j, "ci-cpu.json");
  CHECK(again.collectives.size() == m.collectives.size());
  ff::MachineProfile refit = ff::machine_from_json(ff::calibrate_profile(nullptr, again, "ci-cpu"), "refit");
  CHECK(refit.intra_default.busbw == rel(5 * GB, 1e-9));
  CHECK(refit.gemm_fp32.eff.size() == p.gemm_fp32.eff.size());
}

TEST_CASE("a calibrated profile states its errors: the repeats' spread, never below the assumed, checked up to the widest group measured") {
  // cpu_run: GEMM repeats at 0.8, 1 and 1.2 of their median (p90 of the
  // deviations 0.2), collectives at 0.9, 1, 1.1 (0.1, below the assumed
  // 15%), nothing across nodes.
  const nlohmann::json j = ff::calibrate_profile(nlohmann::json(), cpu_run(), "cpu");
  const ff::MachineProfile p = ff::machine_from_json(j, "cpu.json");
  CHECK(p.uncertainty.stated);
  CHECK(p.uncertainty.compute == rel(0.2, 1e-9));
  CHECK(p.uncertainty.intra == rel(0.15, 1e-12));
  CHECK(p.uncertainty.inter == rel(0.20, 1e-12));
  CHECK(p.uncertainty.checked_nodes == 0);
  CHECK(j["uncertainty"]["kind"] == "measured");
  CHECK(contains(j["uncertainty"]["source"], "inter-node collectives not measured"));
  // On 8 nodes, groups of 4 with repeats at 0.7, 1 and 1.3 of their median:
  // ±30%, checked up to the 4 nodes a group spans (not the 8 of the job),
  // beyond them at least the assumed 30%.
  ff::Measurement m = cpu_run();
  m.ranks = 16, m.gpus_per_node = 2, m.nodes = 8;
  add_sweep(m, ff::Coll::AllReduce, inter(1, 4), 100 * us, 0.05 * GB);
  for (auto& c : m.collectives)
    if (c.geometry.inter) c.times_s = {1.3 * c.times_s[1], c.times_s[1], 0.7 * c.times_s[1]};
  const ff::MachineProfile q = ff::machine_from_json(ff::calibrate_profile(nlohmann::json(), m, "four"), "four.json");
  CHECK(q.uncertainty.inter == rel(0.3, 1e-9));
  CHECK(q.uncertainty.checked_nodes == 4);
  CHECK(q.uncertainty.beyond == rel(0.3, 1e-9));
  CHECK(q.uncertainty.intra == rel(0.15, 1e-12));
  // Links alone over perlmutter: the GEMMs are the base's, and so is their
  // stated 6%; its 256 nodes checked are not, the 2 measured are.
  ff::Measurement links = run_of("nccl", 8, 4, "srun -N 2 measure");
  add_sweep(links, ff::Coll::AllReduce, inter(1, 2), 8 * us, 45 * GB);
  const ff::MachineProfile r =
      ff::machine_from_json(ff::calibrate_profile(ff::profile_json("perlmutter"), links, "pm"), "pm.json");
  CHECK(r.uncertainty.compute == rel(0.06, 1e-12));
  CHECK(r.uncertainty.inter == rel(0.20, 1e-12));
  CHECK(r.uncertainty.checked_nodes == 2);
  CHECK(r.uncertainty.beyond == rel(0.30, 1e-12));
}

TEST_CASE("with a base profile: measured sections replace, the rest stays, unmeasured entries kept") {
  nlohmann::json base = ff::profile_json("perlmutter");
  ff::Measurement m = run_of("nccl", 8, 4, "srun -N 2 measure");
  add_sweep(m, ff::Coll::AllReduce, intra(1, 2), 4 * us, 70 * GB);
  add_sweep(m, ff::Coll::AllGather, inter(2, 2), 10 * us, 20 * GB);  // 2 groups share a node
  m.gemm_dtype = ff::Dtype::BF16;
  m.gemm.push_back(gemm_at(4096, 4096, 4096, 0.5, 312e12));
  nlohmann::json j = ff::calibrate_profile(base, m, "pm-measured");
  ff::MachineProfile p = ff::machine_from_json(j, "pm-measured.json");

  CHECK(p.peak_flops_bf16 == rel(312e12));       // the base's datasheet peak stays
  CHECK(j["compute"]["kind"] == "nominal");
  CHECK(p.hbm_bandwidth == rel(1555 * GB));      // not measured: from the base
  CHECK(j["memory"]["kind"] == "nominal");
  CHECK(ff::gemm_efficiency(p.gemm_bf16, 4096, 4096, 4096) == rel(0.5));
  // Measured bf16 replaces the base's published rate: the table prices it.
  CHECK_FALSE(j["gemm"].contains("rate"));
  CHECK(p.gemm_rate.efficiency_max == 0);
  CHECK(ff::gemm_time(p, ff::Dtype::BF16, 4096, 4096, 4096) == rel(2.0 * 4096 * 4096 * 4096 / (0.5 * 312e12)));
  // fp32 not measured: perlmutter's fp32 table at 4096³ (a grid point there) is 0.859.
  CHECK(ff::gemm_efficiency(p.gemm_fp32, 4096, 4096, 4096) == rel(0.859));
  // fp32 measured instead: the base's bf16 rate stays as it was, and prices bf16.
  ff::Measurement m32 = m;
  m32.gemm_dtype = ff::Dtype::FP32;
  m32.gemm = {gemm_at(4096, 4096, 4096, 0.5, 19.5e12)};
  nlohmann::json j32 = ff::calibrate_profile(base, m32, "pm-fp32");
  CHECK(j32["gemm"]["rate"] == base["gemm"]["rate"]);
  CHECK_FALSE(j32["gemm"].contains("bf16"));
  const ff::MachineProfile p32 = ff::machine_from_json(j32, "pm-fp32.json");
  CHECK(p32.gemm_rate.efficiency_max == ff::load_machine("perlmutter").gemm_rate.efficiency_max);
  CHECK(ff::gemm_efficiency(p32.gemm_fp32, 4096, 4096, 4096) == rel(0.5));

  // Intra: the measured (1, 2) replaces the base's; (1, 4) and (2, 2) stay, marked nominal.
  REQUIRE(p.intra.size() == 3);
  const auto& kept = entry(j["intra_node"]["table"], "stride", 1, 4);
  CHECK(kept["busbw_GBps"] == 225);
  CHECK(kept["kind"] == "nominal");
  CHECK(contains(kept["source"], "from the base profile"));
  CHECK(entry(j["intra_node"]["table"], "stride", 1, 2)["kind"] == "measured");
  CHECK(p.intra_default.busbw == rel(70 * GB, 1e-9));

  // Inter: only 2 groups per node measured, so the node's bandwidth is 2 × 20 GB/s.
  CHECK(p.inter_node.busbw == rel(40 * GB, 1e-9));
  CHECK(p.inter_node.alpha_s == rel(10 * us, 1e-9));
  REQUIRE(p.inter.size() == 1);
  CHECK(p.inter[0].groups_per_node == 2);
  CHECK(p.inter[0].link.busbw == rel(20 * GB, 1e-9));
  CHECK(j["raw"]["backend"] == "nccl");
}

TEST_CASE("switch groups: the node link from groups inside one, the uplink from one crossing, each entry's crossings") {
  // 4 nodes × 2 ranks in switch groups of 2 nodes (measure --nodes-per-group
  // 2). Size 2 over nodes 0-1 and 2-3 stays in its switch group (0 rings an
  // uplink); size 4 over all four crosses each uplink: 1 ring, or 2 where 2
  // groups share every node.
  ff::Measurement m = run_of("mpi", 8, 2, "mpirun -np 8 measure --nodes-per-group 2");
  m.nodes_per_group = 2;
  add_sweep(m, ff::Coll::AllReduce, intra(1, 2), 20 * us, 5 * GB);
  add_sweep(m, ff::Coll::AllReduce, inter(1, 2), 100 * us, 0.05 * GB);
  add_sweep(m, ff::Coll::AllReduce, inter(1, 4), 150 * us, 0.01 * GB);
  add_sweep(m, ff::Coll::AllReduce, inter(2, 4), 120 * us, 0.008 * GB);
  const nlohmann::json j = ff::calibrate_profile(ff::profile_json("cpu-8x2core"), m, "two-level");
  const nlohmann::json& t = j["inter_node"]["table"];
  CHECK(entry(t, "groups_per_node", 1, 2)["rings_per_uplink"] == 0);
  CHECK(entry(t, "groups_per_node", 1, 4)["rings_per_uplink"] == 1);
  CHECK(entry(t, "groups_per_node", 2, 4)["rings_per_uplink"] == 2);
  // The node's link: the group that stays inside; the uplink: the one ring
  // crossing it alone (the fewest rings an uplink), 1 × 0.01 GB/s.
  CHECK(j["inter_node"]["node_busbw_GBps"].get<double>() == rel(0.05, 1e-9));
  CHECK(j["switch_groups"]["global_busbw_GBps"].get<double>() == rel(0.01, 1e-9));
  CHECK(j["switch_groups"]["alpha_us"].get<double>() == rel(150, 1e-9));
  // Priced back: 2 groups of 4 ranks one a node, stride 2 on 8 ranks, cross
  // each uplink 2 at a time, as the (2, 4) entry was timed: its own α 120 µs
  // and 0.008 GB/s, not the tier's α 150 µs and share 0.01 / 2 GB/s.
  const ff::MachineProfile p = ff::machine_from_json(j, "two-level.json");
  const ff::AxisLink l = ff::axis_link(p, 8, 2, 4);
  REQUIRE(l.rings_per_uplink == 2);
  const double bytes = 4194304;  // a measured size
  CHECK(ff::collective_time(ff::Coll::AllReduce, bytes, l) ==
        rel(fftest::hand_all_reduce(4, bytes, 120 * us, 0.008 * GB), 1e-9));
}

TEST_CASE("switch groups: pairs on nodes apart are another entry, keyed and priced by their rings an uplink") {
  // 4 nodes × 2 ranks, switch groups of 2 nodes. 2 pairs a node on
  // consecutive nodes ({0,2} {1,3} {4,6} {5,7}) stay inside their switch
  // group; on nodes 2 apart ({0,4} {1,5} {2,6} {3,7}) all four leave switch
  // group {0..3}: 4 rings an uplink (one a node: 2).
  ff::Geometry apart = inter(2, 2);
  apart.node_stride = 2;
  ff::Geometry apart_one = inter(1, 2);
  apart_one.node_stride = 2;
  CHECK(ff::rings_per_uplink(inter(2, 2), 4, 2) == 0);
  CHECK(ff::rings_per_uplink(apart, 4, 2) == 4);
  CHECK(ff::rings_per_uplink(apart_one, 4, 2) == 2);
  // 8 nodes in groups of 2, size 4 on nodes 2 apart (lanes 0,2,4,6 and
  // 1,3,5,7): every switch group holds one node of each lane.
  apart_one.size = 4;
  CHECK(ff::rings_per_uplink(apart_one, 8, 2) == 2);

  ff::Measurement m = run_of("mpi", 8, 2, "mpirun -np 8 measure --nodes-per-group 2");
  m.nodes_per_group = 2;
  add_sweep(m, ff::Coll::AllReduce, intra(1, 2), 20 * us, 5 * GB);
  add_sweep(m, ff::Coll::AllReduce, inter(2, 2), 100 * us, 0.025 * GB);
  add_sweep(m, ff::Coll::AllReduce, inter(1, 4), 150 * us, 0.01 * GB);
  add_sweep(m, ff::Coll::AllReduce, apart, 180 * us, 0.004 * GB);
  // The record keeps where the pairs sat.
  const ff::Measurement back = ff::measurement_from_json(ff::to_json(m), "record");
  CHECK(back.collectives.back().geometry.node_stride == 2);
  CHECK(back.collectives.front().geometry.node_stride == 1);
  const nlohmann::json j = ff::calibrate_profile(ff::profile_json("cpu-8x2core"), m, "two-level");
  int pairs = 0, inside = 0, crossing = 0;
  for (const auto& e : j["inter_node"]["table"])
    if (e["groups_per_node"] == 2 && e["size"] == 2 && e.contains("fit")) {
      ++pairs;
      if (e["rings_per_uplink"] == 0) inside += e["busbw_GBps"].get<double>() == rel(0.025, 1e-9);
      if (e["rings_per_uplink"] == 4) crossing += e["busbw_GBps"].get<double>() == rel(0.004, 1e-9);
    }
  CHECK(pairs == 2);
  CHECK(inside == 1);
  CHECK(crossing == 1);
  // The uplink is still fitted on the one ring crossing alone.
  CHECK(j["switch_groups"]["global_busbw_GBps"].get<double>() == rel(0.01, 1e-9));

  const ff::MachineProfile p = ff::machine_from_json(j, "two-level.json");
  const double bytes = 4194304;
  // An axis of stride 4 (pairs {r, r+4}, 2 a node, all crossing: 4 an
  // uplink) takes the pairs timed apart: α 180 µs, 0.004 GB/s.
  const ff::AxisLink x = ff::axis_link(p, 8, 4, 2);
  REQUIRE(x.rings_per_uplink == 4);
  CHECK(ff::collective_time(ff::Coll::AllReduce, bytes, x) ==
        rel(fftest::hand_all_reduce(2, bytes, 180 * us, 0.004 * GB), 1e-9));
  // Stride 2 (pairs {0,2} {1,3} …, inside their switch groups) the pairs timed there.
  const ff::AxisLink y = ff::axis_link(p, 8, 2, 2);
  REQUIRE(y.rings_per_uplink == 0);
  CHECK(ff::collective_time(ff::Coll::AllReduce, bytes, y) ==
        rel(fftest::hand_all_reduce(2, bytes, 100 * us, 0.025 * GB), 1e-9));
  // With only the pairs timed apart, pairs inside a switch group do not take
  // them (4 rings' worth of uplink sharing they do not have): the node's
  // link, shared by 2 groups.
  nlohmann::json apart_only = j;
  auto& table = apart_only["inter_node"]["table"];
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i]["groups_per_node"] == 2 && table[i]["size"] == 2 && table[i]["rings_per_uplink"] == 0) {
      table.erase(i);
      break;
    }
  const ff::MachineProfile r = ff::machine_from_json(apart_only, "apart-only.json");
  const ff::AxisLink within = ff::axis_link(r, 8, 2, 2);
  CHECK(within.inter.busbw == rel(r.inter_node.busbw / 2, 1e-9));
  CHECK(within.inter.alpha_s == rel(r.inter_node.alpha_s, 1e-9));
  CHECK(within.inter.rings_per_uplink == -1);  // not an entry's
  // Without the pairs apart, stride 4 was the inside entry bounded by the
  // uplink's share: min(0.025, 0.01 / 4) GB/s and the tier's α 150 µs.
  ff::Measurement before = m;
  before.collectives.erase(std::remove_if(before.collectives.begin(), before.collectives.end(),
                                          [](const ff::CollectiveSample& c) { return c.geometry.node_stride > 1; }),
                           before.collectives.end());
  const ff::MachineProfile q =
      ff::machine_from_json(ff::calibrate_profile(ff::profile_json("cpu-8x2core"), before, "two-level"), "q.json");
  CHECK(ff::collective_time(ff::Coll::AllReduce, bytes, ff::axis_link(q, 8, 4, 2)) ==
        rel(fftest::hand_all_reduce(2, bytes, 150 * us, 0.0025 * GB), 1e-9));
}

// A GPU's own kernels (measure --model on the nccl backend), made from a
// curve and bandwidths chosen here: calibrate recovers them.
TEST_CASE("the engine's GPU kernels timed alone: the causal flash curve, the element-wise efficiency, the launch") {
  nlohmann::json base = ff::profile_json("dgx-h100");
  ff::Measurement m = run_of("nccl", 1, 1, "measure --backend nccl --model gpt-1.3b");
  m.stream_bytes_per_s = 3000 * GB;
  // efficiency_max 0.4 of the 989 TFLOP/s peak, half of it at 300 tokens.
  const double peak = 989e12, e = 0.4, h = 300, flops = 1e12;
  for (double S : {512.0, 1024.0, 4096.0})
    m.gpu_kernels.push_back({"flash_attention", S, 128, flops, 0, {flops / (e * peak * S / (S + h))}});
  // 2,000, 2,400 and 2,800 GB/s: the median is 0.8 of the copy's 3,000.
  for (double gbps : {2000.0, 2800.0, 2400.0}) m.gpu_kernels.push_back({"gelu forward", 0, 0, 0, 1e9, {1e9 / (gbps * GB)}});
  // The norm forward at 1,500 GB/s and backward at 1,000, 20 µs a launch
  // each, at 1 GB and at a quarter of it; a bias add and a residual add at
  // 3,000: the median over each kernel's largest timing stays 2,400 (980,
  // 1,456, 2,000, 2,400, 2,800, 3,000, 3,000).
  for (double bytes : {1e9, 0.25e9}) {
    m.gpu_kernels.push_back({"norm forward", 0, 0, 0, bytes, {bytes / (1500 * GB) + 20e-6}});
    m.gpu_kernels.push_back({"norm backward", 0, 0, 0, bytes, {bytes / (1000 * GB) + 20e-6}});
  }
  m.gpu_kernels.push_back({"bias add", 0, 0, 0, 1e9, {1e9 / (3000 * GB)}});
  m.gpu_kernels.push_back({"residual add", 0, 0, 0, 1e9, {1e9 / (3000 * GB)}});
  m.launch_s = 2.5e-6;
  // FC1's GEMM at 100 µs alone; beside 16 SMs copying a median of 112 µs
  // (+12%), 32 copying 124 µs (+24%), 16 only held 106 µs (+6%): the
  // profile's slowdown their mean, 0.14.
  m.hiding.push_back({8192, 8192, 2048, 16, true, {100e-6, 101e-6, 99e-6}, {112e-6, 110e-6, 114e-6}, 500e9});
  m.hiding.push_back({8192, 8192, 2048, 32, true, {100e-6}, {124e-6}, 900e9});
  m.hiding.push_back({8192, 8192, 2048, 16, false, {100e-6}, {106e-6}, 0});
  const nlohmann::json j = ff::calibrate_profile(base, m, "h100-kernels");
  const ff::MachineProfile p = ff::machine_from_json(j, "h100-kernels.json");
  const ff::AttentionCurve* causal128 = nullptr;
  for (const auto& c : p.flash_attention)
    if (c.head_dim == 128 && c.causal) causal128 = &c;
  REQUIRE(causal128);
  CHECK(causal128->efficiency_max == rel(e, 1e-9));
  CHECK(causal128->half_seq == rel(h, 1e-9));
  CHECK(p.flash_attention.size() == 4);  // the base's other three curves kept
  CHECK(j["compute"]["flash_attention"]["kind"] == "measured");
  CHECK(p.elementwise_efficiency == rel(0.8, 1e-12));
  // Each class fitted on its kernels: GELU's three 1 GB (one size) at
  // 2,000, 2,800 and 2,400 GB/s take 1/2000 + 1/2800 + 1/2400 s per GB,
  // 3 GB in 1.2738095e-3 s = 2,355.14 GB/s = 0.785047 of the copy, no
  // launch of its own; the norm's two kernels at two sizes give back 20 µs
  // and 2 GB in 1/1500 + 1/1000 s per GB = 1,200 GB/s = 0.4; the bias add
  // prices no class (an epilogue wherever the engine can).
  const auto by = [&](ff::KernelClass c) { return p.elementwise_by_class[size_t(c)]; };
  const auto launch = [&](ff::KernelClass c) { return p.launch_by_class_s[size_t(c)]; };
  CHECK(by(ff::KernelClass::Activation) == rel(0.785047, 1e-6));
  CHECK(launch(ff::KernelClass::Activation) == -1);
  CHECK(by(ff::KernelClass::Norm) == rel(0.4, 1e-9));
  CHECK(launch(ff::KernelClass::Norm) == rel(20e-6, 1e-6));
  CHECK(by(ff::KernelClass::Bias) == 0);
  CHECK(by(ff::KernelClass::Residual) == rel(1.0, 1e-12));
  // Priced: 1 GB of norm in 2 launches at 1,200 GB/s and 20 µs each; of
  // embedding (not measured) at 0.8 and the profile's 2.5 µs.
  CHECK(ff::elementwise_time(p, ff::KernelClass::Norm, 1e9, 2) == rel(1.0 / 1200 + 40e-6, 1e-9));
  CHECK(ff::elementwise_time(p, ff::KernelClass::Embedding, 1e9, 2) == rel(1.0 / 2400 + 2 * 2.5e-6, 1e-9));
  CHECK(p.launch_s == rel(2.5e-6, 1e-12));
  CHECK(p.compute_slowdown == rel(0.14, 1e-9));
  CHECK(contains(j["overlap"]["source"], "a proxy on one GPU"));
  // The record keeps the samples: read back, the same.
  const ff::Measurement back = ff::measurement_from_json(ff::to_json(m), "record");
  REQUIRE(back.hiding.size() == 3);
  CHECK(back.hiding[1].blocks == 32);
  CHECK(back.hiding[1].copying);
  CHECK_FALSE(back.hiding[2].copying);
  CHECK(back.hiding[0].slowdown() == rel(0.12, 1e-9));
  CHECK(back.hiding[1].copy_bytes_per_s == rel(900e9, 1e-12));
  REQUIRE(back.gpu_kernels.size() == 12);
  CHECK(back.gpu_kernels[1].seq == 1024);
  CHECK(back.gpu_kernels[1].head_dim == 128);
  CHECK(back.gpu_kernels[4].bytes == 1e9);
  CHECK(back.gpu_kernels[2].median_s() == rel(m.gpu_kernels[2].median_s(), 1e-9));
  CHECK(back.launch_s == rel(2.5e-6, 1e-9));
}

TEST_CASE("a machine faster than its base's peak raises the peak; one group per node sets the node") {
  ff::Measurement m = run_of("nccl", 8, 4, "srun -N 2 measure");
  add_sweep(m, ff::Coll::AllReduce, inter(1, 2), 8 * us, 45 * GB);
  add_sweep(m, ff::Coll::AllReduce, inter(4, 2), 8 * us, 15 * GB);
  m.gemm_dtype = ff::Dtype::BF16;
  m.gemm.push_back(gemm_at(8192, 8192, 8192, 1.0, 400e12));  // 400 TFLOP/s on a 312 TFLOP/s datasheet
  nlohmann::json j = ff::calibrate_profile(ff::profile_json("perlmutter"), m, "fast");
  ff::MachineProfile p = ff::machine_from_json(j, "fast.json");
  CHECK(p.peak_flops_bf16 == rel(400e12));
  CHECK(j["compute"]["kind"] == "measured");
  CHECK(ff::gemm_efficiency(p.gemm_bf16, 8192, 8192, 8192) == rel(1.0));
  CHECK(p.inter_node.busbw == rel(45 * GB, 1e-9));  // groups_per_node 1 preferred
  CHECK(p.intra.size() == 3);                      // no intra data: the base's section as it was
  CHECK(j["intra_node"] == ff::profile_json("perlmutter")["intra_node"]);
}

TEST_CASE("with a base profile, measured stream and memory replace the base's figures") {
  ff::Measurement m = cpu_run();  // stream 10 GB/s, 8 GiB per rank
  m.memory_bytes_per_rank = 2 * GiB;  // below perlmutter's 3 GiB reserve
  nlohmann::json j = ff::calibrate_profile(ff::profile_json("perlmutter"), m, "pm-cpu");
  ff::MachineProfile p = ff::machine_from_json(j, "pm-cpu.json");
  CHECK(p.hbm_bandwidth == rel(10 * GB));
  CHECK(p.hbm_capacity == rel(2 * GiB));
  CHECK(p.memory_reserve == rel(0.2 * GiB));
  CHECK(p.elementwise_efficiency == rel(0.8));  // perlmutter's, not measured
  CHECK(j["memory"]["kind"] == "measured");
  CHECK(contains(j["memory"]["source"], "reserve_GiB lowered"));
  CHECK(p.peak_flops_fp32 == rel(19.5e12));  // the CPU's 0.1 TFLOP/s does not beat the datasheet
}

TEST_CASE("calibrate_profile and profile_json refuse what they cannot build from") {
  ff::Measurement m = cpu_run();
  m.gemm.clear();
  CHECK(contains(input_error_of([&] { ff::calibrate_profile(nullptr, m, "x"); }), "GEMM samples"));
  m = cpu_run();
  m.stream_bytes_per_s = 0;
  CHECK(contains(input_error_of([&] { ff::calibrate_profile(nullptr, m, "x"); }), "stream bandwidth"));
  m = cpu_run();
  m.collectives.clear();
  CHECK(contains(input_error_of([&] { ff::calibrate_profile(nullptr, m, "x"); }), "no intra-node collectives"));
  // One size per geometry is not a fit.
  m = cpu_run();
  m.collectives.resize(1);
  CHECK(contains(input_error_of([&] { ff::calibrate_profile(nullptr, m, "x"); }), "at least 2"));
  CHECK(contains(input_error_of([] { ff::profile_json("nonesuch"); }), "unknown machine 'nonesuch'"));
  nlohmann::json bad = ff::profile_json("frontier");
  bad["memory"]["hbm_GBps"] = -1;
  CHECK(contains(input_error_of([&] { ff::calibrate_profile(bad, cpu_run(), "x"); }), "memory.hbm_GBps"));
}

TEST_CASE("groups with several members a node are fitted into entries of their own") {
  // 4 ranks across nodes, measured twice: on 4 nodes, one a node (25 MB/s,
  // α 50 µs), and on 2 nodes, two a node (10 MB/s, α 80 µs: Open MPI's
  // all-gather sends from both at once).
  ff::Measurement m = cpu_run();
  add_sweep(m, ff::Coll::AllGather, inter(1, 4), 50 * us, 25e6);
  add_sweep(m, ff::Coll::AllGather, inter_m(1, 4, 2), 80 * us, 10e6);
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "tcp");
  ff::MachineProfile p = ff::machine_from_json(j, "tcp.json");
  REQUIRE(p.inter.size() == 2);
  for (const auto& e : p.inter) {
    CHECK(e.groups_per_node == 1);
    CHECK(e.size == 4);
    CHECK(e.link.busbw == rel(e.members_per_node == 2 ? 10e6 : 25e6, 1e-9));
    CHECK(e.link.alpha_s == rel(e.members_per_node == 2 ? 80 * us : 50 * us, 1e-9));
  }
  CHECK(p.inter[0].members_per_node != p.inter[1].members_per_node);
  // The written entries say which is which.
  std::set<int> written;
  for (const auto& e : j["inter_node"]["table"]) written.insert(e["members_per_node"].get<int>());
  CHECK(written == std::set<int>{1, 2});
  // The node's own link is the one-member-a-node fit: the ring rule's figure.
  CHECK(p.inter_node.busbw == rel(25e6, 1e-9));
  CHECK(p.inter_node.alpha_s == rel(50 * us, 1e-9));

  // Measured again with only the two-a-node groups, on that profile as the
  // base: the one-a-node entry is kept, and the node's link comes from the
  // only fit there is, saying so.
  ff::Measurement again = run_of("mpi", 8, 2, "mpirun -np 8 measure --inter 1x4x2");
  add_sweep(again, ff::Coll::AllGather, inter_m(1, 4, 2), 60 * us, 12e6);
  nlohmann::json k = ff::calibrate_profile(j, again, "tcp2");
  ff::MachineProfile q = ff::machine_from_json(k, "tcp2.json");
  REQUIRE(q.inter.size() == 2);
  for (const auto& e : q.inter) CHECK(e.link.busbw == rel(e.members_per_node == 2 ? 12e6 : 25e6, 1e-9));
  CHECK(contains(k["inter_node"]["source"], "members_per_node 2"));
}

TEST_CASE("members_per_node in records: written, read back, merged apart, absent in old records") {
  ff::Measurement m = run_of("mpi", 8, 2, "measure");
  ff::CollectiveSample a = sample(ff::Coll::AllGather, inter(1, 4), 4096, 50 * us, 25e6);
  ff::CollectiveSample b = sample(ff::Coll::AllGather, inter_m(1, 4, 2), 4096, 80 * us, 10e6);
  // Same collective, size and (c, size): only the members a node differ.
  std::vector<ff::CollectiveSample> merged;
  ff::merge_sample(merged, a);
  ff::merge_sample(merged, b);
  CHECK(merged.size() == 2);
  ff::merge_sample(merged, b);
  REQUIRE(merged.size() == 2);
  CHECK(merged[1].times_s.size() == 6);  // 3 repeats, twice
  m.collectives = {a, b};

  nlohmann::json j = ff::to_json(m);
  CHECK(j["collectives"][0]["members_per_node"] == 1);
  CHECK(j["collectives"][1]["members_per_node"] == 2);
  ff::Measurement back = ff::measurement_from_json(j, "run.json");
  REQUIRE(back.collectives.size() == 2);
  CHECK(back.collectives[0].geometry.members_per_node == 1);
  CHECK(back.collectives[1].geometry.members_per_node == 2);

  // A record written before the field existed: one member a node.
  nlohmann::json old = j;
  for (auto& c : old["collectives"]) c.erase("members_per_node");
  ff::Measurement o = ff::measurement_from_json(old, "old.json");
  CHECK(o.collectives[0].geometry.members_per_node == 1);
  CHECK(o.collectives[1].geometry.members_per_node == 1);

  nlohmann::json bad = j;
  bad["collectives"][1]["members_per_node"] = 0;
  CHECK(contains(input_error_of([&] { ff::measurement_from_json(bad, "run.json"); }),
                 "run.json: field 'collectives[1].members_per_node': expected an integer >= 1"));
  bad["collectives"][1]["members_per_node"] = 4;  // size 4 all on one node is no inter-node group
  CHECK(contains(input_error_of([&] { ff::measurement_from_json(bad, "run.json"); }),
                 "field 'collectives[1].members_per_node': expected an integer >= 1 and below size"));
}

TEST_CASE("profile inter entries: members_per_node optional, default 1, checked") {
  // Entries written before the field existed: one member a node.
  nlohmann::json old = ff::profile_json("cpu-8x2core");
  REQUIRE_FALSE(old["inter_node"]["table"].empty());
  for (auto& e : old["inter_node"]["table"]) e.erase("members_per_node");
  for (const auto& e : ff::machine_from_json(old, "old.json").inter) CHECK(e.members_per_node == 1);
  nlohmann::json j = ff::profile_json("perlmutter");
  j["inter_node"]["table"] = {{{"groups_per_node", 1}, {"size", 8}, {"members_per_node", 4},
                               {"alpha_us", 12}, {"busbw_GBps", 60}}};
  ff::MachineProfile p = ff::machine_from_json(j, "pm.json");
  REQUIRE(p.inter.size() == 1);
  CHECK(p.inter[0].members_per_node == 4);
  // 1,024 ranks, stride 1 size 8: groups on 2 nodes, 4 each (perlmutter has 4 a node).
  CHECK(ff::axis_link(p, 1024, 1, 8).inter.busbw == rel(60 * GB));
  j["inter_node"]["table"][0]["members_per_node"] = 0;
  CHECK(contains(input_error_of([&] { ff::machine_from_json(j, "pm.json"); }),
                 "pm.json: field 'inter_node.table[0].members_per_node': expected an integer >= 1"));
  j["inter_node"]["table"][0]["members_per_node"] = "two";
  CHECK(contains(input_error_of([&] { ff::machine_from_json(j, "pm.json"); }),
                 "field 'inter_node.table[0].members_per_node'"));
  j["inter_node"]["table"][0]["members_per_node"] = 8;
  CHECK(contains(input_error_of([&] { ff::machine_from_json(j, "pm.json"); }), "below size"));
}

// ---- pairs (send-recv) and the host link ----

namespace {

// One pair message each way at once: t = α + bytes/bw (profiles/README.md, p2p).
ff::P2PSample pair_at(bool across, long long stride_or_pairs, double bytes, double alpha, double bw) {
  ff::P2PSample s;
  s.geometry.inter = across;
  s.geometry.size = 2;
  if (across) s.geometry.groups_per_node = int(stride_or_pairs);
  else s.geometry.stride = stride_or_pairs;
  s.bytes = bytes;
  s.iters = 20;
  double t = alpha + bytes / bw;
  s.times_s = {0.9 * t, t, 1.2 * t};  // the median is t
  return s;
}

void add_pairs(ff::Measurement& m, bool across, long long key, double alpha, double bw) {
  for (double b = 1024; b <= 16777216; b *= 2) m.p2p.push_back(pair_at(across, key, b, alpha, bw));
}

ff::HostLinkSample copy_at(bool h2d, int gpus, double bytes, double alpha, double bw) {
  ff::HostLinkSample s;
  s.to_device = h2d;
  s.gpus = gpus;
  s.bytes = bytes;
  s.iters = 20;
  double t = alpha + bytes / bw;
  s.times_s = {t, 1.1 * t, 0.95 * t};
  return s;
}

void add_copies(ff::Measurement& m, bool h2d, int gpus, double alpha, double bw) {
  for (double b = 1024; b <= 268435456.0; b *= 4) m.host_link.push_back(copy_at(h2d, gpus, b, alpha, bw));
}

}  // namespace

TEST_CASE("fit_p2p recovers α and bw from exact pair timings, 1 KiB .. 1 GiB") {
  for (auto [alpha, bw] : {std::pair{3 * us, 25 * GB}, std::pair{40 * us, 0.5 * GB}, std::pair{0.0, 10 * GB}})
    for (bool across : {false, true}) {
      std::vector<ff::P2PSample> s;
      for (double b : sweep()) s.push_back(pair_at(across, 1, b, alpha, bw));
      ff::LinkFit f = ff::fit_p2p(s);
      if (alpha > 0) CHECK(f.link.alpha_s == rel(alpha, 1e-9));
      else CHECK(f.link.alpha_s < 1e-9 * us);
      CHECK(f.link.busbw == rel(bw, 1e-9));
      CHECK(f.points == 21);
      CHECK(f.rel_rms < 1e-9);
    }
  // By hand, 2 points: (1 MB, 60 µs) and (2 MB, 110 µs) lie on α = 10 µs, 1/bw = 50 µs/MB: bw = 20 GB/s.
  std::vector<ff::P2PSample> two = {pair_at(false, 1, 1e6, 10 * us, 20 * GB), pair_at(false, 1, 2e6, 10 * us, 20 * GB)};
  CHECK(two[0].median_s() == rel(60 * us));
  CHECK(two[1].median_s() == rel(110 * us));
  ff::LinkFit f = ff::fit_p2p(two);
  CHECK(f.link.alpha_s == rel(10 * us, 1e-9));
  CHECK(f.link.busbw == rel(20 * GB, 1e-9));
  CHECK(contains(input_error_of([] { ff::fit_p2p({pair_at(false, 1, 1e6, us, GB)}); }), "at least 2"));
}

TEST_CASE("a record with pairs gives a p2p section: smallest stride inside, one pair per node across") {
  ff::Measurement m = cpu_run();
  add_pairs(m, false, 1, 5 * us, 8 * GB);
  add_pairs(m, false, 2, 6 * us, 6 * GB);
  add_pairs(m, true, 1, 20 * us, 2 * GB);
  add_pairs(m, true, 2, 22 * us, 1.25 * GB);  // each of 2 pairs sharing a node: 2.5 GB/s in total
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "pairs");
  ff::MachineProfile p = ff::machine_from_json(j, "pairs.json");
  REQUIRE(p.has_p2p);
  CHECK(p.p2p_intra.alpha_s == rel(5 * us, 1e-9));
  CHECK(p.p2p_intra.bw == rel(8 * GB, 1e-9));
  CHECK(p.p2p_inter.alpha_s == rel(20 * us, 1e-9));
  CHECK(p.p2p_inter.bw == rel(2 * GB, 1e-9));
  const auto& s = j["p2p"];
  CHECK(s["kind"] == "measured");
  CHECK(s["intra_node"]["kind"] == "measured");
  CHECK(s["inter_node"]["kind"] == "measured");
  CHECK(contains(s["source"], "mpirun -np 4 measure --out run.json"));
  CHECK(contains(s["inter_node"]["source"], "2 pairs sharing a node"));
  CHECK(contains(s["inter_node"]["source"], "1.25 GB/s each way per pair (2.5 in total"));
  REQUIRE(s["table"].size() == 4);
  for (const auto& e : s["table"]) CHECK(e["fit"]["points"] == 15);  // 1 KiB .. 16 MiB
  // The record rides along and refits to the same figures.
  ff::Measurement again = ff::measurement_from_json(j, "pairs.json");
  REQUIRE(again.p2p.size() == m.p2p.size());
  CHECK(again.p2p[0].geometry.stride == 1);
  ff::MachineProfile refit = ff::machine_from_json(ff::calibrate_profile(nullptr, again, "pairs"), "refit");
  CHECK(refit.p2p_inter.bw == rel(2 * GB, 1e-9));
  CHECK(j["raw"]["p2p"][0]["busbw_GBps"] == j["raw"]["p2p"][0]["algbw_GBps"]);  // nccl-tests' sendrecv
}

TEST_CASE("pairs measured on one side only: the other from the base's p2p, else from the profile's all-gather") {
  // Only 2 pairs sharing a node across nodes: one pair alone is taken as 2 × each pair's bw.
  ff::Measurement m = cpu_run();
  add_pairs(m, true, 2, 22 * us, 1.25 * GB);
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "x");
  ff::MachineProfile p = ff::machine_from_json(j, "x");
  CHECK(p.p2p_inter.bw == rel(2.5 * GB, 1e-9));
  CHECK(p.p2p_inter.alpha_s == rel(22 * us, 1e-9));
  // No pair inside a node: cpu_run's stride-1 size-2 all-gather (α 20 µs, 5 GB/s):
  // α·(2−1) + ½·(2·bytes)/busbw = α + bytes/busbw.
  CHECK(p.p2p_intra.alpha_s == rel(20 * us, 1e-9));
  CHECK(p.p2p_intra.bw == rel(5 * GB, 1e-9));
  CHECK(j["p2p"]["intra_node"]["kind"] == "nominal");

  // Inside only, with a base that has a p2p section: its inter_node stays.
  nlohmann::json base = ff::profile_json("perlmutter");
  base["p2p"] = {{"kind", "nominal"}, {"source", "stated"},
                 {"intra_node", {{"alpha_us", 3}, {"bw_GBps", 100}}}, {"inter_node", {{"alpha_us", 9}, {"bw_GBps", 24}}}};
  ff::Measurement n = cpu_run();
  add_pairs(n, false, 1, 5 * us, 8 * GB);
  nlohmann::json k = ff::calibrate_profile(base, n, "y");
  ff::MachineProfile q = ff::machine_from_json(k, "y");
  CHECK(q.p2p_intra.bw == rel(8 * GB, 1e-9));
  CHECK(q.p2p_inter.bw == rel(24 * GB));
  CHECK(q.p2p_inter.alpha_s == rel(9 * us));
  CHECK(k["p2p"]["inter_node"]["kind"] == "nominal");
  CHECK(contains(k["p2p"]["inter_node"]["source"], "from the base profile: stated"));

  // A record without pairs or host rows leaves the base's sections as they were, or absent.
  base["host"] = {{"kind", "nominal"}, {"link_GBps", 25}, {"memory_GiB", 256}};
  nlohmann::json same = ff::calibrate_profile(base, cpu_run(), "z");
  CHECK(same["p2p"] == base["p2p"]);
  CHECK(same["host"] == base["host"]);
  nlohmann::json none = ff::calibrate_profile(nullptr, cpu_run(), "w");
  CHECK(!none.contains("p2p"));
  CHECK(!none.contains("host"));
  CHECK(!ff::machine_from_json(none, "w").has_host);
}

TEST_CASE("a record with host rows gives a host section") {
  // 4 GPUs a node (cpu_run). Alone: h2d 20, d2h 18 GB/s; all 4 at once: 12 and 11 GB/s each.
  ff::Measurement m = cpu_run();
  add_copies(m, true, 1, 10 * us, 20 * GB);
  add_copies(m, false, 1, 12 * us, 18 * GB);
  add_copies(m, true, 4, 10 * us, 12 * GB);
  add_copies(m, false, 4, 12 * us, 11 * GB);
  m.host_link_kind = "cuda-pinned";
  m.host_memory_bytes = 512 * GiB;
  nlohmann::json j = ff::calibrate_profile(nullptr, m, "host");
  ff::MachineProfile p = ff::machine_from_json(j, "host.json");
  REQUIRE(p.has_host);
  CHECK(p.host_link_bw == rel(18 * GB, 1e-9));      // the slower direction alone
  CHECK(p.host_node_bw == rel(4 * 11 * GB, 1e-9));  // 4 × the slower direction, all at once
  CHECK(p.host_memory == rel(512 * GiB));
  CHECK(p.host_bw_per_gpu() == rel(11 * GB, 1e-9)); // min(18, 44 / 4)
  CHECK(j["host"]["kind"] == "measured");
  CHECK(contains(j["host"]["source"], "pinned cudaMemcpyAsync"));
  CHECK(j["host"]["fit"]["h2d_1_gpus"]["alpha_us"].get<double>() == rel(10, 1e-9));
  CHECK(j["host"]["fit"]["d2h_4_gpus"]["bw_GBps"].get<double>() == rel(11, 1e-9));

  // The record's JSON keeps the rows and what they time; the stand-in says it is one.
  ff::Measurement again = ff::measurement_from_json(ff::to_json(m), "rec.json");
  CHECK(again.host_link.size() == m.host_link.size());
  CHECK(again.host_link_kind == "cuda-pinned");
  CHECK(again.host_memory_bytes == rel(512 * GiB));
  m.host_link_kind = "host-memcpy";
  nlohmann::json s = ff::calibrate_profile(nullptr, m, "standin");
  CHECK(contains(s["host"]["source"], "stands in for the GPU link"));
  CHECK(contains(s["raw"]["host_link"]["what"], "not a GPU link"));

  // Without host memory in the record: memory per rank × ranks per node (8 GiB × 4).
  m.host_memory_bytes = 0;
  CHECK(ff::machine_from_json(ff::calibrate_profile(nullptr, m, "x"), "x").host_memory == rel(32 * GiB));

  // Bad rows name their field.
  nlohmann::json bad = ff::to_json(m);
  bad["host_link"]["samples"][0]["direction"] = "sideways";
  CHECK(contains(input_error_of([&] { ff::measurement_from_json(bad, "r.json"); }), "host_link.samples[0].direction"));
  bad = ff::to_json(m);
  bad["host_link"]["kind"] = "pcie";
  CHECK(contains(input_error_of([&] { ff::measurement_from_json(bad, "r.json"); }), "host_link.kind"));
}

TEST_CASE("engine_device: cuda where measured with NCCL or said by the base, cpu otherwise; anything else refused") {
  ff::Measurement m = cpu_run();
  nlohmann::json p = ff::calibrate_profile(nullptr, m, "cpu");
  CHECK(!p.contains("engine_device"));
  CHECK(ff::machine_from_json(p, "cpu.json").engine_device == "cpu");
  m.backend = "nccl";
  CHECK(ff::calibrate_profile(nullptr, m, "gpu")["engine_device"] == "cuda");
  CHECK(ff::load_machine("perlmutter").engine_device == "cuda");  // NVIDIA A100s
  CHECK(ff::load_machine("frontier").engine_device == "cpu");     // AMD: no cuda device
  p["engine_device"] = "rocm";
  CHECK(contains(input_error_of([&] { ff::machine_from_json(p, "cpu.json"); }),
                 "cpu.json: field 'engine_device': expected \"cpu\" or \"cuda\""));
}

TEST_CASE("poll_us and gap_us: how measure timed, in the record, carried into the profile, checked, merged only when equal") {
  struct Field {
    const char* name;
    std::optional<double> ff::Measurement::*in_record;
    std::optional<double> ff::MachineProfile::*in_profile;
    const char* disagree;
  };
  for (Field f : {Field{"poll_us", &ff::Measurement::poll_s, &ff::MachineProfile::poll_s, "different poll intervals"},
                  Field{"gap_us", &ff::Measurement::gap_s, &ff::MachineProfile::gap_s, "idled before each operation"}}) {
    CAPTURE(f.name);
    const std::string name = f.name;
    ff::Measurement m = cpu_run();
    CHECK(!ff::to_json(m).contains(name));  // unset: the record does not say (nccl, nccl-tests, older records)
    CHECK(!ff::calibrate_profile(nullptr, m, "cpu").contains(name));
    m.*f.in_record = 50 * 1e-6;
    nlohmann::json j = ff::to_json(m);
    CHECK(j[name] == 50);  // as given, not 49.99999999999999
    ff::Measurement back = ff::measurement_from_json(j, "run.json");
    REQUIRE((back.*f.in_record).has_value());
    CHECK(*(back.*f.in_record) == fftest::rel(50e-6, 1e-9));

    nlohmann::json p = ff::calibrate_profile(nullptr, m, "cpu");
    CHECK(p[name] == 50);
    ff::MachineProfile mp = ff::machine_from_json(p, "cpu.json");
    REQUIRE((mp.*f.in_profile).has_value());
    CHECK(*(mp.*f.in_profile) == fftest::rel(50e-6, 1e-9));
    // A base's figure does not describe this measurement.
    (m.*f.in_record).reset();
    CHECK(!ff::calibrate_profile(p, m, "again").contains(name));

    p[name] = -1;
    CHECK(contains(input_error_of([&] { ff::machine_from_json(p, "cpu.json"); }),
                   "cpu.json: field '" + name + "': expected microseconds >= 0"));
    j[name] = -1;
    CHECK(contains(input_error_of([&] { ff::measurement_from_json(j, "run.json"); }),
                   "run.json: field '" + name + "': expected microseconds >= 0"));

    ff::Measurement a = cpu_run(), b = cpu_run(), c = cpu_run();
    a.*f.in_record = 50e-6, b.*f.in_record = 50e-6;
    CHECK(*(ff::merge_measurements({a, b, c}).*f.in_record) == fftest::rel(50e-6, 1e-9));  // c does not say
    b.*f.in_record = 0;
    std::string why = input_error_of([&] { ff::merge_measurements({a, b}); });
    CHECK(contains(why, f.disagree));
    CHECK(contains(why, "(" + name + " 50 and 0)"));
  }
}

// Rings at scale (MODEL.md §2): rings of one kind over three spans make the
// node's link one fit of them all; times no positive form fits leave the one
// geometry's fit, and its source says why.
TEST_CASE("rings over three or more spans set the node's link: a call cost and two protocols") {
  ff::Measurement m = run_of("nccl-tests", 32, 1, "srun -N 32 all_gather_perf");
  const double call = 40 * us, alpha = 10 * us, ll = 4 * us, bw = 50 * GB;
  for (int g : {8, 16, 32})
    for (double b = 65536; b <= 268435456; b *= 4) {
      // By hand: call + min(α·(g−1) + (g−1)/g·b/bw, α_LL·(g−1) + 2·(g−1)/g·b/bw).
      const double wire = (g - 1.0) / g * b / bw;
      ff::CollectiveSample s;
      s.op = ff::Coll::AllGather, s.geometry = inter(1, g), s.bytes = b;
      s.times_s = {call + std::min(alpha * (g - 1) + wire, ll * (g - 1) + 2 * wire)};
      m.collectives.push_back(s);
    }
  nlohmann::json j = ff::calibrate_profile(ff::profile_json("perlmutter"), m, "rings");
  ff::MachineProfile p = ff::machine_from_json(j, "rings.json");
  CHECK(p.inter_node.call_s == rel(call, 1e-6));
  CHECK(p.inter_node.alpha_s == rel(alpha, 1e-6));
  CHECK(p.inter_node.ll_alpha_s == rel(ll, 1e-6));
  CHECK(p.inter_node.busbw == rel(bw, 1e-6));
  CHECK(j["inter_node"]["fit"]["points"] == 3 * 7);
  // A span not measured (128 ranks) is priced from that link.
  CHECK(ff::collective_time(ff::Coll::AllGather, 128, 1048576, p.inter_node) ==
        rel(call + std::min(alpha * 127 + 127.0 / 128 * 1048576 / bw, ll * 127 + 2 * 127.0 / 128 * 1048576 / bw), 1e-6));

  // Times that fall with size and span: no positive form; the widest
  // geometry's own fit stands.
  for (auto& s : m.collectives) s.times_s = {1e-3 / std::sqrt(s.bytes * s.geometry.size)};
  j = ff::calibrate_profile(ff::profile_json("perlmutter"), m, "falling");
  CHECK(fftest::contains(j["inter_node"]["source"].get<std::string>(), "Not fitted as rings at scale"));
  CHECK_FALSE(j["inter_node"].contains("call_us"));
}
