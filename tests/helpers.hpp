#pragma once
// Shared fixtures for the unit tests: a tiny GPT model and synthetic machine
// profiles whose numbers are easy to work with by hand. Expected values in the
// tests are always written out as arithmetic from MODEL.md §1–2, never taken
// from the code under test.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "advisor/core/error.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/core/model_spec.hpp"

namespace fftest {

// A relative comparison (doctest's default Approx adds an absolute slack of
// `epsilon`, useless for times of microseconds). Do not use it against 0.
inline doctest::Approx rel(double v, double eps = 1e-12) { return doctest::Approx(v).epsilon(eps).scale(0); }

// tests/fixtures/<name>. Meson compiles with __FILE__ relative to the build
// directory, the parent of this executable's directory (build/tests/...), so
// the fixtures are found from any working directory.
inline std::string fixture(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path src = fs::path(__FILE__).parent_path();
  if (src.is_relative()) src = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / src;
  return (src / "fixtures" / name).lexically_normal().string();
}

// layers 2, hidden 64, heads 4, ffn 256 (= 4H), vocab 100 padded to 128, seq_len 16.
inline ff::ModelSpec toy_model(int layers = 2) { return ff::ModelSpec{"toy", layers, 64, 4, 256, 100, 128, 16}; }

inline ff::GemmTable flat_gemm(double eff) {
  ff::GemmTable t;
  t.m = {1024};
  t.n = {1024};
  t.k = {1024};
  t.eff = {eff};
  return t;
}

// A link as a measured profile has it: priced by the ring formulas as
// fitted (the cheaper-of-ring-and-tree rule for unmeasured sizes is tested
// apart, in test_comm_model.cpp).
inline ff::LinkParams measured(double alpha_s, double busbw) {
  ff::LinkParams l{alpha_s, busbw};
  l.measured_here = true;
  return l;
}

// A synthetic machine: every GEMM at efficiency 0.5, no intra table (every
// group inside a node uses intra_default), no inter table (node_busbw / c);
// its links priced as measured.
inline ff::MachineProfile toy_machine(int gpus_per_node) {
  ff::MachineProfile p;
  p.name = "toy";
  p.gpus_per_node = gpus_per_node;
  p.peak_flops_bf16 = 100e12;
  p.peak_flops_fp32 = 25e12;
  p.attention_efficiency = 0.25;
  p.hbm_bandwidth = 1e12;
  p.elementwise_efficiency = 0.5;
  p.hbm_capacity = 1e15;  // everything fits
  p.memory_reserve = 1e9;
  p.overlap_efficiency = 0;
  p.intra_default = measured(5e-6, 100e9);
  p.inter_node = measured(10e-6, 80e9);
  p.gemm_bf16 = flat_gemm(0.5);
  p.gemm_fp32 = flat_gemm(0.5);
  return p;
}

// Perlmutter's link figures (MODEL.md §4): 4 GPUs a node; inside, stride 1:
// g=2 → 76, g=4 → 225 GB/s; stride 2: g=2 → 76; across ≈ 80 GB/s a node.
inline ff::MachineProfile perlmutter_like() {
  ff::MachineProfile p = toy_machine(4);
  p.intra_default = measured(5e-6, 76e9);
  p.intra = {{1, 2, measured(5e-6, 76e9)}, {1, 4, measured(5e-6, 225e9)}, {2, 2, measured(5e-6, 76e9)}};
  p.inter_node = measured(10e-6, 80e9);
  return p;
}

// Collectives by hand, MODEL.md §2 (ring, α-β, nccl-tests' bus bandwidth).
inline double hand_all_reduce(int g, double bytes, double alpha, double busbw) {
  return g == 1 ? 0.0 : alpha * 2 * (g - 1) + 2.0 * (g - 1) / g * bytes / busbw;
}
inline double hand_gather_scatter(int g, double bytes, double alpha, double busbw) {
  return g == 1 ? 0.0 : alpha * (g - 1) + double(g - 1) / g * bytes / busbw;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Runs f, expects an ff::InputError, returns its message ("" if none was thrown).
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const ff::InputError& e) {
    return e.what();
  }
  FAIL_CHECK("expected an ff::InputError");
  return "";
}

}  // namespace fftest
