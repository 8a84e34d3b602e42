// CUDA's library kernels.
#include "codegen/cuda/library.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "codegen/cache.h"
#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/cuda_target.h"
#include "runtime/cuda/device.h"
#include "runtime/kernels/convert.h"
#include "runtime/kernels/normal_math.h"
#include "runtime/ops/dispatch.h"
#include "runtime/random.h"
#include "runtime/tensor_impl.h"

// The one argument of every library kernel, defined once for both sides: the host fills it,
// the CUDA source gets its text.
#define KILN_LIBRARY_ARGS                                                                          \
  struct kiln_lib_args {                                                                           \
    char* p[4];              /* buffers */                                                         \
    long long n;             /* points (threads' work items) */                                    \
    long long rank;          /* of size */                                                         \
    long long size[8];       /* the points' index space */                                         \
    long long st[3][8];      /* strides of three operands over it, in elements */                  \
    long long i[20];         /* the op's integers */                                               \
    double f[2];             /* the op's floats */                                                 \
    unsigned long long bits; /* a fill value's bits */                                             \
  };
#define KILN_STRINGIFY(...) #__VA_ARGS__
#define KILN_TEXT(...) KILN_STRINGIFY(__VA_ARGS__)

namespace kiln::codegen::cuda {
namespace {

KILN_LIBRARY_ARGS
using LibraryArgs = kiln_lib_args;
constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

/// The kernels' bodies: templates over a dtype's traits (D::S stored, D::C computed in), made
/// into kernels by KILN_LIB below.
constexpr const char* kKernels = R"(
typedef unsigned long long kiln_u64_t;
#define KILN_POINTS(t)                                                                 \
  for (kiln_i64 t = (kiln_i64)blockIdx.x * blockDim.x + threadIdx.x; t < a.n;          \
       t += (kiln_i64)gridDim.x * blockDim.x)

// Element types. S: as stored; C: as computed (f16/bf16 in f32, integers in i64).
#define KILN_PLAIN(NAME, T, CT, LOWEST, BELOW_ONE)                                      \
  struct NAME {                                                                        \
    typedef T S;                                                                       \
    typedef CT C;                                                                      \
    static __device__ __forceinline__ C ld(S s) { return (C)s; }                       \
    static __device__ __forceinline__ S st(C c) { return (S)c; }                       \
    static __device__ __forceinline__ C lowest() { return LOWEST; }                    \
    static __device__ __forceinline__ S below_one() { return BELOW_ONE; }              \
  };
KILN_PLAIN(kiln_d_f32, float, float, -__uint_as_float(0x7f800000u), 0.99999994f)
KILN_PLAIN(kiln_d_f64, double, double, -__longlong_as_double(0x7ff0000000000000LL), 0.0)
KILN_PLAIN(kiln_d_i64, kiln_i64, kiln_i64, (-9223372036854775807LL - 1), 0)
KILN_PLAIN(kiln_d_i32, int, kiln_i64, (-2147483647 - 1), 0)
KILN_PLAIN(kiln_d_i8, signed char, kiln_i64, -128, 0)
KILN_PLAIN(kiln_d_u8, unsigned char, kiln_i64, 0, 0)
KILN_PLAIN(kiln_w1, unsigned char, unsigned char, 0, 0)
KILN_PLAIN(kiln_w2, unsigned short, unsigned short, 0, 0)
KILN_PLAIN(kiln_w4, unsigned, unsigned, 0, 0)
KILN_PLAIN(kiln_w8, kiln_u64_t, kiln_u64_t, 0, 0)
#define KILN_HALF(NAME, TO_F32, FROM_F32, BELOW_ONE)                                    \
  struct NAME {                                                                        \
    typedef unsigned short S;                                                          \
    typedef float C;                                                                   \
    static __device__ __forceinline__ C ld(S s) { return TO_F32(s); }                  \
    static __device__ __forceinline__ S st(C c) { return FROM_F32(c); }                \
    static __device__ __forceinline__ C lowest() { return -__uint_as_float(0x7f800000u); } \
    static __device__ __forceinline__ S below_one() { return BELOW_ONE; }              \
  };
KILN_HALF(kiln_d_f16, kiln_f16_to_f32, kiln_f32_to_f16, 0x3bff)
KILN_HALF(kiln_d_bf16, kiln_bf16_to_f32, kiln_f32_to_bf16, 0x3f7f)

// Sums wrap for integers (two's complement), as the CPU's.
static __device__ __forceinline__ kiln_i64 kiln_lib_add(kiln_i64 x, kiln_i64 y) {
  return (kiln_i64)((kiln_u64_t)x + (kiln_u64_t)y);
}
static __device__ __forceinline__ float kiln_lib_add(float x, float y) { return x + y; }
static __device__ __forceinline__ double kiln_lib_add(double x, double y) { return x + y; }

// The offsets of point t of a.size under the strides of operands 0, 1 and 2.
struct kiln_offsets { kiln_i64 o[3]; };
static __device__ __forceinline__ kiln_offsets kiln_unravel(const kiln_lib_args& a, kiln_i64 t) {
  kiln_offsets r = {{0, 0, 0}};
  for (int d = (int)a.rank - 1; d >= 0; --d) {
    const kiln_i64 c = t % a.size[d];
    t /= a.size[d];
    r.o[0] += c * a.st[0][d];
    r.o[1] += c * a.st[1][d];
    r.o[2] += c * a.st[2][d];
  }
  return r;
}

// p0[point] = p1[point], each under its strides.
template <typename D> static __device__ void kiln_copy(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  KILN_POINTS(t) {
    const kiln_offsets f = kiln_unravel(a, t);
    out[f.o[0]] = x[f.o[1]];
  }
}

// p0[t] = the value whose bits are a.bits (contiguous).
template <typename D> static __device__ void kiln_fill(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S v = (typename D::S)a.bits;
  KILN_POINTS(t) out[t] = v;
}

// index_select and gather: out[point] = x[offset without dim + index[point] * i0], where
// index (i64) is addressed by its own strides over the points; an index outside [0, i1)
// raises the flag p3 and stores 0.
template <typename D> static __device__ void kiln_take(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const kiln_i64* index = (const kiln_i64*)a.p[2];
  int* bad = (int*)a.p[3];
  KILN_POINTS(t) {
    const kiln_offsets f = kiln_unravel(a, t);
    const kiln_i64 k = index[f.o[2]];
    if (k < 0 || k >= a.i[1]) {
      *bad = 1;
      out[f.o[0]] = 0;
    } else {
      out[f.o[0]] = x[f.o[1] + k * a.i[0]];
    }
  }
}

// arange: start + t * step in double, then the dtype (floating) ...
template <typename D> static __device__ void kiln_arange_float(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  KILN_POINTS(t) out[t] = D::st((typename D::C)(a.f[0] + a.f[1] * (double)t));
}
// ... or in wrapping 64-bit integers (integral).
template <typename D> static __device__ void kiln_arange_int(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  KILN_POINTS(t)
  out[t] = D::st((kiln_i64)((kiln_u64_t)a.i[0] + (kiln_u64_t)a.i[1] * (kiln_u64_t)t));
}

// Philox 4x32-10 (runtime/random.h): block `counter` (the high half 0) under `key`.
static __device__ __forceinline__ void kiln_philox(kiln_u64_t counter, kiln_u64_t key,
                                                   unsigned w[4]) {
  unsigned c0 = (unsigned)counter, c1 = (unsigned)(counter >> 32), c2 = 0, c3 = 0;
  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const kiln_u64_t p0 = (kiln_u64_t)0xD2511F53u * c0, p1 = (kiln_u64_t)0xCD9E8D57u * c2;
    const unsigned hi0 = (unsigned)(p0 >> 32), lo0 = (unsigned)p0;
    const unsigned hi1 = (unsigned)(p1 >> 32), lo1 = (unsigned)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = c0;
  w[1] = c1;
  w[2] = c2;
  w[3] = c3;
}
// The 64-bit word of element t when two elements share a block (f64 rand, wide randint).
static __device__ __forceinline__ kiln_u64_t kiln_word64(const kiln_lib_args& a, kiln_i64 t) {
  unsigned w[4];
  kiln_philox((kiln_u64_t)a.i[1] + (kiln_u64_t)(t / 2), (kiln_u64_t)a.i[0], w);
  const int k = (int)(t % 2) * 2;
  return ((kiln_u64_t)w[k] << 32) | w[k + 1];
}
static __device__ __forceinline__ unsigned kiln_word32(const kiln_lib_args& a, kiln_i64 t) {
  unsigned w[4];
  kiln_philox((kiln_u64_t)a.i[1] + (kiln_u64_t)(t / 4), (kiln_u64_t)a.i[0], w);
  return w[t % 4];
}

// rand (seed i0, offset i1): 24-bit uniforms for f32/f16/bf16 (one rounding up to 1 is the
// largest value below 1) ...
template <typename D> static __device__ void kiln_rand24(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  KILN_POINTS(t) {
    const float u = (float)(kiln_word32(a, t) >> 8) * 0x1p-24f;
    typename D::S s = D::st(u);
    if (D::ld(s) == 1.0f) s = D::below_one();
    out[t] = s;
  }
}
// ... 53-bit ones for f64.
template <typename D> static __device__ void kiln_rand53(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  KILN_POINTS(t) out[t] = (double)(kiln_word64(a, t) >> 11) * 0x1p-53;
}

// randn (seed i0, offset i1): element t's pair of words from block t / 4 by Box-Muller, in
// double through KILN_NORMAL_MATH (the CPU's bits), rounded to the dtype.
template <typename D> static __device__ void kiln_randn(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  KILN_POINTS(t) {
    unsigned w[4];
    kiln_philox((kiln_u64_t)a.i[1] + (kiln_u64_t)(t / 4), (kiln_u64_t)a.i[0], w);
    const int k = (int)(t % 4) & 2;
    const double u1 = (double)((w[k] >> 8) + 1) * 0x1p-24; // (0, 1]
    const double u2 = (double)(w[k + 1] >> 8) * 0x1p-24;   // [0, 1)
    const double r = sqrt(-2.0 * kiln_nm_log(u1));
    double sin_t, cos_t;
    kiln_nm_sincos(6.283185307179586 * u2, &sin_t, &cos_t);
    out[t] = D::st((typename D::C)(t % 2 == 0 ? r * cos_t : r * sin_t));
  }
}

// randint (seed i0, offset i1): low i2 + w mod range i3, w of 64 bits when the range is.
template <typename D> static __device__ void kiln_randint(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const kiln_u64_t range = (kiln_u64_t)a.i[3];
  const bool wide = range > 0xffffffffull;
  KILN_POINTS(t) {
    const kiln_u64_t w = wide ? kiln_word64(a, t) : (kiln_u64_t)kiln_word32(a, t);
    out[t] = D::st((typename D::C)(kiln_i64)((kiln_u64_t)a.i[2] + w % range));
  }
}

// cumsum of a dense [outer, i0, i1] tensor along its middle dim: a thread per (outer, column),
// its running sum in the compute type, stored rounded after every step.
template <typename D> static __device__ void kiln_cumsum(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const kiln_i64 len = a.i[0], inner = a.i[1];
  KILN_POINTS(t) {
    const kiln_i64 base = (t / inner) * len * inner + t % inner;
    typename D::C acc = 0;
    for (kiln_i64 k = 0; k < len; ++k) {
      acc = kiln_lib_add(acc, D::ld(x[base + k * inner]));
      out[base + k * inner] = D::st(acc);
    }
  }
}

// Multiply-adds, integers wrapping.
static __device__ __forceinline__ kiln_i64 kiln_lib_madd(kiln_i64 acc, kiln_i64 x, kiln_i64 y) {
  return (kiln_i64)((kiln_u64_t)acc + (kiln_u64_t)x * (kiln_u64_t)y);
}
static __device__ __forceinline__ float kiln_lib_madd(float acc, float x, float y) {
  return acc + x * y;
}
static __device__ __forceinline__ double kiln_lib_madd(double acc, double x, double y) {
  return acc + x * y;
}

// conv2d of dense NCHW x (p1) and OIHW w (p2), bias p3 (or null), as an implicit GEMM per
// group: result rows m = (n, oy, ox), columns the group's output channels, k = (c, ky, kx);
// x's rows are gathered from the input on the fly (zeros in the padding). A block per 16x16
// tile through shared memory, as kiln_matmul; each sum starts from the bias and runs over k in
// order (the CPU's order). i: n c h w o cg kh kw oh ow sh sw ph pw dh dw groups tiles_m
// tiles_n; a.n: the tiles of all groups.
template <typename D> static __device__ void kiln_conv2d(const kiln_lib_args& a) {
  typedef typename D::C C;
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const typename D::S* w = (const typename D::S*)a.p[2];
  const typename D::S* bias = (const typename D::S*)a.p[3];
  const kiln_i64 Cin = a.i[1], H = a.i[2], W = a.i[3], O = a.i[4], cg = a.i[5], kh = a.i[6],
                 kw = a.i[7], oh = a.i[8], ow = a.i[9], sh = a.i[10], sw = a.i[11],
                 ph = a.i[12], pw = a.i[13], dh = a.i[14], dw = a.i[15], tm = a.i[17],
                 tn = a.i[18];
  const kiln_i64 og = O / a.i[16], M = a.i[0] * oh * ow, K = cg * kh * kw, plane = oh * ow;
  __shared__ C ta[16][17];
  __shared__ C tb[16][17];
  const int ty = (int)(threadIdx.x / 16u), tx = (int)(threadIdx.x % 16u);
  for (kiln_i64 tile = blockIdx.x; tile < a.n; tile += gridDim.x) {
    const kiln_i64 g = tile / (tm * tn), r = tile % (tm * tn);
    const kiln_i64 m0 = (r / tn) * 16, n0 = (r % tn) * 16;
    // The result row this thread loads for (m0 + ty) and the one it computes (m0 + ty too).
    const kiln_i64 m = m0 + ty, n = n0 + tx;
    const kiln_i64 img = m / plane, oy = (m % plane) / ow, ox = m % ow;
    const typename D::S* xg = x + (img * Cin + g * cg) * H * W;
    const typename D::S* wn = w + (g * og + n0 + ty) * K; // the column row this thread loads
    C acc = bias && n < og ? D::ld(bias[g * og + n]) : (C)0;
    for (kiln_i64 k0 = 0; k0 < K; k0 += 16) {
      const kiln_i64 k = k0 + tx;
      C v = 0;
      if (m < M && k < K) {
        const kiln_i64 c = k / (kh * kw), ky = (k / kw) % kh, kx = k % kw;
        const kiln_i64 iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) v = D::ld(xg[(c * H + iy) * W + ix]);
      }
      ta[ty][tx] = v;
      // tb[kk][nn] = w[g * og + n0 + nn][k0 + kk]: thread (ty, tx) loads column n0 + ty.
      tb[tx][ty] = n0 + ty < og && k < K ? D::ld(wn[k]) : (C)0;
      __syncthreads();
      const int kn = K - k0 < 16 ? (int)(K - k0) : 16;
      for (int kk = 0; kk < kn; ++kk)
        acc = kiln_lib_madd(acc, ta[ty][kk], tb[kk][tx]);
      __syncthreads();
    }
    if (m < M && n < og) out[((img * O) + g * og + n) * plane + oy * ow + ox] = D::st(acc);
  }
}

// max_pool2d over dense planes (p1: [planes, H, W]): padding never wins, a NaN replaces the
// maximum. i: kh kw sh sw ph pw dh dw H W oh ow.
template <typename D> static __device__ void kiln_max_pool2d(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const kiln_i64 kh = a.i[0], kw = a.i[1], sh = a.i[2], sw = a.i[3], ph = a.i[4], pw = a.i[5],
                 dh = a.i[6], dw = a.i[7], H = a.i[8], W = a.i[9], oh = a.i[10], ow = a.i[11];
  KILN_POINTS(t) {
    const kiln_i64 ox = t % ow, oy = (t / ow) % oh, plane = t / (ow * oh);
    const typename D::S* src = x + plane * H * W;
    typename D::C best = D::lowest();
    for (kiln_i64 ky = 0; ky < kh; ++ky) {
      const kiln_i64 iy = oy * sh - ph + ky * dh;
      if (iy < 0 || iy >= H) continue;
      for (kiln_i64 kx = 0; kx < kw; ++kx) {
        const kiln_i64 ix = ox * sw - pw + kx * dw;
        if (ix < 0 || ix >= W) continue;
        const typename D::C v = D::ld(src[iy * W + ix]);
        const typename D::C m = v > best ? v : best;
        best = v != v ? v : m;
      }
    }
    out[t] = D::st(best);
  }
}

// avg_pool2d over dense planes, PyTorch's divisor (the window clipped to input + padding
// when padding counts, else the input elements in it). i: kh kw sh sw ph pw H W oh ow
// count_include_pad.
template <typename D> static __device__ void kiln_avg_pool2d(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const kiln_i64 kh = a.i[0], kw = a.i[1], sh = a.i[2], sw = a.i[3], ph = a.i[4], pw = a.i[5],
                 H = a.i[6], W = a.i[7], oh = a.i[8], ow = a.i[9];
  KILN_POINTS(t) {
    const kiln_i64 ox = t % ow, oy = (t / ow) % oh, plane = t / (ow * oh);
    const typename D::S* src = x + plane * H * W;
    kiln_i64 y0 = oy * sh - ph, x0 = ox * sw - pw;
    kiln_i64 y1 = y0 + kh < H + ph ? y0 + kh : H + ph, x1 = x0 + kw < W + pw ? x0 + kw : W + pw;
    const kiln_i64 pool_size = (y1 - y0) * (x1 - x0);
    y0 = y0 > 0 ? y0 : 0;
    x0 = x0 > 0 ? x0 : 0;
    y1 = y1 < H ? y1 : H;
    x1 = x1 < W ? x1 : W;
    if (y0 >= y1 || x0 >= x1) {
      out[t] = D::st((typename D::C)0);
      continue;
    }
    typename D::C sum = 0;
    for (kiln_i64 iy = y0; iy < y1; ++iy)
      for (kiln_i64 ix = x0; ix < x1; ++ix)
        sum = kiln_lib_add(sum, D::ld(src[iy * W + ix]));
    const kiln_i64 divisor = a.i[10] ? pool_size : (y1 - y0) * (x1 - x0);
    out[t] = D::st(sum / (typename D::C)divisor);
  }
}

// matmul: a block per 16x16 tile of one batch's [M, N] result (dense), the operands' tiles
// through shared memory, sums in the compute type in order of k. The batch index space is
// a.size; operand 1 (p1, [M, K]) and 2 (p2, [K, N]) are addressed by their batch strides
// st[1], st[2] and their row and column strides. i: M N K a_row a_col b_row b_col tiles_m
// tiles_n; a.n: the tiles of all batches.
template <typename D> static __device__ void kiln_matmul(const kiln_lib_args& a) {
  typedef typename D::C C;
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const typename D::S* y = (const typename D::S*)a.p[2];
  const kiln_i64 M = a.i[0], N = a.i[1], K = a.i[2], ars = a.i[3], acs = a.i[4], brs = a.i[5],
                 bcs = a.i[6], tm = a.i[7], tn = a.i[8];
  __shared__ C ta[16][17];
  __shared__ C tb[16][17];
  const int ty = (int)(threadIdx.x / 16u), tx = (int)(threadIdx.x % 16u);
  for (kiln_i64 tile = blockIdx.x; tile < a.n; tile += gridDim.x) {
    const kiln_i64 batch = tile / (tm * tn), r = tile % (tm * tn);
    const kiln_i64 m0 = (r / tn) * 16, n0 = (r % tn) * 16;
    const kiln_offsets f = kiln_unravel(a, batch);
    const typename D::S* xa = x + f.o[1];
    const typename D::S* yb = y + f.o[2];
    C acc = 0;
    for (kiln_i64 k0 = 0; k0 < K; k0 += 16) {
      const kiln_i64 am = m0 + ty, ak = k0 + tx, bk = k0 + ty, bn = n0 + tx;
      ta[ty][tx] = am < M && ak < K ? D::ld(xa[am * ars + ak * acs]) : (C)0;
      tb[ty][tx] = bk < K && bn < N ? D::ld(yb[bk * brs + bn * bcs]) : (C)0;
      __syncthreads();
      const int kn = K - k0 < 16 ? (int)(K - k0) : 16;
      for (int k = 0; k < kn; ++k)
        acc = kiln_lib_madd(acc, ta[ty][k], tb[k][tx]);
      __syncthreads();
    }
    const kiln_i64 m = m0 + ty, n = n0 + tx;
    if (m < M && n < N) out[(batch * M + m) * N + n] = D::st(acc);
  }
}

// floor_divide (i0 = 0) and remainder (i0 = 1) of operands in the result's dtype, broadcast
// by their strides (st[1], st[2]) over the dense result: Python's rules as the CPU's
// (runtime/kernels/binary.cpp). Floats: the quotient from fmod (exact on both sides); an
// integer division by zero raises the flag p3.
static __device__ __forceinline__ float kiln_fmod(float x, float y) { return fmodf(x, y); }
static __device__ __forceinline__ double kiln_fmod(double x, double y) { return fmod(x, y); }
static __device__ __forceinline__ float kiln_floor(float x) { return floorf(x); }
static __device__ __forceinline__ double kiln_floor(double x) { return floor(x); }
static __device__ __forceinline__ float kiln_copysign(float x, float y) { return copysignf(x, y); }
static __device__ __forceinline__ double kiln_copysign(double x, double y) { return copysign(x, y); }
template <typename C> static __device__ __forceinline__ C kiln_divmod(C x, C y, bool rem, int*) {
  const C mod = kiln_fmod(x, y);
  if (rem) return mod != 0 && ((y < 0) != (mod < 0)) ? mod + y : mod;
  if (y == 0) return x / y;
  C div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
  if (div == 0) return kiln_copysign((C)0, x / y);
  C floordiv = kiln_floor(div);
  if (div - floordiv > (C)0.5) floordiv += 1;
  return floordiv;
}
template <> __device__ __forceinline__ kiln_i64 kiln_divmod<kiln_i64>(kiln_i64 x, kiln_i64 y,
                                                                      bool rem, int* bad) {
  if (y == 0) {
    *bad = 1;
    return 0;
  }
  if (y == -1) return rem ? 0 : (kiln_i64)(0ull - (kiln_u64_t)x);
  const kiln_i64 q = x / y, r = x % y;
  const bool adjust = r != 0 && ((r < 0) != (y < 0));
  return rem ? (adjust ? r + y : r) : (adjust ? q - 1 : q);
}
template <typename D> static __device__ void kiln_divmod_kernel(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* x = (const typename D::S*)a.p[1];
  const typename D::S* y = (const typename D::S*)a.p[2];
  int* bad = (int*)a.p[3];
  KILN_POINTS(t) {
    const kiln_offsets f = kiln_unravel(a, t);
    out[f.o[0]] = D::st(kiln_divmod(D::ld(x[f.o[1]]), D::ld(y[f.o[2]]), a.i[0] != 0, bad));
  }
}

// scatter: a thread per line of the index along dim (the other coordinates: a.size, with
// size 1 at dim), writing its positions in order, so a repeated target keeps the last write as
// on the CPU. out (p0, already x's copy), src (p1), index (p2, i64) by strides st[0..2] over the
// line; i: len, out / src / index strides along dim, extent of out's dim; a bad index raises
// the flag p3.
template <typename D> static __device__ void kiln_scatter(const kiln_lib_args& a) {
  typename D::S* out = (typename D::S*)a.p[0];
  const typename D::S* src = (const typename D::S*)a.p[1];
  const kiln_i64* index = (const kiln_i64*)a.p[2];
  int* bad = (int*)a.p[3];
  KILN_POINTS(t) {
    const kiln_offsets f = kiln_unravel(a, t);
    for (kiln_i64 k = 0; k < a.i[0]; ++k) {
      const kiln_i64 j = index[f.o[2] + k * a.i[3]];
      if (j < 0 || j >= a.i[4]) {
        *bad = 1;
        continue;
      }
      out[f.o[0] + j * a.i[1]] = src[f.o[1] + k * a.i[2]];
    }
  }
}

#ifdef __CUDACC__
#define KILN_LIB(F, SUFFIX, D)                                                         \
  extern "C" __global__ void __launch_bounds__(256) F##_##SUFFIX(kiln_lib_args a) { F<D>(a); }
#else
#define KILN_LIB(F, SUFFIX, D)                                                         \
  extern "C" void F##_##SUFFIX##_host(const void* args, unsigned blocks) {             \
    const kiln_lib_args& a = *static_cast<const kiln_lib_args*>(args);                 \
    kiln_emu_launch(blocks, 256u, [&] { F<D>(a); });                                   \
  }
