// Weak placeholders for primitives whose inference or kernel is not yet written; a real
// definition elsewhere in the library replaces each. Removed once every op is implemented.
#include "runtime/ops/op.h"

namespace kiln::ops {
#define KILN_OP(name, kind, nin, nout, attrs, doc)                                                        \
  __attribute__((weak)) std::vector<TensorMeta> infer_##name(std::span<const TensorMeta>, const Attrs&) { \
    throw Error(#name ": not implemented yet");                                                           \
  }                                                                                                       \
  __attribute__((weak)) void kernel_##name(std::span<const Tensor>, const Attrs&, std::span<Tensor>) {    \
    throw Error(#name ": not implemented yet");                                                           \
  }
#include "runtime/ops/ops.def"
#undef KILN_OP
}  // namespace kiln::ops
