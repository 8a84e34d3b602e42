// Kernels of the reduction primitives: sum, prod, amax, amin over dims (the pairwise engine
// of reduce_loops.h), argmax/argmin along one dim, and cumsum.
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/convert.h"
#include "runtime/kernels/copy.h"
#include "runtime/kernels/reduce_loops.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/ops/reduce_dims.h"

namespace kiln::kernels {
namespace {

/// Accumulator of sum/prod: f32 for f32/f16/bf16 (rounded once at the end), f64 for f64,
/// i64 for integers and bool (wrapping, as PyTorch's int64 accumulation).
template <typename T>
using accumulate_t =
    std::conditional_t<is_floating_v<T>,
                       std::conditional_t<std::is_same_v<T, double>, double, float>, int64_t>;

/// Two's-complement wrapping arithmetic (signed overflow is undefined in C++).
inline int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

template <typename T_> struct SumOp {
  using T = T_;
  using Acc = accumulate_t<T>;
  // -0.0 is IEEE's additive identity (-0.0 + x == x for every x, +0.0 included).
  static Acc identity() { return std::is_integral_v<Acc> ? Acc(0) : Acc(-0.0); }
  static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return wrapping_add(a, b);
    else
      return a + b;
  }
  static Acc load(T v) { return static_cast<Acc>(static_cast<compute_t<T>>(v)); }
  static T store(Acc a) { return convert<T, Acc>(a); }
  static T empty_value() { return convert<T, Acc>(Acc(0)); }
};

template <typename T_> struct ProdOp {
  using T = T_;
  using Acc = accumulate_t<T>;
  static Acc identity() { return Acc(1); }
  static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return wrapping_mul(a, b);
    else
      return a * b;
  }
  static Acc load(T v) { return static_cast<Acc>(static_cast<compute_t<T>>(v)); }
  static T store(Acc a) { return convert<T, Acc>(a); }
  static T empty_value() { return convert<T, Acc>(Acc(1)); }
};

/// amax (IsMax) / amin: a NaN operand wins, so NaN propagates.
template <typename T_, bool IsMax> struct ExtremumOp {
  using T = T_;
  using Acc = compute_t<T>;
  static Acc identity() {
    if constexpr (std::is_floating_point_v<Acc>)
      return IsMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    else
      return IsMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
  }
  static Acc combine(Acc a, Acc b) {
    if (a != a) return a; // NOLINT(misc-redundant-expression): NaN test
    if (b != b) return b; // NOLINT(misc-redundant-expression)
    if constexpr (IsMax)
      return a < b ? b : a;
    else
      return b < a ? b : a;
  }
  static Acc load(T v) { return static_cast<Acc>(v); }
  static T store(Acc a) { return static_cast<T>(a); }
  static T empty_value() { return store(identity()); } // unreachable: inference refuses
};

/// Columns one vertical-reduction task owns.
constexpr int64_t kTile = 64;
/// Columns one argmax/argmin task scans per row: a wide run keeps the prefetcher streaming.
constexpr int64_t kArgTile = 512;