#endif
)";

/// The kernels: a family, and the element types it is made for.
struct Family {
  const char* name;
  std::vector<const char*> types; // traits suffixes: f32 ... (dtypes) or w1 ... (words)
};
const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"kiln_copy", {"w1", "w2", "w4", "w8"}},
      {"kiln_fill", {"w1", "w2", "w4", "w8"}},
      {"kiln_take", {"w1", "w2", "w4", "w8"}},
      {"kiln_scatter", {"w1", "w2", "w4", "w8"}},
      {"kiln_divmod_kernel", {"f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8"}},
      {"kiln_arange_float", {"f32", "f64", "f16", "bf16"}},
      {"kiln_arange_int", {"i64", "i32", "i8", "u8"}},
      {"kiln_rand24", {"f32", "f16", "bf16"}},
      {"kiln_rand53", {"f64"}},
      {"kiln_randn", {"f32", "f64", "f16", "bf16"}},
      {"kiln_randint", {"f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8"}},
      {"kiln_cumsum", {"f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8"}},
      {"kiln_conv2d", {"f32", "f64", "f16", "bf16"}},
      {"kiln_matmul", {"f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8"}},
      {"kiln_max_pool2d", {"f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8"}},
      {"kiln_avg_pool2d", {"f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8"}},
  };
  return f;
}

