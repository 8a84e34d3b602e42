// CUDA's eager kernels: an op on CUDA tensors runs as a graph of that one op, lowered by the
// same pipeline as compiled graphs with the CUDA target (codegen/cuda/cuda_target.h) and kept
// per signature (the op, its attributes, and each operand's dtype, sizes and strides), so a
// second call with the same signature launches at once.
//
// Ops without a lowering (factories, random ops, data movement, cumsum, conv2d, pooling) run
// as CUDA's library kernels (codegen/cuda/library.h), matmul through cuBLASLt or the library.
// Random ops draw the CPU's Philox numbers, bit for bit, for the same seed and offsets. What
// has no CUDA code yet runs on the host, on copies of the operands, its results copied back:
// the library's gaps (bool results of a few ops, ranks above 8) and the steps of a graph the
// CUDA target leaves to the host (Plan::run_on). host_fallbacks counts them.
//
// Registered with dispatch() (runtime/ops/dispatch.h) when libkiln_codegen loads.
#pragma once

#include <cstdint>

namespace kiln::codegen::cuda {

/// Calls to CUDA eager kernels so far: single-op graphs compiled (first calls of a
/// signature), calls that ran on the host, wholly (ops without CUDA code, graphs the CUDA
/// target could not compile) or in part (a library call's step), and calls run by a library kernel.
struct EagerCounters {
  int64_t compiled = 0;
  int64_t host_fallbacks = 0;
  int64_t library = 0; // calls run by a library kernel
};
EagerCounters eager_counters();

} // namespace kiln::codegen::cuda
