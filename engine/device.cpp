#include "engine/device.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/device_kernels.hpp"
#include "engine/runtime/check.hpp"
#include "engine/runtime/clock.hpp"
#include "engine/runtime/huge_pages.hpp"
#include "engine/runtime/mpi_poll.hpp"
#ifdef FF_CUDA_DEVICE
#include "engine/cuda/cuda_device.hpp"
#include "engine/runtime/gpu.hpp"
#endif

namespace ff::engine {

Device::Event Device::copy(void* dst, const void* src, size_t bytes, CopyWay, std::initializer_list<Event> after,
                           const std::function<void(double)>& timed) {
  for (Event e : after) wait(e);
  const double t0 = now_s();
  // On CPU ranks, in slices, each followed by an MPI test: nothing else
  // moves the communication in flight while the host copies.
  const size_t slice = host_is_device() ? size_t(256) << 10 : std::max<size_t>(bytes, 1);
  for (size_t i = 0; i < bytes; i += slice) {
    std::memcpy(static_cast<char*>(dst) + i, static_cast<const char*>(src) + i, std::min(slice, bytes - i));
    if (host_is_device()) progress();
  }
  if (timed) timed(now_s() - t0);
  return 0;
}

namespace {

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  Event record() override { return 0; }
  void wait(Event) override {}
  bool host_is_device() const override { return true; }

 protected:
  // A kernel may launch another (a gradient accumulation completing while a
  // GEMM drives progress): only the outermost is counted.
  double begin() override {
    ++depth_;
    return now_s();
  }
  double end(const Kernel& k, double t0) override {
    const double dt = now_s() - t0;
    if (--depth_ == 0) {
      count(k, dt);
      stats.busy_s += dt;
      stats.host_s += dt;
    }
    return dt;
  }

 private:
  int depth_ = 0;
};

class PacedDevice final : public Device {
 public:
  PacedDevice(const DevicePace& pace, bool fp64) : pace_(pace), flops_(pace_gemm_flops(pace, fp64)) {}
  std::string name() const override { return "paced"; }
  Event record() override { return free_; }
  void wait(Event e) override {
    for (double t = now_s(); t < e; t = now_s()) {
      progress();
      const double left = e - now_s();
      sleep_for(std::min(left, pace_.poll_s));
    }
  }
  bool host_is_device() const override { return false; }
  // A copy engine per way, as a GPU has: a copy starts once it is issued,
  // its way's engine is free and every `after` event is reached, and lasts
  // bytes / the host link's pace, whatever the kernels and the other way
  // do. The host makes it at once (the values are the host's already); a
  // host slower than the pace delays it, as it does a kernel.
  Event copy(void* dst, const void* src, size_t bytes, CopyWay way, std::initializer_list<Event> after,
             const std::function<void(double)>& timed) override {
    double start = std::max(now_s(), engine_free_[int(way)]);
    for (Event e : after) start = std::max(start, e);
    std::memcpy(dst, src, bytes);
    const double duration = double(bytes) / pace_.host_bytes_per_s;
    const double done = complete(start + duration, now_s());
    engine_free_[int(way)] = done;
    if (timed) timed(duration);
    return done;
  }
  // Kernels launched from now on start after `e`.
  void stream_wait(Event e) override { free_ = std::max(free_, e); }

 protected:
  double begin() override { return now_s(); }
  // The kernel starts when both it is launched and the device is free, and
  // lasts its paced duration; its result exists only once the host has
  // computed it, so a host slower than the pace delays it (late_s).
  double end(const Kernel& k, double launched) override {
    const double host_done = now_s();
    const double duration = k.flops / flops_ + k.bytes / pace_.bytes_per_s;
    free_ = complete(std::max(launched, free_) + duration, host_done);
    count(k, duration);
    stats.busy_s += duration;
    stats.host_s += host_done - launched;
    return duration;
  }

 private:
  // Work due at `due` on the device clock whose host part ended at
  // `host_done`: done then, or when the host is, if later (late_s).
  double complete(double due, double host_done) {
    if (host_done > due) stats.late_s += host_done - due;
    return std::max(due, host_done);
  }

  DevicePace pace_;
  double flops_;
  double free_ = 0;  // the device clock: when the last launched kernel completes
  double engine_free_[2] = {0, 0};  // each copy engine's: when its last copy completes
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

#ifdef FF_CUDA_DEVICE
bool select_cuda_gpu(MPI_Comm world, std::string* why) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const bool ok = cuda::select_local_gpu(node, why);
  MPI_CHECK(MPI_Comm_free(&node));
  return ok;
}
std::unique_ptr<Device> make_cuda_device(bool profile) { return std::make_unique<CudaDevice>(profile); }
#else
bool select_cuda_gpu(MPI_Comm, std::string* why) {
  *why = "this engine was built without the CUDA toolkit (meson -Dcuda=enabled, nvcc under -Dcuda-home)";
  return false;
}
std::unique_ptr<Device> make_cuda_device(bool) { throw std::logic_error("engine: built without the cuda device"); }
double cuda_gemm_peak(int, const std::string&) { throw std::logic_error("engine: built without the cuda device"); }
#endif

template <typename T>
std::unique_ptr<DeviceKernels<T>> kernels_for(Device& dev) {
#ifdef FF_CUDA_DEVICE
  if (auto* gpu = dynamic_cast<CudaDevice*>(&dev)) return make_cuda_kernels<T>(*gpu);
#endif
  return std::make_unique<CpuKernels<T>>(dev);
}
template std::unique_ptr<DeviceKernels<float>> kernels_for<float>(Device&);
template std::unique_ptr<DeviceKernels<double>> kernels_for<double>(Device&);
template std::unique_ptr<DeviceKernels<bf16>> kernels_for<bf16>(Device&);

void install_buffer_memory(const BufferMemory* memory) {
  BufferMemoryState& st = buffer_memory_state();
  if (st.memory == memory) return;
  if (st.live != 0)
    throw std::logic_error("engine: the device's memory is installed after " + std::to_string(st.live) +
                           " arrays were made elsewhere");
  st.memory = memory;
}
std::unique_ptr<Device> make_paced_device(const DevicePace& pace, bool fp64) {
  return std::make_unique<PacedDevice>(pace, fp64);
}

}  // namespace ff::engine