std::string traits_of(const char* suffix) {
  return suffix[0] == 'w' ? std::string("kiln_") + suffix : std::string("kiln_d_") + suffix;
}

/// A library kernel's name: its family and the suffix of the element type.
std::string kernel_name(const char* family, std::string_view suffix) {
  return std::string(family) + "_" + std::string(suffix);
}

/// The element-type suffix of dtype d ("f32"), or "" for one the library does not take.
std::string_view suffix_of(DType d) {
  switch (d) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i64: return "i64";
  case DType::i32: return "i32";
  case DType::i8: return "i8";
  case DType::u8: return "u8";
  case DType::bool_: return "";
  }
  return "";
}

/// The word suffix of an element of `bytes` bytes.
std::string word_of(int64_t bytes) { return "w" + std::to_string(bytes); }

/// The library loaded on one device.
struct Loaded {
  std::shared_ptr<const kiln::cuda::Module> module;
  std::map<std::string, size_t, std::less<>> index;
};

const Loaded& loaded(int device) {
  static std::mutex mu;
  static auto* libraries = new std::map<int, Loaded>(); // never destroyed, as the modules
  std::lock_guard lock(mu);
  Loaded& l = (*libraries)[device];
  if (l.module) return l;
  const CudaTarget& target = cuda_target(device);
  const std::string source = library_source();
  // --fmad=false: a multiply and an add round twice, as the CPU kernels do.
  const std::vector<std::string> options = {"--fmad=false"};
  const std::string key = "kiln cuda library 1\n" + target.identity() + "source " +
                          std::to_string(fnv1a(source)) + "\n";
  DiskCache& cache = DiskCache::global();
  std::optional<std::string> blob = cache.load(key);
  Expected<CudaBlob> parts = blob ? split_cuda_blob(*blob) : Expected<CudaBlob>(CudaBlob{});
  if (!blob || !parts || parts->cubin.empty() || (kiln::cuda::emulated() && parts->host.empty())) {
    Expected<std::string> built =
        compile_cuda_blob(source, "kiln_library.cu", target.arch(), options);
    if (!built) throw Error::without_location("CUDA library kernels: " + built.error().message());
    cache.store(key, *built);
    blob = std::move(*built);
    parts = split_cuda_blob(*blob);
    KILN_ASSERT(parts, "the CUDA library's blob just built does not parse");
  }
  const std::vector<std::string> names = library_kernel_names();
  l.module = kiln::cuda::load_module({parts->cubin, parts->ptx, parts->host}, names, device);
  for (size_t k = 0; k < names.size(); ++k)
    l.index.emplace(names[k], k);
  return l;
}

