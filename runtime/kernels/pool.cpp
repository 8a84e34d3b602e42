// The pooling kernels: max_pool2d (NaN propagating, padding acts as -inf) and avg_pool2d
// (PyTorch's divisor rules for count_include_pad and ceil_mode windows), over C/HW planes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/ops/op.h"
#include "runtime/parallel.h"

namespace kiln::ops {

namespace {

/// The (H, W) planes of a 3-d or 4-d input and where each starts.
struct Planes {
  int64_t count, channels, h, w;
  int64_t stride_n, stride_c, stride_h, stride_w;
  int64_t offset(int64_t p) const { return (p / channels) * stride_n + (p % channels) * stride_c; }
};

Planes planes_of(const Tensor& x) {
  const int64_t r = x.dim();
  return {numel_of(IntList(x.sizes().data(), static_cast<size_t>(r - 2))),
          x.size(r - 3),
          x.size(r - 2),
          x.size(r - 1),
          r == 4 ? x.stride(0) : 0,
          x.stride(r - 3),
          x.stride(r - 2),
          x.stride(r - 1)};
}

/// Runs fn(plane_index, in_plane, out_plane) over every plane on the pool.
template <typename T, typename Fn>
void for_each_plane(const Tensor& x, Tensor& y, int64_t work_per_plane, Fn fn) {
  const Planes pl = planes_of(x);
  const T* px = static_cast<const T*>(x.raw_data());
  T* py = static_cast<T*>(y.raw_data());
  const int64_t out_plane = y.size(-2) * y.size(-1);
  parallel_for(0, pl.count,
               std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_plane)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t p = begin; p < end; ++p)
                   fn(pl, px + pl.offset(p), py + p * out_plane);
               });
}

template <typename T> bool is_nan(T v) {
  if constexpr (std::is_integral_v<T>)
    return false;
  else
    return std::isnan(v);
}

} // namespace

void kernel_max_pool2d(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t kh = a.ints(0)[0], kw = a.ints(0)[1], sh = a.ints(1)[0], sw = a.ints(1)[1];
  const int64_t ph = a.ints(2)[0], pw = a.ints(2)[1], dh = a.ints(3)[0], dw = a.ints(3)[1];
  const int64_t oh = y.size(-2), ow = y.size(-1);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    // Each output's window clipped to the input once per row and column (padding never
    // wins: it is -inf, the lowest value for integers), and the fold as a select, not a
    // branch: random data mispredicts half the compares of a branchy max.
    std::vector<int64_t> ky0(static_cast<size_t>(oh)), ky1(static_cast<size_t>(oh));
    std::vector<int64_t> kx0(static_cast<size_t>(ow)), kx1(static_cast<size_t>(ow));
    auto clip = [](int64_t o, int64_t s, int64_t p, int64_t d, int64_t k, int64_t n, int64_t& lo,
                   int64_t& hi) {
      lo = 0;
      while (lo < k && o * s - p + lo * d < 0)
        ++lo;
      hi = lo;
      while (hi < k && o * s - p + hi * d < n)
        ++hi;
    };
    for (int64_t oy = 0; oy < oh; ++oy)
      clip(oy, sh, ph, dh, kh, x.size(-2), ky0[static_cast<size_t>(oy)],
           ky1[static_cast<size_t>(oy)]);
    for (int64_t ox = 0; ox < ow; ++ox)
      clip(ox, sw, pw, dw, kw, x.size(-1), kx0[static_cast<size_t>(ox)],
           kx1[static_cast<size_t>(ox)]);
    for_each_plane<T>(x, y, oh * ow * kh * kw, [&](const Planes& pl, const T* src, T* dst) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          C best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                        : std::numeric_limits<C>::lowest();
          for (int64_t ky = ky0[static_cast<size_t>(oy)]; ky < ky1[static_cast<size_t>(oy)]; ++ky) {
            const T* row = src + (oy * sh - ph + ky * dh) * pl.stride_h;
            for (int64_t kx = kx0[static_cast<size_t>(ox)]; kx < kx1[static_cast<size_t>(ox)];
                 ++kx) {
              const C v = static_cast<C>(row[(ox * sw - pw + kx * dw) * pl.stride_w]);
              // PyTorch's rule: a NaN replaces the maximum, and nothing compares above NaN.
              const C m = v > best ? v : best;
              best = is_nan(v) ? v : m;
            }
          }
          dst[oy * ow + ox] = static_cast<T>(best);
        }
      }
    });
  });
}

void kernel_avg_pool2d(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t kh = a.ints(0)[0], kw = a.ints(0)[1], sh = a.ints(1)[0], sw = a.ints(1)[1];
  const int64_t ph = a.ints(2)[0], pw = a.ints(2)[1];
  const bool count_include_pad = a.b(4);
  const int64_t oh = y.size(-2), ow = y.size(-1);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Integers sum in i64 and divide with truncation, as PyTorch's CPU kernel.
    using C = std::conditional_t<std::is_integral_v<compute_t<T>>, int64_t, compute_t<T>>;
    for_each_plane<T>(x, y, oh * ow * kh * kw, [&](const Planes& pl, const T* src, T* dst) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          // PyTorch: the padded window (clipped to input + padding) sets the divisor when
          // padding counts; otherwise only the input elements in the window count.
          int64_t y0 = oy * sh - ph, x0 = ox * sw - pw;
          int64_t y1 = std::min(y0 + kh, pl.h + ph), x1 = std::min(x0 + kw, pl.w + pw);
          const int64_t pool_size = (y1 - y0) * (x1 - x0);
          y0 = std::max<int64_t>(y0, 0);
          x0 = std::max<int64_t>(x0, 0);
          y1 = std::min(y1, pl.h);
          x1 = std::min(x1, pl.w);
          if (y0 >= y1 || x0 >= x1) {
            dst[oy * ow + ox] = static_cast<T>(C(0));
            continue;
          }
          C sum = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix)
              sum += static_cast<C>(src[iy * pl.stride_h + ix * pl.stride_w]);
          const int64_t divisor = count_include_pad ? pool_size : (y1 - y0) * (x1 - x0);
          dst[oy * ow + ox] = static_cast<T>(sum / static_cast<C>(divisor));
        }
      }
    });
  });
}

} // namespace kiln::ops
