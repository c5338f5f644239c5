#pragma once
// The kernels of the schedule (gpt.cpp), one call per kernel body, so the same
// schedule runs on every device: the cpu's (layers.hpp, adamw.hpp, BLAS) for
// the cpu and paced devices, whose kernels compute on the host, and the GPU's
// (cuda/kernels.hpp, cuBLAS) for the cuda device (cuda/cuda_device.hpp).
// Pointers are the device's memory (Buffer: on a GPU, managed memory).
// gpt.cpp wraps each call in Device::launch with what it costs the device.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/adamw.hpp"
#include "engine/device.hpp"
#include "engine/flash_attention.hpp"
#include "engine/layers.hpp"
#include "engine/llama_layers.hpp"
#include "engine/matmul.hpp"
#include "engine/runtime/bf16.hpp"

namespace ff::engine {

// A contiguous run of n values at x.
template <typename M>
struct Part {
  const M* x;
  size_t n;
};

// T is the training dtype (float, double, bf16): weights as the GEMMs read
// them, activations, messages. M = master_t<T> holds what must not be
// rounded to it: master weights, gradient accumulators, Adam's moments and
// the reduction statistics (the same type but for bf16, whose M is float).
// Every kernel computes in M.
template <typename T>
class DeviceKernels {
 public:
  using M = master_t<T>;
  virtual ~DeviceKernels() = default;

  // C = alpha·op(A)·op(B) + beta·C, row-major, accumulated in M. Returns the
  // host's seconds in BLAS (0 where the device is a GPU: its time is the
  // device's).
  virtual double gemm(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                      M beta, T* C, int ldc) = 0;
  // The same with C in M: a weight gradient into its accumulator.
  virtual double gemm_to_master(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B,
                                int ldb, M beta, M* C, int ldc) = 0;
  // A linear layer's output whole on this rank, its bias in the GEMM's
  // epilogue: C = alpha·op(A)·op(B) + bias, bias[j] added to column j of C
  // [m, n] (contiguous). gemm_bias_gelu keeps that in `pre` and writes
  // C = gelu(pre) (gelu_forward). Each the GEMM then the element-wise
  // kernels where the device has no such epilogue; returns as gemm does.
  virtual double gemm_bias(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                           const T* bias, T* C) = 0;
  virtual double gemm_bias_gelu(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B,
                                int ldb, const T* bias, T* pre, T* C) = 0;

  // Element-wise glue.
  virtual void copy(const void* src, void* dst, size_t bytes) = 0;
  virtual void zero(void* x, size_t bytes) = 0;
  virtual void add(const T* a, const T* b, T* out, size_t n) = 0;           // out = a + b (out may be a)
  virtual void accumulate(M* acc, const T* x, size_t n) = 0;                 // acc += x
  virtual void accumulate_master(M* acc, const M* x, size_t n) = 0;          // acc += x, both in M
  virtual void widen(const T* x, M* out, size_t n) = 0;                      // out = x
  virtual void narrow(const M* x, T* out, size_t n) = 0;                     // out = x rounded to T
  virtual void add_bias(T* out, const T* bias, long rows, long n) = 0;      // out[i, j] += bias[j]
  virtual void bias_grad(const T* dout, M* dbias, long rows, long n) = 0;   // dbias[j] += Σ_i dout[i, j]
  // Σ x² over every part (the gradient norm's arrays), in double, returned
  // to the host: one pass over all of them, one wait.
  virtual double sum_of_squares(const std::vector<Part<M>>& parts) = 0;

  // A micro-batch's tokens where the device reads them: the host's own array
  // on the cpu, a copy in activation slot `slot`'s buffer on a GPU.
  virtual const int* tokens(const int* host, size_t n, int slot) = 0;
  // targets[i]: the token after input i of each sequence of S + 1 tokens.
  virtual void targets(const int* tokens, int* targets, long t, long S) = 0;

