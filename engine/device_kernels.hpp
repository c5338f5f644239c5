#pragma once
// The kernels of the schedule (gpt.cpp), one call per kernel body, so the same
// schedule runs on every device: the cpu's (layers.hpp, adamw.hpp, BLAS) for
// the cpu and paced devices, whose kernels compute on the host, and the GPU's
// (cuda/kernels.hpp, cuBLAS) for the cuda device (cuda/cuda_device.hpp).
// Pointers are the device's memory (Buffer: on a GPU, managed memory).
// gpt.cpp wraps each call in Device::launch with what it costs the device.
#include <algorithm>
#include <cstddef>
#include <memory>

#include "adamw.hpp"
#include "device.hpp"
#include "layers.hpp"
#include "matmul.hpp"

namespace ff::engine {

template <typename T>
class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;

  // C = alpha·op(A)·op(B) + beta·C, row-major. Returns the host's seconds in
  // BLAS (0 where the device is a GPU: its time is the device's).
  virtual double gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb,
                      T beta, T* C, int ldc) = 0;

  // Element-wise glue.
  virtual void copy(const T* src, T* dst, size_t n) = 0;
  virtual void zero(T* x, size_t n) = 0;
  virtual void add(const T* a, const T* b, T* out, size_t n) = 0;           // out = a + b (out may be a)
  virtual void add_bias(T* out, const T* bias, long rows, long n) = 0;      // out[i, j] += bias[j]
  virtual void bias_grad(const T* dout, T* dbias, long rows, long n) = 0;   // dbias[j] += Σ_i dout[i, j]
  virtual double sum_of_squares(const T* x, size_t n) = 0;                  // returned to the host

  // A micro-batch's tokens where the device reads them: the host's own array
  // on the cpu, a copy in activation slot `slot`'s buffer on a GPU.
  virtual const int* tokens(const int* host, size_t n, int slot) = 0;
  // targets[i]: the token after input i of each sequence of S + 1 tokens.
  virtual void targets(const int* tokens, int* targets, long t, long S) = 0;

  // The layers' local steps (layers.hpp).
  virtual void layernorm_row_sums(const T* x, T* sum, long t, long hx) = 0;
  virtual void layernorm_centred_squares(const T* x, const T* sum, T* mean, T* sq, long t, long hx, long H) = 0;
  virtual void layernorm_normalize(const T* x, const T* mean, const T* sq, const T* gamma, const T* beta, T* y,
                                   T* xhat, T* rstd, long t, long hx, long H) = 0;
  virtual void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, T* stat, long t, long hx) = 0;
  virtual void layernorm_backward_apply(const T* dy, const T* xhat, const T* rstd, const T* gamma, const T* stat,
                                        T* dx, T* dgamma, T* dbeta, long t, long hx, long H) = 0;
  virtual void gelu_forward(const T* x, T* y, long n) = 0;
  virtual void gelu_backward(const T* x, const T* dy, T* dx, long n) = 0;
  virtual void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy,
                                long v0) = 0;
  virtual void add_positions(T* h0, const T* pos, long t, long S, long hx) = 0;
  virtual void embedding_scatter_add(const int* tokens, const T* dh0, T* dE, long ldE, T* dpos, long t, long S,
                                     long hx, long vy, long v0) = 0;
  // Both return the host's seconds in BLAS, as gemm does.
  virtual double attention_forward(const T* qkv, T* out, T* probs, long seqs, long S, long heads, long dh) = 0;
  virtual double attention_backward(const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S,
                                    long heads, long dh) = 0;
  virtual void cross_entropy_row_max(const T* logits, T* mx, long t, long vy, long valid) = 0;
  virtual void cross_entropy_exp_sums(const T* logits, const int* targets, const T* mx, T* dlogits, T* st, long t,
                                      long vy, long v0, long valid) = 0;
  // Σ of the token losses, returned to the host.
  virtual double cross_entropy_finish(const int* targets, const T* mx, const T* st, T* dlogits, long t, long vy,
                                      long v0, long valid, T grad_scale) = 0;
  virtual void adamw_update(T* w, T* g, T* m, T* v, size_t n, const AdamWStep<T>& s) = 0;
};

