// The copy primitive (contiguous/clone, copy_, host reads): strided element copies between
// any two layouts, converting between any two dtypes.
#include "runtime/kernels/copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/convert.h"
#include "runtime/kernels/loops.h"
#include "runtime/ops/op.h"

namespace kiln::kernels {
namespace {

/// Bytes per memcpy chunk when a dense copy is split across threads.
constexpr int64_t kMemcpyGrain = int64_t{1} << 20;

void parallel_memcpy(char* dst, const char* src, int64_t nbytes) {
  parallel_for(0, nbytes, kMemcpyGrain, [&](int64_t b, int64_t e) {
    std::memcpy(dst + b, src + b, static_cast<size_t>(e - b));
  });
}

/// Side of the square tiles a transposing copy moves at a time (fits L1 on both sides).
constexpr int64_t kTransposeTile = 32;

/// A copy where dst is dense along its last dim but src along another one (contiguous() of
/// a transposed or permuted tensor): walking either side in order misses cache on the other,
/// so move square tiles. Returns false when the layouts are not of this kind.
template <typename Word> bool copy_transposed(const LoopPlan<2>& p) {
  const int64_t rank = static_cast<int64_t>(p.sizes.size());
  constexpr int64_t w = sizeof(Word);
  if (rank < 2 || p.strides[0][rank - 1] != w || p.strides[1][rank - 1] == w) return false;
  int64_t j = -1; // src's dense dim
  for (int64_t d = 0; d < rank - 1; ++d)
    if (p.strides[1][d] == w) j = d;
  if (j < 0) return false;
  const int64_t nj = p.sizes[j], nk = p.sizes[rank - 1];
  if (nj < kTransposeTile || nk < kTransposeTile) return false;
  // The remaining dims, outermost first, iterate over whole (j, k) planes.
  std::vector<int64_t> outer_sizes, dst_outer, src_outer;
  for (int64_t d = 0; d < rank - 1; ++d) {
    if (d == j) continue;
    outer_sizes.push_back(p.sizes[d]);
    dst_outer.push_back(p.strides[0][d]);
    src_outer.push_back(p.strides[1][d]);
  }
  const int64_t planes = p.numel / (nj * nk);
  const int64_t tiles_j = (nj + kTransposeTile - 1) / kTransposeTile;
  const int64_t dst_j = p.strides[0][j], src_k = p.strides[1][rank - 1];
  parallel_for(0, planes * tiles_j, std::max<int64_t>(1, kParallelGrain / (kTransposeTile * nk)),
               [&](int64_t b, int64_t e) {
                 for (int64_t task = b; task < e; ++task) {
                   int64_t plane = task / tiles_j, j0 = (task % tiles_j) * kTransposeTile;
                   int64_t dst_off = 0, src_off = 0;
                   for (size_t d = outer_sizes.size(); d-- > 0;) {
                     int64_t i = plane % outer_sizes[d];
                     plane /= outer_sizes[d];
                     dst_off += i * dst_outer[d];
                     src_off += i * src_outer[d];
                   }
                   char* dst = p.base[0] + dst_off;
                   const char* src = p.base[1] + src_off;
                   const int64_t j1 = std::min(nj, j0 + kTransposeTile);
                   for (int64_t k0 = 0; k0 < nk; k0 += kTransposeTile) {
                     const int64_t k1 = std::min(nk, k0 + kTransposeTile);
                     for (int64_t jj = j0; jj < j1; ++jj) {
                       auto* d = reinterpret_cast<Word*>(dst + jj * dst_j);
                       const char* s = src + jj * w;
                       for (int64_t kk = k0; kk < k1; ++kk)
                         std::memcpy(d + kk, s + kk * src_k, sizeof(Word));
                     }
                   }
                 }
               });
  return true;
}

/// Same-dtype strided copy, moving elements as opaque words of the element's width.
template <typename Word> void copy_words(const Tensor& dst, const Tensor& src) {
  auto plan = make_loop_plan<2>(dst.sizes(), {&dst, &src});
  if (copy_transposed<Word>(plan)) return;
  run_loop(plan, [](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    if (s[0] == sizeof(Word) && s[1] == sizeof(Word)) {
      std::memcpy(p[0], p[1], static_cast<size_t>(n) * sizeof(Word));
    } else if (s[1] == 0) { // broadcast source: a fill
      Word v;
      std::memcpy(&v, p[1], sizeof(Word));
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(p[0] + i * s[0], &v, sizeof(Word));
    } else {
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(p[0] + i * s[0], p[1] + i * s[1], sizeof(Word));
    }
  });
}

} // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype()) {
    // x.copy_(x): nothing to move (and memcpy onto itself is undefined).
    if (dst.raw_data() == src.raw_data() && dst.sizes() == src.sizes() &&
        dst.strides() == src.strides())
      return;
    if (dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous()) {
      parallel_memcpy(static_cast<char*>(dst.raw_data()), static_cast<const char*>(src.raw_data()),
                      dst.numel() * dst.itemsize());
      return;
    }
    switch (dst.itemsize()) {
    case 1: copy_words<uint8_t>(dst, src); return;
    case 2: copy_words<uint16_t>(dst, src); return;
    case 4: copy_words<uint32_t>(dst, src); return;
    case 8: copy_words<uint64_t>(dst, src); return;
    default: KILN_UNREACHABLE("copy: unexpected element size");
    }
  }
  visit_dtype(dst.dtype(), [&](auto out_tag) {
    using Out = decltype(out_tag);
    visit_dtype(src.dtype(), [&](auto in_tag) {
      using In = decltype(in_tag);
      map_unary<Out, In>(dst, src, [](In x) { return convert<Out, In>(x); });
    });
  });
}

} // namespace kiln::kernels

namespace kiln::ops {

void kernel_copy(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  // out may be a strided destination of another dtype (copy_); dispatch has already routed
  // overlapping source and destination through a temporary.
  kernels::copy_into(out[0], in[0]);
}

} // namespace kiln::ops
