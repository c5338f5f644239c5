#include "engine/runtime/cublas_api.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "engine/runtime/fatal.hpp"

namespace ff::cuda {

namespace {

// GemmEx and GemmStridedBatchedEx (cublas_api.hpp) are the header's C
// declarations; unevaluated, so nothing links to cuBLAS.
static_assert(sizeof(static_cast<GemmEx>(&cublasGemmEx)) > 0);
static_assert(sizeof(static_cast<GemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)) > 0);

Cublas open_cublas() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string why = dlerror();
    const std::string path = std::string(FF_CUDA_HOME) + "/lib64/" + name;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) FF_FATAL("cannot open cuBLAS: " + why + "; " + dlerror());
  }
  auto entry = [lib](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (!fn) FF_FATAL(std::string("cuBLAS has no ") + symbol);
  };
  Cublas c;
  entry(c.get_property, "cublasGetProperty");
  entry(c.create, "cublasCreate_v2");
  entry(c.destroy, "cublasDestroy_v2");
  entry(c.set_stream, "cublasSetStream_v2");
  entry(c.set_math_mode, "cublasSetMathMode");
  entry(c.gemm_ex, "cublasGemmEx");
  entry(c.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  return c;
}

}  // namespace

const Cublas& cublas() {
  static const Cublas c = open_cublas();  // never closed: handles live to exit
  return c;
}

}  // namespace ff::cuda