/// Queues kernel `name` over a.n points on `device`, `per_block` points to a block (a thread
/// each, or a tile each).
void launch(const std::string& name, const LibraryArgs& a, Device device,
            int64_t per_block = kThreads) {
  if (a.n == 0) return;
  const Loaded& l = loaded(device.index);
  auto it = l.index.find(name);
  KILN_ASSERT(it != l.index.end(), "no CUDA library kernel ", name);
  const int64_t blocks = std::clamp<int64_t>((a.n + per_block - 1) / per_block, 1, kMaxBlocks);
  l.module->launch_with(it->second, &a, static_cast<unsigned>(blocks), kThreads);
}

char* ptr(const Tensor& t) { return static_cast<char*>(const_cast<void*>(t.raw_data())); }

/// Args over the index space `sizes`, with no operands yet.
LibraryArgs args_over(IntList sizes) {
  LibraryArgs a{};
  a.n = numel_of(sizes);
  a.rank = static_cast<long long>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d)
    a.size[d] = sizes[d];
  return a;
}

void set_strides(LibraryArgs& a, int operand, IntList strides) {
  for (size_t d = 0; d < strides.size(); ++d)
    a.st[operand][d] = strides[d];
}

/// Copies src into dst (same sizes and element size, any strides), on the device.
void copy_strided(const Tensor& dst, const Tensor& src, Device device) {
  LibraryArgs a = args_over(dst.sizes());
  a.p[0] = ptr(dst);
  a.p[1] = ptr(src);
  set_strides(a, 0, dst.strides());
  set_strides(a, 1, src.strides());
  launch(kernel_name("kiln_copy", word_of(dst.itemsize())), a, device);
}

