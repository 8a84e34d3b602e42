// Matmuls on CUDA through cuBLASLt (libcublasLt.so.13, opened with dlopen at first use, like
// the driver): kiln::matmul's semantics on CUDA tensors, with the leading post-ops of a
// library epilogue (runtime/epilogue.h) that cuBLASLt fuses: a scale, a bias along the last
// dim, then ReLU or tanh-GELU. Computes in f32 (CUBLAS_COMPUTE_32F, no TF32) for f32, f16 and
// bf16 operands.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "runtime/epilogue.h"
#include "runtime/tensor.h"

namespace kiln::cuda {

/// Whether cuBLASLt can be used: a CUDA device (not the emulated one) and the library loads.
bool blas_available();
/// Why not (empty when it can).
std::string blas_unavailable_reason();

/// a @ b on their device through cuBLASLt, fused with the longest prefix of `post_ops` it
/// can take (their tensor operands indexed into `operands`, as an Epilogue's); `*fused` is set
/// to how many it took. Nothing (and *fused 0) when cuBLASLt cannot take the operands: another
/// dtype, a vector operand, a batch that broadcasts, strides that are neither row- nor
/// column-major; the caller then runs it otherwise. A cuBLASLt failure is a kiln::Error naming
/// the shapes and the status.
std::optional<Tensor> blas_matmul(const Tensor& a, const Tensor& b,
                                  std::span<const PostOp> post_ops,
                                  std::span<const Tensor> operands, size_t* fused);

} // namespace kiln::cuda
