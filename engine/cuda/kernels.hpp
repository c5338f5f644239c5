#pragma once
// The engine's non-GEMM kernels on a GPU, one .cu file per concern, each the
// twin of the cpu function of the same name (layers.hpp, llama_layers.hpp,
// adamw.hpp) and checked against it (tests/engine/test_cuda_kernels.cpp).
// Pointers are device memory; each launcher enqueues on `stream` and returns
// at once.
// T is the training dtype (float, double, engine::bf16) and M = master_t<T>
// its master type, as in DeviceKernels (device_kernels.hpp): each launcher
// takes the arguments of the DeviceKernels method of its name, loads T into
// M, computes in M and rounds to T only what it stores as T (scalar.cuh).
// Declared for plain C++ callers: no CUDA types but the stream and the
// cuBLAS handle.
#include <cstddef>
#include <vector>

#include "engine/adamw.hpp"  // AdamWStep
#include "engine/runtime/bf16.hpp"

struct CUstream_st;
struct cublasContext;

namespace ff::cuda {

using Stream = CUstream_st*;  // cudaStream_t
using Blas = cublasContext*;  // cublasHandle_t
using engine::master_t;

// LayerNorm over H columns of which this rank holds hx, around its two
// all-reduces over X (layers.hpp): row sums; mean and centred squares; x̂, y,
// rstd. Backward: the two sums per token; dx, and dγ, dβ accumulated.
// The statistics and dγ, dβ are M; x̂ and y are rounded from the same
// unrounded (x − mean)·rstd.
template <typename T> void layernorm_row_sums(const T* x, master_t<T>* sum, long t, long hx, Stream s);
template <typename T>
void layernorm_centred_squares(const T* x, const master_t<T>* sum, master_t<T>* mean, master_t<T>* sq, long t,
                               long hx, long H, Stream s);
template <typename T>
void layernorm_normalize(const T* x, const master_t<T>* mean, const master_t<T>* sq, const T* gamma, const T* beta,
                         T* y, T* xhat, master_t<T>* rstd, long t, long hx, long H, Stream s);
template <typename T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, master_t<T>* stat, long t, long hx, Stream s);
template <typename T>
void layernorm_backward_apply(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma,
                              const master_t<T>* stat, T* dx, master_t<T>* dgamma, master_t<T>* dbeta, long t, long hx,
                              long H, Stream s);

// The same on whole rows (hx = H, no all-reduce between the steps), fused:
// forward one kernel; backward one for dx and each chunk of rows' partial
// dγ, dβ, and one adding the chunks in order (deterministic, no atomics).
template <typename T>
void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, master_t<T>* rstd, long t, long H,
                       Stream s);
template <typename T>
void layernorm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx,
                        master_t<T>* dgamma, master_t<T>* dbeta, long t, long H, Stream s);

// RMSNorm over H columns of which this rank holds hx, around its one
// all-reduce over X each way (llama_layers.hpp): the row sums of squares;
// x̂, y, rstd. Backward: Σ dy·γ·x̂ per token; dx, and dγ accumulated. M and
// T as LayerNorm's.
template <typename T> void rmsnorm_row_squares(const T* x, master_t<T>* sq, long t, long hx, Stream s);
template <typename T>
void rmsnorm_normalize(const T* x, const master_t<T>* sq, const T* gamma, T* y, T* xhat, master_t<T>* rstd, long t,
                       long hx, long H, Stream s);
template <typename T>
void rmsnorm_backward_sums(const T* dy, const T* xhat, const T* gamma, master_t<T>* stat, long t, long hx, Stream s);
template <typename T>
void rmsnorm_backward_apply(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma,
                            const master_t<T>* stat, T* dx, master_t<T>* dgamma, long t, long hx, long H, Stream s);
// Fused on whole rows, as LayerNorm's.
template <typename T>
void rmsnorm_forward(const T* x, const T* gamma, T* y, T* xhat, master_t<T>* rstd, long t, long H, Stream s);
template <typename T>
void rmsnorm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx, master_t<T>* dgamma,
                      long t, long H, Stream s);

