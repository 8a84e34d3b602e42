// The reduced-dims rule shared by reduction inference and kernels: empty = all, negative
// dims wrap, duplicates are an error, keepdim keeps reduced dims as size 1.
#pragma once

#include <vector>

#include "runtime/shape.h"

namespace kiln {

/// For each dim of a tensor of `rank`, whether `dims` reduces it (empty dims = all dims);
/// throws naming `op` for an out-of-range or repeated dim.
std::vector<bool> reduced_dims_mask(IntList dims, int64_t rank, const char* op);

/// The output shape of reducing `sizes` over `mask`.
Shape reduced_shape(IntList sizes, const std::vector<bool>& mask, bool keepdim);

} // namespace kiln
