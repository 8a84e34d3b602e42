// A test hook for codegen/cpu/vector_math: one JIT-compiled loop applying one op to arrays,
// behind an interface free of LLVM types.
#pragma once

#include <cstdint>
#include <memory>

#include "codegen/cpu/jit.h"
#include "runtime/dtype.h"
#include "runtime/ops/op.h"

namespace kiln::codegen::cpu {

/// out[i] = op(x[i]) (op(x[i], y[i]) for pow; y is ignored otherwise) for i < n, elements of
/// the probe's dtype.
using MathKernel = void (*)(const void* x, const void* y, void* out, int64_t n);

/// A compiled probe: the library keeps fn's code mapped.
struct MathProbe {
  std::shared_ptr<JitLibrary> library;
  MathKernel fn = nullptr;
};

/// Compiles a loop that applies emit_math(op) to `lanes` elements at a time as one
/// <lanes x T> vector, then to the remaining n % lanes elements one scalar at a time (lanes = 1:
/// scalar only), with the host's CPU and features as a kernel has them. dtype is f32 or f64;
/// op must satisfy has_vector_math.
MathProbe compile_math_probe(kiln::Op op, kiln::DType dtype, int lanes);

} // namespace kiln::codegen::cpu
