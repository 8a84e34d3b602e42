// The matmul kernel: [..., n, k] x [..., k, m] with broadcast batch dims. f32/bf16/f16 go
// through oneDNN's matmul primitive when it is available and implements the dtype on this
// CPU; everything else (and the fallback) is a plain loop over output rows.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/kernels/loops.h"
#include "runtime/kernels/onednn.h"
#include "runtime/ops/op.h"
#include "runtime/parallel.h"

namespace kiln::ops {

namespace {

/// Element strides of the last two dims of t.
struct MatStrides {
  int64_t rows, cols;
};
MatStrides mat_strides(const Tensor& t) { return {t.stride(-2), t.stride(-1)}; }

/// Integers accumulate in u64 (wrapping like two's complement in their own width once
/// truncated); floats in their compute type (f32 for f16/bf16).
template <typename T>
using acc_t = std::conditional_t<std::is_integral_v<T>, uint64_t, compute_t<T>>;

template <typename T> acc_t<T> to_acc(T v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  else
    return static_cast<acc_t<T>>(v);
}

/// The loop path: one output row at a time, ikj order so the inner loop runs along b's row.
template <typename T>
void matmul_loop(const Tensor& a, const Tensor& b, Tensor& c, const std::vector<int64_t>& a_off,
                 const std::vector<int64_t>& b_off) {
  using Acc = acc_t<T>;
  const int64_t n = c.size(-2), m = c.size(-1), k = a.size(-1);
  const int64_t nb = static_cast<int64_t>(a_off.size());
  const MatStrides as = mat_strides(a), bs = mat_strides(b);
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* pc = static_cast<T*>(c.raw_data());
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, k * m));
  parallel_for(0, nb * n, grain, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(static_cast<size_t>(m));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bi = r / n, i = r % n;
      const T* arow = pa + a_off[static_cast<size_t>(bi)] + i * as.rows;
      const T* bmat = pb + b_off[static_cast<size_t>(bi)];
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t p = 0; p < k; ++p) {
        const Acc av = to_acc(arow[p * as.cols]);
        const T* brow = bmat + p * bs.rows;
        if (bs.cols == 1) {
          for (int64_t j = 0; j < m; ++j)
            acc[static_cast<size_t>(j)] += av * to_acc(brow[j]);
        } else {
          for (int64_t j = 0; j < m; ++j)
            acc[static_cast<size_t>(j)] += av * to_acc(brow[j * bs.cols]);
        }
      }
      T* crow = pc + r * m;
      for (int64_t j = 0; j < m; ++j)
        crow[j] = static_cast<T>(acc[static_cast<size_t>(j)]);
    }
  });
}

#ifdef KILN_HAVE_ONEDNN

/// How a rows x cols matrix with element strides (rs, cs) is handed to oneDNN: row-major
/// (ld = row stride) or column-major (ld = column stride). Anything else is packed first.
struct GemmLayout {
  bool ok = false;
  bool col_major = false;
  int64_t ld = 0;
};

GemmLayout gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  // A dim of size 1 may carry any stride; normalise it so oneDNN sees a valid plain layout.
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols)))
    return {true, false, rows == 1 ? std::max<int64_t>(1, cols) : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows)))
    return {true, true, cols == 1 ? std::max<int64_t>(1, rows) : cs};
  return {};
}

dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, dnnl::memory::data_type dt,
                               const GemmLayout& l) {
  return dnnl::memory::desc(
      {rows, cols}, dt, l.col_major ? dnnl::memory::dims{1, l.ld} : dnnl::memory::dims{l.ld, 1});
}

/// Copies a strided matrix into a dense row-major buffer.
template <typename T>
void pack(const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, std::vector<T>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[static_cast<size_t>(i * cols + j)] = src[i * rs + j * cs];
}

/// Equal batch dims on both sides (attention's [batch, heads, time, head_dim] products): one
/// oneDNN matmul over all of them, with the operands' own strides. False when the shapes
/// broadcast or oneDNN refuses the layout (the caller then goes matrix by matrix).
template <typename T>
bool matmul_onednn_batched(const Tensor& a, const Tensor& b, Tensor& c,
                           dnnl::memory::data_type dt) {
  const int64_t rank = c.dim();
  if (rank < 3 || a.dim() != rank || b.dim() != rank || !c.is_contiguous()) return false;
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (a.size(d) != c.size(d) || b.size(d) != c.size(d) || a.stride(d) == 0 || b.stride(d) == 0)
      return false;
  auto dims_of = [](const Tensor& t) {
    return dnnl::memory::dims(t.sizes().begin(), t.sizes().end());
  };
  const dnnl::memory::dims ad = dims_of(a), bd = dims_of(b), cd = dims_of(c);
  const dnnl::memory::dims as = kernels::onednn_strides(a), bs = kernels::onednn_strides(b),
                           cs = kernels::onednn_strides(c);
  std::vector<int64_t> key{3, static_cast<int64_t>(dt), rank};
  for (const auto* v : {&ad, &bd, &as, &bs})
    key.insert(key.end(), v->begin(), v->end());
  auto prim = kernels::cached_primitive(key, [&] {
    dnnl::memory::desc amd(ad, dt, as), bmd(bd, dt, bs), cmd(cd, dt, cs);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, cmd), kernels::onednn_attr(),
                                    kernels::onednn_engine());
    return kernels::CachedPrimitive{dnnl::matmul(pd), pd.scratchpad_desc().get_size(), {}};
  });
  if (!prim) return false;
  const auto& eng = kernels::onednn_engine();
  kernels::onednn_execute(
      "matmul", *prim,
      {{DNNL_ARG_SRC, dnnl::memory(dnnl::memory::desc(ad, dt, as), eng, a.raw_data())},
       {DNNL_ARG_WEIGHTS, dnnl::memory(dnnl::memory::desc(bd, dt, bs), eng, b.raw_data())},
       {DNNL_ARG_DST, dnnl::memory(dnnl::memory::desc(cd, dt, cs), eng, c.raw_data())}});
  return true;
}

