// A build without CUDA/NCCL: the GPU paths say so instead of existing.
#include "measure/backend.hpp"
#include "measure/gemm.hpp"
#include "measure/stream.hpp"

namespace ff::measure {

bool nccl_built() { return false; }

std::unique_ptr<Backend> make_nccl_backend(MPI_Comm, std::string* why) {
  *why = "--backend nccl: this measure was built without CUDA/NCCL (reconfigure with -Dcuda=enabled on a machine "
         "with the CUDA toolkit and NCCL); use --backend mpi";
  return nullptr;
}

double measure_device_copy(size_t, int) { return 0; }
nlohmann::json cuda_versions() { return nlohmann::json::object(); }
double gpu_memory_bytes() { return 0; }

std::vector<ff::GemmSample> measure_gemm_cuda(const std::vector<GemmShape>&, int, const GemmProgress&) { return {}; }

}  // namespace ff::measure
