// CountingTarget: the host's CPU JIT under another name, for tests of the Target seam: its
// own identity (so its own cache keys), its compiles counted, or failing every compile.
#pragma once

#include <string>
#include <string_view>

#include "codegen/cpu/jit_target.h"
#include "codegen/target.h"

namespace kiln::testing {

/// The host JIT under another name: its own cache keys, its compiles counted.
class CountingTarget final : public codegen::Target {
public:
  explicit CountingTarget(std::string tag, bool fail = false) : tag_(std::move(tag)), fail_(fail) {}
  std::string_view name() const override { return "counting"; }
  int vector_bytes() const override { return host().vector_bytes(); }
  std::string identity() const override { return host().identity() + "test " + tag_ + "\n"; }
  std::string source(std::span<const ir::kernel::Kernel> k,
                     std::span<const codegen::Schedule> s) const override {
    return host().source(k, s);
  }
  Expected<std::string> compile(std::span<const ir::kernel::Kernel> k,
                                std::span<const codegen::Schedule> s) const override {
    ++compiles;
    if (fail_) return Error::without_location("this target has no code for " + k[0].name);
    return host().compile(k, s);
  }
  bool check(std::string_view object) const override { return host().check(object); }
  Expected<codegen::LoadedCode> load(std::string_view object,
                                     std::span<const ir::kernel::Kernel> k) const override {
    return host().load(object, k);
  }
  mutable int compiles = 0;

private:
  static const codegen::Target& host() { return codegen::cpu::jit_target(); }
  std::string tag_;
  bool fail_;
};

} // namespace kiln::testing
