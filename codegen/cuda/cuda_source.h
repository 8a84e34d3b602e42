// CUDA C++ from the loop IR: the source NVRTC compiles (codegen/cuda/nvrtc.h). Needs no CUDA
// header, so it is generated and inspected on any machine.
//
// Each kernel becomes `extern "C" __global__ void NAME(T0* b0, T1* b1, ..., long long n)`:
// its buffers in the kernel's order (inputs const), then the count of outer points. One
// thread computes one outer point (the threads of a grid stride over all n): its items in
// order, each inner loop as nested for loops over the inner variables, reductions in
// registers. Values follow the loop IR's rules as the CPU code does: f16/bf16 carried in f32
// and rounded to their dtype after every op, eager NaN and signed-zero semantics for
// max/min/relu and the reductions, integer arithmetic wrapping, float-to-int conversions
// saturating with NaN -> 0.
//
// The same text also compiles as host C++ (without __CUDACC__): a shim gives the CUDA builtins
// their device semantics, and each kernel gets `extern "C" void NAME_host(char* const* b,
// long long n)`, which runs the whole grid on the calling thread. The tests check the CUDA
// kernels' results against the CPU's that way, on machines without a GPU.
#pragma once

#include <span>
#include <string>

#include "codegen/schedule.h"
#include "ir/kernel/kernel.h"
#include "runtime/error.h"

namespace kiln::codegen::cuda {

/// Threads per block of the generated kernels.
inline constexpr int kBlockThreads = 256;

/// One translation unit with every kernel (and the helpers they share). A kiln::Error when a
/// kernel holds an op the CUDA code generator does not know (a bug: the verifier admits only
/// lowerable ops).
std::string cuda_source(std::span<const ir::kernel::Kernel> kernels,
                        std::span<const Schedule> schedules);

} // namespace kiln::codegen::cuda
