// cuBLASLt matmuls, opened with dlopen at first use.
#include "runtime/cuda/blas.h"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "runtime/cuda/device.h"
#include "runtime/error.h"
#include "runtime/ops.h"

#if KILN_HAVE_CUDA
#include <cublasLt.h>
#endif

namespace kiln::cuda {

#if KILN_HAVE_CUDA
namespace {

/// cuBLASLt's entry points kiln uses.
struct Lt {
  void* handle = nullptr;
  std::string reason;
  cublasLtHandle_t lt = nullptr;
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtGetStatusName) status_name = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  Tensor workspace; // on cuda:0, kept for every call

  template <typename F> bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    if (f == nullptr) reason = std::string("libcublasLt.so.13 has no ") + name;
    return f != nullptr;
  }

  Lt() {
    if (!is_available() || emulated()) {
      reason = is_available() ? "the emulated device has no cuBLASLt" : unavailable_reason();
      return;
    }
    handle = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      reason = std::string("libcublasLt.so.13 can't be loaded (") + (why ? why : "not found") + ")";
      return;
    }
    if (!find(create, "cublasLtCreate") || !find(status_name, "cublasLtGetStatusName") ||
        !find(desc_create, "cublasLtMatmulDescCreate") ||
        !find(desc_destroy, "cublasLtMatmulDescDestroy") ||
        !find(desc_set, "cublasLtMatmulDescSetAttribute") ||
        !find(layout_create, "cublasLtMatrixLayoutCreate") ||
        !find(layout_destroy, "cublasLtMatrixLayoutDestroy") ||
        !find(layout_set, "cublasLtMatrixLayoutSetAttribute") ||
        !find(pref_create, "cublasLtMatmulPreferenceCreate") ||
        !find(pref_destroy, "cublasLtMatmulPreferenceDestroy") ||
        !find(pref_set, "cublasLtMatmulPreferenceSetAttribute") ||
        !find(heuristic, "cublasLtMatmulAlgoGetHeuristic") || !find(matmul, "cublasLtMatmul"))
      return;
    if (cublasStatus_t s = create(&lt); s != CUBLAS_STATUS_SUCCESS) {
      reason = std::string("cublasLtCreate: ") + status_name(s);
      lt = nullptr;
      return;
    }
    workspace = empty({kWorkspaceBytes}, TensorOptions(DType::u8).device(Device::cuda(0)));
  }
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

  void check(cublasStatus_t s, const std::string& what) const {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw Error::without_location("cuBLASLt: " + what + ": " + status_name(s));
  }
};

Lt& lt() {
  static Lt* l = new Lt(); // never destroyed: its handle outlives static tensors
  return *l;
}

/// One operand as cuBLASLt sees it (column-major): rows x cols with leading dimension ld,
/// transposed or not, over `batch` matrices `stride` elements apart.
struct Matrix {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  bool transposed = false;
  int64_t batch = 1, stride = 0;
};

/// The column-major form of row-major t^T ([..., R, C] -> C x R): kiln's row-major [R, C] is
/// cuBLAS's column-major C x R with ld = its row stride, and a column-major one (a transposed
/// view) is R x C, used transposed. Nothing for other strides or a batch that is not evenly
/// strided.
std::optional<Matrix> transposed_view(const Tensor& t) {
  const int64_t r = t.size(-2), c = t.size(-1), sr = t.stride(-2), sc = t.stride(-1);
  Matrix m;
  if (sc == 1 && sr >= std::max<int64_t>(c, 1)) {
    m = {static_cast<uint64_t>(c), static_cast<uint64_t>(r), sr, false, 1, 0};
  } else if (sr == 1 && sc >= std::max<int64_t>(r, 1)) {
    m = {static_cast<uint64_t>(r), static_cast<uint64_t>(c), sc, true, 1, 0};
  } else {
    return std::nullopt;
  }
  // Batch dims: one stride over all of them (each dim nests in the next outer one).
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (m.batch == 1)
      m.stride = t.stride(d);
    else if (t.stride(d) != m.stride * m.batch)
      return std::nullopt;
    m.batch *= t.size(d);
  }
  return m;
}

cudaDataType_t data_type(DType t) {
  return t == DType::f16 ? CUDA_R_16F : t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic picks
/// kernels for the alignment it is told.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0)
    al /= 2;
  return al;
}

/// RAII for the descriptors of one call.
struct Descriptors {
  Lt& l;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) l.pref_destroy(pref);
    for (cublasLtMatrixLayout_t x : {a, b, d})
      if (x) l.layout_destroy(x);
    if (op) l.desc_destroy(op);
  }
};

} // namespace
#endif

bool blas_available() {
#if KILN_HAVE_CUDA
  return lt().lt != nullptr;
#else
  return false;
#endif
}

std::string blas_unavailable_reason() {
#if KILN_HAVE_CUDA
  return blas_available() ? std::string() : lt().reason;
#else
  return "kiln was built without CUDA";
#endif
}