// The cpu's kernels: the host computes each when it is launched.
template <typename T>
class CpuKernels final : public DeviceKernels<T> {
 public:
  explicit CpuKernels(Device& dev) : dev_(dev) {}

  double gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb, T beta, T* C,
              int ldc) override {
    return host_gemm(dev_, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void copy(const T* src, T* dst, size_t n) override { std::copy(src, src + n, dst); }
  void zero(T* x, size_t n) override { std::fill(x, x + n, T(0)); }
  void add(const T* a, const T* b, T* out, size_t n) override {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }
  void add_bias(T* out, const T* bias, long rows, long n) override {
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < n; ++j) out[i * n + j] += bias[j];
  }
  void bias_grad(const T* dout, T* dbias, long rows, long n) override {
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < n; ++j) dbias[j] += dout[i * n + j];
  }
  double sum_of_squares(const T* x, size_t n) override { return engine::sum_of_squares(x, n); }
  const int* tokens(const int* host, size_t, int) override { return host; }
  void targets(const int* tokens, int* targets, long t, long S) override {
    for (long i = 0; i < t; ++i) targets[i] = tokens[(i / S) * (S + 1) + i % S + 1];
  }
  void layernorm_row_sums(const T* x, T* sum, long t, long hx) override { engine::layernorm_row_sums(x, sum, t, hx); }
  void layernorm_centred_squares(const T* x, const T* sum, T* mean, T* sq, long t, long hx, long H) override {
    engine::layernorm_centred_squares(x, sum, mean, sq, t, hx, H);
  }
  void layernorm_normalize(const T* x, const T* mean, const T* sq, const T* gamma, const T* beta, T* y, T* xhat,
                           T* rstd, long t, long hx, long H) override {
    engine::layernorm_normalize(x, mean, sq, gamma, beta, y, xhat, rstd, t, hx, H);
  }
  void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, T* stat, long t, long hx) override {
    engine::layernorm_backward_sums(dy, xhat, gamma, stat, t, hx);
  }
  void layernorm_backward_apply(const T* dy, const T* xhat, const T* rstd, const T* gamma, const T* stat, T* dx,
                                T* dgamma, T* dbeta, long t, long hx, long H) override {
    engine::layernorm_backward_apply(dy, xhat, rstd, gamma, stat, dx, dgamma, dbeta, t, hx, H);
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
  void embedding_scatter_add(const int* tokens, const T* dh0, T* dE, long ldE, T* dpos, long t, long S, long hx,
                             long vy, long v0) override {
    engine::embedding_scatter_add(tokens, dh0, dE, ldE, dpos, t, S, hx, vy, v0);
  }
  double attention_forward(const T* qkv, T* out, T* probs, long seqs, long S, long heads, long dh) override {
    return engine::attention_forward(dev_, qkv, out, probs, seqs, S, heads, dh);
  }
  double attention_backward(const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S, long heads,
                            long dh) override {
    return engine::attention_backward(dev_, qkv, probs, dout, dqkv, seqs, S, heads, dh);
  }
  void cross_entropy_row_max(const T* logits, T* mx, long t, long vy, long valid) override {
    engine::cross_entropy_row_max(logits, mx, t, vy, valid);
  }
  void cross_entropy_exp_sums(const T* logits, const int* targets, const T* mx, T* dlogits, T* st, long t, long vy,
                              long v0, long valid) override {
    engine::cross_entropy_exp_sums(logits, targets, mx, dlogits, st, t, vy, v0, valid);
  }
  double cross_entropy_finish(const int* targets, const T* mx, const T* st, T* dlogits, long t, long vy, long v0,
                              long valid, T grad_scale) override {
    return engine::cross_entropy_finish(targets, mx, st, dlogits, t, vy, v0, valid, grad_scale);
  }
  void adamw_update(T* w, T* g, T* m, T* v, size_t n, const AdamWStep<T>& s) override {
    engine::adamw_update(w, g, m, v, n, s);
  }

 private:
  Device& dev_;
};

// The kernels of `dev`: the cuda device's own (when the engine is built with
// them), else the cpu's.
template <typename T>
std::unique_ptr<DeviceKernels<T>> kernels_for(Device& dev);

}  // namespace ff::engine