/// t when dense, else a dense copy of it on the device.
Tensor dense(const Tensor& t, Device device) {
  if (t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), device);
  copy_strided(c, t, device);
  return c;
}

/// t in dtype d (the device's cast kernel when it differs).
Tensor as_dtype(const Tensor& t, DType d) {
  return t.dtype() == d ? t : dispatch1(Op::cast, {t}, Attrs{d});
}

bool fits(const Tensor& t) { return t.dim() <= kMaxRank; }

/// A device int a kernel sets when an operand is bad (an index out of range, an integer
/// division by zero); raised() reads it back (a synchronous copy).
class DeviceFlag {
public:
  explicit DeviceFlag(Device device) : device_(device), t_(make_tensor({1}, DType::i32, device)) {
    const int32_t zero = 0;
    kiln::cuda::detail::copy_to_device(ptr(t_), &zero, sizeof zero, device_);
  }
  char* data() const { return ptr(t_); }
  bool raised() const {
    int32_t flag = 0;
    kiln::cuda::detail::copy_to_host(&flag, ptr(t_), sizeof flag, device_);
    return flag != 0;
  }

private:
  Device device_;
  Tensor t_;
};

/// The error of a raised index flag: the first bad index, found on the host to name it as
/// the CPU does.
void report_bad_index(const char* op, const Tensor& index, int64_t extent, int64_t dim) {
  const Tensor host = index.to(Device::cpu()).contiguous();
  const auto* v = static_cast<const int64_t*>(host.raw_data());
  for (int64_t k = 0; k < host.numel(); ++k)
    KILN_CHECK(v[k] >= 0 && v[k] < extent, op, ": index ", v[k], " is out of range for dim ", dim,
               " of size ", extent);
  KILN_ASSERT(false, op, ": the device flagged an index the host finds in range");
}

