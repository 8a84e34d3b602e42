// The LLVM side of the JIT, for the code generator files under codegen/cpu/ only: the
// target machine, the O3 pipeline, object emission.
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <string>

#include "codegen/cpu/jit.h"

namespace kiln::codegen::cpu {

/// Sets the module's triple and data layout to the host target's.
void prepare_module(llvm::Module& m);
/// Verifies the module (a broken module is a kiln bug: KILN_UNREACHABLE with the message),
/// runs LLVM's O3 pipeline for the target's CPU, and returns the object file's bytes. A
/// module of more than `large_module` instructions (negative: none is large) gets a short
/// pipeline instead (SROA, EarlyCSE, InstCombine, SimplifyCFG; no loop passes, no SLP):
/// kiln's kernels are vectorized already, and on large ones O3's loop passes take time
/// superlinear in the number of loops (docs/performance.md, "Compile time").
/// With `own_machine`, the module gets a target machine of its own, so that compiles on several
/// threads run at once (the process's host machine serves one compile at a time).
std::string compile_module(llvm::Module& m, const HostTarget& target, int64_t large_module = -1,
                           bool own_machine = false);

} // namespace kiln::codegen::cpu
