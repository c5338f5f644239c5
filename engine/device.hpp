#pragma once
// One rank's device (MODEL.md §11): the model code launches kernels on it in
// order, and waits for them through events; collectives wait for the kernels
// launched before them, as a communication stream waits on the compute
// stream's event. One schedule (gpt.cpp) drives every backend:
//   cpu    the host is the device: a kernel runs when launched (today's
//          synchronous engine), and drives MPI progress inside long GEMMs.
//   paced  "tc for compute": a kernel computes its result on the host when
//          launched (so every result is the cpu's, bit for bit) and completes
//          on a virtual device clock at max(launch, device free) + duration,
//          the duration from a DevicePace; waiting sleeps until the clock
//          reaches the event, driving MPI progress every Δ.
//   cuda   a GPU (cuda/cuda_device.hpp): kernels are queued on a stream and
//          their results exist when it reaches them (deferred); waiting
//          polls the stream's events, driving MPI progress.
// What each kernel computes is the device's DeviceKernels (device_kernels.hpp).
#include <mpi.h>

#include <array>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "advisor/core/device_pace.hpp"
#include "advisor/core/kernel_class.hpp"

namespace ff::engine {

// What a kernel costs the device: GEMM (and attention) FLOPs and element-wise
// memory traffic. The paced device charges each layer the traffic MODEL.md's
// compute model charges it (what fused GPU kernels move), however many
// passes the host makes. Its class and the GPU kernels it takes are the
// advisor's inventory's (MODEL.md §2, "Kernels").
struct Kernel {
  KernelClass cls = KernelClass::Gemm;
  double flops = 0;
  double bytes = 0;
  int launches = 1;
};

struct DeviceStats {
  long kernels = 0;
  // Per kernel class: the GPU kernels launched, and their device time where
  // known (cpu: the host's; paced: the pace's; cuda: under profiling alone).
  std::array<double, kKernelClasses> class_launches{}, class_s{};
  double busy_s = 0;  // device time of every kernel: the paced durations, or on cpu the real ones
  double gemm_s = 0;  // cuda, profiling: of busy_s, the kernels with FLOPs (GEMMs, attention), from events
  double peak_bytes = 0;  // cuda: the most device memory the engine's arrays held
  double host_s = 0;  // the host's real time inside kernel bodies
  double late_s = 0;  // paced: how far the host's real work pushed completions past the device clock
};

// Called while a device waits (paced) or between the panels of a long GEMM
// (cpu): the communicator moves whatever is in flight.
class ProgressHook {
 public:
  virtual ~ProgressHook() = default;
  virtual bool pending() const = 0;
  virtual void progress() = 0;
};

// The two ways of the host link, each with its own copy engine on a GPU.
enum class CopyWay { ToDevice, ToHost };

class Device {
 public:
  using Event = double;  // a point on the device clock

  virtual ~Device() = default;
  virtual std::string name() const = 0;
  void set_progress(ProgressHook* h) { progress_ = h; }

  // Runs `body`, the kernel's work on the host, as one kernel of cost `k`.
  // Returns the kernel's device time.
  template <class Body>
  double launch(const Kernel& k, Body&& body) {
    const double t0 = begin();
    body();
    return end(k, t0);
  }
  // The completion of everything launched so far.
  virtual Event record() = 0;
  // Returns once the device has reached `e`.
  virtual void wait(Event e) = 0;
  void synchronize() { wait(record()); }
  // cpu: kernels are the host's own work, timed as they run; a long one
  // drives MPI progress itself, since nothing else does while it runs.
  virtual bool host_is_device() const = 0;
  // Whether a kernel's result exists only once the device reaches its event
  // (a GPU), rather than when it is launched (cpu, paced: the host computes
  // it then). The schedule synchronizes where the host reuses or reads what
  // a queued kernel may still touch.
  virtual bool deferred() const { return false; }
  // Offload's host arena: runs `allocate`, whose new arrays a GPU puts in
  // pinned host memory, so that copies to and from them cross the host link
  // at its DMA rate. The host's memory already on the cpu and paced devices.
  virtual void allocate_on_host(const std::function<void()>& allocate) { allocate(); }
  // Offload's bucket buffers, which only kernels and copies touch: runs
  // `allocate`, whose new arrays a GPU puts in its own memory, which the host
  // cannot address. Copies between managed and pinned host memory take turns
  // across the link (on an H200, both ways at once ran at 26 GB/s each,
  // against 51 from device memory and 55 one way alone). The host's memory
  // on the cpu and paced devices.
  virtual void allocate_on_device(const std::function<void()>& allocate) { allocate(); }
  // Before the first step: the arrays made so far moved to where the
  // kernels run (a GPU's managed memory, in bulk). Nothing to move on the
  // cpu and paced devices.
  virtual void place_arrays() {}
  // Offload's copy of `bytes` from `src` to `dst` one way across the host
  // link. On a GPU it is queued on that way's copy stream, so that both ways
  // and the kernels run at once, as MODEL.md §9 prices them. It starts once
  // the device has reached every event of `after` (record()'s or copy()'s;
  // 0: none), and returns its own event for wait() and stream_wait().
  // `timed` gets the copy's seconds once they are known, at the latest when
  // a wait() has passed it. Where the host computes the kernels (cpu,
  // paced), the host copies at once: the cpu after waiting for `after`,
  // the paced device completing it on its way's copy engine's clock.
  virtual Event copy(void* dst, const void* src, size_t bytes, CopyWay way, std::initializer_list<Event> after,
                     const std::function<void(double)>& timed);
  // Kernels launched from now on start after `e` (a copy's event); the host
  // goes on. Nothing to do where copies are made at once.
  virtual void stream_wait(Event) {}
  bool comm_pending() const { return progress_ && progress_->pending(); }
  void progress() {
    if (progress_) progress_->progress();
  }

  DeviceStats stats;

 protected:
  // What end() adds for an outermost kernel of device time `seconds` (< 0:
  // not known yet).
  void count(const Kernel& k, double seconds) {
    ++stats.kernels;
    stats.class_launches[size_t(k.cls)] += k.launches;
    if (seconds >= 0) stats.class_s[size_t(k.cls)] += seconds;
  }
  virtual double begin() = 0;
  virtual double end(const Kernel& k, double t0) = 0;
  ProgressHook* progress_ = nullptr;
};

std::unique_ptr<Device> make_cpu_device();
// cuda (cuda/cuda_device.hpp): this rank's GPU; kernels on one stream.
// Takes this rank's GPU (local rank i of its node, GPU i); false with `why`
// where it has none. Every rank of `world` calls it.
bool select_cuda_gpu(MPI_Comm world, std::string* why);
// The cuda device on the selected GPU, before any of the engine's arrays.
// `profile`: every kernel between two events, its time added to its class
// (a launch-bound step runs slower so); else events only where waited on.
std::unique_ptr<Device> make_cuda_device(bool profile = false);
// The selected GPU's best n×n×n GEMM rate in FLOP/s for `dtype` (fp64, fp32
// or bf16), in the engine's math mode (fp32 without TF32, bf16 with fp32
// accumulation): the ceiling `engine --bench` holds a run's GEMMs against
// (cuda/cuda_device.cpp; device memory of its own).
double cuda_gemm_peak(int n, const std::string& dtype);
// `fp64`: GEMMs at the pace's fp64 rate.
std::unique_ptr<Device> make_paced_device(const DevicePace& pace, bool fp64);

}  // namespace ff::engine
