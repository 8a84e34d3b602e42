// Inline LLVM IR for exp, log, tanh, erf, sigmoid, sin, cos, pow, sqrt and rsqrt: range
// reduction plus minimax polynomials (fitted for this file by a Remez exchange, coefficients
// rounded to the element type), all with llvm.fma and straight-line selects, no calls (but
// for sin/cos of huge arguments, below).
//
// Methods (p = 23 or 52 significand bits; f32 and f64 share the method, not the coefficients):
// - exp: k = rint(x/ln2) by adding 1.5*2^p (the "magic number", one FMA), r = x - k ln2 with a
//   two-part ln2 (FMA), e^r = 1 + r + r^2 P(r), times 2^k in two exact power-of-two steps so
//   that a denormal result is rounded once, by the last multiply. x is clamped first so that
//   the integer arithmetic stays in range (NaN passes the clamp), and lanes whose result
//   rounds to +0 are selected to 0 (no underflowing step: an x86 microcode assist each). On AVX-512
//   targets, vectors of whole 512-bit registers take the 2^k step as one vscalefps/pd per register,
//   which rounds once too: the same bits in one instruction instead of eight.
// - log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) from the bits (denormals scaled by 2^(p+1)
//   first), f = m - 1 exact, s = f/(2+f), log(1+f) = f - f^2/2 + s(f^2/2 + R(s^2)) (fdlibm's
//   arrangement: the rounding error of s only reaches a small correction term), + e ln2.
// - sin/cos: q = the integer nearest x 2/pi, r = x - q pi/2 with pi/2 in three parts
//   (Cody-Waite, FMA); sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) (the rounding
//   error of 1 - r^2/2 added back), chosen and signed by q mod 4. This is accurate (measured
//   <= 1 ulp) for |x| <= 1e6 (f32) and <= 1e15 (f64). A vector with a finite lane beyond
//   takes a branch that calls libm's sinf/sin/cosf/cos (eager's own kernel) for such lanes,
//   in place of a vector Payne-Hanek reduction (such arguments are rare in models).
// - tanh: |x| < 0.625: x + x^3 T(x^2); else 1 - 2/(e^(2|x|) + 1); on |x|, the sign copied last.
// - sigmoid: 1/(1 + e^-x), eager's formula, with the exp above (so it overflows where eager's).
// - erf: |x| < 1: x + x E(x^2); else 1 - e^(-x^2) erfcx(|x|) with erfcx polynomials (in 1/x for
//   f32; three intervals in x for f64), |x| clamped where erf rounds to 1; the sign copied.
// - pow: std::pow's special cases (C99 F.9.4.4) by selects, plus eager's x^2 = x*x. The rest is
//   exp(y log|x|): for f32 in double (|y log x| < 104 wherever the f32 result is finite and
//   nonzero, so double's log and exp leave ~20 bits to spare and the one rounding to f32 is the
//   last); for f64 log|x| is a double-double (relative error ~2^-64) and exp takes the
//   double-double product y log|x|.
// - sqrt: llvm.sqrt; rsqrt: 1 / llvm.sqrt(x), an IEEE division, exactly eager's.
// Measured against eager (glibc) by test/codegen/test_vector_math.cpp, f32 and f64 alike: at
// most 1 ulp for exp, log, erf, cos, pow and sin; 2 for tanh (there
// glibc's tanh is the less accurate); 3 for sigmoid (eager's formula rounds three times, after
// an exp that is itself within 1 ulp of eager's); sqrt and rsqrt are bit-exact.
//
// llvm.fma lowers to one instruction given the host's FMA (every AVX2 x86 has it); without
// FMA the backend would call fma() from libm, which is correct but slow.
#include "codegen/cpu/vector_math.h"

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace kiln::codegen::cpu {
namespace {

using llvm::Value;

// ---- coefficients (Remez fits; the fitted interval and the error are in each comment) ----

// (e^r - 1 - r)/r^2 on |r| <= ln2/2; relative error of e^r 2^-28 (f32), 2^-56 (f64).
constexpr double kExpF32[] = {0x1.fffffcp-2, 0x1.555492p-3, 0x1.5558f2p-5, 0x1.1239d4p-7,
                              0x1.6a244ap-10};
constexpr double kExpF64[] = {0x1.000000000000ap-1,  0x1.55555555554fap-3,  0x1.555555555088cp-5,
                              0x1.1111111127b9dp-7,  0x1.6c16c18426773p-10, 0x1.a01a012a693e5p-13,
                              0x1.a0199a16c446ap-16, 0x1.71df253b42393p-19, 0x1.28ad68bf78217p-22,
                              0x1.ad7f79341dc25p-26};
// R(z)/z, R = 2 atanh(s)/s - 2, z = s^2 <= (3 - 2 sqrt 2)^2; relative error of log(1+f)
// 2^-30 (f32), 2^-58.8 (f64).
constexpr double kLogF32[] = {0x1.55557ap-1, 0x1.995e9cp-2, 0x1.31e664p-2};
constexpr double kLogF64[] = {0x1.5555555555588p-1, 0x1.999999998241ep-2, 0x1.249249403fc8dp-2,
                              0x1.c71c53308e2fep-3, 0x1.74660a8695f66p-3, 0x1.39a664b86efb6p-3,
                              0x1.2edb3eb18fea2p-3};
// ((2 atanh(s) - 2s)/s^3 - 2/3)/z for the double-double log of f64 pow; relative 2^-53.8.
constexpr double kLogTailF64[] = {0x1.999999999999ap-2, 0x1.2492492492523p-2, 0x1.c71c71c6ea460p-3,
                                  0x1.745d177ae498bp-3, 0x1.3b1395b20001fp-3, 0x1.1118ce96a84b5p-3,
                                  0x1.df7b67f751024p-4, 0x1.e03ca7cea6820p-4};
// (sin r - r)/r^3 and (cos r - 1 + r^2/2)/r^4 in z = r^2 on |r| <= pi/4 + 0.01; relative
// errors 2^-27.6 and 2^-29.9 (f32), 2^-56.5 and 2^-61.3 (f64).
constexpr double kSinF32[] = {-0x1.555544p-3, 0x1.1106b8p-7, -0x1.99171ap-13};
constexpr double kCosF32[] = {0x1.55554ap-5, -0x1.6c0ba6p-10, 0x1.99c2acp-16};
constexpr double kSinF64[] = {-0x1.5555555555546p-3, 0x1.111111110f465p-7,   -0x1.a01a019b8d840p-13,
                              0x1.71de35041dedcp-19, -0x1.ae5e0afaecd9bp-26, 0x1.5d785bbba355fp-33};
constexpr double kCosF64[] = {0x1.5555555555549p-5,  -0x1.6c16c16c14ba9p-10,
                              0x1.a01a019c213fep-16, -0x1.27e4f7a244a24p-22,
                              0x1.1ee9a5d9f87dep-29, -0x1.8f8a8507e672fp-37};
// (tanh x - x)/x^3 in z = x^2 on |x| < 0.625; relative error 2^-28.5 (f32), 2^-58.3 (f64).
constexpr double kTanhF32[] = {-0x1.555554p-2, 0x1.111066p-3,  -0x1.b9ee9p-5,
                               0x1.638b58p-6,  -0x1.0bf4fep-7, 0x1.18e1dep-9};
constexpr double kTanhF64[] = {
    -0x1.5555555555554p-2,  0x1.1111111110e27p-3,  -0x1.ba1ba1b9e5287p-5,  0x1.664f48742e239p-6,
    -0x1.226e332b23b5ap-7,  0x1.d6d366852089bp-9,  -0x1.7d9cbfc56bb82p-10, 0x1.350fc243cfe88p-11,
    -0x1.f13e95d96630fp-13, 0x1.80a8c338cdcfcp-14, -0x1.fcd970ca69ff1p-16, 0x1.997529a31e294p-18};
// erf(x)/x - 1 in z = x^2 on |x| < 1; relative error 2^-27.7 (f32), 2^-56.3 (f64).
constexpr double kErfSmallF32[] = {0x1.06eba8p-3, -0x1.81273ep-2, 0x1.ce2cf8p-4, -0x1.b7f90cp-6,
                                   0x1.5405b2p-8, -0x1.a3f7p-11,  0x1.496a3p-14};
constexpr double kErfSmallF64[] = {
    0x1.06eba8214db69p-3,  -0x1.812746b0379e6p-2,  0x1.ce2f21a042b20p-4,  -0x1.b82ce3128499dp-6,
    0x1.565bcd0db02e7p-8,  -0x1.c02db3d8ed2aep-11, 0x1.f9a321a11e807p-14, -0x1.f4d1df39578b3p-17,
    0x1.b9def19e85021p-20, -0x1.5f1d36c6c66e2p-23, 0x1.f7a4125b8949ep-27, -0x1.386ac1476c03ep-30,
    0x1.0579abff1cf33p-34};
// erfcx(x) = e^(x^2) erfc(x) for the erf of |x| >= 1. f32: a polynomial in t = 1/x on
// [1, 3.92] (erf rounds to 1 beyond); f64: polynomials in x - c on [1, 2], [2, 3.5], [3.5, 6]
// (c the midpoint). Fitted for the absolute error of erf = 1 - e^(-x^2) erfcx(x): 2^-31.1
// (f32); 2^-57.3, 2^-63.9, 2^-72.8 (f64).
constexpr double kErfcxF32[] = {0x1.a5bb7p-13, 0x1.1e41c2p-1,  0x1.79003ep-5, -0x1.fc6934p-2,
                                0x1.21f002p-1, -0x1.65ffc4p-2, 0x1.ec11eap-4, -0x1.27b51ap-6};
constexpr double kErfcxF64[3][16] = {
    {0x1.494daffa2ad68p-2, -0x1.4f1988444caf0p-3, 0x1.37ea271bc54d8p-4, -0x1.0dc51d2943183p-5,
     0x1.b65944f344d0fp-7, -0x1.513ed75e3f520p-8, 0x1.ee705e83a5ecfp-10, -0x1.5b0ac11590e05p-11,
     0x1.d450929c5bff3p-13, -0x1.30c086cf0e7c4p-14, 0x1.7f9cd6cc99a28p-16, -0x1.d43a31f33f8cbp-18,
     0x1.14da0f47fd0c2p-19, -0x1.3c85d99c49b8fp-21, 0x1.80d05772c268ep-23, -0x1.d86ed28a363bdp-25},
    {0x1.8c9eb68ff27d7p-3, -0x1.03057813300bep-4, 0x1.43b98bac831a0p-6, -0x1.84e9ab30e014ap-8,
     0x1.c2c72fd86e93dp-10, -0x1.f99e41ed3785bp-12, 0x1.131bb0c546033p-13, -0x1.2312b4fa8b0aap-15,
     0x1.2bfb97f951114p-17, -0x1.2da18794b34b4p-19, 0x1.284c9cb9f7310p-21, -0x1.1d3396e932f20p-23,
     0x1.0caad85c824a7p-25, -0x1.d95828d509f9fp-28, 0x1.cd07be65b122ap-30, -0x1.3a340f73c479bp-31},
    {0x1.dc603a3e77e9bp-4, -0x1.81149bc4a0d05p-6, 0x1.317c144f8bcecp-8, -0x1.dc1af884539b7p-11,
     0x1.6cc10c144cb1ap-13, -0x1.12f173e6b5fbcp-15, 0x1.9818c2639e29bp-18, -0x1.2a627e1f0ddf4p-20,
     0x1.ae1ef2e59d004p-23, -0x1.31bc0db9b8b2fp-25, 0x1.ad20ef5bb8cdbp-28, -0x1.29ff98d9cf6dap-30,
     0x1.9219aac00b06fp-33, -0x1.03f3df6c8f419p-35, 0x1.ab213602065bdp-38, -0x1.5dbaad0e1867cp-40}};
constexpr double kErfcxF64Centre[3] = {1.5, 2.75, 4.75};

/// Emits the arithmetic of one element type (float or double), scalar or vector.
class Math {
public:
  Math(llvm::IRBuilderBase& b, llvm::Type* ty)
      : b_(b), ty_(ty), dbl_(ty->getScalarType()->isDoubleTy()),
        ity_(ty->getWithNewType(dbl_ ? b.getInt64Ty() : b.getInt32Ty())) {
    KILN_ASSERT(ty->getScalarType()->isFloatTy() || dbl_, "vector math on a non-float type");
    const llvm::Function* f = b.GetInsertBlock()->getParent();
    const llvm::Attribute features = f->getFnAttribute("target-features");
    avx512_ = features.isValid() && features.getValueAsString().contains("+avx512f");
  }

  /// Bits of the significand (23 or 52), the exponent bias, the width.
  int mbits() const { return dbl_ ? 52 : 23; }
  int bias() const { return dbl_ ? 1023 : 127; }
  int width() const { return dbl_ ? 64 : 32; }

  Value* c(double v) { return llvm::ConstantFP::get(ty_, v); }
  Value* ci(int64_t v) { return llvm::ConstantInt::get(ity_, static_cast<uint64_t>(v), true); }
  Value* inf() { return c(std::numeric_limits<double>::infinity()); }
  Value* nan() { return c(std::numeric_limits<double>::quiet_NaN()); }

  Value* add(Value* x, Value* y) { return b_.CreateFAdd(x, y); }
  Value* sub(Value* x, Value* y) { return b_.CreateFSub(x, y); }
  Value* mul(Value* x, Value* y) { return b_.CreateFMul(x, y); }
  Value* div(Value* x, Value* y) { return b_.CreateFDiv(x, y); }
  Value* neg(Value* x) { return b_.CreateFNeg(x); }
  Value* fma(Value* x, Value* y, Value* z) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fma, {ty_}, {x, y, z});
  }
  Value* abs(Value* x) { return b_.CreateIntrinsic(llvm::Intrinsic::fabs, {ty_}, {x}); }
  Value* sqrt(Value* x) { return b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {ty_}, {x}); }
  Value* copysign(Value* mag, Value* sgn) {
    return b_.CreateIntrinsic(llvm::Intrinsic::copysign, {ty_}, {mag, sgn});
  }
  Value* sel(Value* cond, Value* x, Value* y) { return b_.CreateSelect(cond, x, y); }
  // Ordered comparisons: false when either side is NaN.
  Value* lt(Value* x, Value* y) { return b_.CreateFCmpOLT(x, y); }
  Value* gt(Value* x, Value* y) { return b_.CreateFCmpOGT(x, y); }
  Value* ge(Value* x, Value* y) { return b_.CreateFCmpOGE(x, y); }
  Value* eq(Value* x, Value* y) { return b_.CreateFCmpOEQ(x, y); }
  Value* isnan(Value* x) { return b_.CreateFCmpUNO(x, x); }
  Value* and_(Value* x, Value* y) { return b_.CreateAnd(x, y); }
  Value* or_(Value* x, Value* y) { return b_.CreateOr(x, y); }
  Value* not_(Value* x) { return b_.CreateNot(x); }

  Value* bits(Value* x) { return b_.CreateBitCast(x, ity_); }
  Value* from_bits(Value* i) { return b_.CreateBitCast(i, ty_); }
  Value* iadd(Value* x, Value* y) { return b_.CreateAdd(x, y); }
  Value* isub(Value* x, Value* y) { return b_.CreateSub(x, y); }
  Value* iand(Value* x, Value* y) { return b_.CreateAnd(x, y); }
  Value* shl(Value* x, int n) { return b_.CreateShl(x, static_cast<uint64_t>(n)); }
  Value* ashr(Value* x, int n) { return b_.CreateAShr(x, static_cast<uint64_t>(n)); }
  Value* lshr(Value* x, int n) { return b_.CreateLShr(x, static_cast<uint64_t>(n)); }
  Value* ine(Value* x, Value* y) { return b_.CreateICmpNE(x, y); }
  Value* islt(Value* x, Value* y) { return b_.CreateICmpSLT(x, y); }
  Value* to_float(Value* i) { return b_.CreateSIToFP(i, ty_); }

  /// Clamps to [lo, hi]; NaN stays NaN.
  Value* clamp(Value* x, double lo, double hi) {
    x = sel(lt(x, c(lo)), c(lo), x);
    return sel(gt(x, c(hi)), c(hi), x);
  }

  /// c[0] + z (c[1] + z (c[2] + ...)) by FMA.
  template <size_t N> Value* poly(Value* z, const double (&coeffs)[N]) {
    Value* acc = c(coeffs[N - 1]);
    for (size_t i = N - 1; i-- > 0;)
      acc = fma(acc, z, c(coeffs[i]));
    return acc;
  }
  template <size_t N32, size_t N64>
  Value* poly(Value* z, const double (&f32)[N32], const double (&f64)[N64]) {
    return dbl_ ? poly(z, f64) : poly(z, f32);
  }

  /// 1.5 * 2^p: adding it rounds |v| < 2^(p-1) to an integer held in the low bits.
  double magic() const { return dbl_ ? 0x1.8p52 : 0x1.8p23; }
  /// rint(v) as a float and as an integer, for |v| < 2^(p-1).
  std::pair<Value*, Value*> rint_magic(Value* t_plus_magic) {
    Value* f = sub(t_plus_magic, c(magic()));
    Value* i = isub(bits(t_plus_magic), bits(c(magic())));
    return {f, i};
  }

  /// p * 2^k for integer k with |k| <= 2 * bias, in two exact power-of-two steps: when the
  /// result is denormal, the second multiply rounds once.
  Value* ldexp(Value* p, Value* k) {
    Value* k1 = ashr(k, 1);
    Value* k2 = isub(k, k1);
    Value* s1 = from_bits(shl(iadd(k1, ci(bias())), mbits()));
    Value* s2 = from_bits(shl(iadd(k2, ci(bias())), mbits()));
    return mul(mul(p, s1), s2);
  }

  /// p * 2^kf (kf an integer-valued float, |kf| <= 2 * bias) by AVX-512's scalef, one per
  /// 512-bit register of a vector that fills whole registers: the exact product rounded once,
  /// as ldexp's two steps give. Null where the target or the width does not allow it.
  Value* scalef(Value* p, Value* kf) {
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(ty_);
    const unsigned per = dbl_ ? 8 : 16;
    if (!avx512_ || vt == nullptr || vt->getNumElements() % per != 0) return nullptr;
    const auto id = dbl_ ? llvm::Intrinsic::x86_avx512_mask_scalef_pd_512
                         : llvm::Intrinsic::x86_avx512_mask_scalef_ps_512;
    llvm::Type* reg = llvm::FixedVectorType::get(ty_->getScalarType(), per);
    llvm::Value* all = llvm::ConstantInt::get(dbl_ ? b_.getInt8Ty() : b_.getInt16Ty(), -1, true);
    llvm::Value* round = b_.getInt32(4); // the current rounding mode (nearest even)
    std::vector<Value*> parts;
    for (unsigned at = 0; at < vt->getNumElements(); at += per) {
      auto piece = [&](Value* v) {
        return vt->getNumElements() == per
                   ? v
                   : b_.CreateShuffleVector(v, llvm::createSequentialMask(at, per, 0));
      };
      parts.push_back(b_.CreateIntrinsic(
          id, {}, {piece(p), piece(kf), llvm::Constant::getNullValue(reg), all, round}));
    }
    return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
  }

  // ---- the functions ----

  /// e^(x + lo), lo a small correction (the low half of a double-double) or null.
  Value* exp(Value* x, Value* lo = nullptr) {
    double min = dbl_ ? -760.0 : -110.0, max = dbl_ ? 710.0 : 89.0;
    if (lo) lo = sel(or_(lt(x, c(min)), gt(x, c(max))), c(0.0), lo);
    // Below ln(2^-(p+2)) (e^x < half the smallest denormal) the result is +0. Such lanes
    // compute e^0 instead and are selected to 0 after: the underflow of the last step would
    // cost a microcode assist per vector on x86 (a masked softmax's -inf lanes: 5x slower).
    Value* zero = lt(x, c(dbl_ ? -746.0 : -104.0));
    x = clamp(sel(zero, c(0.0), x), min, max);
    double ln2_hi = dbl_ ? 0x1.62e42fefa39efp-1 : 0x1.62e43p-1;
    double ln2_lo = dbl_ ? 0x1.abc9e3b39803fp-56 : -0x1.05c61p-29;
    double log2e = dbl_ ? 0x1.71547652b82fep+0 : 0x1.715476p+0;
    auto [kf, ki] = rint_magic(fma(x, c(log2e), c(magic())));
    Value* r = fma(kf, c(-ln2_hi), x);
    r = fma(kf, c(-ln2_lo), r);
    if (lo) r = add(r, lo);
    Value* u = fma(mul(r, r), poly(r, kExpF32, kExpF64), r); // e^r - 1
    Value* p = add(c(1.0), u);
    Value* scaled = scalef(p, kf);
    return sel(zero, c(0.0), scaled ? scaled : ldexp(p, ki));
  }

  /// Splits finite x > 0 (denormals included) as 2^e * m, m in [sqrt(1/2), sqrt(2)); returns
  /// {m - 1 (exact), e as a float}.
  std::pair<Value*, Value*> log_reduce(Value* x) {
    double min_normal = dbl_ ? 0x1p-1022 : 0x1p-126;
    Value* tiny = lt(x, c(min_normal));
    x = sel(tiny, mul(x, c(dbl_ ? 0x1p54 : 0x1p24)), x);
    Value* eadj = sel(tiny, ci(dbl_ ? -54 : -24), ci(0));
    int64_t one = dbl_ ? 0x3ff0000000000000 : 0x3f800000;
    int64_t sqrt_half = dbl_ ? 0x3fe6a09e667f3bcd : 0x3f3504f3;
    // Moving the exponent's origin to sqrt(1/2): the exponent field of ix counts from there.
    Value* ix = iadd(bits(x), ci(one - sqrt_half));
    Value* e = iadd(isub(lshr(ix, mbits()), ci(bias())), eadj);
    Value* m = from_bits(iadd(iand(ix, ci((int64_t(1) << mbits()) - 1)), ci(sqrt_half)));
    return {sub(m, c(1.0)), to_float(e)};
  }

  Value* log(Value* x) {
    auto [f, e] = log_reduce(x);
    double ln2_hi = dbl_ ? 0x1.62e42fefa39efp-1 : 0x1.62e43p-1;
    double ln2_lo = dbl_ ? 0x1.abc9e3b39803fp-56 : -0x1.05c61p-29;
    Value* s = div(f, add(c(2.0), f));
    Value* z = mul(s, s);
    Value* r = mul(z, poly(z, kLogF32, kLogF64));
    Value* hfsq = mul(mul(c(0.5), f), f);
    // log(1+f) = f - (hfsq - s (hfsq + R)); e ln2 added last with the larger part in the FMA.
    Value* small = fma(s, add(hfsq, r), mul(e, c(ln2_lo)));
    Value* res = fma(e, c(ln2_hi), sub(f, sub(hfsq, small)));
    res = sel(eq(x, c(0.0)), neg(inf()), res);
    res = sel(lt(x, c(0.0)), nan(), res);
    res = sel(eq(x, inf()), inf(), res);
    return sel(isnan(x), x, res);
  }

  Value* sin_cos(Value* x, bool cosine) {
    // q = the integer nearest x * 2/pi: rint(x * c_hi), then moved by one where the exact
    // remainder x * c_hi - q (one FMA) plus x * c_lo passes +-1/2, so that |r| <= pi/4 up to
    // the magic number's limit |q| < 2^(p-1) (and not only while x * (2/pi - c_hi) is small).
    double c_hi = dbl_ ? 0x1.45f306dc9c883p-1 : 0x1.45f306p-1;
    double c_lo = dbl_ ? -0x1.6b01ec5417056p-55 : 0x1.b93910p-26;
    auto [q0f, q0i] = rint_magic(fma(x, c(c_hi), c(magic())));
    Value* frac = fma(x, c(c_lo), fma(x, c(c_hi), neg(q0f)));
    Value* up = gt(frac, c(0.5));
    Value* down = lt(frac, c(-0.5));
    Value* qf = add(q0f, sel(up, c(1.0), sel(down, c(-1.0), c(0.0))));
    Value* qi = iadd(q0i, sel(up, ci(1), sel(down, ci(-1), ci(0))));
    double p1 = dbl_ ? 0x1.921fb54442d18p+0 : 0x1.921fb6p+0;
    double p2 = dbl_ ? 0x1.1a62633145c07p-54 : -0x1.777a5cp-25;
    double p3 = dbl_ ? -0x1.f1976b7ed8fbcp-110 : -0x1.ee59dap-50;
    Value* r = fma(qf, c(-p1), x);
    r = fma(qf, c(-p2), r);
    r = fma(qf, c(-p3), r);
    // Beyond the accurate range q is not the nearest integer to x*2/pi; keep r (and the
    // polynomials) bounded there. NaN and inf (r = NaN) pass.
    r = clamp(r, -1.0, 1.0);
    Value* z = mul(r, r);
    Value* sin_r = fma(mul(z, r), poly(z, kSinF32, kSinF64), r);
    // 1 - z/2 rounds; its error (1 - w) - z/2 is exact and added back with the tail.
    Value* hz = mul(c(0.5), z);
    Value* w = sub(c(1.0), hz);
    Value* tail = fma(mul(z, z), poly(z, kCosF32, kCosF64), sub(sub(c(1.0), w), hz));
    Value* cos_r = add(w, tail);
    // sin(x) = [sin r, cos r, -sin r, -cos r][q mod 4]; cos(x) = sin(x + pi/2).
    Value* n = cosine ? iadd(qi, ci(1)) : qi;
    Value* swap = ine(iand(n, ci(1)), ci(0));
    Value* res = sel(swap, cos_r, sin_r);
    Value* sign = shl(iand(n, ci(2)), width() - 2);
    res = from_bits(b_.CreateXor(bits(res), sign));
    res = clamp(res, -1.0, 1.0);
    // r + r^3 S(r^2) gives +0 for r = -0 (S(0) < 0); sin(-0) is -0.
    res = cosine ? res : sel(eq(x, c(0.0)), x, res);
    return beyond_reduction(x, res, dbl_ ? 1e15 : 1e6,
                            cosine ? (dbl_ ? "cos" : "cosf") : (dbl_ ? "sin" : "sinf"));
  }

  /// res, but where a lane of x is finite with |x| > limit (past the range where the
  /// Cody-Waite reduction is accurate, rare in practice) that lane is libm's `fn` (what the
  /// eager kernel computes), on a branch taken only by a vector that holds such a lane.
  Value* beyond_reduction(Value* x, Value* res, double limit, const char* fn) {
    Value* ax = abs(x);
    Value* far = and_(gt(ax, c(limit)), lt(ax, inf()));
    auto* vec = llvm::dyn_cast<llvm::FixedVectorType>(ty_);
    Value* any = vec != nullptr ? b_.CreateOrReduce(far) : far;
    llvm::BasicBlock* fast = b_.GetInsertBlock();
    llvm::Function* f = fast->getParent();
    llvm::LLVMContext& ctx = f->getContext();
    auto* slow = llvm::BasicBlock::Create(ctx, "libm", f);
    auto* join = llvm::BasicBlock::Create(ctx, "libm.join", f);
    b_.CreateCondBr(any, slow, join);
    b_.SetInsertPoint(slow);
    llvm::Type* el = ty_->getScalarType();
    llvm::FunctionCallee callee =
        f->getParent()->getOrInsertFunction(fn, llvm::FunctionType::get(el, {el}, false));
    Value* exact = nullptr;
    if (vec == nullptr) {
      exact = b_.CreateCall(callee, {x});
    } else {
      exact = llvm::PoisonValue::get(ty_);
      for (unsigned i = 0; i < vec->getNumElements(); ++i)
        exact = b_.CreateInsertElement(
            exact, b_.CreateCall(callee, {b_.CreateExtractElement(x, uint64_t{i})}), uint64_t{i});
    }
    // The near lanes keep the inline result, so every vector width computes what the scalar
    // code computes.
    exact = sel(far, exact, res);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(ty_, 2);
    phi->addIncoming(res, fast);
    phi->addIncoming(exact, slow);
    return phi;
  }

  // Both branches on |x|, the sign restored last (x + x^3 T would lose the sign of -0).
  Value* tanh(Value* x) {
    Value* ax = abs(x);
    Value* z = mul(ax, ax);
    Value* small = fma(mul(z, ax), poly(z, kTanhF32, kTanhF64), ax);
    Value* large = sub(c(1.0), div(c(2.0), add(exp(add(ax, ax)), c(1.0))));
    return copysign(sel(lt(ax, c(0.625)), small, large), x);
  }

  Value* sigmoid(Value* x) { return div(c(1.0), add(c(1.0), exp(neg(x)))); }

  Value* erf(Value* x) {
    Value* ax = abs(x);
    Value* small = fma(x, poly(mul(x, x), kErfSmallF32, kErfSmallF64), x);
    Value* a = sel(gt(ax, c(dbl_ ? 6.0 : 4.0)), c(dbl_ ? 6.0 : 4.0), ax);
    Value* large = sub(c(1.0), mul(exp(neg(mul(a, a))), erfcx(a)));
    Value* res = sel(lt(ax, c(1.0)), small, copysign(large, x));
    return sel(isnan(x), x, res);
  }

  Value* erfcx(Value* a);

  /// log(x) as a double-double (relative error ~2^-64) for f64 pow; x >= 0.
  std::pair<Value*, Value*> log_dd(Value* x);

  Value* pow(Value* x, Value* y);

