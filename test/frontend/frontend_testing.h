// Helpers for the compiled-vs-eager tests: bit-for-bit comparison and the f64 reference rule.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::testing {

/// Same dtype, shape and bytes (NaNs with the same bits compare equal).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<size_t>(ca.numel() * ca.itemsize())) == 0;
}

/// A copy of a call argument for the f64 reference run: floating tensors in f64, the rest as
/// they are.
inline Tensor f64_copy(const Tensor& t) { return to_f64(std::span<const Tensor>(&t, 1)).front(); }
template <typename T> T f64_copy(const T& v) { return v; }

/// The f64 reference rule (runtime/accuracy.h) for `got`, a compiled result of `fn(args...)`:
/// fn runs eagerly on the arguments and on their f64 copies. fn must take its tensors as
/// arguments (weights too), so that the reference run computes in f64 throughout.
template <typename Fn, typename... Args>
std::optional<std::string> close_to_eager(const Tensor& got, const Fn& fn, const Args&... args) {
  const Tensor eager = fn(args...);
  Tensor reference;
  try {
    reference = fn(f64_copy(args)...);
  } catch (const Error& e) {
    return std::string("the f64 reference run threw (does the function capture f32 tensors? "
                       "pass them as arguments or convert them with as_dtype_of): ") +
           e.what();
  }
  return check_accuracy(got, eager, reference);
}

/// Sets an environment variable for the scope (read where a graph compiles, such as
/// KILN_ATTENTION), and puts back what it was.
class ScopedEnv {
public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      ::unsetenv(name_);
    else
      ::setenv(name_, old_.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* name_;
  std::string old_;
};

/// `t` in the dtype of `like`: a test function that captures weights converts them so that
/// its f64 reference run computes in f64 (the same tensor when the dtypes agree, so the
/// compiled function still reads the parameter itself).
inline Tensor as_dtype_of(const Tensor& t, const Tensor& like) {
  return t.dtype() == like.dtype() ? t : t.to(like.dtype());
}

/// Evaluates each side once (a compiled call counts in the stats).
#define KILN_REQUIRE_BITWISE(a, b)                                                                 \
  do {                                                                                             \
    const ::kiln::Tensor kiln_got_ = (a);                                                          \
    const ::kiln::Tensor kiln_want_ = (b);                                                         \
    INFO("expected " << kiln_want_ << "\ngot " << kiln_got_);                                      \
    REQUIRE(::kiln::testing::bitwise_equal(kiln_got_, kiln_want_));                                \
  } while (0)

/// A compiled result against eager code by the f64 reference rule: KILN_REQUIRE_CLOSE(c(x, w),
/// f, x, w) runs f(x, w) and f on f64 copies of x and w. `got` is evaluated once.
#define KILN_REQUIRE_CLOSE(got, ...)                                                               \
  do {                                                                                             \
    const ::kiln::Tensor kiln_got_ = (got);                                                        \
    const std::optional<std::string> kiln_m_ =                                                     \
        ::kiln::testing::close_to_eager(kiln_got_, __VA_ARGS__);                                   \
    INFO((kiln_m_ ? *kiln_m_ : std::string()));                                                    \
    REQUIRE(!kiln_m_);                                                                             \
  } while (0)

/// The rule for results whose three runs the test does itself (modules in f32 and in f64).
#define KILN_REQUIRE_ACCURATE(got, eager, reference)                                               \
  do {                                                                                             \
    const std::optional<std::string> kiln_m_ =                                                     \
        ::kiln::check_accuracy((got), (eager), (reference));                                       \
    INFO((kiln_m_ ? *kiln_m_ : std::string()));                                                    \
    REQUIRE(!kiln_m_);                                                                             \
  } while (0)

} // namespace kiln::testing