// SwiGLU on a Y block: f [t, 2·fy] holds the gate columns then the up ones,
// so one H → 2F GEMM feeds it; g [t, fy]. Backward writes both halves of df.
template <typename T> void swiglu_forward(const T* f, T* g, long t, long fy, Stream s);
template <typename T> void swiglu_backward(const T* f, const T* dg, T* df, long t, long fy, Stream s);

// Rotary positions, in place on the Q and K heads of qkv [t, (heads + 2·kv)·dh]
// (whole heads: nothing from another rank). `inverse` turns back, which is
// backward: the rotation is orthogonal.
template <typename T>
void rope_rotate(T* qkv, long t, long S, long heads, long kv, long dh, bool inverse, double theta, Stream s);

// GPT-2's tanh GELU.
template <typename T> void gelu_forward(const T* x, T* y, long n, Stream s);
template <typename T> void gelu_backward(const T* x, const T* dy, T* dx, long n, Stream s);

// Vocabulary-parallel cross-entropy over Y, around its two reductions
// (layers.hpp): the row max; e = exp(logit − max) into dlogits with the sums
// and the target's logit; then dlogits and each token's loss (`loss`, t
// values: the host sums them, as the cpu's cross_entropy_finish returns).
// The sums are of the unrounded e; dlogits holds e rounded to T until the
// finish divides it.
template <typename T>
void cross_entropy_row_max(const T* logits, master_t<T>* mx, long t, long vy, long valid, Stream s);
template <typename T>
void cross_entropy_exp_sums(const T* logits, const int* targets, const master_t<T>* mx, T* dlogits, master_t<T>* st,
                            long t, long vy, long v0, long valid, Stream s);
template <typename T>
void cross_entropy_finish(const int* targets, const master_t<T>* mx, const master_t<T>* st, T* dlogits,
                          master_t<T>* loss, long t, long vy, long v0, long valid, master_t<T> grad_scale, Stream s);

// The embedding over a Y block of the vocabulary (layers.hpp): lookup,
// positions added, and backward's scatter-add into dE and dpos into M
// gradients; dpos nullptr where the model has no position table (rotary
// positions).
template <typename T>
void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy, long v0,
                      Stream s);
template <typename T> void add_positions(T* h0, const T* pos, long t, long S, long hx, Stream s);

// The scatter-add reads the tokens grouped by row, grouped on the host,
// where they are before the step: a block per row hit then adds its tokens
// in order, deterministic without atomics and parallel over rows as well as
// columns. `csr` (host) holds offsets [rows + 1], the rows hit (of this
// block, from 0) [rows], then the token indices i of each row in increasing
// order [offsets[rows]], each row's from its offset; build() rewrites it.
struct EmbeddingRows {
  std::vector<int> csr;
  long rows = 0;
  void build(const int* tokens, long t, long S, long vy, long v0);

 private:
  // vy counts, zero between calls; the rows hit, in order of first hit,
  // then most-hit first; the counting sort's buckets.
  std::vector<int> count_, hit_, order_, by_count_;
};
// `csr`, `rows`: a device copy of an EmbeddingRows' of the tokens.
template <typename T>
void embedding_scatter_add(const int* csr, long rows, const T* dh0, master_t<T>* dE, long ldE, master_t<T>* dpos,
                           long t, long S, long hx, Stream s);

// Causal attention on whole local heads, `heads` query heads over `kv`
// key/value heads (grouped-query; kv = heads is multi-head), the layouts of
// layers.hpp (qkv [seqs·S, (heads + 2·kv)·dh], out [seqs·S, heads·dh], probs
// [seqs, heads, S, S]): the cpu's GEMMs per (sequence, query head) as cuBLAS
// strided-batched calls, one per sequence and member of a KV head's group,
// batched over the groups (`blas`, bound to stream s; a group's dK and dV
// summed in head order, as the cpu's), full S×S products with the causal
// mask applied by the softmax kernels (one block per query row). The S×S
// scores are in memory, as the cpu's; flash_attention_forward below keeps
// them on chip, never writing probs (S² values per head less traffic and
// memory), and skips the masked half.
// Workspaces of probs' size: `scores` (M) takes the unrounded GEMM results
// the softmax kernels read (scale·Q·Kᵀ forward, dP = dO·Vᵀ backward) and
// `dscores` (T) backward's dS, rounded for the two GEMMs after it. Where
// T = M they may alias what they feed, in place as before bf16: forward's
// scores = probs, backward's dscores = scores.
template <typename T>
void attention_forward(Blas blas, const T* qkv, T* out, T* probs, master_t<T>* scores, long seqs, long S, long heads,
                       long kv, long dh, Stream s);
