#include "measure/gemm.hpp"

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "advisor/core/job.hpp"
#include "engine/runtime/check.hpp"
#include "measure/harness.hpp"

namespace ff::measure {

std::vector<GemmShape> grid_gemm_shapes(const std::vector<long long>& dims) {
  std::vector<GemmShape> shapes;
  for (long long m : dims)
    for (long long n : dims)
      for (long long k : dims) shapes.push_back({m, n, k, "nn"});
  return shapes;
}

std::vector<GemmShape> model_gemm_shapes(const ff::ModelSpec& model, const std::vector<std::pair<int, int>>& xy,
                                         int micro_batch) {
  std::vector<GemmShape> shapes;
  auto add = [&](long long m, long long n, long long k, const char* layout) {
    GemmShape s{m, n, k, layout};
    for (const auto& o : shapes)
      if (o.m == m && o.n == n && o.k == k && o.layout == s.layout) return;
    shapes.push_back(s);
  };
  long long t = 1LL * micro_batch * model.seq_len;
  for (auto [gx, gy] : xy) {
    ff::Grid grid{gx, gy, 1, 1};
    std::vector<ff::LinearLayer> layers;
    for (const auto& l : ff::block_layers(model)) layers.push_back(l);
    layers.push_back(ff::lm_head(model));
    for (const auto& l : layers) {
      ff::LocalWeight w = ff::local_weight(l, grid);
      long long kl = std::llround(w.k_local), nl = std::llround(w.n_local);
      add(t, nl, kl, "nn");
      add(t, kl, nl, "nt");
      add(kl, nl, t, "tn");
    }
  }
  return shapes;
}

int gemm_calls(const GemmShape& s, double target_flops) {
  double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
  return int(std::clamp(std::ceil(target_flops / flops), 1.0, 1000.0));
}

double best_gemm_rate(const std::vector<ff::GemmSample>& samples) {
  double best = 0;
  for (const auto& s : samples) best = std::max(best, s.flops() / s.median_s());
  return best;
}

std::vector<ff::GemmSample> sweep_gemm(const std::vector<GemmShape>& shapes, int repeats, const GemmProgress& progress,
                                       const std::function<double(const GemmShape&)>& seconds_per_call) {
  std::vector<ff::GemmSample> samples;
  for (const auto& s : shapes) samples.push_back(ff::GemmSample{s.m, s.n, s.k, s.layout, {}});
  int done = 0, total = int(shapes.size()) * repeats;
  for (int rep = 0; rep < repeats; ++rep)
    for (size_t i = 0; i < shapes.size(); ++i) {
      samples[i].times_s.push_back(seconds_per_call(shapes[i]));
      if (progress) progress(++done, total, samples[i]);
    }
  return samples;
}

std::vector<ff::GemmSample> measure_gemm_cpu(const std::vector<GemmShape>& shapes, int repeats,
                                             const GemmProgress& progress) {
  return sweep_gemm(shapes, repeats, progress, [](const GemmShape& s) {
    bool ta = s.layout[0] == 't', tb = s.layout[1] == 't';
    // A is stored [m,k] (or [k,m] when transposed), B [k,n] (or [n,k]).
    std::vector<float> a(size_t(s.m * s.k), 0.5f), b(size_t(s.k * s.n), 0.25f), c(size_t(s.m * s.n));
    int lda = int(ta ? s.m : s.k), ldb = int(tb ? s.k : s.n);
    auto call = [&] {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(s.m), int(s.n),
                  int(s.k), 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), int(s.n));
    };
    call();  // warm-up: pages touched, BLAS buffers allocated
    int calls = gemm_calls(s, 2e8);
    return time_all_ranks([&] {
             for (int j = 0; j < calls; ++j) call();
           }) /
           calls;
  });
}

}  // namespace ff::measure
