// The schedule's element-wise glue on the GPU (kernels.hpp), twins of
// device_kernels.hpp's CpuKernels: sums, the master's accumulate, widen and
// narrow, the bias and its gradient, the targets, and the sum of squares for
// the gradient norm. Computed in M, rounded where stored as T.
#include <algorithm>

#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"
#include "engine/runtime/cuda_check.hpp"

namespace ff::cuda {

namespace {

// out = a + b, kPack<T> values a thread (T the training dtype; a, b and out
// in T or its master type M): add's residual sum, and accumulate's acc += x
// in place.
template <typename T, typename A, typename B, typename O>
__global__ void sum_kernel(const A* a, const B* b, O* out, size_t n, bool aligned) {
  const Pack<T> p(n, aligned);
  master_t<T> x[kPack<T>], y[kPack<T>];
  load_pack(a + p.i0, x, p.count, p.vec);
  load_pack(b + p.i0, y, p.count, p.vec);
#pragma unroll
  for (int k = 0; k < kPack<T>; ++k) x[k] += y[k];
  store_pack(out + p.i0, x, p.count, p.vec);
}

// out = x in another dtype (widen: T to M; narrow: M to T, rounded).
template <typename T, typename From, typename To>
__global__ void convert_kernel(const From* x, To* out, size_t n, bool aligned) {
  const Pack<T> p(n, aligned);
  master_t<T> v[kPack<T>];
  load_pack(x + p.i0, v, p.count, p.vec);
  store_pack(out + p.i0, v, p.count, p.vec);
}

// Aligned only where a row is whole chunks (n a multiple of kPack): a
// thread's values then share a row, and the bias's columns are a chunk.
template <typename T, typename M = master_t<T>>
__global__ void add_bias_kernel(T* out, const T* bias, long rows, long n, bool aligned) {
  const Pack<T> p(size_t(rows) * size_t(n), aligned);
  if (p.count == 0) return;
  M x[kPack<T>], b[kPack<T>];
  load_pack(out + p.i0, x, p.count, p.vec);
  const size_t j0 = p.i0 % size_t(n);
  if (p.vec) {
    load_pack(bias + j0, b, p.count, true);
  } else {
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k) b[k] = load(bias + (p.i0 + size_t(k)) % size_t(n));
  }
#pragma unroll
  for (int k = 0; k < kPack<T>; ++k) x[k] += b[k];
  store_pack(out + p.i0, x, p.count, p.vec);
}

// The bias gradient's chunk sums (reduce.cuh's add_column_sums) with kPack
// columns a thread, 16 bytes a row: the same additions in the same order.
template <typename T, typename M = master_t<T>>
__global__ void bias_chunks_kernel(const T* dout, long rows, long n, M* part, long chunk_rows) {
  const long j0 = (long(blockIdx.x) * blockDim.x + threadIdx.x) * kPack<T>;
  if (j0 >= n) return;
  const long lo = long(blockIdx.y) * chunk_rows, hi = lo + chunk_rows < rows ? lo + chunk_rows : rows;
  M acc[kPack<T>] = {};
  // kBatchRows rows' loads in flight before their additions (one row at a
  // time left the loads waiting on each other: half the bandwidth).
  long i = lo;
  for (; i + kBatchRows <= hi; i += kBatchRows) {
    M v[kBatchRows][kPack<T>];
#pragma unroll
    for (int r = 0; r < kBatchRows; ++r) load_pack(dout + (i + r) * n + j0, v[r], kPack<T>, true);
#pragma unroll
    for (int r = 0; r < kBatchRows; ++r)
#pragma unroll
      for (int k = 0; k < kPack<T>; ++k) acc[k] += v[r][k];
  }
  for (; i < hi; ++i) {
    M v[kPack<T>];
    load_pack(dout + i * n + j0, v, kPack<T>, true);
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k) acc[k] += v[k];
  }
  store_pack(part + long(blockIdx.y) * n + j0, acc, kPack<T>, true);
}

__global__ void targets_kernel(const int* tokens, int* targets, long t, long S) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < t) targets[i] = tokens[(i / S) * (S + 1) + i % S + 1];
}

// Σ x² in double in two passes, deterministic: each block's strided partial
// sums and tree into part[block], then one block sums the parts.
template <typename T>
__global__ void squares_partial_kernel(SquaresParts<T> p, double* part) {
  // 16 bytes a load where a part is aligned (4 bytes a thread left the
  // pass at 1.3 TB/s on an H100): a thread's chunks of kPack<T> values.
  constexpr int W = kPack<T>;
  const size_t stride = size_t(gridDim.x) * kThreads;
  double s = 0;
  for (int k = 0; k < p.count; ++k) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(p.x[k]) % 16 == 0;
    for (size_t c = size_t(blockIdx.x) * kThreads + threadIdx.x; c * W < p.n[k]; c += stride) {
      const size_t i0 = c * W;
      const int count = p.n[k] - i0 < size_t(W) ? int(p.n[k] - i0) : W;
      double v[W];
      load_pack(p.x[k] + i0, v, count, aligned && count == W);
#pragma unroll
      for (int w = 0; w < W; ++w) s += v[w] * v[w];
    }
  }
  s = block_reduce(s, Add{});
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ void sum_parts_kernel(double* part, int parts, bool accumulate) {
  double s = 0;
  for (int i = int(threadIdx.x); i < parts; i += kThreads) s += part[i];
  s = block_reduce(s, Add{});
  if (threadIdx.x == 0) part[kSumOfSquaresWorkspace] = accumulate ? part[kSumOfSquaresWorkspace] + s : s;
}

}  // namespace

