// The schedule heuristic.
#include "codegen/schedule.h"

#include <algorithm>

#include "runtime/parallel.h"

namespace kiln::codegen {

using ir::kernel::Instr;
using ir::kernel::Kernel;

int64_t Schedule::rows(const Kernel& k) const {
  if (k.outer.empty()) return 1;
  int64_t r = 1;
  for (size_t d = 0; d + 1 < k.outer.size(); ++d)
    r *= k.outer[d];
  int64_t last = k.outer.back();
  return r * ((last + block - 1) / block);
}

std::string Schedule::str() const {
  const char* v = vector == Vector::none ? "none" : vector == Vector::outer ? "outer" : "inner";
  return std::string("vector=") + v + " lanes=" + std::to_string(lanes) +
         " unroll=" + std::to_string(unroll) + " block=" + std::to_string(block) +
         " grain=" + std::to_string(grain);
}

Schedule choose_schedule(const Kernel& k, int vector_bytes) {
  Schedule s;
  int64_t widest = 4;
  bool arg_reduction = false;
  for (const Instr& in : k.instrs) {
    // Constants are splat once; argmax indices are i64 beside the values they track.
    if (in.kind != Instr::Kind::constant && (in.dtype == DType::f64 || in.dtype == DType::i64))
      widest = 8;
    if (in.kind == Instr::Kind::reduce && (in.op == Op::argmax || in.op == Op::argmin))
      arg_reduction = true;
  }
  int lanes = static_cast<int>(std::clamp<int64_t>(vector_bytes / widest, 1, 16));
  int64_t inner = 1;
  for (int64_t e : k.inner)
    inner *= e;
  if (!k.inner.empty()) {
    // Inner vector code pays when the loads along the last inner variable are unit-stride.
    const int last = k.num_vars() - 1;
    int unit = 0, other = 0;
    for (const auto& l : k.loops)
      for (int id : l.body) {
        const Instr& in = k.instrs[static_cast<size_t>(id)];
        if (in.kind != Instr::Kind::load || !in.index.uses(last)) continue;
        (in.index.affine_in(last) && in.index.coefficient(last) == 1 ? unit : other)++;
      }
    if (!arg_reduction && unit > 0 && other == 0 && k.inner.back() >= lanes) {
      s.vector = Schedule::Vector::inner;
      s.lanes = lanes;
      // Up to 4 vectors per step while the scalar tail (under lanes x unroll points) stays
      // small beside the row.
      while (s.unroll < 4 && k.inner.back() >= int64_t{8} * lanes * s.unroll)
        s.unroll *= 2;
    } else if (!k.outer.empty() && k.outer.back() >= lanes) {
      s.vector = Schedule::Vector::outer;
      s.lanes = lanes;
    }
  } else if (!k.outer.empty() && k.outer.back() >= 2) {
    s.vector = Schedule::Vector::outer;
    s.lanes = lanes;
  }
  if (s.vector == Schedule::Vector::outer && !k.outer.empty()) {
    int64_t last = k.outer.back();
    int64_t b = std::max<int64_t>(4096 / std::max<int64_t>(inner, 1), s.lanes);
    b = (b + s.lanes - 1) / s.lanes * s.lanes;
    s.block = std::min(last, b);
  }
  int64_t work = s.block * std::max<int64_t>(inner, 1);
  s.grain = std::max<int64_t>(1, (kParallelGrain + work - 1) / std::max<int64_t>(work, 1));
  return s;
}

} // namespace kiln::codegen
