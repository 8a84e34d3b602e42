// Index expressions of the loop IR: affine forms in the loop variables, plus floor division
// and modulo by positive constants (which reshapes of strided data need).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::ir::kernel {

class Index;

/// One term of an affine form: a loop variable, or (inner / d), or (inner mod d), d > 0.
struct Term {
  enum class Kind : uint8_t { var, div, mod };
  Kind kind = Kind::var;
  int var = 0;                        // Kind::var
  std::shared_ptr<const Index> inner; // Kind::div, Kind::mod
  int64_t divisor = 1;
};

/// constant + Σ coefficient·term, kept simplified: like terms combined, zero coefficients
/// dropped, terms in a canonical order. Arithmetic is on int64 (64-bit indices throughout).
class Index {
public:
  Index() = default;
  static Index constant(int64_t c);
  static Index var(int v);

  int64_t offset() const { return constant_; }
  const std::vector<std::pair<int64_t, Term>>& terms() const { return terms_; }
  bool is_constant() const { return terms_.empty(); }
  /// The coefficient of variable v where it appears only as a plain term; nullopt-like -1
  /// is never returned: `affine_in(v)` says whether v appears inside a div/mod.
  int64_t coefficient(int v) const;
  bool affine_in(int v) const;
  bool uses(int v) const;

  friend Index operator+(const Index& a, const Index& b);
  friend Index operator*(const Index& a, int64_t c);
  /// floor(a / d) and a mod d (d > 0), simplified with the variables' extents: each
  /// variable v ranges over [0, extents[v]).
  static Index floordiv(const Index& a, int64_t d, std::span<const int64_t> extents);
  static Index mod(const Index& a, int64_t d, std::span<const int64_t> extents);

  /// The smallest and largest value over the variables' ranges.
  std::pair<int64_t, int64_t> range(std::span<const int64_t> extents) const;

  /// `3 + 4*v0 + v1 + 2*(v2 / 3)`
  std::string str() const;
  friend bool operator==(const Index& a, const Index& b);

private:
  void add_term(int64_t coef, Term t);
  int64_t constant_ = 0;
  std::vector<std::pair<int64_t, Term>> terms_;
};

bool operator==(const Term& a, const Term& b);

} // namespace kiln::ir::kernel
