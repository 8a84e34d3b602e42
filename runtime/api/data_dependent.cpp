// Ops whose output shape depends on the data: nonzero and masked_select. They read the data
// on the host, so under kiln::compile each is a graph break (the pending graph runs first).
#include "runtime/ops.h"
#include "runtime/tracing.h"

namespace kiln {

Tensor nonzero(const Tensor& a) {
  HostReadScope read(&a, HostRead::nonzero);
  std::vector<bool> flags = a.to_vector<bool>();
  const int64_t rank = a.dim();
  std::vector<int64_t> coords;
  Shape index(static_cast<size_t>(rank), 0);
  int64_t count = 0;
  for (bool f : flags) {
    if (f) {
      coords.insert(coords.end(), index.begin(), index.end());
      ++count;
    }
    for (int64_t d = rank - 1; d >= 0; --d) { // row-major successor of index
      auto k = static_cast<size_t>(d);
      if (++index[k] < a.sizes()[k]) break;
      index[k] = 0;
    }
  }
  return tensor(coords, {count, rank}).to(a.device()); // counted on the host
}

Tensor masked_select(const Tensor& a, const Tensor& mask) {
  // Both are read on the host: the mask decides the shape, a gives the values.
  if (Tracer* tracer = active_tracer()) tracer->host_read(&mask, HostRead::masked_select);
  HostReadScope read(&a, HostRead::masked_select);
  KILN_CHECK(mask.dtype() == DType::bool_, "masked_select: mask must be bool, got ", mask.dtype(),
             " (shapes ", shape_str(a.sizes()), " and ", shape_str(mask.sizes()), ")");
  Shape shape = broadcast_shapes(a.sizes(), mask.sizes(), "masked_select");
  Tensor values = contiguous(expand(a, shape));
  std::vector<bool> keep = expand(mask, shape).to_vector<bool>();
  std::vector<int64_t> picked;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) picked.push_back(static_cast<int64_t>(i));
  auto count = static_cast<int64_t>(picked.size());
  return index_select(reshape(values, {-1}), 0, tensor(picked, {count}).to(a.device()));
}

} // namespace kiln