private:
  llvm::IRBuilderBase& b_;
  llvm::Type* ty_;
  bool dbl_;
  llvm::Type* ity_;
  bool avx512_ = false; // the function's target has AVX-512F (scalef)
};

Value* Math::erfcx(Value* a) {
  if (!dbl_) return poly(div(c(1.0), a), kErfcxF32);
  // The interval's coefficients by selects (a blend each), then one Horner chain.
  Value* first = lt(a, c(2.0));
  Value* second = lt(a, c(3.5));
  auto pick = [&](double v0, double v1, double v2) {
    return sel(first, c(v0), sel(second, c(v1), c(v2)));
  };
  const auto& k = kErfcxF64;
  Value* u = sub(a, pick(kErfcxF64Centre[0], kErfcxF64Centre[1], kErfcxF64Centre[2]));
  Value* acc = pick(k[0][15], k[1][15], k[2][15]);
  for (int i = 14; i >= 0; --i)
    acc = fma(acc, u, pick(k[0][i], k[1][i], k[2][i]));
  return acc;
}

std::pair<Value*, Value*> Math::log_dd(Value* x) {
  KILN_ASSERT(dbl_, "the double-double log is for f64");
  auto [f, e] = log_reduce(x);
  // s = f / (2 + f) as s_hi + s_lo: 2 + f = d_hi + d_lo exactly (Fast2Sum), and the residual
  // f - s_hi d_hi of a correctly rounded quotient is exact under FMA.
  Value* d_hi = add(c(2.0), f);
  Value* d_lo = add(sub(c(2.0), d_hi), f);
  Value* s_hi = div(f, d_hi);
  Value* rem = fma(neg(s_hi), d_lo, fma(neg(s_hi), d_hi, f));
  Value* s_lo = div(rem, d_hi);
  // z = s^2 and s^3 as double-doubles (products split exactly by FMA).
  Value* z_hi = mul(s_hi, s_hi);
  Value* z_lo = fma(add(s_hi, s_hi), s_lo, fma(s_hi, s_hi, neg(z_hi)));
  Value* s3_hi = mul(z_hi, s_hi);
  Value* s3_lo = fma(z_hi, s_lo, fma(z_lo, s_hi, fma(z_hi, s_hi, neg(s3_hi))));
  // log(1+f) = 2 atanh(s) = 2s + s^3 (2/3 + z W(z)); the tail z W(z) < 0.012 needs no more
  // than double precision, 2/3 does.
  Value* tail = mul(z_hi, poly(z_hi, kLogTailF64));
  double two_thirds_hi = 0x1.5555555555555p-1, two_thirds_lo = 0x1.5555555555555p-55;
  Value* w_hi = add(c(two_thirds_hi), tail);
  Value* w_lo = add(add(sub(c(two_thirds_hi), w_hi), tail), c(two_thirds_lo));
  Value* b_hi = mul(s3_hi, w_hi);
  Value* b_lo = fma(s3_hi, w_lo, fma(s3_lo, w_hi, fma(s3_hi, w_hi, neg(b_hi))));
  Value* a_hi = add(s_hi, s_hi);
  Value* m_hi = add(a_hi, b_hi); // |2s| > |B|: Fast2Sum
  Value* m_lo = add(add(sub(a_hi, m_hi), b_hi), add(add(s_lo, s_lo), b_lo));
  // + e ln2, ln2_hi with 32 significant bits so that e ln2_hi is exact; TwoSum (either side
  // may be the larger).
  Value* k_hi = mul(e, c(0x1.62e42feep-1));
  Value* k_lo = mul(e, c(0x1.a39ef35793c76p-33));
  Value* l_hi = add(k_hi, m_hi);
  Value* v = sub(l_hi, k_hi);
  Value* err = add(sub(k_hi, sub(l_hi, v)), sub(m_hi, v));
  Value* l_lo = add(err, add(m_lo, k_lo));
  Value* hi = add(l_hi, l_lo);
  Value* lo = sub(l_lo, sub(hi, l_hi));
  // log 0 = -inf, log inf = inf, NaN stays, each with a zero low half.
  Value* zero = eq(x, c(0.0));
  Value* inf_or_nan = or_(eq(x, inf()), isnan(x));
  hi = sel(zero, neg(inf()), sel(inf_or_nan, x, hi));
  lo = sel(or_(zero, inf_or_nan), c(0.0), lo);
  return {hi, lo};
}

