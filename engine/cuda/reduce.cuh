#pragma once
// One block's sum or max of one value per thread, for the row kernels (one
// block per token row). kThreads threads, a power of two.
#include <cuda_runtime.h>

#include "engine/cuda/scalar.cuh"

namespace ff::cuda {

constexpr int kThreads = 256;

template <typename T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) part[threadIdx.x] = op(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  T out = part[0];
  __syncthreads();  // part is reused by the next call
  return out;
}

struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

// Two sums over the block at once, every thread given the same two: each
// warp's by shuffles (lane 0's kept), then the warps' in order. Two
// barriers where block_reduce's tree takes nine: a norm's backward pays
// them on every row.
template <typename T>
__device__ void block_sum2(T& a, T& b) {
  constexpr int kWarps = kThreads / 32;
  __shared__ T pa[kWarps], pb[kWarps];
  for (int o = 16; o > 0; o /= 2) a += __shfl_xor_sync(0xffffffffu, a, o), b += __shfl_xor_sync(0xffffffffu, b, o);
  const int w = int(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) pa[w] = a, pb[w] = b;
  __syncthreads();
  a = pa[0], b = pb[0];
#pragma unroll
  for (int k = 1; k < kWarps; ++k) a += pa[k], b += pb[k];
  __syncthreads();  // pa, pb are reused by the next call
}

inline unsigned blocks_for(long n) { return unsigned((n + kThreads - 1) / kThreads); }
// Blocks for n values at kPack<T> a thread (scalar.cuh).
template <typename T>
inline unsigned pack_blocks(size_t n) {
  return blocks_for(long((n + kPack<T> - 1) / kPack<T>));
}


// out[j] += Σ_i value(i, j) over the rows of a rows×n matrix (a bias's or
// LayerNorm's parameter gradient), deterministic without atomics: each
// chunk of kChunkRows rows sums its column into part[chunk][j], then one
// thread per column adds the chunks in order. A thread per column alone
// (n of a few thousand) would leave most of the GPU idle.
constexpr long kChunkRows = 64;
// Rows (or chunks) a thread loads before it adds them, in order.
constexpr int kBatchRows = 8;
// Device memory every column sum reuses, grown as needed (glue.cu); one
// stream launches them all.
void* column_sum_workspace(size_t bytes);

// The values are T's, summed in M (`out`'s type, master_t<T>).
template <typename T>
struct Element {  // a[i, j]
  const T* a;
  long n;
  __device__ master_t<T> operator()(long i, long j) const { return load(a + i * n + j); }
};
template <typename T>
struct ElementProduct {  // a[i, j]·b[i, j]
  const T* a;
  const T* b;
  long n;
  __device__ master_t<T> operator()(long i, long j) const { return load(a + i * n + j) * load(b + i * n + j); }
};

template <typename T, class Value>
__global__ void column_chunks_kernel(Value value, long rows, long n, T* part, long chunk_rows) {
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const long lo = long(blockIdx.y) * chunk_rows, hi = lo + chunk_rows < rows ? lo + chunk_rows : rows;
  T acc = 0;
  for (long i = lo; i < hi; ++i) acc += value(i, j);
  part[long(blockIdx.y) * n + j] = acc;
}
template <typename T>
__global__ void add_chunks_kernel(const T* part, long chunks, long n, T* out) {
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  T acc = out[j];
  long c = 0;
  for (; c + kBatchRows <= chunks; c += kBatchRows) {  // the loads in flight together, added in order
    T v[kBatchRows];
#pragma unroll
    for (int r = 0; r < kBatchRows; ++r) v[r] = part[(c + r) * n + j];
#pragma unroll
    for (int r = 0; r < kBatchRows; ++r) acc += v[r];
  }
  for (; c < chunks; ++c) acc += part[c * n + j];
  out[j] = acc;
}
template <typename T, class Value>
void add_column_sums(Value value, long rows, long n, T* out, cudaStream_t s, long chunk_rows = kChunkRows) {
  if (rows <= 0 || n <= 0) return;
  const long chunks = (rows + chunk_rows - 1) / chunk_rows;
  T* part = static_cast<T*>(column_sum_workspace(size_t(chunks * n) * sizeof(T)));
  column_chunks_kernel<T><<<dim3(blocks_for(n), unsigned(chunks)), kThreads, 0, s>>>(value, rows, n, part, chunk_rows);
  add_chunks_kernel<<<blocks_for(n), kThreads, 0, s>>>(part, chunks, n, out);
}

}  // namespace ff::cuda
