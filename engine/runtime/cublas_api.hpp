#pragma once
// cuBLAS, opened when first used rather than linked. Linking it costs every
// process that starts about 0.3 s of CPU in cuBLASLt's static initialisers,
// GPU or not: every cpu and paced engine run, every measure run, each rank
// of each of the test suite's mpirun launches. Only the cuda device and
// measure's GEMM sweep call it, through these entry points. cuBLASLt (the
// GEMMs with epilogues) likewise, on the cuda device's first bf16 or fp32 one.
#include <cublasLt.h>
#include <cublas_v2.h>

namespace ff::cuda {

// The C entry points: C++ overloads them with cudaDataType compute types.
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);

struct Cublas {
  decltype(&cublasGetProperty) get_property;
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  GemmEx gemm_ex;
  GemmStridedBatchedEx gemm_strided_batched_ex;
};

// The library of the toolkit this was built with (libcublas.so.<major>, as
// the loader finds it: LD_LIBRARY_PATH, this binary's run path, then the
// toolkit's lib64), opened on the first call. Fatal, with the loader's
// reason, where it cannot be opened or lacks an entry point.
const Cublas& cublas();

struct CublasLt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
};

// libcublasLt.so.<major>, found and opened as cublas() opens cuBLAS.
const CublasLt& cublaslt();

}  // namespace ff::cuda
