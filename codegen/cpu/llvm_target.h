// The LLVM side of the JIT, for the code generator files under codegen/cpu/ only: the
// target machine, the O3 pipeline, object emission.
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <string>

#include "codegen/cpu/jit.h"

namespace kiln::codegen::cpu {

/// Sets the module's triple and data layout to the host target's.
void prepare_module(llvm::Module& m);
/// Verifies the module (a broken module is a kiln bug: KILN_UNREACHABLE with the message),
/// runs LLVM's O3 pipeline for the target's CPU, and returns the object file's bytes.
std::string compile_module(llvm::Module& m, const HostTarget& target);

} // namespace kiln::codegen::cpu
