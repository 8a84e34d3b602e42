// CUDA C++ from the loop IR: the source NVRTC compiles (codegen/cuda/nvrtc.h). Needs no CUDA
// header, so it is generated and inspected on any machine.
//
// Each kernel becomes `extern "C" __global__ void NAME(T0* b0, T1* b1, ..., long long n)`:
// its buffers in the kernel's order (inputs const), then the count of outer points. A group
// of threads computes one outer point (GpuLaunch; the groups of a grid stride over all n):
// its items in order, each inner loop's points dealt out to the group's threads, reductions
// in registers and then combined across the group. Values follow the loop IR's rules as the CPU
// code does: f16/bf16 carried in f32 and rounded to their dtype after every op, eager NaN and
// signed-zero semantics for max/min/relu and the reductions, integer arithmetic wrapping,
// float-to-int conversions saturating with NaN -> 0.
//
// The same text also compiles as host C++ (without __CUDACC__): a shim gives the CUDA builtins
// their device semantics, and each kernel gets `extern "C" void NAME_host(char* const* b,
// long long n, unsigned blocks)`, which runs a grid of that many blocks on the calling thread:
// block after block, each thread of a block a fiber (ucontext) that runs until it reaches a
// barrier (__syncthreads, __syncwarp, a warp shuffle) and yields, so the threads of a block
// advance in lockstep between barriers as on the device. The tests check the CUDA kernels'
// results, cross-thread reductions included, against the CPU's that way, on machines
// without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codegen/schedule.h"
#include "ir/kernel/kernel.h"
#include "runtime/error.h"

namespace kiln::codegen::cuda {

/// Threads per block of the generated kernels.
inline constexpr int kBlockThreads = 256;
/// The most blocks a launch has: the threads of a larger grid stride over the rest.
inline constexpr int64_t kMaxBlocks = 16384;

/// The GPU schedule of one kernel: how its outer points map to threads. A group of `group`
/// threads computes one outer point: 1 (a thread per point: pointwise kernels, and reductions
/// whose loads are coalesced across neighbouring points), 32 (a warp per row: reductions over
/// rows up to 1024 points, combined by warp shuffles) or `threads` (the block per row: longer
/// rows, combined by warp shuffles and then through shared memory). Within a group, each inner
/// loop's points are dealt out to the threads in turn, so neighbouring threads load
/// neighbouring elements.
struct GpuLaunch {
  int threads = kBlockThreads; // per block
  int group = 1;               // threads per outer point: 1, 32 or threads
  int vector = 1;              // outer points per thread: 1, or kVector (gpu_vectorizable)
  int64_t points_per_block() const { return threads / group * vector; }
  /// Blocks for n outer points: one pass over them, at most kMaxBlocks, at least 1.
  int64_t blocks(int64_t n) const;
  /// "threads=256 group=32".
  std::string str() const;
};

/// Points per thread of a vectorized kernel.
inline constexpr int kVector = 4;

/// Whether kernel k can run kVector neighbouring points (along its last outer dim) per
/// thread: a pointwise kernel (no inner loops) whose last outer extent is a multiple of
/// kVector and that loads no buffer it stores. Its accesses that run unit-stride along that
/// dim from a multiple of kVector elements load and store the points' elements as one vector
/// (128 bits for f32: `kiln_vec4`); the others element by element. A vector access needs its
/// buffer aligned to the vector (at most 16 bytes): the kernel checks at entry and otherwise
/// runs a point per thread.
bool gpu_vectorizable(const ir::kernel::Kernel& k);

/// The heuristic: a group per row for reductions of at least 64 points whose loads run
/// unit-stride along the last inner variable, or whose kernel has too few outer points to fill
/// the device (4096); a warp up to 1024 points, the block beyond; otherwise a thread per point,
/// kVector points per thread when the kernel is vectorizable and has a vector access.
GpuLaunch gpu_launch(const ir::kernel::Kernel& k);

/// What every translation unit of kiln's CUDA starts with: the helpers the kernels share
/// (f16/bf16 conversions, floor division, saturating conversions, warp shuffles) and, for the
/// host build, the shim that runs the kernels on the CPU.
std::string_view cuda_preamble();

/// One translation unit with every kernel (and the helpers they share), kernel k under
/// launches[k] (gpu_launch's when empty). A kiln::Error when a kernel holds an op the CUDA code
/// generator does not know (a bug: the verifier admits only lowerable ops), or a launch is not
/// one of the forms above.
std::string cuda_source(std::span<const ir::kernel::Kernel> kernels,
                        std::span<const GpuLaunch> launches = {});

} // namespace kiln::codegen::cuda