  // The layers' local steps (layers.hpp).
  virtual void layernorm_row_sums(const T* x, M* sum, long t, long hx) = 0;
  virtual void layernorm_centred_squares(const T* x, const M* sum, M* mean, M* sq, long t, long hx, long H) = 0;
  virtual void layernorm_normalize(const T* x, const M* mean, const M* sq, const T* gamma, const T* beta, T* y,
                                   T* xhat, M* rstd, long t, long hx, long H) = 0;
  virtual void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, M* stat, long t, long hx) = 0;
  virtual void layernorm_backward_apply(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat,
                                        T* dx, M* dgamma, M* dbeta, long t, long hx, long H) = 0;
  // The same on whole rows (hx = H, no reduction between the steps): one
  // kernel forward, one backward (dγ, dβ included).
  virtual void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd, long t,
                                 long H) = 0;
  virtual void layernorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma,
                                  M* dbeta, long t, long H) = 0;
  virtual void gelu_forward(const T* x, T* y, long n) = 0;
  virtual void gelu_backward(const T* x, const T* dy, T* dx, long n) = 0;
  virtual void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy,
                                long v0) = 0;
  virtual void add_positions(T* h0, const T* pos, long t, long S, long hx) = 0;
  // Backward reads the host's tokens (not tokens()'s copy): a GPU groups
  // them by row before it launches.
  virtual void embedding_scatter_add(const int* host_tokens, const T* dh0, M* dE, long ldE, M* dpos, long t, long S,
                                     long hx, long vy, long v0) = 0;
  // Both return the host's seconds in BLAS, as gemm does.
  virtual double attention_forward(const T* qkv, T* out, T* probs, long seqs, long S, long heads, long kv,
                                   long dh) = 0;
  virtual double attention_backward(const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S,
                                    long heads, long kv, long dh) = 0;
  // Flash attention (flash_attention.hpp): each query row's log-sum-exp
  // (lse, [seqs, heads, S] in M) kept for backward instead of probs. Both
  // return the host's seconds in BLAS. A GPU runs it up to a head size.
  virtual bool runs_flash_attention(long dh) const = 0;
  virtual double flash_attention_forward(const T* qkv, T* out, M* lse, long seqs, long S, long heads, long kv,
                                         long dh) = 0;
  virtual double flash_attention_backward(const T* qkv, const T* out, const M* lse, const T* dout, T* dqkv,
                                          long seqs, long S, long heads, long kv, long dh) = 0;
  // The Llama-style block's layers (llama_layers.hpp).
  virtual void rmsnorm_row_squares(const T* x, M* sq, long t, long hx) = 0;
  virtual void rmsnorm_normalize(const T* x, const M* sq, const T* gamma, T* y, T* xhat, M* rstd, long t, long hx,
                                 long H) = 0;
  virtual void rmsnorm_backward_sums(const T* dy, const T* xhat, const T* gamma, M* stat, long t, long hx) = 0;
  virtual void rmsnorm_backward_apply(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                                      M* dgamma, long t, long hx, long H) = 0;
  virtual void rmsnorm_forward(const T* x, const T* gamma, T* y, T* xhat, M* rstd, long t, long H) = 0;
  virtual void rmsnorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, long t,
                                long H) = 0;
  virtual void swiglu_forward(const T* f, T* g, long t, long fy) = 0;
  virtual void swiglu_backward(const T* f, const T* dg, T* df, long t, long fy) = 0;
  virtual void rope_rotate(T* qkv, long t, long S, long heads, long kv, long dh, bool inverse) = 0;
  virtual void cross_entropy_row_max(const T* logits, M* mx, long t, long vy, long valid) = 0;
  virtual void cross_entropy_exp_sums(const T* logits, const int* targets, const M* mx, T* dlogits, M* st, long t,
                                      long vy, long v0, long valid) = 0;
  // Σ of the token losses, returned to the host.
  virtual double cross_entropy_finish(const int* targets, const M* mx, const M* st, T* dlogits, long t, long vy,
                                      long v0, long valid, M grad_scale) = 0;
  // AdamW on the master; `w`, the weight in T, gets the result rounded to it
  // (nullptr where the master is the weight: T = M).
  virtual void adamw_update(M* master, M* g, M* m, M* v, T* w, size_t n, const AdamWStep<M>& s) = 0;
};

// The cpu's kernels: the host computes each when it is launched.
template <typename T>
class CpuKernels final : public DeviceKernels<T> {
 public:
  using M = master_t<T>;
  explicit CpuKernels(Device& dev) : dev_(dev) {}