Value* Math::pow(Value* x, Value* y) {
  Value* ax = abs(x);
  Value* mag; // |x|^y for the cases the table below leaves
  if (!dbl_) {
    llvm::Type* dty = ty_->getWithNewType(b_.getDoubleTy());
    Math d(b_, dty);
    Value* l = d.log(b_.CreateFPExt(ax, dty));
    mag = b_.CreateFPTrunc(d.exp(d.mul(b_.CreateFPExt(y, dty), l)), ty_);
  } else {
    // |y log x| up to 745 amplifies log's relative error up to 2^10 times: log|x| and the
    // product are double-doubles. exp drops the low half where the high half over/underflows.
    auto [l_hi, l_lo] = log_dd(ax);
    Value* p_hi = mul(y, l_hi);
    Value* p_lo = fma(y, l_lo, fma(y, l_hi, neg(p_hi)));
    mag = exp(p_hi, p_lo);
  }
  // y's parity from its bits: |y| >= 2^p is an integer (even from 2^(p+1)); below, adding 2^p
  // rounds |y| to an integer whose parity is the low bit.
  Value* ay = abs(y);
  double two_p = dbl_ ? 0x1p52 : 0x1p23;
  Value* big = ge(ay, c(two_p));
  Value* t = add(ay, c(two_p));
  Value* is_int = or_(big, eq(sub(t, c(two_p)), ay));
  Value* low_bit = ine(iand(bits(sel(big, ay, t)), ci(1)), ci(0));
  Value* odd = and_(and_(is_int, low_bit), lt(ay, c(2 * two_p)));
  // std::pow's table (C99 F.9.4.4), later selects overriding earlier ones.
  Value* res = sel(and_(odd, islt(bits(x), ci(0))), neg(mag), mag); // sign of x, -0 included
  Value* neg_finite = and_(lt(x, c(0.0)), gt(x, neg(inf())));
  res = sel(and_(neg_finite, not_(is_int)), nan(), res);
  res = sel(and_(eq(ax, c(1.0)), eq(ay, inf())), c(1.0), res); // (-1)^±inf
  res = sel(or_(eq(x, c(1.0)), eq(y, c(0.0))), c(1.0), res);   // even for NaN
  res = sel(eq(y, c(1.0)), x, res);
  return sel(eq(y, c(2.0)), mul(x, x), res); // eager's x^2 = x * x
}

} // namespace

