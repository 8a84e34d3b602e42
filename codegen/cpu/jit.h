// The process's LLVM JIT, behind an interface free of LLVM types: compiled objects are
// loaded into their own library and their functions looked up by name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::codegen::cpu {

/// What the JIT compiles for: the host CPU and its features (LLVM's spelling, "+avx2,...").
struct HostTarget {
  std::string triple;
  std::string cpu;
  std::string features;
  /// Widest vector register in bytes the compiler should use (32 for AVX2, 64 for AVX-512).
  int vector_bytes = 16;
  /// Position-independent code, for objects linked into a shared library (`kiln aot`).
  bool pic = false;
};
const HostTarget& host_target();
/// Another CPU of the host's architecture, by LLVM's name ("x86-64-v4" for AVX-512,
/// "x86-64-v3", "znver4", "x86-64"): code for it is generated, verified and emitted but never
/// loaded, so widths and instruction sets the host lacks are still checked; and the CPU `kiln
/// aot` compiles a library for. Its features are the CPU's own (features is empty), its vector
/// width the widest they have. A kiln::Error when LLVM does not know the CPU.
HostTarget cpu_target(std::string_view cpu);

/// The instruction-set features code for `target` may use (LLVM's names, "avx2", "fma",
/// "avx512f", ...): its CPU's and its own list's; not the tuning features.
std::vector<std::string> cpu_features(const HostTarget& target);

/// Whether this host runs code compiled for `target`: the host has every feature of its CPU.
bool host_runs(const HostTarget& target);

/// The LLVM version kiln's JIT was built with ("22.1.0").
const char* llvm_version();

/// One loaded object file. Its code stays mapped while the library lives.
class JitLibrary {
public:
  ~JitLibrary();
  JitLibrary(const JitLibrary&) = delete;
  JitLibrary& operator=(const JitLibrary&) = delete;
  /// The address of a function the object defines; a kiln::Error when it is absent.
  void* lookup(std::string_view symbol) const;

private:
  friend std::shared_ptr<JitLibrary> load_object(std::string_view object, std::string_view name);
  JitLibrary() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Links an object file (ELF bytes from the code generator or the on-disk cache) into the
/// process. `name` labels the library in errors. A malformed object (check_object) is a
/// kiln::Error, and is never handed to LLVM.
std::shared_ptr<JitLibrary> load_object(std::string_view object, std::string_view name);

} // namespace kiln::codegen::cpu
