#include "engine/runtime/cublaslt_gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <tuple>

#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cuda_check.hpp"

namespace ff::cuda {

namespace {

// Enough for the split-K and stream-K kernels the heuristic picks for the
// engine's shapes; allocated once.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// The largest power of two up to 16 dividing the address: the heuristic
// chooses kernels by the operands' alignment, so a plan holds only for it.
int alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return a % 16 == 0 ? 16 : int(a & (~a + 1));
}

template <typename V>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v) {
  CUBLAS_CHECK(cublaslt().desc_set(d, attr, &v, sizeof v));
}

}  // namespace

// A plan per case: the descriptors and the algorithm, or none (ok false:
// the caller's separate kernels run it).
struct EpilogueGemm::Impl {
  using Key = std::tuple<bool, bool, bool, bool, int, int, int, int, int, int>;
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  void* workspace = nullptr;
  std::map<Key, Plan> plans;

  Impl() {
    const CublasLt& lt = cublaslt();
    CUBLAS_CHECK(lt.create(&h));
    CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    CUBLAS_CHECK(lt.preference_create(&preference));
    const uint64_t bytes = kWorkspaceBytes;
    CUBLAS_CHECK(lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes));
  }
  ~Impl() {
    const CublasLt& lt = cublaslt();
    for (auto& [key, p] : plans) {
      if (p.desc) lt.desc_destroy(p.desc);
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c})
        if (l) lt.layout_destroy(l);
    }
    lt.preference_destroy(preference);
    cudaFree(workspace);
    lt.destroy(h);
  }

  // Row-major C[m, n] = op(A)·op(B) as column-major Cᵀ[n, m] = op(B)ᵀ·op(A)ᵀ
  // (cublas_gemm.cpp's gemm_ex): B is cuBLASLt's first operand, A its
  // second, each with its own transpose and leading dimension.
  Plan make(bool fp32, bool ta, bool tb, int m, int n, int k, int lda, int ldb, const void* bias, void* pre) {
    const CublasLt& lt = cublaslt();
    const cudaDataType_t t = fp32 ? CUDA_R_32F : CUDA_R_16BF;
    Plan p;
    CUBLAS_CHECK(lt.desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, tb ? CUBLAS_OP_T : CUBLAS_OP_N);
    set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, ta ? CUBLAS_OP_T : CUBLAS_OP_N);
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, pre ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS);
    // The bias and GELU's input in D's type (the defaults); the input's
    // rows are D's, n apart.
    set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    if (pre) {
      set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre);
      set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(n));
    }
    CUBLAS_CHECK(lt.layout_create(&p.a, t, tb ? k : n, tb ? n : k, ldb));
    CUBLAS_CHECK(lt.layout_create(&p.b, t, ta ? m : k, ta ? k : m, lda));
    CUBLAS_CHECK(lt.layout_create(&p.c, t, n, m, n));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    const cublasStatus_t s = lt.heuristic(h, p.desc, p.a, p.b, p.c, p.c, preference, 1, &r, &found);
    p.ok = s == CUBLAS_STATUS_SUCCESS && found > 0 && r.state == CUBLAS_STATUS_SUCCESS;
    if (p.ok) p.algo = r.algo;
    return p;
  }
};

EpilogueGemm::EpilogueGemm(cudaStream_t stream) : stream_(stream) {}

// The workspace is freed once the stream has run every GEMM that uses it.
EpilogueGemm::~EpilogueGemm() {
  if (impl_) cudaStreamSynchronize(stream_);
}

bool EpilogueGemm::run(bool fp32, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
                       const void* B, int ldb, const void* bias, void* pre, void* C) {
  if (m == 0 || n == 0 || k == 0 || (pre && n % 8)) return false;
  if (!impl_) impl_ = std::make_unique<Impl>();
  int align = 16;
  for (const void* p : {A, B, bias, static_cast<const void*>(pre), static_cast<const void*>(C)})
    align = std::min(align, alignment(p));
  const Impl::Key key{fp32, ta, tb, pre != nullptr, m, n, k, lda, ldb, align};
  auto it = impl_->plans.find(key);
  if (it == impl_->plans.end()) it = impl_->plans.emplace(key, impl_->make(fp32, ta, tb, m, n, k, lda, ldb, bias, pre)).first;
  Impl::Plan& p = it->second;
  if (!p.ok) return false;
  // The same case for another layer: its bias and GELU input. cuBLASLt
  // reads the descriptor when the GEMM is enqueued, not when it runs.
  set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (pre) set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre);
  const float beta = 0;
  CUBLAS_CHECK(cublaslt().matmul(impl_->h, p.desc, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo,
                                 impl_->workspace, kWorkspaceBytes, stream_));
  return true;
}

}  // namespace ff::cuda
