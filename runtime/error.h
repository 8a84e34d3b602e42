// kiln::Error (user mistakes), KILN_ASSERT (internal bugs) and Expected<T> (compiler internals).
#pragma once

#include <exception>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

/// A user error: bad shapes, an unsupported dtype, a corrupt file. The message is lower case,
/// names the op and the shapes, and ends with the user's call site when one is known.
class Error : public std::exception {
public:
  /// Builds the error and appends " (at FILE:LINE)" for the first stack frame outside kiln.
  explicit Error(std::string message);
  /// Builds the error without looking up a call site (for errors about files, not calls).
  static Error without_location(std::string message);

  const char* what() const noexcept override { return full_.c_str(); }
  /// The message without the call site.
  const std::string& message() const { return message_; }
  /// "file:line" of the user's call, or empty when it could not be found.
  const std::string& location() const { return location_; }

private:
  struct NoLocation {};
  Error(std::string message, NoLocation);
  std::string message_;
  std::string location_;
  std::string full_;
};

namespace detail {
[[noreturn]] void assert_fail(const char* cond, const char* file, int line, const std::string& msg);

/// Streams every argument into one string: str("shape ", s, " and ", t).
template <typename... Args> std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
} // namespace detail

/// Throws kiln::Error with the streamed message when cond is false.
#define KILN_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      throw ::kiln::Error(::kiln::detail::str(__VA_ARGS__));                                       \
  } while (0)

/// An internal invariant; failing it is a bug in kiln, never a user mistake.
#define KILN_ASSERT(cond, ...)                                                                     \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      ::kiln::detail::assert_fail(#cond, __FILE__, __LINE__, ::kiln::detail::str(__VA_ARGS__));    \
  } while (0)

#define KILN_UNREACHABLE(msg) ::kiln::detail::assert_fail("unreachable", __FILE__, __LINE__, msg)

/// A value or the user error that prevented it; used inside the compiler where failure is
/// an expected outcome (parsing, verification, passes).
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {} // NOLINT(google-explicit-constructor)
  Expected(Error err) : v_(std::move(err)) {} // NOLINT(google-explicit-constructor)
  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  T& value() {
    if (auto* e = std::get_if<Error>(&v_)) throw *e;
    return std::get<T>(v_);
  }
  const Error& error() const { return std::get<Error>(v_); }

private:
  std::variant<T, Error> v_;
};

template <> class [[nodiscard]] Expected<void> {
public:
  Expected() = default;
  Expected(Error err) : err_(std::move(err)), ok_(false) {} // NOLINT(google-explicit-constructor)
  explicit operator bool() const { return ok_; }
  void value() const {
    if (!ok_) throw err_;
  }
  const Error& error() const { return err_; }

private:
  Error err_ = Error::without_location("");
  bool ok_ = true;
};

} // namespace kiln
