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

// The toolkit's library `stem`.so.<major> (cuBLAS and cuBLASLt share the
// major version) where the loader finds it, else in the toolkit's lib64.
void* open_library(const char* stem, const char* what) {
  const std::string name = std::string(stem) + ".so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string why = dlerror();
    const std::string path = std::string(FF_CUDA_HOME) + "/lib64/" + name;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) FF_FATAL(std::string("cannot open ") + what + ": " + why + "; " + dlerror());
  }
  return lib;
}

// Sets each entry point `fn` to `symbol` of `lib`; fatal where it is missing.
auto entry_points(void* lib, const char* what) {
  return [lib, what](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (!fn) FF_FATAL(std::string(what) + " has no " + symbol);
  };
}

Cublas open_cublas() {
  auto entry = entry_points(open_library("libcublas", "cuBLAS"), "cuBLAS");
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

CublasLt open_cublaslt() {
  auto entry = entry_points(open_library("libcublasLt", "cuBLASLt"), "cuBLASLt");
  CublasLt c;
  entry(c.create, "cublasLtCreate");
  entry(c.destroy, "cublasLtDestroy");
  entry(c.desc_create, "cublasLtMatmulDescCreate");
  entry(c.desc_destroy, "cublasLtMatmulDescDestroy");
  entry(c.desc_set, "cublasLtMatmulDescSetAttribute");
  entry(c.layout_create, "cublasLtMatrixLayoutCreate");
  entry(c.layout_destroy, "cublasLtMatrixLayoutDestroy");
  entry(c.preference_create, "cublasLtMatmulPreferenceCreate");
  entry(c.preference_destroy, "cublasLtMatmulPreferenceDestroy");
  entry(c.preference_set, "cublasLtMatmulPreferenceSetAttribute");
  entry(c.heuristic, "cublasLtMatmulAlgoGetHeuristic");
  entry(c.matmul, "cublasLtMatmul");
  return c;
}

}  // namespace

const Cublas& cublas() {
  static const Cublas c = open_cublas();  // never closed: handles live to exit
  return c;
}

const CublasLt& cublaslt() {
  static const CublasLt c = open_cublaslt();
  return c;
}

}  // namespace ff::cuda
