#pragma once
// The cuda device (device.hpp): this rank's GPU. Kernels are queued on one
// stream in launch order and complete when the stream reaches them; record()
// is an event on that stream, and waiting polls it while driving MPI
// progress. Its kernels (DeviceKernels) are kernels.hpp's and cuBLAS's. The
// engine's arrays are managed memory (huge_pages.hpp's BufferMemory), which
// the host addresses directly: the schedule and its host bookkeeping are the
// cpu's. Its communicator is NcclComm (nccl_comm.hpp). Offload's copies run
// on two more streams, one per way of the host link.
#include <cstddef>
#include <memory>

#include "engine/device.hpp"
#include "engine/device_kernels.hpp"

struct CUstream_st;
struct cublasContext;

namespace ff::engine {

class CudaDevice final : public Device {
 public:
  // On the current GPU (ff::cuda::select_local_gpu first). Installs managed
  // memory for the engine's arrays: make it before any of them. `profile`:
  // two events around every kernel, its time to its class and to busy_s
  // (without, a launch-bound step pays nothing for timing it: no busy_s).
  explicit CudaDevice(bool profile = false);
  ~CudaDevice() override;
  std::string name() const override { return "cuda"; }
  Event record() override;
  void wait(Event e) override;
  bool host_is_device() const override { return false; }
  bool deferred() const override { return true; }
  // Pinned host memory (cudaMallocHost) for the arrays `allocate` makes.
  void allocate_on_host(const std::function<void()>& allocate) override;
  // Device memory (cudaMalloc) for the arrays `allocate` makes.
  void allocate_on_device(const std::function<void()>& allocate) override;
  void place_arrays() override;
  // On a copy stream per way, timed by events on it.
  Event copy(void* dst, const void* src, size_t bytes, CopyWay way, std::initializer_list<Event> after,
             const std::function<void(double)>& timed) override;
  void stream_wait(Event e) override;

  CUstream_st* stream() const;
  cublasContext* blas() const;
  // The engine's arrays in device memory: now, and the most at any time.
  static double array_bytes();
  static double peak_array_bytes();

 protected:
  double begin() override;
  double end(const Kernel& k, double t0) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <typename T>
std::unique_ptr<DeviceKernels<T>> make_cuda_kernels(CudaDevice& dev);

}  // namespace ff::engine
