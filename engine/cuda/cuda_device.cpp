#include "engine/cuda/cuda_device.hpp"

#include <cuda_runtime.h>

#include <cstring>
#include <deque>
#include <map>
#include <type_traits>
#include <vector>

#include "engine/cuda/kernels.hpp"
#include "engine/runtime/clock.hpp"
#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cublas_gemm.hpp"
#include "engine/runtime/cublaslt_gemm.hpp"
#include "engine/runtime/cuda_check.hpp"
#include "engine/runtime/huge_pages.hpp"

namespace ff::engine {

namespace {

// Managed memory for the engine's arrays, zero-filled on the GPU (the host
// never touches what stays zero) and counted for the run record's peak;
// pinned host memory while allocate_on_host runs (offload's arena), device
// memory while allocate_on_device runs (offload's bucket buffers).
enum class Home { Managed, Host, Device };
struct ManagedBytes {
  double now = 0, peak = 0;
  Home home = Home::Managed;          // where the next array goes
  std::map<void*, size_t> arrays;     // on the GPU (managed or not), for the peak and cudaFree
  std::map<void*, size_t> managed;    // of those, the managed ones, for CudaDevice::place_arrays
};
ManagedBytes& managed_bytes() {
  static ManagedBytes b;
  return b;
}
void* managed_allocate(size_t bytes) {
  void* p = nullptr;
  ManagedBytes& b = managed_bytes();
  const size_t n = bytes == 0 ? 1 : bytes;
  if (b.home == Home::Host) {
    if (cudaMallocHost(&p, n) != cudaSuccess) return nullptr;
    std::memset(p, 0, bytes);
    return p;
  }
  if ((b.home == Home::Device ? cudaMalloc(&p, n) : cudaMallocManaged(&p, n)) != cudaSuccess) return nullptr;
  // On the legacy stream, which the engine's non-blocking streams do not
  // wait for: nothing queued there can touch a new array.
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, 0));
  CUDA_CHECK(cudaStreamSynchronize(0));
  b.arrays[p] = bytes;
  if (b.home == Home::Managed) b.managed[p] = bytes;
  b.now += double(bytes);
  b.peak = std::max(b.peak, b.now);
  return p;
}
// Arrays on the GPU are in the map; anything else came from cudaMallocHost.
void managed_deallocate(void* p, size_t bytes) {
  ManagedBytes& b = managed_bytes();
  if (b.arrays.erase(p) == 0) {
    CUDA_CHECK(cudaFreeHost(p));
    return;
  }
  b.managed.erase(p);
  CUDA_CHECK(cudaFree(p));
  b.now -= double(bytes);
}
const BufferMemory kManaged{managed_allocate, managed_deallocate, true};

// A cuBLAS handle in the engine's math mode: fp32 GEMMs in fp32, no TF32
// (MODEL.md §6: a round-off gradient moves AdamW by ±lr).
cublasHandle_t engine_blas_handle() {
  cublasHandle_t h = nullptr;
  CUBLAS_CHECK(cuda::cublas().create(&h));
  CUBLAS_CHECK(cuda::cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH));
  return h;
}

}  // namespace

// Events are recycled; each kernel is bracketed by two of them so its device
// time is known once the stream has passed it.
struct CudaDevice::Impl {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::vector<cudaEvent_t> spare;
  struct Marker {
    double id;
    cudaEvent_t ev;
  };
  std::deque<Marker> markers;  // recorded, not yet waited for, in stream order
  double next_id = 1;
  bool profile = false;
  struct Timed {
    cudaEvent_t start, stop;
    bool flops;
    KernelClass cls;
  };
  std::deque<Timed> timed;  // kernels whose time is not yet read
  cudaEvent_t start = nullptr;
  int depth = 0;
  // Offload's copies, per way in stream order until their times are read.
  cudaStream_t copy_stream[2] = {};
  struct Copy {
    double id;
    cudaEvent_t start, stop;
    std::function<void(double)> timed;
  };
  std::deque<Copy> copies[2];

