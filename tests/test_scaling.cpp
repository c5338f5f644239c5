// `advisor scaling` (MODEL.md §14): the sweep's GPU counts, the efficiency,
// days and GPU-hours, the budgets' picks and the shape marks, all worked by
// hand; the range a prediction carries (MODEL.md §8); and the picture's
// points, band, MFU marks and shares at hand-worked coordinates.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "advisor/cli/job_options.hpp"
#include "advisor/core/error.hpp"
#include "advisor/model/prediction.hpp"
#include "advisor/model/scaling.hpp"
#include "advisor/model/sensitivity.hpp"
#include "advisor/output/scaling_svg.hpp"
#include "advisor/output/svg.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

namespace {

ScalingPoint point(long long gpus, double time_s, double tokens_per_s, double flops, double train_tokens) {
  ScalingPoint p;
  p.gpus = gpus;
  p.found = true;
  p.time_s = time_s;
  p.tokens_per_s = tokens_per_s;
  p.model_flops = flops;
  p.train_tokens = train_tokens;
  return p;
}

std::string error_of(const std::string& gpus) {
  try {
    advisor::parse_gpu_counts(gpus);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::vector<double>> numbers(const std::string& svg, const std::string& pattern) {
  std::vector<std::vector<double>> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    std::vector<double> v;
    for (size_t k = 1; k < it->size(); ++k) v.push_back(std::stod((*it)[k]));
    out.push_back(v);
  }
  return out;
}

}  // namespace

TEST_CASE("scaling: --gpus is a doubling range, an increasing list or one count; anything else names the flag") {
  CHECK(advisor::parse_gpu_counts("64..4096") == std::vector<long long>{64, 128, 256, 512, 1024, 2048, 4096});
  CHECK(advisor::parse_gpu_counts("48..192") == std::vector<long long>{48, 96, 192});
  CHECK(advisor::parse_gpu_counts("64,96,128") == std::vector<long long>{64, 96, 128});
  CHECK(advisor::parse_gpu_counts("1024") == std::vector<long long>{1024});
  CHECK(advisor::parse_gpu_counts("8..8") == std::vector<long long>{8});
  CHECK(error_of("64..1000").find("--gpus 64..1000: a range doubles from its start (64, 128, …, 512, 1,024)") == 0);
  CHECK(error_of("4096..64").find("--gpus 4096..64: a range runs from fewer GPUs to more") == 0);
  CHECK(error_of("128,64").find("--gpus 128,64: list the counts in increasing order") == 0);
  CHECK(error_of("64,64").find("increasing order, each once") != std::string::npos);
  CHECK(error_of("64,,128").find("--gpus ''") == 0);
  CHECK(error_of("64..").find("--gpus ''") == 0);
  CHECK(error_of("0..64").find("--gpus '0'") == 0);
  CHECK(error_of("64..1.5e3").find("--gpus '1.5e3'") == 0);
  std::string many;
  for (int i = 1; i <= 65; ++i) many += (i > 1 ? "," : "") + std::to_string(i);
  CHECK(error_of(many).find("65 counts; at most 64") != std::string::npos);
}

TEST_CASE("scaling: efficiency, days and GPU-hours by hand") {
  // One batch (the same FLOPs): 64 GPUs at 100 s, 128 at 60 s: 100·64 / (60·128) = 5/6.
  const ScalingPoint a = point(64, 100, 1e4, 1e18, 1e9), b = point(128, 60, 1e4 * 100 / 60, 1e18, 1e9);
  CHECK(scaling_efficiency(a, a) == rel(1));
  CHECK(scaling_efficiency(a, b) == rel(5.0 / 6));
  // The batch doubling with the GPUs (twice the FLOPs): 100 s / 110 s.
  CHECK(scaling_efficiency(a, point(128, 110, 0, 2e18, 1e9)) == rel(100.0 / 110));
  // 1e9 tokens at 1e4 tokens/s: 1e5 s, 1.1574 days, 27.78 h × 64 GPUs = 1,777.8 GPU-hours.
  CHECK(days_to_train(a) == rel(1e5 / 86400));
  CHECK(gpu_hours(a) == rel(1e5 / 3600 * 64));
  // 128 GPUs at 1e4·5/3 tokens/s: 6e4 s, 16.67 h × 128 = 2,133.3 GPU-hours.
  CHECK(gpu_hours(b) == rel(6e4 / 3600 * 128));
}

TEST_CASE("scaling: a deadline picks the fewest GPU-hours that meet it, a GPU-hour budget the soonest within it") {
  // 1e9 tokens. 64 GPUs: 1e5 s (1.157 d, 1,777.8 GPU-h); 128: 6e4 s (0.694 d,
  // 2,133.3 GPU-h); 256: 4e4 s (0.463 d, 2,844.4 GPU-h); 512: nothing fits.
  std::vector<ScalingPoint> p = {point(64, 1, 1e4, 1, 1e9), point(128, 1, 1e9 / 6e4, 1, 1e9),
                                 point(256, 1, 1e9 / 4e4, 1, 1e9), ScalingPoint{}};
  p[3].gpus = 512;
  CHECK(fewest_gpu_hours_within(p, 2.0) == 0);    // all three meet 2 days; 64 GPUs costs least
  CHECK(fewest_gpu_hours_within(p, 1.0) == 1);    // 64 GPUs takes 1.157 d
  CHECK(fewest_gpu_hours_within(p, 0.5) == 2);    // only 256 GPUs (0.463 d)
  CHECK(fewest_gpu_hours_within(p, 0.4) == -1);   // none; the count without an answer never counts
  CHECK(soonest_within_gpu_hours(p, 3000) == 2);  // all within; 256 GPUs is soonest
  CHECK(soonest_within_gpu_hours(p, 2500) == 1);  // 256 GPUs costs 2,844 GPU-h
  CHECK(soonest_within_gpu_hours(p, 1800) == 0);
  CHECK(soonest_within_gpu_hours(p, 1000) == -1);
  // A tie on GPU-hours goes to fewer GPUs (perfect scaling: the same GPU-hours, sooner).
  std::vector<ScalingPoint> perfect = {point(64, 1, 1e4, 1, 1e9), point(128, 1, 2e4, 1, 1e9)};
  CHECK(fewest_gpu_hours_within(perfect, 2.0) == 0);
  CHECK(soonest_within_gpu_hours(perfect, 1e9) == 1);
}

TEST_CASE("scaling: a grid's shape names the axes in use, the largest model-parallel one in capitals") {
  auto shape = [](int x, int y, int z, int d, int p) {
    Grid g{x, y, z, d};
    g.p = p;
    return grid_shape(g);
  };
  CHECK(shape(1, 8, 1, 4, 2) == "Ypd");
  CHECK(shape(1, 1, 128, 1, 1) == "Z");
  CHECK(shape(1, 2, 128, 8, 1) == "yZd");
  CHECK(shape(1, 4, 1, 64, 8) == "yPd");
  CHECK(shape(4, 4, 1, 2, 1) == "Xyd");  // a tie: the first
  CHECK(shape(1, 1, 1, 64, 1) == "d");
  CHECK(shape(1, 1, 1, 1, 1) == "-");
}

TEST_CASE("range: each kind of term at its stated error, by hand on one GPU; wider beyond the nodes checked") {
  // One GPU: no collective, and on the toy machine a GEMM or attention
  // kernel's time is its FLOPs over a flat efficiency, so a compute error e
  // moves the step by exactly ±e of their seconds and nothing else.
  Job job;
  job.model = fftest::toy_model(4);
  job.gpus = 1;
  job.batch = 8;
  MachineProfile m = fftest::toy_machine(4);
  m.uncertainty = Uncertainty{true, 0.1, 0, 0, 0, 0};
  Config c;
  c.micro_batch = 2;
  const Prediction pr = predict(job, m, c);
  double kernels = 0;  // GEMM and attention seconds per iteration
  for (const ComputeTerm& t : pr.plan.compute)
    if (t.cls == KernelClass::Gemm || t.cls == KernelClass::Attention) kernels += t.seconds * per_iteration(pr.plan, t);
  REQUIRE(kernels > 0);
  const PredictedRange r = predicted_range(job, m, c);
  CHECK(r.stated);
  CHECK(r.low == rel(pr.estimate.time_s - 0.1 * kernels, 1e-9));
  CHECK(r.high == rel(pr.estimate.time_s + 0.1 * kernels, 1e-9));
  // No error stated anywhere: the prediction itself.
  m.uncertainty = Uncertainty{true, 0, 0, 0, 0, 0};
  CHECK(predicted_range(job, m, c).low == rel(pr.estimate.time_s));
  CHECK(predicted_range(job, m, c).high == rel(pr.estimate.time_s));

  // 16 GPUs on 4 nodes, data over all of them: a group spans 4 nodes. With
  // the inter-node error checked at 2 nodes the wider one applies.
  job.gpus = 16;
  job.batch = 32;
  c.grid = Grid{1, 1, 1, 16};
  m.uncertainty = Uncertainty{true, 0, 0, 0.1, 4, 0.3};
  const PredictedRange within = predicted_range(job, m, c);
  CHECK(!within.beyond_checked);
  CHECK(within.inter == 0.1);
  m.uncertainty.checked_nodes = 2;
  const PredictedRange beyond = predicted_range(job, m, c);
  CHECK(beyond.beyond_checked);
  CHECK(beyond.inter == 0.3);
  const double t = predict(job, m, c).estimate.time_s;
  CHECK(beyond.low < within.low);
  CHECK(within.low < t);
  CHECK(t < within.high);
  CHECK(within.high < beyond.high);
  // The inter-node collectives' time moves by at most ±30% of the step.
  CHECK(beyond.high <= 1.3 * t);
  CHECK(beyond.low >= 0.7 * t);
  // A profile that states nothing: the defaults, and the words say so.
  CHECK(!MachineProfile{}.uncertainty.stated);
  CHECK(fftest::contains(range_basis(MachineProfile{}), "assumed (the profile states none)"));
  CHECK(range_basis(m) == "compute ±0%, intra-node ±0%, inter-node ±10% (±30% beyond 2 nodes): the profile's stated errors");
}

// Three points at 64, 128 and 256 GPUs: tokens/s 1e5, 2e5, 4e5 with bands
// ×0.8 and ×1.2, the given MFU, named grid0..grid2.
std::vector<ScalingPlotPoint> three_points(const std::array<double, 3>& mfu) {
  std::vector<ScalingPlotPoint> pts;
  for (int i = 0; i < 3; ++i) {
    ScalingPlotPoint q;
    q.gpus = 64LL << i;
    q.found = true;
    q.tokens_per_s = 1e5 * double(1 << i);
    q.tokens_per_s_low = 0.8 * q.tokens_per_s;
    q.tokens_per_s_high = 1.2 * q.tokens_per_s;
    q.mfu = mfu[size_t(i)];
    q.label = "grid" + std::to_string(i);
    pts.push_back(q);
  }
  return pts;
}

TEST_CASE("scaling picture: points, band, MFU and shares at hand-worked coordinates; a gap breaks the line") {
  // Tokens/s 1e5, 2e5, 4e5 with bands ×0.8 and ×1.2: the log axis runs from
  // 5e4 (the 1-2-5 value under 8e4) to 5e5 (over 4.8e5), one decade, so
  // y = 100 + 280·(1 − log10(v / 5e4)). x = 96 + 42 + 84·log2(N / 64).
  // MFU 0.50, 0.45, 0.40: its axis tops at 50%, y = 100 + 280·(1 − mfu/0.5).
  const double tps[] = {1e5, 2e5, 4e5}, mfu[] = {0.5, 0.45, 0.4};
  std::vector<ScalingPlotPoint> pts = three_points({mfu[0], mfu[1], mfu[2]});
  for (ScalingPlotPoint& q : pts) {
    q.parts[0] = 3;  // compute 3 s, exposed x 1 s: shares 75% and 25%
    q.parts[1] = 1;
  }
  auto x = [](int k) { return 138.0 + 84 * k; };
  auto y = [](double v) { return 100 + 280 * (1 - std::log10(v / 5e4)); };
  const std::string svg = scaling_svg(pts, "t", "band");

  const auto circles = numbers(svg, "<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  REQUIRE(circles.size() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(circles[k][0] == doctest::Approx(x(k)).epsilon(1e-3));
    CHECK(circles[k][1] == doctest::Approx(y(tps[k])).epsilon(1e-3));
  }
  // The band: the highs left to right, then the lows right to left.
  const auto band = numbers(svg, "<polygon class=\"band\" points=\"([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+) "
                                 "([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+)\"");
  REQUIRE(band.size() == 1);
  const double want[] = {x(0), y(1.2e5), x(1), y(2.4e5), x(2), y(4.8e5), x(2), y(3.2e5), x(1), y(1.6e5), x(0), y(8e4)};
  for (int k = 0; k < 12; ++k) CHECK(band[0][k] == doctest::Approx(want[k]).epsilon(1e-3));
  const auto squares = numbers(svg, "<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"6\" height=\"6\"");
  REQUIRE(squares.size() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(squares[k][0] + 3 == doctest::Approx(x(k)).epsilon(1e-3));
    CHECK(squares[k][1] + 3 == doctest::Approx(100 + 280 * (1 - mfu[k] / 0.5)).epsilon(1e-3));
  }
  // Shares: compute 75% of 160 px from the bottom (490 + 160 = 650), then x's 25% above it.
  const auto shares = numbers(svg, "<rect class=\"share\" x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"36.0\" "
                                   "height=\"([0-9.]+)\"");
  REQUIRE(shares.size() == 6);
  CHECK(shares[0][0] == doctest::Approx(x(0) - 18).epsilon(1e-3));
  CHECK(shares[0][1] == doctest::Approx(650 - 120).epsilon(1e-4));
  CHECK(shares[0][2] == doctest::Approx(120).epsilon(1e-4));
  CHECK(shares[1][1] == doctest::Approx(650 - 160).epsilon(1e-4));
  CHECK(shares[1][2] == doctest::Approx(40).epsilon(1e-4));
  // Each point's grid named above its band, 8 px over the band's top; a
  // model, where a point has its own, 12 px above that.
  for (int k = 0; k < 3; ++k) {
    const auto at = numbers(svg, "<text x=\"([0-9.]+)\" y=\"([0-9.]+)\"[^>]*>grid" + std::to_string(k) + "</text>");
    REQUIRE(at.size() == 1);
    CHECK(at[0][0] == doctest::Approx(x(k)).epsilon(1e-3));
    CHECK(at[0][1] == doctest::Approx(y(1.2 * tps[k]) - 8).epsilon(1e-3));
  }
  pts[2].model = "gpt-x";
  const auto model = numbers(scaling_svg(pts, "t", "band"), "<text x=\"([0-9.]+)\" y=\"([0-9.]+)\"[^>]*>gpt-x</text>");
  REQUIRE(model.size() == 1);
  CHECK(model[0][1] == doctest::Approx(y(1.2 * tps[2]) - 20).epsilon(1e-3));

  // Without an answer at 128 GPUs: two runs, each its own line and band, and the gap marked.
  pts[1].found = false;
  const std::string gap = scaling_svg(pts, "t", "band");
  CHECK(numbers(gap, "<polygon class=\"band\"").size() == 2);
  CHECK(numbers(gap, "<polyline class=\"tokens\"").size() == 2);
  CHECK(numbers(gap, "<circle ").size() == 2);
  CHECK(gap.find(">none fits</text>") != std::string::npos);
}

TEST_CASE("scaling picture: a grid's name moves under the band where the MFU mark would sit beneath it") {
  // The points above: tokens/s 1e5, 2e5, 4e5 (bands ×0.8, ×1.2), the log
  // axis 5e4–5e5 over y 100–380, y = 100 + 280·(1 − log10(v / 5e4)). At 64
  // GPUs the name's baseline over the band is y(1.2e5) − 8 = 265.54 and the
  // text runs 257.54–268.54. MFU 0.21 on the 0–50% axis puts the mark at
  // 100 + 280·(1 − 0.42) = 262.4: under the text, so the name goes 8 px under
  // the band, baseline y(8e4) + 16 = 338.85. At 128 GPUs MFU 0.45 (y 128)
  // leaves the name over its band, baseline y(2.4e5) − 8 = 181.26.
  std::vector<ScalingPlotPoint> pts = three_points({0.21, 0.45, 0.4});
  const std::string svg = scaling_svg(pts, "t", "band");
  const auto mark = numbers(svg, "<rect x=\"135.0\" y=\"([0-9.]+)\" width=\"6\" height=\"6\"");
  REQUIRE(mark.size() == 1);
  CHECK(mark[0][0] + 3 == doctest::Approx(262.4).epsilon(1e-3));
  const auto under = numbers(svg, "<text x=\"([0-9.]+)\" y=\"([0-9.]+)\"[^>]*>grid0</text>");
  REQUIRE(under.size() == 1);
  CHECK(under[0][0] == doctest::Approx(138).epsilon(1e-3));
  CHECK(under[0][1] == doctest::Approx(338.85).epsilon(1e-3));
  const auto over = numbers(svg, "<text x=\"([0-9.]+)\" y=\"([0-9.]+)\"[^>]*>grid1</text>");
  REQUIRE(over.size() == 1);
  CHECK(over[0][1] == doctest::Approx(181.26).epsilon(1e-3));
  // With a model named too, the pair moves together, the model 12 px over
  // the grid: grid baseline 338.85 + 12 = 350.85, the model's 338.85.
  pts[0].model = "gpt-x";
  const std::string two = scaling_svg(pts, "t", "band");
  const auto grid = numbers(two, "<text x=\"[0-9.]+\" y=\"([0-9.]+)\"[^>]*>grid0</text>");
  const auto model = numbers(two, "<text x=\"[0-9.]+\" y=\"([0-9.]+)\"[^>]*>gpt-x</text>");
  REQUIRE(grid.size() == 1);
  REQUIRE(model.size() == 1);
  CHECK(grid[0][0] == doctest::Approx(350.85).epsilon(1e-3));
  CHECK(model[0][0] == doctest::Approx(338.85).epsilon(1e-3));
}

TEST_CASE("pictures are as wide as their text: a long note widens the document") {
  // DejaVu Sans 12 px: "W" is 0.989 em, 11.87 px; 200 of them 2,373.6 px.
  CHECK(text_width("W") == doctest::Approx(11.868).epsilon(1e-3));
  CHECK(text_width("ab", 10) == doctest::Approx((0.613 + 0.635) * 10).epsilon(1e-6));
  CHECK(mono_width("a·b") == doctest::Approx(3 * 0.602 * 12).epsilon(1e-9));  // per code point, not byte
  ScalingPlotPoint q;
  q.gpus = 64;
  q.found = true;
  q.tokens_per_s = q.tokens_per_s_low = q.tokens_per_s_high = 1e5;
  q.mfu = 0.5;
  const std::string svg = scaling_svg({q}, "t", std::string(200, 'W'));
  std::smatch w;
  REQUIRE(std::regex_search(svg, w, std::regex("<svg[^>]* width=\"([0-9.]+)\"")));
  // The note starts at 96 + 26 = 122 px.
  CHECK(std::stod(w[1]) >= 122 + 200 * 0.989 * 12);
}