bool has_vector_math(kiln::Op op) {
  switch (op) {
  case Op::exp:
  case Op::log:
  case Op::tanh:
  case Op::erf:
  case Op::sigmoid:
  case Op::sin:
  case Op::cos:
  case Op::pow:
  case Op::sqrt:
  case Op::rsqrt: return true;
  default: return false;
  }
}

llvm::Value* emit_math(llvm::IRBuilderBase& b, kiln::Op op, llvm::Value* x, llvm::Value* y) {
  KILN_ASSERT(has_vector_math(op), "emit_math: no vector math for this op");
  KILN_ASSERT((op == Op::pow) == (y != nullptr), "emit_math: pow takes two operands, the rest one");
  KILN_ASSERT(y == nullptr || y->getType() == x->getType(), "emit_math: operand types differ");
  // The algorithms rely on exact IEEE behaviour (error-free transformations, magic-number
  // rounding, NaN tests): no fast-math flags of the caller's, restored on return.
  llvm::IRBuilderBase::FastMathFlagGuard keep_flags(b);
  b.clearFastMathFlags();
  Math m(b, x->getType());
  switch (op) {
  case Op::exp: return m.exp(x);
  case Op::log: return m.log(x);
  case Op::tanh: return m.tanh(x);
  case Op::erf: return m.erf(x);
  case Op::sigmoid: return m.sigmoid(x);
  case Op::sin: return m.sin_cos(x, false);
  case Op::cos: return m.sin_cos(x, true);
  case Op::pow: return m.pow(x, y);
  case Op::sqrt: return m.sqrt(x);
  case Op::rsqrt: return m.div(m.c(1.0), m.sqrt(x));
  default: KILN_UNREACHABLE("emit_math: unhandled op");
  }
}