  cudaEvent_t event() {
    if (spare.empty()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      return e;
    }
    cudaEvent_t e = spare.back();
    spare.pop_back();
    return e;
  }
  // The times of the kernels the stream has passed, in order.
  void collect(DeviceStats& st) {
    while (!timed.empty() && cudaEventQuery(timed.front().stop) == cudaSuccess) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, timed.front().start, timed.front().stop));
      st.busy_s += ms * 1e-3;
      st.class_s[size_t(timed.front().cls)] += ms * 1e-3;
      if (timed.front().flops) st.gemm_s += ms * 1e-3;
      spare.push_back(timed.front().start);
      spare.push_back(timed.front().stop);
      timed.pop_front();
    }
    for (std::deque<Copy>& q : copies)
      while (!q.empty() && cudaEventQuery(q.front().stop) == cudaSuccess) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, q.front().start, q.front().stop));
        if (q.front().timed) q.front().timed(ms * 1e-3);
        spare.push_back(q.front().start);
        spare.push_back(q.front().stop);
        q.pop_front();
      }
  }
  // The CUDA event behind a device event still pending: a kernel marker or a
  // copy's completion; nullptr once retired (the device has passed it).
  cudaEvent_t marker(double id) const {
    for (const Marker& m : markers)
      if (m.id == id) return m.ev;
    return nullptr;
  }
  cudaEvent_t copy_done(double id) const {
    for (const std::deque<Copy>& q : copies)
      for (const Copy& c : q)
        if (c.id == id) return c.stop;
    return nullptr;
  }
};

CudaDevice::CudaDevice(bool profile) : impl_(std::make_unique<Impl>()) {
  impl_->profile = profile;
  install_buffer_memory(&kManaged);
  CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  impl_->blas = engine_blas_handle();
  CUBLAS_CHECK(cuda::cublas().set_stream(impl_->blas, impl_->stream));
  for (cudaStream_t& s : impl_->copy_stream) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
}

CudaDevice::~CudaDevice() {
  cudaStreamSynchronize(impl_->stream);
  for (int w = 0; w < 2; ++w) {
    cudaStreamSynchronize(impl_->copy_stream[w]);
    for (auto& c : impl_->copies[w]) cudaEventDestroy(c.start), cudaEventDestroy(c.stop);
    cudaStreamDestroy(impl_->copy_stream[w]);
  }
  for (auto& m : impl_->markers) cudaEventDestroy(m.ev);
  for (auto& t : impl_->timed) cudaEventDestroy(t.start), cudaEventDestroy(t.stop);
  for (cudaEvent_t e : impl_->spare) cudaEventDestroy(e);
  cuda::cublas().destroy(impl_->blas);
  cudaStreamDestroy(impl_->stream);
}

CUstream_st* CudaDevice::stream() const { return impl_->stream; }
cublasContext* CudaDevice::blas() const { return impl_->blas; }
double CudaDevice::array_bytes() { return managed_bytes().now; }
double CudaDevice::peak_array_bytes() { return managed_bytes().peak; }

// Every array to the GPU in bulk copies: what the host wrote (the weights'
// initialisation) would otherwise move page by page under the first step's
// kernels (gpt-1.3b: a first step of 16-26 s).
void CudaDevice::place_arrays() {
  int gpu = 0;
  CUDA_CHECK(cudaGetDevice(&gpu));
  cudaMemLocation here{};
  here.type = cudaMemLocationTypeDevice;
  here.id = gpu;
  for (const auto& [p, bytes] : managed_bytes().managed)
    CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, here, 0, impl_->stream));
  synchronize();
}

namespace {
void allocate_in(Home home, const std::function<void()>& allocate) {
  struct Scope {
    explicit Scope(Home h) { managed_bytes().home = h; }
    ~Scope() { managed_bytes().home = Home::Managed; }
  } scope(home);
  allocate();
}
}  // namespace