/// t's strides over `sizes` (t broadcast to them, right-aligned): 0 along broadcast dims.
Shape broadcast_strides(const Tensor& t, IntList sizes) {
  Shape st(sizes.size(), 0);
  const size_t skip = sizes.size() - static_cast<size_t>(t.dim());
  for (size_t d = 0; d < static_cast<size_t>(t.dim()); ++d)
    st[skip + d] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return st;
}

/// index_select and gather: out[p] = x[p with dim's coordinate index[p']]. `index_strides`
/// address the index over the output's points.
Tensor take(const char* op, const Tensor& x, const Tensor& index, IntList index_strides,
            int64_t dim, const TensorMeta& meta, Device device) {
  Tensor out = make_tensor(meta.sizes, meta.dtype, device);
  const int64_t extent = x.dim() == 0 ? 1 : x.size(dim);
  LibraryArgs a = args_over(out.sizes());
  Shape xs = x.strides();
  if (x.dim() > 0) xs[static_cast<size_t>(dim)] = 0;
  // A 0-d x: the one element, at every point.
  if (x.dim() == 0) xs.assign(out.sizes().size(), 0);
  const DeviceFlag bad(device);
  a.p[0] = ptr(out);
  a.p[1] = ptr(x);
  a.p[2] = ptr(index);
  a.p[3] = bad.data();
  set_strides(a, 0, out.strides());
  set_strides(a, 1, xs);
  set_strides(a, 2, index_strides);
  a.i[0] = x.dim() == 0 ? 0 : x.stride(dim);
  a.i[1] = extent;
  launch(kernel_name("kiln_take", word_of(x.itemsize())), a, device);
  if (bad.raised()) report_bad_index(op, index, extent, dim);
  return out;
}