/// Runs every batch matrix through one cached 2-d oneDNN matmul (or all of them as one GEMM
/// when they share B and A's batches are contiguous rows); false when oneDNN has no
/// implementation for this dtype on this CPU (the caller then runs the loop).
template <typename T>
bool matmul_onednn(const Tensor& a, const Tensor& b, Tensor& c, const std::vector<int64_t>& a_off,
                   const std::vector<int64_t>& b_off, dnnl::memory::data_type dt) {
  const int64_t rows = c.size(-2), m = c.size(-1), k = a.size(-1);
  const int64_t batches = static_cast<int64_t>(a_off.size());
  const MatStrides as = mat_strides(a), bs = mat_strides(b);
  // One B for every batch and the A matrices one after another in row-major order (a linear
  // layer on [batch, time, features]): the batches are the rows of one GEMM.
  bool fold = batches > 1 && as.cols == 1 && as.rows >= k;
  for (int64_t bi = 1; fold && bi < batches; ++bi)
    fold = b_off[static_cast<size_t>(bi)] == b_off[0] &&
           a_off[static_cast<size_t>(bi)] == a_off[0] + bi * rows * as.rows;
  const int64_t n = fold ? rows * batches : rows;
  const int64_t nb = fold ? 1 : batches;
  const GemmLayout la0 = gemm_layout(n, k, as.rows, as.cols);
  const GemmLayout lb0 = gemm_layout(k, m, bs.rows, bs.cols);
  // Unusable layouts (both strides > 1, overlapping rows) are packed to row-major.
  const GemmLayout la = la0.ok ? la0 : GemmLayout{true, false, k};
  const GemmLayout lb = lb0.ok ? lb0 : GemmLayout{true, false, m};
  const std::vector<int64_t> key{
      0, static_cast<int64_t>(dt), n, k, m, la.col_major, la.ld, lb.col_major, lb.ld};
  auto prim = kernels::cached_primitive(key, [&] {
    auto ad = matrix_desc(n, k, dt, la), bd = matrix_desc(k, m, dt, lb);
    auto cd = matrix_desc(n, m, dt, GemmLayout{true, false, m});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), kernels::onednn_attr(),
                                    kernels::onednn_engine());
    return kernels::CachedPrimitive{dnnl::matmul(pd), pd.scratchpad_desc().get_size(), {}};
  });
  if (!prim) return false;
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* pc = static_cast<T*>(c.raw_data());
  auto ad = matrix_desc(n, k, dt, la), bd = matrix_desc(k, m, dt, lb);
  auto cd = matrix_desc(n, m, dt, GemmLayout{true, false, m});
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<T> a_buf, b_buf;
    for (int64_t bi = begin; bi < end; ++bi) {
      const T* am = pa + a_off[static_cast<size_t>(bi)];
      const T* bm = pb + b_off[static_cast<size_t>(bi)];
      if (!la0.ok) {
        pack(am, n, k, as.rows, as.cols, a_buf);
        am = a_buf.data();
      }
      if (!lb0.ok) {
        pack(bm, k, m, bs.rows, bs.cols, b_buf);
        bm = b_buf.data();
      }
      const auto& eng = kernels::onednn_engine();
      kernels::onednn_execute("matmul", *prim,
                              {{DNNL_ARG_SRC, dnnl::memory(ad, eng, const_cast<T*>(am))},
                               {DNNL_ARG_WEIGHTS, dnnl::memory(bd, eng, const_cast<T*>(bm))},
                               {DNNL_ARG_DST, dnnl::memory(cd, eng, pc + bi * n * m)}});
    }
  };
  // Large matrices use oneDNN's own threads one after another; many small ones are spread
  // over the pool (oneDNN then runs each on the calling thread).
  constexpr int64_t kBigMatmul = int64_t{1} << 18;
  if (n * k * m >= kBigMatmul)
    run(0, nb);
  else
    parallel_for(0, nb, std::max<int64_t>(1, kBigMatmul / (n * k * m)), run);
  return true;
}

#endif

} // namespace

void kernel_matmul(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  Tensor& c = out[0];
  if (c.numel() == 0) return;
  const Shape batch(c.sizes().begin(), c.sizes().end() - 2);
  const std::vector<int64_t> a_off = kernels::batch_offsets(a, batch);
  const std::vector<int64_t> b_off = kernels::batch_offsets(b, batch);
  visit_dtype(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      KILN_ASSERT(false, "matmul: bool reached the kernel");
    } else {
      if (a.size(-1) == 0) { // an empty sum: zeros, without asking the library
        std::fill_n(static_cast<T*>(c.raw_data()), c.numel(), T(0));
        return;
      }
#ifdef KILN_HAVE_ONEDNN
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16> ||
                    std::is_same_v<T, Half>) {
        using dt = dnnl::memory::data_type;
        const dt d = std::is_same_v<T, float>      ? dt::f32
                     : std::is_same_v<T, BFloat16> ? dt::bf16
                                                   : dt::f16;
        if (kernels::onednn_enabled() &&
            (matmul_onednn_batched<T>(a, b, c, d) || matmul_onednn<T>(a, b, c, a_off, b_off, d)))
          return;
      }
#endif
      matmul_loop<T>(a, b, c, a_off, b_off);
    }
  });
}

} // namespace kiln::ops