void CudaDevice::allocate_on_host(const std::function<void()>& allocate) { allocate_in(Home::Host, allocate); }
void CudaDevice::allocate_on_device(const std::function<void()>& allocate) { allocate_in(Home::Device, allocate); }

Device::Event CudaDevice::record() {
  cudaEvent_t e = impl_->event();
  CUDA_CHECK(cudaEventRecord(e, impl_->stream));
  const double id = impl_->next_id++;
  impl_->markers.push_back({id, e});
  return id;
}

// Polls the event (a sleeping rank makes no MPI progress). A kernel marker
// is retired with every marker before it: the stream reached them first. A
// copy is retired, with the copies before it, when its time is read.
void CudaDevice::wait(Event e) {
  auto poll = [this](cudaEvent_t ev) {
    for (;;) {
      const cudaError_t q = cudaEventQuery(ev);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) CUDA_CHECK(q);
      progress();
    }
  };
  if (cudaEvent_t target = impl_->marker(e)) {
    poll(target);
    while (!impl_->markers.empty() && impl_->markers.front().id <= e) {
      impl_->spare.push_back(impl_->markers.front().ev);
      impl_->markers.pop_front();
    }
  } else if (cudaEvent_t done = impl_->copy_done(e)) {
    poll(done);
  }
  impl_->collect(stats);
  stats.peak_bytes = peak_array_bytes();
}

Device::Event CudaDevice::copy(void* dst, const void* src, size_t bytes, CopyWay way,
                               std::initializer_list<Event> after, const std::function<void(double)>& timed) {
  cudaStream_t s = impl_->copy_stream[int(way)];
  for (Event e : after) {
    if (cudaEvent_t ev = impl_->marker(e)) CUDA_CHECK(cudaStreamWaitEvent(s, ev, 0));
    else if (cudaEvent_t ev = impl_->copy_done(e)) CUDA_CHECK(cudaStreamWaitEvent(s, ev, 0));
  }
  Impl::Copy c{impl_->next_id++, impl_->event(), impl_->event(), timed};
  CUDA_CHECK(cudaEventRecord(c.start, s));
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  CUDA_CHECK(cudaEventRecord(c.stop, s));
  impl_->copies[int(way)].push_back(std::move(c));
  return impl_->copies[int(way)].back().id;
}

void CudaDevice::stream_wait(Event e) {
  if (cudaEvent_t ev = impl_->copy_done(e)) CUDA_CHECK(cudaStreamWaitEvent(impl_->stream, ev, 0));
}

// A kernel launched while another is being launched (a completion callback)
// is inside the outer one's events.
double CudaDevice::begin() {
  if (impl_->depth++ == 0 && impl_->profile) {
    impl_->start = impl_->event();
    CUDA_CHECK(cudaEventRecord(impl_->start, impl_->stream));
  }
  return now_s();
}

// The device time is known later (collect), under profiling alone: 0 here.
double CudaDevice::end(const Kernel& k, double t0) {
  stats.host_s += now_s() - t0;
  if (--impl_->depth > 0) return 0;
  count(k, -1);
  if (!impl_->profile) return 0;
  cudaEvent_t stop = impl_->event();
  CUDA_CHECK(cudaEventRecord(stop, impl_->stream));
  impl_->timed.push_back({impl_->start, stop, k.flops > 0, k.cls});
  return 0;
}

namespace {

// The cuda device's kernels: each enqueued on its stream; the two that
// return a value to the host (a sum of squares, the loss) wait for it.
template <typename T>
class CudaKernels final : public DeviceKernels<T> {
 public:
  using M = master_t<T>;
  explicit CudaKernels(CudaDevice& dev) : s_(dev.stream()), blas_(dev.blas()), epilogue_(dev.stream()) {
    CUDA_CHECK(cudaMalloc(&scalar_, (cuda::kSumOfSquaresWorkspace + 1) * sizeof(double)));
  }
  ~CudaKernels() override {
    cudaStreamSynchronize(s_);
    cudaFree(scalar_);
    for (auto& b : tokens_) cudaFree(b.p);
    cudaFree(csr_);
    cudaFree(delta_);
    cudaFree(scores_);
    cudaFree(dscores_);
    cudaFree(loss_);
  }