std::optional<Tensor> run_one(Op op, std::span<const Tensor> in, const Attrs& attrs,
                              const TensorMeta& meta, Device device) {
  const std::string_view sfx = suffix_of(meta.dtype);
  for (const Tensor& t : in)
    if (!fits(t)) return std::nullopt;
  if (meta.sizes.size() > kMaxRank) return std::nullopt;
  switch (op) {
  case Op::empty: return make_tensor(meta.sizes, meta.dtype, device);
  case Op::arange: {
    if (sfx.empty()) return std::nullopt;
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    LibraryArgs a = args_over(out.sizes());
    a.p[0] = ptr(out);
    const bool fl = is_floating(meta.dtype);
    if (fl) {
      a.f[0] = attrs.scalar(0).to_double();
      a.f[1] = attrs.scalar(2).to_double();
    } else {
      a.i[0] = attrs.scalar(0).to_int();
      a.i[1] = attrs.scalar(2).to_int();
    }
    launch(kernel_name(fl ? "kiln_arange_float" : "kiln_arange_int", sfx), a, device);
    return out;
  }
  case Op::rand:
  case Op::randn:
  case Op::randint: {
    if (sfx.empty() || (op != Op::randint && !is_floating(meta.dtype))) return std::nullopt;
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    LibraryArgs a = args_over(out.sizes());
    a.p[0] = ptr(out);
    // The blocks reserved as the CPU kernel reserves them (runtime/kernels/random.cpp).
    uint64_t per_block = 4;
    if (op == Op::randint) {
      a.i[2] = attrs.i(0);
      a.i[3] = static_cast<long long>(static_cast<uint64_t>(attrs.i(1)) -
                                      static_cast<uint64_t>(attrs.i(0)));
      if (static_cast<uint64_t>(a.i[3]) > 0xffffffffull) per_block = 2;
    } else if (op == Op::rand && meta.dtype == DType::f64) {
      per_block = 2;
    }
    const uint64_t n = static_cast<uint64_t>(out.numel());
    const PhiloxState st = default_generator().reserve((n + per_block - 1) / per_block);
    a.i[0] = static_cast<long long>(st.seed);
    a.i[1] = static_cast<long long>(st.offset);
    const char* family = op == Op::randint          ? "kiln_randint"
                         : op == Op::randn          ? "kiln_randn"
                         : meta.dtype == DType::f64 ? "kiln_rand53"
                                                    : "kiln_rand24";
    launch(kernel_name(family, sfx), a, device);
    return out;
  }
  case Op::index_select: {
    const Tensor& x = in[0];
    const int64_t dim = x.dim() == 0 ? 0 : wrap_dim(attrs.i(0), x.dim(), "index_select");
    const Tensor index = as_dtype(in[1], DType::i64);
    // The index runs along dim of the output (a 0-d index of a 0-d x: the one point).
    Shape is(meta.sizes.size(), 0);
    if (!is.empty()) is[static_cast<size_t>(dim)] = index.dim() == 0 ? 0 : index.stride(0);
    return take("index_select", x, index, is, dim, meta, device);
  }
  case Op::gather: {
    const Tensor& x = in[0];
    const int64_t dim = x.dim() == 0 ? 0 : wrap_dim(attrs.i(0), x.dim(), "gather");
    const Tensor index = as_dtype(in[1], DType::i64);
    if (index.dim() != static_cast<int64_t>(meta.sizes.size())) return std::nullopt;
    return take("gather", x, index, index.strides(), dim, meta, device);
  }
  case Op::floor_divide:
  case Op::remainder: {
    if (sfx.empty()) return std::nullopt;
    const Tensor x = as_dtype(in[0], meta.dtype), y = as_dtype(in[1], meta.dtype);
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    LibraryArgs a = args_over(out.sizes());
    set_strides(a, 0, out.strides());
    set_strides(a, 1, broadcast_strides(x, out.sizes()));
    set_strides(a, 2, broadcast_strides(y, out.sizes()));
    const DeviceFlag bad(device);
    a.p[0] = ptr(out);
    a.p[1] = ptr(x);
    a.p[2] = ptr(y);
    a.p[3] = bad.data();
    a.i[0] = op == Op::remainder ? 1 : 0;
    launch(kernel_name("kiln_divmod_kernel", sfx), a, device);
    KILN_CHECK(!bad.raised(), op_name(op), ": integer division by zero");
    return out;
  }
  case Op::scatter: {
    const Tensor &x = in[0], &src = in[2];
    const Tensor index = as_dtype(in[1], DType::i64);
    if (x.dim() == 0 || index.dim() != x.dim() || src.dim() != x.dim() || x.dtype() != meta.dtype ||
        src.dtype() != meta.dtype)
      return std::nullopt;
    const int64_t dim = wrap_dim(attrs.i(0), x.dim(), "scatter");
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    copy_strided(out, x, device);
    // A thread per line of the index along dim.
    Shape lines = index.sizes();
    lines[static_cast<size_t>(dim)] = 1;
    LibraryArgs a = args_over(lines);
    if (index.numel() == 0) a.n = 0;
    set_strides(a, 0, out.strides());
    set_strides(a, 1, src.strides());
    set_strides(a, 2, index.strides());
    const DeviceFlag bad(device);
    a.p[0] = ptr(out);
    a.p[1] = ptr(src);
    a.p[2] = ptr(index);
    a.p[3] = bad.data();
    const int64_t v[5] = {index.size(dim), out.stride(dim), src.stride(dim), index.stride(dim),
                          out.size(dim)};
    std::copy(std::begin(v), std::end(v), a.i);
    launch(kernel_name("kiln_scatter", word_of(out.itemsize())), a, device);
    if (bad.raised()) report_bad_index("scatter", index, out.size(dim), dim);
    return out;
  }
  case Op::cat: {
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    if (out.numel() == 0) return out;
    const int64_t dim = wrap_dim(attrs.i(0), out.dim(), "cat");
    int64_t at = 0;
    for (const Tensor& t : in) {
      if (t.dim() == 1 && t.size(0) == 0) continue; // skipped, as in inference
      const Tensor src = as_dtype(t, meta.dtype);
      copy_strided(make_view(out, src.sizes(), out.strides(), at * out.stride(dim)), src, device);
      at += t.size(dim);
    }
    return out;
  }
  case Op::pad: {
    const Tensor& x = in[0];
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    if (out.numel() == 0) return out;
    LibraryArgs a = args_over(out.sizes());
    a.p[0] = ptr(out);
    visit_dtype(meta.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T v = kernels::convert<T, double>(attrs.f(1));
      std::memcpy(&a.bits, &v, sizeof v);
    });
    launch(kernel_name("kiln_fill", word_of(out.itemsize())), a, device);
    // The input region that survives (negative pads crop) and where it lands.
    const std::vector<int64_t>& pads = attrs.ints(0);
    Shape sizes = x.sizes();
    int64_t src_off = 0, dst_off = 0;
    for (size_t i = 0; i < pads.size() / 2; ++i) {
      const size_t d = static_cast<size_t>(x.dim()) - 1 - i;
      const int64_t left = pads[2 * i], right = pads[2 * i + 1];
      const int64_t crop_l = std::max<int64_t>(0, -left), crop_r = std::max<int64_t>(0, -right);
      sizes[d] = std::max<int64_t>(0, x.sizes()[d] - crop_l - crop_r);
      src_off += crop_l * x.strides()[d];
      dst_off += std::max<int64_t>(0, left) * out.strides()[d];
    }
    if (numel_of(sizes) > 0)
      copy_strided(make_view(out, sizes, out.strides(), dst_off),
                   make_view(x, sizes, x.strides(), x.storage_offset() + src_off), device);
    return out;
  }
  case Op::cumsum: {
    if (sfx.empty()) return std::nullopt;
    const Tensor x = dense(as_dtype(in[0], meta.dtype), device);
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    const int64_t dim = x.dim() == 0 ? 0 : wrap_dim(attrs.i(0), x.dim(), "cumsum");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d < dim) outer *= x.size(d);
      if (d > dim) inner *= x.size(d);
    }
    LibraryArgs a{};
    a.n = out.numel() == 0 ? 0 : outer * inner;
    a.p[0] = ptr(out);
    a.p[1] = ptr(x);
    a.i[0] = x.dim() == 0 ? 1 : x.size(dim);
    a.i[1] = inner;
    launch(kernel_name("kiln_cumsum", sfx), a, device);
    return out;
  }
  case Op::conv2d: {
    if (!is_floating(meta.dtype) || in[0].dim() != 4 || in[0].dtype() != meta.dtype)
      return std::nullopt;
    const Tensor x = dense(in[0], device), w = dense(in[1], device);
    const std::optional<Tensor> b =
        in.size() == 3 ? std::optional<Tensor>(dense(in[2], device)) : std::nullopt;
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    LibraryArgs a{};
    a.p[0] = ptr(out);
    a.p[1] = ptr(x);
    a.p[2] = ptr(w);
    a.p[3] = b ? ptr(*b) : nullptr;
    const int64_t og = w.size(0) / attrs.i(3);
    const int64_t tm = (x.size(0) * out.size(2) * out.size(3) + 15) / 16, tn = (og + 15) / 16;
    const int64_t v[19] = {x.size(0),
                           x.size(1),
                           x.size(2),
                           x.size(3),
                           w.size(0),
                           w.size(1),
                           w.size(2),
                           w.size(3),
                           out.size(2),
                           out.size(3),
                           attrs.ints(0)[0],
                           attrs.ints(0)[1],
                           attrs.ints(1)[0],
                           attrs.ints(1)[1],
                           attrs.ints(2)[0],
                           attrs.ints(2)[1],
                           attrs.i(3),
                           tm,
                           tn};
    std::copy(std::begin(v), std::end(v), a.i);
    a.n = out.numel() == 0 ? 0 : attrs.i(3) * tm * tn;
    launch(kernel_name("kiln_conv2d", sfx), a, device, /*per_block=*/1);
    return out;
  }
  case Op::matmul: {
    const Tensor &x = in[0], &y = in[1];
    if (sfx.empty() || x.dtype() != meta.dtype || y.dtype() != meta.dtype || x.dim() < 2 ||
        y.dim() < 2)
      return std::nullopt;
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    // The batch dims of the result; each operand's right-aligned, broadcast ones stride 0.
    const Shape batch(meta.sizes.begin(), meta.sizes.end() - 2);
    LibraryArgs a = args_over(batch);
    for (int operand = 1; operand <= 2; ++operand) {
      const Tensor& t = operand == 1 ? x : y;
      const int64_t lead = t.dim() - 2, skip = static_cast<int64_t>(batch.size()) - lead;
      for (int64_t d = 0; d < lead; ++d)
        a.st[operand][skip + d] = t.size(d) == 1 ? 0 : t.stride(d);
    }
    const int64_t M = x.size(-2), K = x.size(-1), N = y.size(-1);
    const int64_t tm = (M + 15) / 16, tn = (N + 15) / 16;
    a.n = out.numel() == 0 ? 0 : numel_of(batch) * tm * tn;
    a.p[0] = ptr(out);
    a.p[1] = ptr(x);
    a.p[2] = ptr(y);
    const int64_t v[9] = {M, N, K, x.stride(-2), x.stride(-1), y.stride(-2), y.stride(-1), tm, tn};
    std::copy(std::begin(v), std::end(v), a.i);
    launch(kernel_name("kiln_matmul", sfx), a, device, /*per_block=*/1);
    return out;
  }
  case Op::max_pool2d:
  case Op::avg_pool2d: {
    const Tensor x = dense(in[0], device);
    if (sfx.empty() || x.dim() < 3) return std::nullopt;
    Tensor out = make_tensor(meta.sizes, meta.dtype, device);
    LibraryArgs a{};
    a.n = out.numel();
    a.p[0] = ptr(out);
    a.p[1] = ptr(x);
    const std::vector<int64_t>&k = attrs.ints(0), &s = attrs.ints(1), &p = attrs.ints(2);
    std::vector<int64_t> v = {k[0], k[1], s[0], s[1], p[0], p[1]};
    if (op == Op::max_pool2d) v.insert(v.end(), attrs.ints(3).begin(), attrs.ints(3).end());
    v.insert(v.end(), {x.size(-2), x.size(-1), out.size(-2), out.size(-1)});
    if (op == Op::avg_pool2d) v.push_back(attrs.b(4) ? 1 : 0);
    std::copy(v.begin(), v.end(), a.i);
    launch(kernel_name(op == Op::max_pool2d ? "kiln_max_pool2d" : "kiln_avg_pool2d", sfx), a,
           device);
    return out;
  }
  default: return std::nullopt;
  }
}

} // namespace

