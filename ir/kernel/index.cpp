// Index expressions: construction, simplification, range analysis, printing.
#include "ir/kernel/index.h"

#include <algorithm>
#include <tuple>

#include "runtime/error.h"

namespace kiln::ir::kernel {
namespace {

int64_t floor_div(int64_t a, int64_t d) {
  int64_t q = a / d;
  return (a % d != 0 && (a < 0) != (d < 0)) ? q - 1 : q;
}

// Appends rather than `"(" + str`: GCC 12 warns (-Wrestrict, falsely) on literal + string.
std::string term_str(const Term& t) {
  std::string s;
  if (t.kind == Term::Kind::var) {
    s = "v";
    s += std::to_string(t.var);
    return s;
  }
  s = "(";
  s += t.inner->str();
  s += t.kind == Term::Kind::div ? " / " : " % ";
  s += std::to_string(t.divisor);
  s += ")";
  return s;
}

bool term_less(const Term& a, const Term& b) {
  if (a.kind != b.kind) return a.kind < b.kind;
  if (a.kind == Term::Kind::var) return a.var < b.var;
  if (a.divisor != b.divisor) return a.divisor < b.divisor;
  return a.inner->str() < b.inner->str();
}

} // namespace

bool operator==(const Term& a, const Term& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Term::Kind::var) return a.var == b.var;
  return a.divisor == b.divisor && *a.inner == *b.inner;
}

bool operator==(const Index& a, const Index& b) {
  return a.constant_ == b.constant_ && a.terms_ == b.terms_;
}

Index Index::constant(int64_t c) {
  Index i;
  i.constant_ = c;
  return i;
}

Index Index::var(int v) {
  Index i;
  i.terms_.push_back({1, Term{Term::Kind::var, v, nullptr, 1}});
  return i;
}

void Index::add_term(int64_t coef, Term t) {
  if (coef == 0) return;
  auto it = std::lower_bound(terms_.begin(), terms_.end(), t,
                             [](const auto& e, const Term& x) { return term_less(e.second, x); });
  if (it != terms_.end() && it->second == t) {
    it->first += coef;
    if (it->first == 0) terms_.erase(it);
    return;
  }
  terms_.insert(it, {coef, std::move(t)});
}

Index operator+(const Index& a, const Index& b) {
  Index r = a;
  r.constant_ += b.constant_;
  for (const auto& [c, t] : b.terms_)
    r.add_term(c, t);
  return r;
}

Index operator*(const Index& a, int64_t c) {
  if (c == 0) return Index::constant(0);
  Index r;
  r.constant_ = a.constant_ * c;
  for (const auto& [k, t] : a.terms_)
    r.terms_.push_back({k * c, t});
  return r;
}

int64_t Index::coefficient(int v) const {
  for (const auto& [c, t] : terms_)
    if (t.kind == Term::Kind::var && t.var == v) return c;
  return 0;
}

bool Index::uses(int v) const {
  for (const auto& [c, t] : terms_) {
    if (t.kind == Term::Kind::var ? t.var == v : t.inner->uses(v)) return true;
  }
  return false;
}

bool Index::affine_in(int v) const {
  for (const auto& [c, t] : terms_)
    if (t.kind != Term::Kind::var && t.inner->uses(v)) return false;
  return true;
}

std::pair<int64_t, int64_t> Index::range(std::span<const int64_t> extents) const {
  int64_t lo = constant_, hi = constant_;
  for (const auto& [c, t] : terms_) {
    int64_t tlo = 0, thi = 0;
    switch (t.kind) {
    case Term::Kind::var:
      thi = std::max<int64_t>(extents[static_cast<size_t>(t.var)] - 1, 0);
      break;
    case Term::Kind::div: {
      auto [a, b] = t.inner->range(extents);
      tlo = floor_div(a, t.divisor);
      thi = floor_div(b, t.divisor);
      break;
    }
    case Term::Kind::mod: {
      auto [a, b] = t.inner->range(extents);
      if (a >= 0 && b < t.divisor) {
        tlo = a;
        thi = b;
      } else {
        thi = t.divisor - 1;
      }
      break;
    }
    }
    if (c >= 0) {
      lo += c * tlo;
      hi += c * thi;
    } else {
      lo += c * thi;
      hi += c * tlo;
    }
  }
  return {lo, hi};
}

namespace {

/// Splits a into (q, b) with a = d·q + b, moving every term whose coefficient d divides
/// (and the multiple of d in the constant) into q.
std::pair<Index, Index> split_multiple(const Index& a, int64_t d) {
  Index q = Index::constant(floor_div(a.offset(), d));
  Index b = Index::constant(a.offset() - floor_div(a.offset(), d) * d);
  for (const auto& [c, t] : a.terms()) {
    Index one;
    if (t.kind == Term::Kind::var) {
      one = Index::var(t.var);
    } else {
      // Rebuild the single term through the public constructors.
      one = t.kind == Term::Kind::div ? Index::floordiv(*t.inner, t.divisor, {})
                                      : Index::mod(*t.inner, t.divisor, {});
    }
    if (c % d == 0)
      q = q + one * (c / d);
    else
      b = b + one * c;
  }
  return {q, b};
}

} // namespace

Index Index::floordiv(const Index& a, int64_t d, std::span<const int64_t> extents) {
  KILN_CHECK(d > 0, "index expression: division by ", d);
  if (d == 1) return a;
  Index q = a, b;
  if (!extents.empty()) {
    auto [qq, bb] = split_multiple(a, d);
    q = qq;
    b = bb;
    auto [lo, hi] = b.range(extents);
    if (lo >= 0 && hi < d) return q;
  } else {
    q = Index::constant(0);
    b = a;
  }
  Index r = extents.empty() ? Index() : q;
  Term t{Term::Kind::div, 0, std::make_shared<const Index>(b), d};
  r.add_term(1, std::move(t));
  return r;
}

Index Index::mod(const Index& a, int64_t d, std::span<const int64_t> extents) {
  KILN_CHECK(d > 0, "index expression: modulo by ", d);
  if (d == 1) return Index::constant(0);
  Index b = a;
  if (!extents.empty()) {
    b = split_multiple(a, d).second;
    auto [lo, hi] = b.range(extents);
    if (lo >= 0 && hi < d) return b;
  }
  Index r;
  r.add_term(1, Term{Term::Kind::mod, 0, std::make_shared<const Index>(b), d});
  return r;
}

std::string Index::str() const {
  std::string s;
  if (constant_ != 0 || terms_.empty()) s = std::to_string(constant_);
  for (const auto& [c, t] : terms_) {
    if (!s.empty())
      s += c < 0 ? " - " : " + ";
    else if (c < 0)
      s += "-";
    int64_t m = c < 0 ? -c : c;
    if (m != 1) {
      s += std::to_string(m);
      s += "*";
    }
    s += term_str(t);
  }
  return s;
}

} // namespace kiln::ir::kernel