  double gemm(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb, M beta, T* C,
              int ldc) override {
    cuda::gemm(blas_, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return 0;
  }
  double gemm_to_master(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                        M beta, M* C, int ldc) override {
    cuda::gemm(blas_, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return 0;
  }
  // cuBLASLt's epilogue where it has one for the case (cublaslt_gemm.hpp:
  // not fp64, ...); else cuBLAS's GEMM and the element-wise kernels, in the
  // same launch. GELU in bf16 alone: cuBLASLt does not document its GELU's
  // accuracy, which bf16's rounding covers (test_cuda_kernels.cpp measures
  // it) and fp32's may not; fp32 takes the bias epilogue, then the GELU
  // kernel.
  double gemm_bias(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                   const T* bias, T* C) override {
    if (!epilogue_.run(ta, tb, m, n, k, alpha, A, lda, B, ldb, bias, static_cast<T*>(nullptr), C)) {
      gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, M(0), C, n);
      add_bias(C, bias, m, n);
    }
    return 0;
  }
  double gemm_bias_gelu(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb,
                        const T* bias, T* pre, T* C) override {
    if (!std::is_same_v<T, bf16> || !epilogue_.run(ta, tb, m, n, k, alpha, A, lda, B, ldb, bias, pre, C)) {
      gemm_bias(ta, tb, m, n, k, alpha, A, lda, B, ldb, bias, pre);
      gelu_forward(pre, C, long(m) * n);
    }
    return 0;
  }
  void copy(const void* src, void* dst, size_t bytes) override {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s_));
  }
  void zero(void* x, size_t bytes) override {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(x, 0, bytes, s_));
  }
  void add(const T* a, const T* b, T* out, size_t n) override { cuda::add(a, b, out, n, s_); }
  void accumulate(M* acc, const T* x, size_t n) override { cuda::accumulate(acc, x, n, s_); }
  // acc += x in M: T = M's accumulate (master_t<M> is M).
  void accumulate_master(M* acc, const M* x, size_t n) override { cuda::accumulate<M>(acc, x, n, s_); }
  void widen(const T* x, M* out, size_t n) override { cuda::widen(x, out, n, s_); }
  void narrow(const M* x, T* out, size_t n) override { cuda::narrow(x, out, n, s_); }
  void add_bias(T* out, const T* bias, long rows, long n) override { cuda::add_bias(out, bias, rows, n, s_); }
  void bias_grad(const T* dout, M* dbias, long rows, long n) override { cuda::bias_grad(dout, dbias, rows, n, s_); }
  double sum_of_squares(const std::vector<Part<M>>& parts) override {
    if (parts.empty()) return 0;
    for (size_t k0 = 0; k0 < parts.size(); k0 += cuda::kSquaresParts) {
      cuda::SquaresParts<M> p{};
      p.count = int(std::min(parts.size() - k0, size_t(cuda::kSquaresParts)));
      for (int k = 0; k < p.count; ++k) p.x[k] = parts[k0 + size_t(k)].x, p.n[k] = parts[k0 + size_t(k)].n;
      cuda::sum_of_squares(p, k0 > 0, scalar_, s_);
    }
    double v = 0;
    CUDA_CHECK(cudaMemcpyAsync(&v, scalar_ + cuda::kSumOfSquaresWorkspace, sizeof v, cudaMemcpyDeviceToHost, s_));
    CUDA_CHECK(cudaStreamSynchronize(s_));
    return v;
  }
  // A copy of the host's tokens into the slot's buffer, in stream order: the
  // kernels before it that read the buffer have run.
  const int* tokens(const int* host, size_t n, int slot) override {
    if (tokens_.size() <= size_t(slot)) tokens_.resize(size_t(slot) + 1);
    DeviceArray& b = tokens_[size_t(slot)];
    if (b.n < n) {
      CUDA_CHECK(cudaStreamSynchronize(s_));
      cudaFree(b.p);
      CUDA_CHECK(cudaMalloc(&b.p, n * sizeof(int)));
      b.n = n;
    }
    CUDA_CHECK(cudaMemcpyAsync(b.p, host, n * sizeof(int), cudaMemcpyDefault, s_));
    return static_cast<const int*>(b.p);
  }
  void targets(const int* tokens, int* targets, long t, long S) override { cuda::targets(tokens, targets, t, S, s_); }
  void layernorm_row_sums(const T* x, M* sum, long t, long hx) override { cuda::layernorm_row_sums(x, sum, t, hx, s_); }
  void layernorm_centred_squares(const T* x, const M* sum, M* mean, M* sq, long t, long hx, long H) override {
    cuda::layernorm_centred_squares(x, sum, mean, sq, t, hx, H, s_);
  }
  void layernorm_normalize(const T* x, const M* mean, const M* sq, const T* gamma, const T* beta, T* y, T* xhat,
                           M* rstd, long t, long hx, long H) override {
    cuda::layernorm_normalize(x, mean, sq, gamma, beta, y, xhat, rstd, t, hx, H, s_);
  }
  void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, M* stat, long t, long hx) override {
    cuda::layernorm_backward_sums(dy, xhat, gamma, stat, t, hx, s_);
  }
  void layernorm_backward_apply(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                                M* dgamma, M* dbeta, long t, long hx, long H) override {
    cuda::layernorm_backward_apply(dy, xhat, rstd, gamma, stat, dx, dgamma, dbeta, t, hx, H, s_);
  }
  void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd, long t, long H) override {
    cuda::layernorm_forward(x, gamma, beta, y, xhat, rstd, t, H, s_);
  }
  void layernorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, M* dbeta, long t,
                          long H) override {
    cuda::layernorm_backward(dy, xhat, rstd, gamma, dx, dgamma, dbeta, t, H, s_);
  }
  void gelu_forward(const T* x, T* y, long n) override { cuda::gelu_forward(x, y, n, s_); }
  void gelu_backward(const T* x, const T* dy, T* dx, long n) override { cuda::gelu_backward(x, dy, dx, n, s_); }
  void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy,
                        long v0) override {
    cuda::embedding_lookup(tokens, E, ldE, h0, t, S, hx, vy, v0, s_);
  }
  void add_positions(T* h0, const T* pos, long t, long S, long hx) override {
    cuda::add_positions(h0, pos, t, S, hx, s_);
  }
  // The grouping's copy is in stream order, as tokens()'s: the last
  // scatter-add has read the buffer before it is rewritten.
  void embedding_scatter_add(const int* host_tokens, const T* dh0, M* dE, long ldE, M* dpos, long t, long S, long hx,
                             long vy, long v0) override {
    rows_.build(host_tokens, t, S, vy, v0);
    int* csr = grow(csr_, csr_n_, rows_.csr.size());
    CUDA_CHECK(cudaMemcpyAsync(csr, rows_.csr.data(), rows_.csr.size() * sizeof(int), cudaMemcpyHostToDevice, s_));
    cuda::embedding_scatter_add(csr, rows_.rows, dh0, dE, ldE, dpos, t, S, hx, s_);
  }
  // Where T = M the softmax works in place (scores = probs forward, dS over
  // dP backward), as before bf16: one workspace of probs' size, backward's.
  // bf16 keeps the unrounded scores and dP in an M workspace and dS in a T
  // one.
  double attention_forward(const T* qkv, T* out, T* probs, long seqs, long S, long heads, long kv,
                           long dh) override {
    M* scores = nullptr;
    if constexpr (std::is_same_v<T, M>) scores = probs;
    else scores = grow(scores_, scores_n_, size_t(seqs * heads * S * S));
    cuda::attention_forward(blas_, qkv, out, probs, scores, seqs, S, heads, kv, dh, s_);
    return 0;
  }
  double attention_backward(const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S, long heads,
                            long kv, long dh) override {
    const size_t n = size_t(seqs * heads * S * S);
    T* dscores = grow(dscores_, dscores_n_, n);
    M* scores = nullptr;
    if constexpr (std::is_same_v<T, M>) scores = dscores;
    else scores = grow(scores_, scores_n_, n);
    cuda::attention_backward(blas_, qkv, probs, dout, dqkv, scores, dscores, seqs, S, heads, kv, dh, s_);
    return 0;
  }
  // Flash attention's kernels stop at head size 128; backward's δ = dO·O
  // (seqs·heads·S values) in a workspace of its own.
  bool runs_flash_attention(long dh) const override { return dh <= cuda::kFlashMaxHeadDim; }
  double flash_attention_forward(const T* qkv, T* out, M* lse, long seqs, long S, long heads, long kv,
                                 long dh) override {
    cuda::flash_attention_forward(qkv, out, lse, seqs, S, heads, kv, dh, s_);
    return 0;
  }
  double flash_attention_backward(const T* qkv, const T* out, const M* lse, const T* dout, T* dqkv, long seqs, long S,
                                  long heads, long kv, long dh) override {
    M* delta = grow(delta_, delta_n_, size_t(seqs * heads * S));
    cuda::flash_attention_backward(qkv, out, lse, dout, dqkv, delta, seqs, S, heads, kv, dh, s_);
    return 0;
  }
  void rmsnorm_row_squares(const T* x, M* sq, long t, long hx) override { cuda::rmsnorm_row_squares(x, sq, t, hx, s_); }
  void rmsnorm_normalize(const T* x, const M* sq, const T* gamma, T* y, T* xhat, M* rstd, long t, long hx,
                         long H) override {
    cuda::rmsnorm_normalize(x, sq, gamma, y, xhat, rstd, t, hx, H, s_);
  }
  void rmsnorm_backward_sums(const T* dy, const T* xhat, const T* gamma, M* stat, long t, long hx) override {
    cuda::rmsnorm_backward_sums(dy, xhat, gamma, stat, t, hx, s_);
  }
  void rmsnorm_backward_apply(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                              M* dgamma, long t, long hx, long H) override {
    cuda::rmsnorm_backward_apply(dy, xhat, rstd, gamma, stat, dx, dgamma, t, hx, H, s_);
  }
  void rmsnorm_forward(const T* x, const T* gamma, T* y, T* xhat, M* rstd, long t, long H) override {
    cuda::rmsnorm_forward(x, gamma, y, xhat, rstd, t, H, s_);
  }
  void rmsnorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, long t,
                        long H) override {
    cuda::rmsnorm_backward(dy, xhat, rstd, gamma, dx, dgamma, t, H, s_);
  }
  void swiglu_forward(const T* f, T* g, long t, long fy) override { cuda::swiglu_forward(f, g, t, fy, s_); }
  void swiglu_backward(const T* f, const T* dg, T* df, long t, long fy) override {
    cuda::swiglu_backward(f, dg, df, t, fy, s_);
  }
  void rope_rotate(T* qkv, long t, long S, long heads, long kv, long dh, bool inverse) override {
    cuda::rope_rotate(qkv, t, S, heads, kv, dh, inverse, kRopeTheta, s_);
  }
  void cross_entropy_row_max(const T* logits, M* mx, long t, long vy, long valid) override {
    cuda::cross_entropy_row_max(logits, mx, t, vy, valid, s_);
  }
  void cross_entropy_exp_sums(const T* logits, const int* targets, const M* mx, T* dlogits, M* st, long t, long vy,
                              long v0, long valid) override {
    cuda::cross_entropy_exp_sums(logits, targets, mx, dlogits, st, t, vy, v0, valid, s_);
  }
  // The token losses (M) summed on the host in token order, as the cpu sums them.
  double cross_entropy_finish(const int* targets, const M* mx, const M* st, T* dlogits, long t, long vy, long v0,
                              long valid, M grad_scale) override {
    grow(loss_, loss_n_, size_t(t));
    cuda::cross_entropy_finish(targets, mx, st, dlogits, loss_, t, vy, v0, valid, grad_scale, s_);
    losses_.resize(size_t(t));
    CUDA_CHECK(cudaMemcpyAsync(losses_.data(), loss_, size_t(t) * sizeof(M), cudaMemcpyDeviceToHost, s_));
    CUDA_CHECK(cudaStreamSynchronize(s_));
    double loss = 0;
    for (M l : losses_) loss += double(l);
    return loss;
  }
  void adamw_update(M* master, M* g, M* m, M* v, T* w, size_t n, const AdamWStep<M>& s) override {
    cuda::adamw_update(master, g, m, v, w, n, s, s_);
  }

 private:
  struct DeviceArray {
    void* p = nullptr;
    size_t n = 0;
  };
  // A workspace of at least n values (freed only once the stream is idle).
  template <typename U>
  U* grow(U*& p, size_t& have, size_t n) {
    if (have >= n) return p;
    CUDA_CHECK(cudaStreamSynchronize(s_));
    cudaFree(p);
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(U)));
    have = n;
    return p;
  }

  cudaStream_t s_;
  cublasHandle_t blas_;
  cuda::EpilogueGemm epilogue_;
  double* scalar_ = nullptr;
  std::vector<DeviceArray> tokens_;
  cuda::EmbeddingRows rows_;  // the embedding's backward
  int* csr_ = nullptr;
  size_t csr_n_ = 0;
  M* delta_ = nullptr;  // flash attention's backward
  size_t delta_n_ = 0;
  M* scores_ = nullptr;  // bf16's only
  size_t scores_n_ = 0;
  T* dscores_ = nullptr;
  size_t dscores_n_ = 0;
  M* loss_ = nullptr;
  size_t loss_n_ = 0;
  std::vector<M> losses_;
};

