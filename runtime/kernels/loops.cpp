// The out-of-line part of loops.h: operand strides under broadcasting.
#include "runtime/kernels/loops.h"

#include "runtime/error.h"

namespace kiln::kernels {

std::vector<int64_t> broadcast_byte_strides(const Tensor& t, IntList sizes) {
  const int64_t rank = static_cast<int64_t>(sizes.size()), trank = t.dim();
  KILN_ASSERT(trank <= rank, "operand of rank ", trank, " broadcast to rank ", rank);
  std::vector<int64_t> out(static_cast<size_t>(rank), 0);
  const int64_t item = t.itemsize();
  for (int64_t d = 0; d < trank; ++d) {
    int64_t od = rank - trank + d;
    int64_t size = t.sizes()[d];
    KILN_ASSERT(size == sizes[od] || size == 1, "operand of shape ", shape_str(t.sizes()),
                " doesn't broadcast to ", shape_str(sizes));
    out[od] = size == 1 ? 0 : t.strides()[d] * item;
  }
  return out;
}

std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t rb = static_cast<int64_t>(batch.size());
  const int64_t rt = t.dim() - 2;
  const int64_t nb = numel_of(batch);
  std::vector<int64_t> off(static_cast<size_t>(nb));
  std::vector<int64_t> idx(static_cast<size_t>(rb), 0);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < rt; ++d)
      if (t.size(d) != 1) o += idx[static_cast<size_t>(d + rb - rt)] * t.stride(d);
    off[static_cast<size_t>(i)] = o;
    for (int64_t d = rb - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < batch[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return off;
}

} // namespace kiln::kernels
