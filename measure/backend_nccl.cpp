// The NCCL backend: device buffers, one GPU per local rank, one NCCL
// communicator and stream per group. Built only where CUDA and NCCL are found;
// uses host APIs only, so no nvcc is needed (MODEL.md §7).
#include <cstring>
#include <vector>

#include "engine/runtime/cuda_check.hpp"
#include "engine/runtime/gpu.hpp"
#include "measure/backend.hpp"

namespace ff::measure {

namespace {

struct NcclGroup : Group {
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
  ~NcclGroup() override {
    for (auto e : events) cudaEventDestroy(e);
    if (nccl) ncclCommDestroy(nccl);
    if (stream) cudaStreamDestroy(stream);
  }
};

ncclDataType_t kFloat = ncclFloat32;

class NcclBackend : public Backend {
 public:
  std::string name() const override { return "nccl"; }

  std::unique_ptr<Group> make_group(MPI_Comm comm) override {
    auto g = std::make_unique<NcclGroup>();
    g->attach(comm);
    g->nccl = cuda::nccl_comm_of(comm);
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    return g;
  }

  float* alloc(size_t count) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, count * sizeof(float) + 256));
    CUDA_CHECK(cudaMemset(p, 0, count * sizeof(float)));
    return static_cast<float*>(p);
  }
  void release(float* buf) override { CUDA_CHECK(cudaFree(buf)); }
  void upload(float* dst, const float* src, size_t count) override {
    CUDA_CHECK(cudaMemcpy(dst, src, count * sizeof(float), cudaMemcpyHostToDevice));
  }
  void download(float* dst, const float* src, size_t count) override {
    CUDA_CHECK(cudaMemcpy(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost));
  }

  bool has_nonblocking() const override { return false; }
  void run(Coll op, Group& group, const float* send, float* recv, size_t count, bool) override {
    auto& g = static_cast<NcclGroup&>(group);
    switch (op) {
      case Coll::AllReduce: NCCL_CHECK(ncclAllReduce(send, recv, count, kFloat, ncclSum, g.nccl, g.stream)); break;
      case Coll::AllGather: NCCL_CHECK(ncclAllGather(send, recv, count, kFloat, g.nccl, g.stream)); break;
      case Coll::ReduceScatter:
        NCCL_CHECK(ncclReduceScatter(send, recv, count, kFloat, ncclSum, g.nccl, g.stream));
        break;
    }
  }
  void send_recv(Group& group, const float* send, float* recv, size_t count) override {
    // One group: both directions in flight at once, as nccl-tests' sendrecv.
    auto& g = static_cast<NcclGroup&>(group);
    int peer = 1 - g.rank;
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, count, kFloat, peer, g.nccl, g.stream));
    NCCL_CHECK(ncclRecv(recv, count, kFloat, peer, g.nccl, g.stream));
    NCCL_CHECK(ncclGroupEnd());
  }

  // Pinned, as a trainer stages offloaded state: pageable memory would be
  // copied through a bounce buffer at a fraction of the link.
  float* alloc_host(size_t count) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, count * sizeof(float) + 256));
    std::memset(p, 0, count * sizeof(float));
    return static_cast<float*>(p);
  }
  void release_host(float* buf) override { CUDA_CHECK(cudaFreeHost(buf)); }
  void copy_host(Group& group, bool to_device, float* host, float* device, size_t count) override {
    auto& g = static_cast<NcclGroup&>(group);
    if (to_device)
      CUDA_CHECK(cudaMemcpyAsync(device, host, count * sizeof(float), cudaMemcpyHostToDevice, g.stream));
    else
      CUDA_CHECK(cudaMemcpyAsync(host, device, count * sizeof(float), cudaMemcpyDeviceToHost, g.stream));
  }
  std::string host_link_kind() const override { return "cuda-pinned"; }

  void sync(Group& group) override { CUDA_CHECK(cudaStreamSynchronize(static_cast<NcclGroup&>(group).stream)); }

  // Events between the enqueued operations time each one on the GPU.
  void stamp(Group& group, int i) override {
    auto& g = static_cast<NcclGroup&>(group);
    while (g.events.size() <= size_t(i)) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      g.events.push_back(e);
    }
    CUDA_CHECK(cudaEventRecord(g.events[size_t(i)], g.stream));
  }
  std::vector<double> elapsed(Group& group, int n) override {
    auto& g = static_cast<NcclGroup&>(group);
    std::vector<double> gaps;
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, g.events[size_t(i)], g.events[size_t(i) + 1]));
      gaps.push_back(ms * 1e-3);
    }
    return gaps;
  }
};

}  // namespace

bool nccl_built() { return true; }

std::unique_ptr<Backend> make_nccl_backend(MPI_Comm node_comm, std::string* why) {
  if (!cuda::select_local_gpu(node_comm, why)) {
    *why = "--backend nccl: " + *why + (why->find("no usable GPU") == 0 ? "; use --backend mpi" : "");
    return nullptr;
  }
  return std::make_unique<NcclBackend>();
}

nlohmann::json cuda_versions() { return cuda::versions(); }
double gpu_memory_bytes() { return cuda::device_memory_bytes(); }

}  // namespace ff::measure