template <typename T>
double gemm_peak_flops(int n) {
  T *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t bytes = size_t(n) * size_t(n) * sizeof(T);
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMalloc(&c, bytes));
  // Every byte 0x3c: small non-zero values (zeros run faster than real data).
  CUDA_CHECK(cudaMemset(a, 0x3c, bytes));
  CUDA_CHECK(cudaMemset(b, 0x3c, bytes));
  cublasHandle_t h = engine_blas_handle();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  double best = 0;
  for (int rep = 0; rep < 8; ++rep) {  // the first two warm up (handle workspace, clocks)
    CUDA_CHECK(cudaEventRecord(start, 0));
    cuda::gemm(h, false, false, n, n, n, master_t<T>(1), a, n, b, n, master_t<T>(0), c, n);
    CUDA_CHECK(cudaEventRecord(stop, 0));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (rep >= 2) best = std::max(best, 2.0 * n * double(n) * n / (ms * 1e-3));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cuda::cublas().destroy(h);
  cudaFree(a), cudaFree(b), cudaFree(c);
  return best;
}
}  // namespace

double cuda_gemm_peak(int n, const std::string& dtype) {
  return dtype == "fp64"   ? gemm_peak_flops<double>(n)
         : dtype == "bf16" ? gemm_peak_flops<bf16>(n)
                           : gemm_peak_flops<float>(n);
}

template <typename T>
std::unique_ptr<DeviceKernels<T>> make_cuda_kernels(CudaDevice& dev) {
  return std::make_unique<CudaKernels<T>>(dev);
}
template std::unique_ptr<DeviceKernels<float>> make_cuda_kernels<float>(CudaDevice&);
template std::unique_ptr<DeviceKernels<double>> make_cuda_kernels<double>(CudaDevice&);
template std::unique_ptr<DeviceKernels<bf16>> make_cuda_kernels<bf16>(CudaDevice&);

}  // namespace ff::engine