template <typename T>
void attention_backward(Blas blas, const T* qkv, const T* probs, const T* dout, T* dqkv, master_t<T>* scores,
                        T* dscores, long seqs, long S, long heads, long kv, long dh, Stream s);

// The same attention fused (flash_attention.cu), the twin of
// engine/flash_attention.hpp's: scores kept on chip in 64-key tiles with an
// online softmax, only the masked half computed, no probs. Forward writes
// out and the log-sum-exp per row (lse [seqs, heads, S], M); backward
// recomputes P from it, with delta = Σ dO∘O per row (M, [seqs, heads, S])
// its workspace, and writes every element of dqkv (a KV head's dK and dV
// summed over its group in head order inside one block: no atomics, runs
// bitwise equal). bf16 at dh 64 and 128 runs on tensor cores (16-byte
// aligned qkv, out, dout, dqkv); every other case on SIMT kernels.
// dh above this keeps the unfused path on the GPU.
constexpr long kFlashMaxHeadDim = 128;
template <typename T>
void flash_attention_forward(const T* qkv, T* out, master_t<T>* lse, long seqs, long S, long heads, long kv, long dh,
                             Stream s);
template <typename T>
void flash_attention_backward(const T* qkv, const T* out, const master_t<T>* lse, const T* dout, T* dqkv,
                              master_t<T>* delta, long seqs, long S, long heads, long kv, long dh, Stream s);

// The schedule's glue (device_kernels.hpp): out = a + b; acc += x; x widened
// to M and narrowed (rounded) to T; out[i, j] += bias[j]; dbias[j] += Σ_i
// dout[i, j] in M (chunks of 64 rows, then the chunks in order: reduce.cuh);
// the targets of sequences of S + 1 tokens.
template <typename T> void add(const T* a, const T* b, T* out, size_t n, Stream s);
template <typename T> void accumulate(master_t<T>* acc, const T* x, size_t n, Stream s);
template <typename T> void widen(const T* x, master_t<T>* out, size_t n, Stream s);
template <typename T> void narrow(const master_t<T>* x, T* out, size_t n, Stream s);
template <typename T> void add_bias(T* out, const T* bias, long rows, long n, Stream s);
template <typename T> void bias_grad(const T* dout, master_t<T>* dbias, long rows, long n, Stream s);
void targets(const int* tokens, int* targets, long t, long S, Stream s);
constexpr size_t kSumOfSquaresWorkspace = 1024;
// The gradient norm's arrays, up to kSquaresParts a launch, by value (kernel
// arguments: no copy of the list to the device, no wait for one). Σ x² over
// all of them in double into out[kSumOfSquaresWorkspace] (the workspace is
// one double longer), added to what is there where `accumulate`: a longer
// list is several launches and one read.
constexpr int kSquaresParts = 32;
template <typename M>
struct SquaresParts {
  const M* x[kSquaresParts];
  size_t n[kSquaresParts];
  int count;
};
template <typename M> void sum_of_squares(const SquaresParts<M>& parts, bool accumulate, double* out, Stream s);

// AdamW on n master parameters; the gradient is left zero, as on the cpu.
// w, where not nullptr, receives each updated master rounded to T.
template <typename T>
void adamw_update(master_t<T>* master, master_t<T>* g, master_t<T>* m, master_t<T>* v, T* w, size_t n,
                  const engine::AdamWStep<master_t<T>>& step, Stream s);

}  // namespace ff::cuda
