// CUDA's library kernels: hand-written CUDA C++ for the ops the loop IR does not lower
// (ops.def traits "eager": factories, random ops, floor_divide and remainder, data movement,
// cumsum, conv2d, pooling,
// and matmul where cuBLASLt does not take it: f64 and integers, broadcast batches, odd
// strides, the emulated device), so that an op on CUDA tensors runs on the device instead of
// on host copies.
//
// Each kernel is a grid-stride loop, a thread per output element, over one argument passed
// by value: the struct LibraryArgs (its buffers, sizes, strides and integers). The source is
// one translation unit, compiled once per device by NVRTC with --fmad=false (a multiply and
// an add stay two roundings, as on the CPU, so arange, rand and the integer kernels give the
// CPU's results bit for bit) and kept in the kernel cache; for the emulated device it is also
// built as host C++ like the generated kernels (codegen/cuda/cuda_source.h).
//
// What each op computes is its CPU kernel's definition (runtime/kernels/): the same Philox
// stream layout (runtime/random.h) and randn's math (runtime/kernels/normal_math.h, one text
// for both), the same arange arithmetic, the pooling rules and the
// order of conv2d's and cumsum's sums, Python's floor division. Out-of-range indices of
// index_select, gather and scatter, and an integer division by zero, are a kiln::Error as on
// the CPU (a device flag read back after the kernel).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/ops/op.h"
#include "runtime/tensor.h"

namespace kiln::codegen::cuda {

/// The library's CUDA source (what NVRTC compiles; the tests check it under ptxas limits).
std::string library_source();
/// The names of its kernels, in the source's order.
std::vector<std::string> library_kernel_names();

/// Runs `op` on `device` with a library kernel, its results made there; nullopt when the
/// library has no kernel for this op and these dtypes (bool results of arange, random ops,
/// cumsum and pooling; ranks above 8: they run on the host).
std::optional<std::vector<Tensor>> run_library_op(Op op, std::span<const Tensor> inputs,
                                                  const Attrs& attrs,
                                                  std::span<const TensorMeta> metas, Device device);

} // namespace kiln::codegen::cuda