/// Each output reduces its own run of reduced positions (the reduced dims walked in place).
template <typename Op>
void reduce_rows(const typename Op::T* x, typename Op::T* out, const ReduceGeometry& g) {
  using T = typename Op::T;
  using Acc = typename Op::Acc;
  const int64_t n_out = g.out_numel, n_red = g.red_numel;
  auto combine = [](Acc a, Acc b) { return Op::combine(a, b); };
  auto reduce_one = [&](int64_t oi, bool parallel_tree) -> T {
    const T* base = x + offset_of(oi, g.kept_sizes, g.kept_strides);
    auto leaf = [&](int64_t b, int64_t e) -> Acc {
      std::array<Acc, kReduceLanes> lane;
      lane.fill(Op::identity());
      if (g.red_sizes.size() == 1 && g.red_strides[0] == 1) {
        const T* p = base + b;
        const int64_t n = e - b;
        int64_t i = 0;
        for (; i + kReduceLanes <= n; i += kReduceLanes)
          for (int j = 0; j < kReduceLanes; ++j)
            lane[j] = Op::combine(lane[j], Op::load(p[i + j]));
        for (; i < n; ++i)
          lane[i % kReduceLanes] = Op::combine(lane[i % kReduceLanes], Op::load(p[i]));
      } else {
        walk_positions(g.red_sizes, g.red_strides, b, e, [&](int64_t k, int64_t off) {
          lane[k % kReduceLanes] = Op::combine(lane[k % kReduceLanes], Op::load(base[off]));
        });
      }
      return fold_lanes(lane, combine);
    };
    Acc r = parallel_tree ? tree_reduce_parallel<Acc>(n_red, leaf, combine)
                          : tree_reduce<Acc>(0, n_red, leaf, combine);
    return Op::store(r);
  };
  if (n_out >= get_num_threads() || n_red <= 2 * kParallelGrain) {
    parallel_for(0, n_out, std::max<int64_t>(1, kParallelGrain / n_red), [&](int64_t b, int64_t e) {
      for (int64_t oi = b; oi < e; ++oi)
        out[oi] = reduce_one(oi, false);
    });
  } else {
    for (int64_t oi = 0; oi < n_out; ++oi)
      out[oi] = reduce_one(oi, true);
  }
}

/// The innermost kept dim is dense: reduce whole rows of kTile outputs at once (column
/// sums), visiting memory in order. Same tree and lanes as reduce_rows, so same results.
template <typename Op>
void reduce_columns(const typename Op::T* x, typename Op::T* out, const ReduceGeometry& g) {
  using T = typename Op::T;
  using Acc = typename Op::Acc;
  using V = std::array<Acc, kTile>;
  const int64_t n_red = g.red_numel;
  const int64_t cols = g.kept_sizes.back();
  IntList outer_sizes(g.kept_sizes.data(), g.kept_sizes.size() - 1);
  IntList outer_strides(g.kept_strides.data(), g.kept_strides.size() - 1);
  const int64_t tiles = (cols + kTile - 1) / kTile;
  const int64_t tasks = (g.out_numel / cols) * tiles;
  auto combine = [](Acc a, Acc b) { return Op::combine(a, b); };
  auto combine_v = [](const V& a, const V& b) {
    V r;
    for (int64_t c = 0; c < kTile; ++c)
      r[c] = Op::combine(a[c], b[c]);
    return r;
  };
  auto run_task = [&](int64_t task, bool parallel_tree) {
    const int64_t ob = task / tiles, c0 = (task % tiles) * kTile;
    const int64_t w = std::min(kTile, cols - c0);
    const T* base = x + offset_of(ob, outer_sizes, outer_strides) + c0;
    auto leaf = [&](int64_t b, int64_t e) -> V {
      std::array<V, kReduceLanes> lanes;
      for (V& l : lanes)
        l.fill(Op::identity());
      walk_positions(g.red_sizes, g.red_strides, b, e, [&](int64_t k, int64_t off) {
        V& l = lanes[k % kReduceLanes];
        const T* row = base + off;
        for (int64_t c = 0; c < w; ++c)
          l[c] = Op::combine(l[c], Op::load(row[c]));
      });
      V r;
      for (int64_t c = 0; c < kTile; ++c) {
        std::array<Acc, kReduceLanes> col;
        for (int j = 0; j < kReduceLanes; ++j)
          col[j] = lanes[j][c];
        r[c] = fold_lanes(col, combine);
      }
      return r;
    };
    V r = parallel_tree ? tree_reduce_parallel<V>(n_red, leaf, combine_v)
                        : tree_reduce<V>(0, n_red, leaf, combine_v);
    T* dst = out + ob * cols + c0;
    for (int64_t c = 0; c < w; ++c)
      dst[c] = Op::store(r[c]);
  };
  if (tasks >= get_num_threads() || n_red <= 2 * kParallelGrain) {
    parallel_for(0, tasks, std::max<int64_t>(1, kParallelGrain / (n_red * kTile)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t t = b; t < e; ++t)
                     run_task(t, false);
                 });
  } else {
    for (int64_t t = 0; t < tasks; ++t)
      run_task(t, true);
  }
}