  double gemm(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb, M beta, T* C,
              int ldc) override {
    return host_gemm(dev_, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  double gemm_to_master(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                        M beta, M* C, int ldc) override {
    return host_gemm(dev_, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  // What the schedule ran before the epilogues, the same roundings: the
  // product rounded to T, the bias added, GELU on the sum rounded to T.
  double gemm_bias(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                   const T* bias, T* C) override {
    const double s = host_gemm(dev_, ta, tb, m, n, k, alpha, A, lda, B, ldb, M(0), C, n);
    add_bias(C, bias, m, n);
    return s;
  }
  double gemm_bias_gelu(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                        const T* bias, T* pre, T* C) override {
    const double s = gemm_bias(ta, tb, m, n, k, alpha, A, lda, B, ldb, bias, pre);
    gelu_forward(pre, C, long(m) * n);
    return s;
  }
  void copy(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void zero(void* x, size_t bytes) override { std::memset(x, 0, bytes); }
  void add(const T* a, const T* b, T* out, size_t n) override {
    for (size_t i = 0; i < n; ++i) out[i] = T(M(a[i]) + M(b[i]));
  }
  void accumulate(M* acc, const T* x, size_t n) override {
    for (size_t i = 0; i < n; ++i) acc[i] += M(x[i]);
  }
  void accumulate_master(M* acc, const M* x, size_t n) override {
    for (size_t i = 0; i < n; ++i) acc[i] += x[i];
  }
  void widen(const T* x, M* out, size_t n) override {
    for (size_t i = 0; i < n; ++i) out[i] = M(x[i]);
  }
  void narrow(const M* x, T* out, size_t n) override {
    for (size_t i = 0; i < n; ++i) out[i] = T(x[i]);
  }
  void add_bias(T* out, const T* bias, long rows, long n) override {
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < n; ++j) out[i * n + j] = T(M(out[i * n + j]) + M(bias[j]));
  }
  void bias_grad(const T* dout, M* dbias, long rows, long n) override {
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < n; ++j) dbias[j] += M(dout[i * n + j]);
  }
  double sum_of_squares(const std::vector<Part<M>>& parts) override {
    double s = 0;
    for (const Part<M>& p : parts) s += engine::sum_of_squares(p.x, p.n);
    return s;
  }
  const int* tokens(const int* host, size_t, int) override { return host; }
  void targets(const int* tokens, int* targets, long t, long S) override {
    for (long i = 0; i < t; ++i) targets[i] = tokens[(i / S) * (S + 1) + i % S + 1];
  }
  void layernorm_row_sums(const T* x, M* sum, long t, long hx) override { engine::layernorm_row_sums(x, sum, t, hx); }
  void layernorm_centred_squares(const T* x, const M* sum, M* mean, M* sq, long t, long hx, long H) override {
    engine::layernorm_centred_squares(x, sum, mean, sq, t, hx, H);
  }
  void layernorm_normalize(const T* x, const M* mean, const M* sq, const T* gamma, const T* beta, T* y, T* xhat,
                           M* rstd, long t, long hx, long H) override {
    engine::layernorm_normalize(x, mean, sq, gamma, beta, y, xhat, rstd, t, hx, H);
  }
  void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, M* stat, long t, long hx) override {
    engine::layernorm_backward_sums(dy, xhat, gamma, stat, t, hx);
  }
  void layernorm_backward_apply(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                                M* dgamma, M* dbeta, long t, long hx, long H) override {
    engine::layernorm_backward_apply(dy, xhat, rstd, gamma, stat, dx, dgamma, dbeta, t, hx, H);
  }
  void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd, long t, long H) override {
    engine::layernorm_forward(x, gamma, beta, y, xhat, rstd, t, H);
  }
  void layernorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, M* dbeta, long t,
                          long H) override {
    engine::layernorm_backward(dy, xhat, rstd, gamma, dx, dgamma, dbeta, t, H);
  }
  void gelu_forward(const T* x, T* y, long n) override { engine::gelu_forward(x, y, n); }
  void gelu_backward(const T* x, const T* dy, T* dx, long n) override { engine::gelu_backward(x, dy, dx, n); }
  void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy,
                        long v0) override {
    engine::embedding_lookup(tokens, E, ldE, h0, t, S, hx, vy, v0);
  }
  void add_positions(T* h0, const T* pos, long t, long S, long hx) override {
    engine::add_positions(h0, pos, t, S, hx);
  }
  void embedding_scatter_add(const int* tokens, const T* dh0, M* dE, long ldE, M* dpos, long t, long S, long hx,
                             long vy, long v0) override {
    engine::embedding_scatter_add(tokens, dh0, dE, ldE, dpos, t, S, hx, vy, v0);
  }
  double attention_forward(const T* qkv, T* out, T* probs, long seqs, long S, long heads, long kv,
                           long dh) override {
    return engine::attention_forward(dev_, qkv, out, probs, seqs, S, heads, kv, dh);
  }
  double attention_backward(const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S, long heads,
                            long kv, long dh) override {
    return engine::attention_backward(dev_, qkv, probs, dout, dqkv, seqs, S, heads, kv, dh);
  }
  bool runs_flash_attention(long) const override { return true; }
  double flash_attention_forward(const T* qkv, T* out, M* lse, long seqs, long S, long heads, long kv,
                                 long dh) override {
    return engine::flash_attention_forward(dev_, qkv, out, lse, seqs, S, heads, kv, dh);
  }
  double flash_attention_backward(const T* qkv, const T* out, const M* lse, const T* dout, T* dqkv, long seqs, long S,
                                  long heads, long kv, long dh) override {
    return engine::flash_attention_backward(dev_, qkv, out, lse, dout, dqkv, seqs, S, heads, kv, dh);
  }
  void rmsnorm_row_squares(const T* x, M* sq, long t, long hx) override { engine::rmsnorm_row_squares(x, sq, t, hx); }
  void rmsnorm_normalize(const T* x, const M* sq, const T* gamma, T* y, T* xhat, M* rstd, long t, long hx,
                         long H) override {
    engine::rmsnorm_normalize(x, sq, gamma, y, xhat, rstd, t, hx, H);
  }
  void rmsnorm_backward_sums(const T* dy, const T* xhat, const T* gamma, M* stat, long t, long hx) override {
    engine::rmsnorm_backward_sums(dy, xhat, gamma, stat, t, hx);
  }
  void rmsnorm_backward_apply(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                              M* dgamma, long t, long hx, long H) override {
    engine::rmsnorm_backward_apply(dy, xhat, rstd, gamma, stat, dx, dgamma, t, hx, H);
  }
  void rmsnorm_forward(const T* x, const T* gamma, T* y, T* xhat, M* rstd, long t, long H) override {
    engine::rmsnorm_forward(x, gamma, y, xhat, rstd, t, H);
  }
  void rmsnorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, long t,
                        long H) override {
    engine::rmsnorm_backward(dy, xhat, rstd, gamma, dx, dgamma, t, H);
  }
  void swiglu_forward(const T* f, T* g, long t, long fy) override { engine::swiglu_forward(f, g, t, fy); }
  void swiglu_backward(const T* f, const T* dg, T* df, long t, long fy) override {
    engine::swiglu_backward(f, dg, df, t, fy);
  }
  void rope_rotate(T* qkv, long t, long S, long heads, long kv, long dh, bool inverse) override {
    engine::rope_rotate(qkv, t, S, heads, kv, dh, inverse);
  }
  void cross_entropy_row_max(const T* logits, M* mx, long t, long vy, long valid) override {
    engine::cross_entropy_row_max(logits, mx, t, vy, valid);
  }
  void cross_entropy_exp_sums(const T* logits, const int* targets, const M* mx, T* dlogits, M* st, long t, long vy,
                              long v0, long valid) override {
    engine::cross_entropy_exp_sums(logits, targets, mx, dlogits, st, t, vy, v0, valid);
  }
  double cross_entropy_finish(const int* targets, const M* mx, const M* st, T* dlogits, long t, long vy, long v0,
                              long valid, M grad_scale) override {
    return engine::cross_entropy_finish(targets, mx, st, dlogits, t, vy, v0, valid, grad_scale);
  }
  void adamw_update(M* master, M* g, M* m, M* v, T* w, size_t n, const AdamWStep<M>& s) override {
    engine::adamw_update(master, g, m, v, w, n, s);
  }

 private:
  Device& dev_;
};

// The kernels of `dev`: the cuda device's own (when the engine is built with
// them), else the cpu's.
template <typename T>
std::unique_ptr<DeviceKernels<T>> kernels_for(Device& dev);

}  // namespace ff::engine