llvm::Value* emit_math_call(llvm::IRBuilderBase& b, kiln::Op op, llvm::Value* x, llvm::Value* y) {
  KILN_ASSERT(has_vector_math(op), "emit_math_call: no vector math for this op");
  llvm::Function* caller = b.GetInsertBlock()->getParent();
  llvm::Module& m = *caller->getParent();
  llvm::Type* ty = x->getType();
  // kiln.math.<op>.<type>, the type as LLVM mangles intrinsic overloads (v16f32, f64, ...).
  std::string name = "kiln.math." + std::string(op_name(op)) + ".";
  if (auto* vec = llvm::dyn_cast<llvm::FixedVectorType>(ty))
    name += "v" + std::to_string(vec->getNumElements());
  name += ty->getScalarType()->isDoubleTy() ? "f64" : "f32";
  // Every kernel of a module has the module's target attributes: one copy serves them all.
  const llvm::Attribute cpu = caller->getFnAttribute("target-cpu");
  const llvm::Attribute features = caller->getFnAttribute("target-features");
  llvm::Function* f = m.getFunction(name);
  if (f == nullptr) {
    std::vector<llvm::Type*> params(y != nullptr ? 2 : 1, ty);
    f = llvm::Function::Create(llvm::FunctionType::get(ty, params, false),
                               llvm::Function::InternalLinkage, name, m);
    f->setCallingConv(llvm::CallingConv::Fast);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addFnAttr(llvm::Attribute::NoInline);
    if (cpu.isValid()) f->addFnAttr(cpu);
    if (features.isValid()) f->addFnAttr(features);
    llvm::IRBuilder<> fb(llvm::BasicBlock::Create(m.getContext(), "entry", f));
    fb.CreateRet(emit_math(fb, op, f->getArg(0), y != nullptr ? f->getArg(1) : nullptr));
  }
  llvm::SmallVector<llvm::Value*, 2> args{x};
  if (y != nullptr) args.push_back(y);
  llvm::CallInst* call = b.CreateCall(f, args);
  call->setCallingConv(llvm::CallingConv::Fast);
  call->setDoesNotThrow();
  return call;
}

} // namespace kiln::codegen::cpu