std::string library_source() {
  std::string s(cuda_preamble());
  s += "\n" KILN_TEXT(KILN_LIBRARY_ARGS) "\n";
  // randn's math, the CPU's text (runtime/kernels/normal_math.h).
  s += "#define KILN_FN static __device__ __forceinline__\n"
       "static __device__ __forceinline__ long long kiln_nm_bits(double x) {\n"
       "  return __double_as_longlong(x);\n}\n"
       "static __device__ __forceinline__ double kiln_nm_double(long long b) {\n"
       "  return __longlong_as_double(b);\n}\n" KILN_TEXT(KILN_NORMAL_MATH) "\n";
  s += kKernels;
  for (const Family& f : families())
    for (const char* t : f.types)
      s += "KILN_LIB(" + std::string(f.name) + ", " + t + ", " + traits_of(t) + ")\n";
  return s;
}

std::vector<std::string> library_kernel_names() {
  std::vector<std::string> names;
  for (const Family& f : families())
    for (const char* t : f.types)
      names.push_back(kernel_name(f.name, t));
  return names;
}

std::optional<std::vector<Tensor>> run_library_op(Op op, std::span<const Tensor> inputs,
                                                  const Attrs& attrs,
                                                  std::span<const TensorMeta> metas,
                                                  Device device) {
  if (metas.size() != 1) return std::nullopt;
  std::optional<Tensor> out = run_one(op, inputs, attrs, metas[0], device);
  if (!out) return std::nullopt;
  return std::vector<Tensor>{std::move(*out)};
}

} // namespace kiln::codegen::cuda