template <typename Op>
void run_reduce(const Tensor& x, const Tensor& out, const std::vector<bool>& mask) {
  using T = typename Op::T;
  KILN_ASSERT(out.is_contiguous(), "reduction kernels write dense outputs");
  ReduceGeometry g = reduce_geometry(x.sizes(), x.strides(), mask);
  if (g.out_numel == 0) return;
  T* o = static_cast<T*>(out.raw_data());
  if (g.red_numel == 0) {
    std::fill(o, o + g.out_numel, Op::empty_value());
    return;
  }
  const T* xp = static_cast<const T*>(x.raw_data());
  bool columns = !g.kept_sizes.empty() && g.kept_strides.back() == 1 && g.red_strides.back() != 1;
  if (columns)
    reduce_columns<Op>(xp, o, g);
  else
    reduce_rows<Op>(xp, o, g);
}

/// x converted to dtype (PyTorch casts a reduction's input to the requested dtype first).
Tensor as_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor c = make_tensor(x.sizes(), dtype, x.device());
  copy_into(c, x);
  return c;
}

template <template <typename> class OpT>
void accumulating_kernel(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out,
                         const char* name) {
  const Tensor& o = out[0];
  check_reduce_size(name, in[0].sizes());
  Tensor x = as_dtype(in[0], o.dtype());
  auto mask = reduced_dims_mask(a.ints(0), x.dim(), name);
  visit_dtype(o.dtype(), [&](auto tag) { run_reduce<OpT<decltype(tag)>>(x, o, mask); });
}

template <bool IsMax>
void extremum_kernel(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out,
                     const char* name) {
  const Tensor& x = in[0];
  check_reduce_size(name, x.sizes());
  auto mask = reduced_dims_mask(a.ints(0), x.dim(), name);
  visit_dtype(x.dtype(),
              [&](auto tag) { run_reduce<ExtremumOp<decltype(tag), IsMax>>(x, out[0], mask); });
}

/// Index of the first extremum along dim; once a NaN is found it is the answer.
template <bool IsMax>
void arg_extremum_kernel(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out,
                         const char* name) {
  const Tensor& x = in[0];
  check_reduce_size(name, x.sizes());
  const int64_t rank = x.dim();
  const int64_t d = wrap_dim(a.i(0), rank, name);
  const int64_t n = rank == 0 ? 1 : x.size(d);
  const int64_t s = rank == 0 ? 0 : x.stride(d);
  Shape kept_sizes, kept_strides;
  for (int64_t k = 0; k < rank; ++k) {
    if (k == d) continue;
    kept_sizes.push_back(x.size(k));
    kept_strides.push_back(x.stride(k));
  }
  auto* o = static_cast<int64_t*>(out[0].raw_data());
  const int64_t n_out = out[0].numel();
  if (n_out == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xp = static_cast<const T*>(x.raw_data());
    auto better = [](C v, C best) {                   // v != v: a NaN, which wins
      return v != v || (IsMax ? v > best : v < best); // NOLINT(misc-redundant-expression)
    };
    const int64_t cols = kept_sizes.empty() ? 1 : kept_sizes.back();
    if (cols >= 2 && kept_strides.back() == 1 && s != 1) {
      // The kept last dim is dense: scan rows of kArgTile outputs together, in memory order.
      IntList outer_sizes(kept_sizes.data(), kept_sizes.size() - 1);
      IntList outer_strides(kept_strides.data(), kept_strides.size() - 1);
      const int64_t tiles = (cols + kArgTile - 1) / kArgTile;
      parallel_for(0, (n_out / cols) * tiles, std::max<int64_t>(1, kParallelGrain / (n * kArgTile)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t task = b; task < e; ++task) {
                       const int64_t ob = task / tiles, c0 = (task % tiles) * kArgTile;
                       const int64_t w = std::min(kArgTile, cols - c0);
                       const T* p = xp + offset_of(ob, outer_sizes, outer_strides) + c0;
                       std::array<C, kArgTile> best;
                       std::array<int64_t, kArgTile> at{};
                       for (int64_t c = 0; c < w; ++c)
                         best[c] = static_cast<C>(p[c]);
                       for (int64_t i = 1; i < n; ++i) {
                         const T* row = p + i * s;
                         for (int64_t c = 0; c < w; ++c) {
                           C v = static_cast<C>(row[c]);
                           // Branch-free so the column loop vectorises; a NaN best is final.
                           const bool take = best[c] == best[c] && better(v, best[c]);
                           best[c] = take ? v : best[c];
                           at[c] = take ? i : at[c];
                         }
                       }
                       std::copy(at.begin(), at.begin() + w, o + ob * cols + c0);
                     }
                   });
      return;
    }
    parallel_for(0, n_out, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
      for (int64_t oi = b; oi < e; ++oi) {
        const T* p = xp + offset_of(oi, kept_sizes, kept_strides);
        C best = static_cast<C>(p[0]);
        int64_t at = 0;
        for (int64_t i = 1; i < n && best == best; ++i) { // best != best: a NaN, final
          C v = static_cast<C>(p[i * s]);
          if (better(v, best)) {
            best = v;
            at = i;
          }
        }
        o[oi] = at;
      }
    });
  });
}