void* column_sum_workspace(size_t bytes) {
  static void* p = nullptr;
  static size_t have = 0;
  if (bytes > have) {
    // Kernels queued before may still read the old one.
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaMalloc(&p, bytes));
    have = bytes;
  }
  return p;
}

template <typename T>
void add(const T* a, const T* b, T* out, size_t n, Stream s) {
  if (n > 0) sum_kernel<T><<<pack_blocks<T>(n), kThreads, 0, s>>>(a, b, out, n, aligned16({a, b, out}));
}
template <typename T>
void accumulate(master_t<T>* acc, const T* x, size_t n, Stream s) {
  if (n > 0) sum_kernel<T><<<pack_blocks<T>(n), kThreads, 0, s>>>(acc, x, acc, n, aligned16({acc, x}));
}
template <typename T>
void widen(const T* x, master_t<T>* out, size_t n, Stream s) {
  if (n > 0) convert_kernel<T><<<pack_blocks<T>(n), kThreads, 0, s>>>(x, out, n, aligned16({x, out}));
}
template <typename T>
void narrow(const master_t<T>* x, T* out, size_t n, Stream s) {
  if (n > 0) convert_kernel<T><<<pack_blocks<T>(n), kThreads, 0, s>>>(x, out, n, aligned16({x, out}));
}
template <typename T>
void add_bias(T* out, const T* bias, long rows, long n, Stream s) {
  const size_t total = size_t(rows) * size_t(n);
  if (total > 0)
    add_bias_kernel<<<pack_blocks<T>(total), kThreads, 0, s>>>(out, bias, rows, n,
                                                                n % kPack<T> == 0 && aligned16({out, bias}));
}
template <typename T>
void bias_grad(const T* dout, master_t<T>* dbias, long rows, long n, Stream s) {
  if (rows <= 0 || n <= 0) return;
  // Chunks of fewer rows where the columns are few, so that a narrow bias
  // (2,048 columns: one block of 16-byte lanes) still fills the GPU with
  // blocks: at least 4 a multiprocessor. The same for both paths, which
  // thus add the same values in the same order.
  static const int sms = [] {
    int device = 0, count = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  const long lanes = blocks_for((n + kPack<T> - 1) / kPack<T>);
  long chunk_rows = kChunkRows;
  while (chunk_rows > kBatchRows && lanes * ((rows + chunk_rows - 1) / chunk_rows) < 4L * sms) chunk_rows /= 2;
  if (n % kPack<T> != 0 || !aligned16({dout})) {
    add_column_sums(Element<T>{dout, n}, rows, n, dbias, s, chunk_rows);
    return;
  }
  using M = master_t<T>;
  const long chunks = (rows + chunk_rows - 1) / chunk_rows;
  M* part = static_cast<M*>(column_sum_workspace(size_t(chunks * n) * sizeof(M)));
  bias_chunks_kernel<<<dim3(unsigned(lanes), unsigned(chunks)), kThreads, 0, s>>>(dout, rows, n, part, chunk_rows);
  add_chunks_kernel<<<blocks_for(n), kThreads, 0, s>>>(part, chunks, n, dbias);
}
void targets(const int* tokens, int* targets, long t, long S, Stream s) {
  if (t > 0) targets_kernel<<<blocks_for(t), kThreads, 0, s>>>(tokens, targets, t, S);
}
template <typename M>
void sum_of_squares(const SquaresParts<M>& p, bool accumulate, double* out, Stream s) {
  size_t most = 0;
  for (int k = 0; k < p.count; ++k) most = std::max(most, p.n[k]);
  const int blocks = int(std::min<long>(long(blocks_for(long(most))), long(kSumOfSquaresWorkspace)));
  squares_partial_kernel<<<unsigned(std::max(blocks, 1)), kThreads, 0, s>>>(p, out);
  sum_parts_kernel<<<1, kThreads, 0, s>>>(out, std::max(blocks, 1), accumulate);
}

#define FF_GLUE(T, M)                                                    \
  template void add<T>(const T*, const T*, T*, size_t, Stream);          \
  template void accumulate<T>(M*, const T*, size_t, Stream);             \
  template void widen<T>(const T*, M*, size_t, Stream);                  \
  template void narrow<T>(const M*, T*, size_t, Stream);                 \
  template void add_bias<T>(T*, const T*, long, long, Stream);           \
  template void bias_grad<T>(const T*, M*, long, long, Stream);
FF_GLUE(float, float)
FF_GLUE(double, double)
FF_GLUE(bf16, float)
// Of the master type only: float (fp32's and bf16's) and double.
template void sum_of_squares<float>(const SquaresParts<float>&, bool, double*, Stream);
template void sum_of_squares<double>(const SquaresParts<double>&, bool, double*, Stream);

}  // namespace ff::cuda