std::optional<Tensor> blas_matmul(const Tensor& a, const Tensor& b,
                                  std::span<const PostOp> post_ops,
                                  std::span<const Tensor> operands, size_t* fused) {
  *fused = 0;
#if KILN_HAVE_CUDA
  const DType t = a.dtype();
  if (!blas_available() || !a.device().is_cuda() || b.device() != a.device() ||
      a.device().index != 0 || b.dtype() != t ||
      (t != DType::f32 && t != DType::f16 && t != DType::bf16) || a.dim() < 2 || b.dim() < 2 ||
      a.size(-1) != b.size(-2))
    return std::nullopt;
  // Batches: b's is a's, or b is one matrix (a's batch then folds into its rows when a's rows
  // are evenly strided across it).
  Shape batch(a.sizes().begin(), a.sizes().end() - 2);
  Tensor a2 = a;
  if (b.dim() == 2 && a.dim() > 2) {
    if (!a.is_contiguous()) return std::nullopt;
    a2 = a.reshape({-1, a.size(-1)});
  } else if (Shape(b.sizes().begin(), b.sizes().end() - 2) != batch) {
    return std::nullopt;
  }
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b.size(-1);
  if (m == 0 || n == 0 || k == 0) return std::nullopt; // the eager kernels know empties
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's A is b^T, its B is a^T.
  std::optional<Matrix> bt = transposed_view(b), at = transposed_view(a2);
  if (!bt || !at || (bt->batch > 1 && bt->batch != at->batch)) return std::nullopt;
  Shape out_sizes = batch;
  out_sizes.push_back(a.size(-2));
  out_sizes.push_back(n);
  Tensor out = empty(out_sizes, TensorOptions(t).device(a.device()));

  // The epilogue: a scale, then a bias along n, then relu or tanh-gelu.
  float alpha = 1.0f;
  const float beta = 0.0f;
  size_t i = 0;
  if (i < post_ops.size() && post_ops[i].kind == PostOp::Kind::binary &&
      post_ops[i].op == Op::mul && post_ops[i].is_scalar) {
    alpha = static_cast<float>(post_ops[i].scalar);
    ++i;
  }
  const Tensor* bias = nullptr;
  if (i < post_ops.size() && post_ops[i].kind == PostOp::Kind::binary &&
      post_ops[i].op == Op::add && !post_ops[i].is_scalar) {
    const Tensor& c = operands[post_ops[i].operand];
    bool vector = c.device() == a.device() && c.dtype() == t && c.numel() == n && c.dim() >= 1 &&
                  c.size(-1) == n && c.stride(-1) == 1;
    if (vector) {
      bias = &c;
      ++i;
    }
  }
  cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (i < post_ops.size() && post_ops[i].kind == PostOp::Kind::relu) {
    epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    ++i;
  } else if (i < post_ops.size() && post_ops[i].kind == PostOp::Kind::gelu_tanh) {
    epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    ++i;
  }

  Lt& l = lt();
  const std::string what = "matmul of " + shape_str(a.sizes()) + " and " + shape_str(b.sizes()) +
                           " (" + std::string(dtype_name(t)) + ")";
  Descriptors ds{l};
  l.check(l.desc_create(&ds.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  const cublasOperation_t ta = bt->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = at->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  l.check(l.desc_set(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), what);
  l.check(l.desc_set(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), what);
  l.check(l.desc_set(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), what);
  if (bias) {
    const void* p = bias->raw_data();
    l.check(l.desc_set(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p), what);
  }
  const cudaDataType_t dt = data_type(t);
  auto layout = [&](cublasLtMatrixLayout_t* x, const Matrix& mx) {
    l.check(l.layout_create(x, dt, mx.rows, mx.cols, mx.ld), what);
    if (at->batch > 1) {
      const int32_t count = static_cast<int32_t>(at->batch);
      const int64_t stride = mx.batch > 1 ? mx.stride : 0;
      l.check(l.layout_set(*x, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), what);
      l.check(l.layout_set(*x, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
              what);
    }
  };
  layout(&ds.a, *bt);
  layout(&ds.b, *at);
  // D: column-major n x m per batch (row-major [m, n]), batches m * n apart.
  const Matrix d{static_cast<uint64_t>(n), static_cast<uint64_t>(m), n, false, at->batch, m * n};
  layout(&ds.d, d);
  l.check(l.pref_create(&ds.pref), what);
  const uint64_t ws = Lt::kWorkspaceBytes;
  l.check(l.pref_set(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), what);
  const uint32_t align_a = alignment(b.raw_data()), align_b = alignment(a2.raw_data()),
                 align_d = alignment(out.raw_data());
  l.check(l.pref_set(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a),
          what);
  l.check(l.pref_set(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b),
          what);
  l.check(l.pref_set(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d),
          what);
  l.check(l.pref_set(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d),
          what);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  l.check(l.heuristic(l.lt, ds.op, ds.a, ds.b, ds.d, ds.d, ds.pref, 1, &result, &found), what);
  if (found == 0) return std::nullopt; // no kernel for these layouts: the caller's way
  l.check(l.matmul(l.lt, ds.op, &alpha, b.raw_data(), ds.a, a2.raw_data(), ds.b, &beta,
                   out.raw_data(), ds.d, out.raw_data(), ds.d, &result.algo, l.workspace.raw_data(),
                   static_cast<size_t>(Lt::kWorkspaceBytes),
                   static_cast<cudaStream_t>(current_stream(0).handle())),
          what);
  *fused = i;
  return out;
#else
  (void)a, (void)b, (void)post_ops, (void)operands;
  return std::nullopt;
#endif
}

} // namespace kiln::cuda
