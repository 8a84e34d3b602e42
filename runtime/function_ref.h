// FunctionRef: a non-owning reference to a callable, for a parameter called during the call
// only. Unlike std::function it never allocates, so the hot path of a compiled call stays
// free of the heap.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace kiln {

template <typename Signature> class FunctionRef;

template <typename R, typename... Args> class FunctionRef<R(Args...)> {
public:
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F&& f) // NOLINT(google-explicit-constructor): binds like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(a)...);
        }) {}

  R operator()(Args... a) const { return call_(object_, std::forward<Args>(a)...); }

private:
  void* object_;
  R (*call_)(void*, Args...);
};

} // namespace kiln
