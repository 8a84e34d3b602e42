// Transcendental functions as inline LLVM IR (exp, log, tanh, erf, sigmoid, sin, cos, pow,
// sqrt, rsqrt) for scalar and fixed-vector float/double values: no libm calls, except on a
// rarely taken branch for sin/cos of arguments too large for the inline range reduction.
//
// Each function is range reduction plus a minimax polynomial, evaluated with llvm.fma, in
// straight-line code (selects), so that a vector of any width computes exactly
// what the scalar code computes, lane by lane. The results are compared with the eager
// kernels (glibc) by test/codegen/test_vector_math.cpp; special values (NaN, ±inf, ±0,
// overflow and underflow, denormals) match eager exactly and the rest is within a few ULP.
// See vector_math.cpp for each method and its measured error.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "runtime/ops/op.h"

namespace kiln::codegen::cpu {

/// Emits op(x) (or op(x, y) for pow) inline at the builder's position. Straight-line code,
/// except sin and cos: they add blocks (the builder is left in the last of them) with a
/// branch to libm calls for huge arguments. x, y: float or double, scalar or fixed vector; the
/// result has x's type. Only ops with has_vector_math(op). The builder's fast-math flags are
/// ignored (and kept): the results are eager's to within the ULP bounds only under IEEE semantics.
llvm::Value* emit_math(llvm::IRBuilderBase& b, kiln::Op op, llvm::Value* x,
                       llvm::Value* y = nullptr);

/// op(x) (or op(x, y)) as a call of a function of the module that computes exactly what
/// emit_math emits inline (its body is emit_math's code), defined once per op and type in
/// the module (internal, never inlined) and shared by every caller: a large kernel's IR then
/// grows by one call per math op, not by a polynomial, and LLVM optimises and selects each
/// polynomial once. The function takes the target attributes of the builder's function.
/// Same operands and result as emit_math; the builder stays in its block.
llvm::Value* emit_math_call(llvm::IRBuilderBase& b, kiln::Op op, llvm::Value* x,
                            llvm::Value* y = nullptr);

/// Whether emit_math handles op.
bool has_vector_math(kiln::Op op);

} // namespace kiln::codegen::cpu