/// Inclusive scan along dim: each (outer, column tile) task runs its rows in order.
template <typename T> void cumsum_dense(const Tensor& x, const Tensor& out, int64_t dim) {
  using Op = SumOp<T>;
  using Acc = typename Op::Acc;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k < dim) outer *= x.size(k);
    if (k > dim) inner *= x.size(k);
  }
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const T* xp = static_cast<const T*>(x.raw_data());
  T* op = static_cast<T*>(out.raw_data());
  parallel_for(0, outer * tiles, std::max<int64_t>(1, kParallelGrain / (n * kTile)),
               [&](int64_t b, int64_t e) {
                 for (int64_t task = b; task < e; ++task) {
                   const int64_t ob = task / tiles, c0 = (task % tiles) * kTile;
                   const int64_t w = std::min(kTile, inner - c0);
                   std::array<Acc, kTile> acc;
                   acc.fill(Op::identity());
                   for (int64_t k = 0; k < n; ++k) {
                     const int64_t row = (ob * n + k) * inner + c0;
                     for (int64_t c = 0; c < w; ++c) {
                       acc[c] = Op::combine(acc[c], Op::load(xp[row + c]));
                       op[row + c] = Op::store(acc[c]);
                     }
                   }
                 }
               });
}

} // namespace
} // namespace kiln::kernels

namespace kiln::ops {

void kernel_sum(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  kernels::accumulating_kernel<kernels::SumOp>(in, a, out, "sum");
}

void kernel_prod(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  kernels::accumulating_kernel<kernels::ProdOp>(in, a, out, "prod");
}

void kernel_amax(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  kernels::extremum_kernel<true>(in, a, out, "amax");
}

void kernel_amin(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  kernels::extremum_kernel<false>(in, a, out, "amin");
}

void kernel_argmax(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  kernels::arg_extremum_kernel<true>(in, a, out, "argmax");
}

void kernel_argmin(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  kernels::arg_extremum_kernel<false>(in, a, out, "argmin");
}

void kernel_cumsum(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& o = out[0];
  if (o.numel() == 0) return;
  const int64_t dim = wrap_dim(a.i(0), in[0].dim(), "cumsum");
  // Scan a dense copy in the output's dtype (PyTorch casts the input first too).
  Tensor x = kernels::as_dtype(in[0], o.dtype());
  if (!x.is_contiguous()) {
    Tensor c = make_tensor(x.sizes(), x.dtype(), x.device());
    kernels::copy_into(c, x);
    x = c;
  }
  visit_dtype(o.dtype(), [&](auto tag) { kernels::cumsum_dense<decltype(tag)>(x, o, dim); });
}

} // namespace kiln::ops
