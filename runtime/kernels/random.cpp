// Eager kernels of rand, randn and randint: the Philox stream layout of runtime/random.h.
#include "runtime/random.h"

#include <bit>
#include <cmath>

#include "runtime/kernels/convert.h"
#include "runtime/kernels/indexed_fill.h"
#include "runtime/kernels/normal_math.h"
#include "runtime/ops/op.h"

namespace kiln::kernels {
namespace {
inline long long kiln_nm_bits(double x) { return std::bit_cast<long long>(x); }
inline double kiln_nm_double(long long b) { return std::bit_cast<double>(b); }
#define KILN_FN inline
KILN_NORMAL_MATH
#undef KILN_FN
} // namespace

double normal_log(double x) { return kiln_nm_log(x); }
void normal_sincos(double t, double* sin_t, double* cos_t) { kiln_nm_sincos(t, sin_t, cos_t); }

} // namespace kiln::kernels

namespace kiln::ops {
namespace {

/// The blocks of one op's reservation, remembering the last one computed (consecutive
/// elements share a block).
class BlockCache {
public:
  explicit BlockCache(PhiloxState st) : st_(st) {}
  const std::array<uint32_t, 4>& block(uint64_t b) {
    if (b != cached_) {
      words_ = philox4x32_10(st_.offset + b, 0, st_.seed);
      cached_ = b;
    }
    return words_;
  }

private:
  PhiloxState st_;
  uint64_t cached_ = ~uint64_t{0};
  std::array<uint32_t, 4> words_{};
};

uint64_t ceil_div(int64_t n, int64_t d) { return static_cast<uint64_t>((n + d - 1) / d); }

/// 2^-24 and 2^-53: the spacing of 24- and 53-bit uniforms.
constexpr float kTwoPow24Inv = 0x1p-24f;
constexpr double kTwoPow53Inv = 0x1p-53;

/// The largest value of T below 1, for uniforms that round up to 1 in f16/bf16.
template <typename T> T below_one() {
  if constexpr (std::is_same_v<T, Half>)
    return Half::from_bits(0x3bff); // 1 - 2^-11
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16::from_bits(0x3f7f); // 1 - 2^-8
  else
    return T(0);
}

} // namespace

void kernel_rand(std::span<const Tensor>, const Attrs&, std::span<Tensor> out) {
  const Tensor& o = out[0];
  int64_t n = o.numel();
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      PhiloxState st = default_generator().reserve(ceil_div(n, 2));
      kernels::fill_indexed<double>(o, [st] {
        return [cache = BlockCache(st)](int64_t i) mutable {
          const auto& w = cache.block(static_cast<uint64_t>(i) / 2);
          int k = static_cast<int>(i % 2) * 2;
          uint64_t bits = (static_cast<uint64_t>(w[k]) << 32) | w[k + 1];
          return static_cast<double>(bits >> 11) * kTwoPow53Inv;
        };
      });
    } else if constexpr (kernels::is_floating_v<T>) {
      PhiloxState st = default_generator().reserve(ceil_div(n, 4));
      kernels::fill_indexed<T>(o, [st] {
        return [cache = BlockCache(st)](int64_t i) mutable {
          const auto& w = cache.block(static_cast<uint64_t>(i) / 4);
          float u = static_cast<float>(w[i % 4] >> 8) * kTwoPow24Inv;
          T r = T(u);
          if constexpr (!std::is_same_v<T, float>) {
            if (static_cast<float>(r) == 1.0f) r = below_one<T>();
          }
          return r;
        };
      });
    } else {
      KILN_UNREACHABLE("rand: inference admits only floating dtypes");
    }
  });
}

// Box-Muller over pairs of words: (w0, w1) give normals 0 and 1 of a block, (w2, w3) 2 and 3,
// in double through KILN_NORMAL_MATH (the CUDA library computes the same bits), rounded to
// the dtype.
void kernel_randn(std::span<const Tensor>, const Attrs&, std::span<Tensor> out) {
  const Tensor& o = out[0];
  PhiloxState st = default_generator().reserve(ceil_div(o.numel(), 4));
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kernels::is_floating_v<T>) {
      kernels::fill_indexed<T>(o, [st] {
        // Both normals of a pair share r and theta: remember the last pair's.
        return [cache = BlockCache(st), pair = ~uint64_t{0}, r = 0.0, sin_t = 0.0,
                cos_t = 0.0](int64_t i) mutable {
          if (static_cast<uint64_t>(i) / 2 != pair) {
            pair = static_cast<uint64_t>(i) / 2;
            const auto& w = cache.block(static_cast<uint64_t>(i) / 4);
            const int k = static_cast<int>(i % 4) & 2;
            const double u1 = static_cast<double>((w[k] >> 8) + 1) * 0x1p-24; // (0, 1]
            const double u2 = static_cast<double>(w[k + 1] >> 8) * 0x1p-24;   // [0, 1)
            r = std::sqrt(-2.0 * kernels::normal_log(u1));
            kernels::normal_sincos(6.283185307179586 * u2, &sin_t, &cos_t);
          }
          return kernels::convert<T, double>(i % 2 == 0 ? r * cos_t : r * sin_t);
        };
      });
    } else {
      KILN_UNREACHABLE("randn: inference admits only floating dtypes");
    }
  });
}

// low + (w mod (high - low)), one word per element for ranges below 2^32, else a 64-bit w from
// two words (high word first) with two elements per block.
void kernel_randint(std::span<const Tensor>, const Attrs& a, std::span<Tensor> out) {
  const Tensor& o = out[0];
  const uint64_t low = static_cast<uint64_t>(a.i(0));
  const uint64_t range = static_cast<uint64_t>(a.i(1)) - low;
  const bool wide = range > 0xffffffffull;
  PhiloxState st = default_generator().reserve(ceil_div(o.numel(), wide ? 2 : 4));
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::fill_indexed<T>(o, [=] {
      return [=, cache = BlockCache(st)](int64_t i) mutable {
        uint64_t w;
        if (wide) {
          const auto& b = cache.block(static_cast<uint64_t>(i) / 2);
          int k = static_cast<int>(i % 2) * 2;
          w = (static_cast<uint64_t>(b[k]) << 32) | b[k + 1];
        } else {
          w = cache.block(static_cast<uint64_t>(i) / 4)[i % 4];
        }
        return kernels::convert<T>(static_cast<int64_t>(low + w % range));
      };
    });
  });
}

} // namespace kiln::ops
