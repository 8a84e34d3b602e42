// The log, sine and cosine of randn's Box-Muller transform, written once for the CPU's randn
// kernel (runtime/kernels/random.cpp) and the CUDA library's (codegen/cuda/library.cpp takes
// this text as a string), so that both compute the same bits: libm's and CUDA's functions
// differ in the last bit. They use only +, -, *, / (never fused: random.cpp is compiled with
// -ffp-contract=off, the CUDA library with --fmad=false), floor and bit moves, all exact or
// correctly rounded under IEEE 754 on either side, in double precision: within a few units in
// the last place of the true values.
//
// KILN_NORMAL_MATH expands to the definitions, each prefixed by KILN_FN (defined by the side
// that expands it), over two helpers it declares: kiln_nm_bits (a double's bits as a long long)
// and kiln_nm_double (the reverse).
#pragma once

// kiln_nm_log(x), x a positive normal double: e ln 2 + log m for x = m 2^e, m in
// [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172, as its odd
// series to s^25 (the rest below 2^-60 of it); ln 2 in two parts (fdlibm's), so e ln2_hi is
// exact.
// kiln_nm_sincos(t, s, c), 0 <= t < 8: t = k pi/2 + r with |r| <= pi/4 (pi/2 in two parts, the
// first of 33 bits, so k pi/2_hi is exact), sin r and cos r as their Taylor series to r^19 and
// r^20 (the rest below 2^-70), mapped to the quadrant k mod 4.
#define KILN_NORMAL_MATH                                                                           \
  KILN_FN double kiln_nm_log(double x) {                                                           \
    const long long b = kiln_nm_bits(x);                                                           \
    long long e = ((b >> 52) & 0x7ff) - 1023;                                                      \
    double m = kiln_nm_double((b & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);                  \
    if (m > 1.4142135623730951) {                                                                  \
      m = m * 0.5;                                                                                 \
      e = e + 1;                                                                                   \
    }                                                                                              \
    const double s = (m - 1.0) / (m + 1.0), z = s * s;                                             \
    double p = 1.0 / 25.0;                                                                         \
    p = p * z + 1.0 / 23.0;                                                                        \
    p = p * z + 1.0 / 21.0;                                                                        \
    p = p * z + 1.0 / 19.0;                                                                        \
    p = p * z + 1.0 / 17.0;                                                                        \
    p = p * z + 1.0 / 15.0;                                                                        \
    p = p * z + 1.0 / 13.0;                                                                        \
    p = p * z + 1.0 / 11.0;                                                                        \
    p = p * z + 1.0 / 9.0;                                                                         \
    p = p * z + 1.0 / 7.0;                                                                         \
    p = p * z + 1.0 / 5.0;                                                                         \
    p = p * z + 1.0 / 3.0;                                                                         \
    const double log_m = 2.0 * s + 2.0 * s * (z * p);                                              \
    const double de = (double)e;                                                                   \
    return de * 6.93147180369123816490e-01 + (de * 1.90821492927058770002e-10 + log_m);            \
  }                                                                                                \
  KILN_FN void kiln_nm_sincos(double t, double* sin_t, double* cos_t) {                            \
    const double k = floor(t * 0.63661977236758134308 + 0.5);                                      \
    const double r = (t - k * 1.57079632673412561417e+00) - k * 6.07710050650619224932e-11;        \
    const double z = r * r;                                                                        \
    double sp = -1.0 / 121645100408832000.0;                                                       \
    sp = sp * z + 1.0 / 355687428096000.0;                                                         \
    sp = sp * z - 1.0 / 1307674368000.0;                                                           \
    sp = sp * z + 1.0 / 6227020800.0;                                                              \
    sp = sp * z - 1.0 / 39916800.0;                                                                \
    sp = sp * z + 1.0 / 362880.0;                                                                  \
    sp = sp * z - 1.0 / 5040.0;                                                                    \
    sp = sp * z + 1.0 / 120.0;                                                                     \
    sp = sp * z - 1.0 / 6.0;                                                                       \
    const double sr = r + r * (z * sp);                                                            \
    double cp = 1.0 / 2432902008176640000.0;                                                       \
    cp = cp * z - 1.0 / 6402373705728000.0;                                                        \
    cp = cp * z + 1.0 / 20922789888000.0;                                                          \
    cp = cp * z - 1.0 / 87178291200.0;                                                             \
    cp = cp * z + 1.0 / 479001600.0;                                                               \
    cp = cp * z - 1.0 / 3628800.0;                                                                 \
    cp = cp * z + 1.0 / 40320.0;                                                                   \
    cp = cp * z - 1.0 / 720.0;                                                                     \
    cp = cp * z + 1.0 / 24.0;                                                                      \
    cp = cp * z - 0.5;                                                                             \
    const double cr = 1.0 + z * cp;                                                                \
    switch ((int)k & 3) {                                                                          \
    case 0:                                                                                        \
      *sin_t = sr;                                                                                 \
      *cos_t = cr;                                                                                 \
      break;                                                                                       \
    case 1:                                                                                        \
      *sin_t = cr;                                                                                 \
      *cos_t = -sr;                                                                                \
      break;                                                                                       \
    case 2:                                                                                        \
      *sin_t = -sr;                                                                                \
      *cos_t = -cr;                                                                                \
      break;                                                                                       \
    default:                                                                                       \
      *sin_t = -cr;                                                                                \
      *cos_t = sr;                                                                                 \
      break;                                                                                       \
    }                                                                                              \
  }

namespace kiln::kernels {

/// The functions of KILN_NORMAL_MATH as the CPU's randn runs them (for the tests).
double normal_log(double x);
void normal_sincos(double t, double* sin_t, double* cos_t);

} // namespace kiln::kernels
