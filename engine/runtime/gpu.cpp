#include "engine/runtime/gpu.hpp"

#include "engine/runtime/check.hpp"
#include "engine/runtime/cuda_check.hpp"

namespace ff::cuda {

bool select_local_gpu(MPI_Comm node_comm, std::string* why) {
  // Without a GPU the runtime reports a driver error rather than zero
  // devices (MODEL.md §7): any error means no GPU here.
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  int local = 0, local_size = 1;
  MPI_CHECK(MPI_Comm_rank(node_comm, &local));
  MPI_CHECK(MPI_Comm_size(node_comm, &local_size));
  if (err != cudaSuccess || devices == 0) {
    *why = std::string("no usable GPU on this node (") + (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
           ")";
    return false;
  }
  if (local_size > devices) {
    *why = std::to_string(local_size) + " ranks share a node with " + std::to_string(devices) +
           " GPUs; launch one rank per GPU";
    return false;
  }
  CUDA_CHECK(cudaSetDevice(local));
  return true;
}

ncclComm_t nccl_comm_of(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  ncclComm_t nccl = nullptr;
  NCCL_CHECK(ncclCommInitRank(&nccl, size, id, rank));
  return nccl;
}

nlohmann::json versions() {
  nlohmann::json v = nlohmann::json::object();
  int nccl = 0, runtime = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // NCCL_VERSION(X,Y,Z): X·10000 + Y·100 + Z since 2.9, X·1000 + Y·100 + Z before.
    int major = nccl >= 10000 ? nccl / 10000 : nccl / 1000, minor = nccl >= 10000 ? nccl / 100 % 100 : nccl / 100 % 10;
    v["nccl"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(nccl % 100);
  }
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    v["cuda"] = std::to_string(runtime / 1000) + "." + std::to_string(runtime / 10 % 100);
  return v;
}

double device_memory_bytes() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return double(total);
}

}  // namespace ff::cuda
