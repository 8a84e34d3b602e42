// MLIR output of the reductions: sum, prod, amax, amin as a linalg.fill of the identity and a
// reducing linalg.generic; argmax, argmin as one generic carrying (best value, index).
#include "ir/mlir_emitter.h"
#include "runtime/ops/reduce_dims.h"

namespace kiln::ir::mlir {
namespace {

/// Puts back the size-1 dims a keepdim reduction removed (`red` marks the reduced dims):
/// a tensor.expand_shape from `reduced` to out's sizes, or r itself when they agree.
std::string keepdim(Emitter& e, std::string r, const Shape& reduced, const std::vector<bool>& red,
                    const Type& out) {
  int64_t rank = static_cast<int64_t>(red.size());
  std::string rt = tensor_type(reduced, out.dtype());
  if (reduced != out.sizes()) {
    std::string s = e.fresh();
    std::string reassoc = "[";
    // Group each kept dim with the reduced dims that follow it (leading ones join the first).
    std::vector<std::vector<int64_t>> groups;
    for (int64_t i = 0; i < rank; ++i) {
      if (!red[static_cast<size_t>(i)] || groups.empty()) groups.push_back({});
      groups.back().push_back(i);
    }
    if (!reduced.empty() && red[0]) {
      // groups[0] starts with reduced dims: merge it into the next group.
      std::vector<int64_t> lead = groups[0];
      groups.erase(groups.begin());
      groups[0].insert(groups[0].begin(), lead.begin(), lead.end());
    }
    if (reduced.empty()) groups.clear();
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      reassoc += gi ? ", [" : "[";
      for (size_t j = 0; j < groups[gi].size(); ++j)
        reassoc += detail::str(j ? ", " : "", groups[gi][j]);
      reassoc += "]";
    }
    reassoc += "]";
    std::string shape;
    for (size_t i = 0; i < out.sizes().size(); ++i)
      shape += detail::str(i ? ", " : "", out.sizes()[i]);
    e.line(s + " = tensor.expand_shape " + r + " " + reassoc + " output_shape [" + shape +
           "] : " + rt + " into " + tensor_type(out));
    r = s;
  }
  return r;
}

/// argmax, argmin: one generic carrying (best value, its index) along `dim`; a later element
/// replaces the best only when strictly better, so the first extremum wins; a NaN beats any
/// number (NaN is maximal for argmax and minimal for argmin).
void arg_reduction(Emitter& e, const Node& n) {
  const Type& in = n.input(0)->type();
  const Type& out = n.output()->type();
  int64_t rank = in.rank();
  int64_t dim = n.attrs().i(0);
  if (dim < 0) dim += rank;
  bool mx = n.op() == Op::argmax;
  DType t = compute_dtype(in.dtype());
  std::vector<bool> red(static_cast<size_t>(rank), false);
  red[static_cast<size_t>(dim)] = true;
  Shape reduced;
  std::string omap = "affine_map<(";
  for (int64_t i = 0; i < rank; ++i)
    omap += detail::str(i ? ", " : "", "d", i);
  omap += ") -> (";
  std::string iters;
  for (int64_t i = 0; i < rank; ++i) {
    iters += detail::str(i ? ", " : "", i == dim ? "\"reduction\"" : "\"parallel\"");
    if (i == dim) continue;
    omap += detail::str(reduced.empty() ? "" : ", ", "d", i);
    reduced.push_back(in.sizes()[static_cast<size_t>(i)]);
  }
  omap += ")>";
  std::string vacc = e.filled(reduced, t, extremum_init(mx, t));
  std::string iacc = e.filled(reduced, DType::i64, "0");
  std::string imap = Emitter::broadcast_map(in.sizes(), in.sizes(), static_cast<size_t>(rank));
  std::string vt = tensor_type(reduced, t), it = tensor_type(reduced, DType::i64);
  std::string r = e.fresh();
  e.line(r + ":2 = linalg.generic {indexing_maps = [" + imap + ", " + omap + ", " + omap +
         "], iterator_types = [" + iters + "]} ins(" + e.name(n.input(0)) + " : " +
         tensor_type(in) + ") outs(" + vacc + ", " + iacc + " : " + vt + ", " + it + ") {");
  std::string a = e.fresh(), v = e.fresh(), i = e.fresh();
  std::string et = elem(t);
  e.line("^bb0(" + a + ": " + elem(in.dtype()) + ", " + v + ": " + et + ", " + i + ": i64):");
  std::string x = e.convert(a, in.dtype(), t);
  std::string k = e.op(detail::str("linalg.index ", dim), "index");
  std::string ki = e.op("arith.index_cast " + k, "index to i64");
  std::string take = e.fresh();
  if (is_floating(t)) {
    e.line("  " + take + " = arith.cmpf " + (mx ? "ogt, " : "olt, ") + x + ", " + v + " : " + et);
    std::string xn = e.fresh(), vn = e.fresh();
    e.line("  " + xn + " = arith.cmpf uno, " + x + ", " + x + " : " + et);
    e.line("  " + vn + " = arith.cmpf uno, " + v + ", " + v + " : " + et);
    std::string tr = e.op("arith.constant true", "i1");
    std::string vok = e.op("arith.xori " + vn + ", " + tr, "i1");
    std::string nb = e.op("arith.andi " + xn + ", " + vok, "i1");
    take = e.op("arith.ori " + take + ", " + nb, "i1");
  } else {
    bool u = t == DType::u8 || t == DType::bool_;
    e.line("  " + take + " = arith.cmpi " +
           (mx ? (u ? "ugt, " : "sgt, ") : (u ? "ult, " : "slt, ")) + x + ", " + v + " : " + et);
  }
  std::string nv = e.op("arith.select " + take + ", " + x + ", " + v, et);
  std::string ni = e.op("arith.select " + take + ", " + ki + ", " + i, "i64");
  e.line("  linalg.yield " + nv + ", " + ni + " : " + et + ", i64");
  e.line("} -> (" + vt + ", " + it + ")");
  e.bind(n.output(), keepdim(e, r + "#1", reduced, red, out));
}

} // namespace

std::string extremum_init(bool max, DType t) {
  if (is_floating(t)) return float_literal(max ? -1.0 / 0.0 : 1.0 / 0.0, t);
  if (t == DType::bool_) return max ? "false" : "true";
  if (t == DType::u8) return max ? "0" : "-1"; // 255 as the signless i8 literal
  int bits = static_cast<int>(itemsize(t) * 8);
  return max ? detail::str(bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1)))
             : detail::str(bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1);
}

namespace {

/// sum, prod, amax, amin: a fill of the identity, then a generic reducing into it.
void reduction(Emitter& e, const Node& n) {
  const Type& in = n.input(0)->type();
  const Type& out = n.output()->type();
  int64_t rank = in.rank();
  std::vector<bool> red = reduced_dims_mask(n.attrs().ints(0), rank, std::string(n.name()).c_str());
  Shape reduced; // sizes without the reduced dims
  std::string omap = "affine_map<(";
  for (int64_t i = 0; i < rank; ++i)
    omap += detail::str(i ? ", " : "", "d", i);
  omap += ") -> (";
  bool first = true;
  for (int64_t i = 0; i < rank; ++i)
    if (!red[static_cast<size_t>(i)]) {
      omap += detail::str(first ? "" : ", ", "d", i);
      first = false;
      reduced.push_back(in.sizes()[static_cast<size_t>(i)]);
    }
  omap += ")>";
  DType t = compute_dtype(out.dtype()); // f16/bf16 accumulate in f32, rounded once at the end
  bool f = is_floating(t), u = t == DType::u8 || t == DType::bool_;
  std::string init;
  const char* comb = "";
  switch (n.op()) {
  case Op::sum:
    init = Emitter::scalar_literal(0, t);
    comb = t == DType::bool_ ? "arith.ori" : f ? "arith.addf" : "arith.addi";
    break;
  case Op::prod:
    init = Emitter::scalar_literal(1, t);
    comb = t == DType::bool_ ? "arith.andi" : f ? "arith.mulf" : "arith.muli";
    break;
  case Op::amax:
  case Op::amin: {
    bool mx = n.op() == Op::amax;
    init = extremum_init(mx, t);
    comb = t == DType::bool_ ? (mx ? "arith.ori" : "arith.andi")
           : f               ? (mx ? "arith.maximumf" : "arith.minimumf")
           : u               ? (mx ? "arith.maxui" : "arith.minui")
                             : (mx ? "arith.maxsi" : "arith.minsi");
    break;
  }
  default: KILN_UNREACHABLE("mlir: not a reduction");
  }
  std::string acc = e.filled(reduced, t, init);
  std::string imap = Emitter::broadcast_map(in.sizes(), in.sizes(), static_cast<size_t>(rank));
  std::string iters;
  for (int64_t i = 0; i < rank; ++i)
    iters +=
        detail::str(i ? ", " : "", red[static_cast<size_t>(i)] ? "\"reduction\"" : "\"parallel\"");
  std::string r = e.fresh();
  std::string rt = tensor_type(reduced, t);
  e.line(r + " = linalg.generic {indexing_maps = [" + imap + ", " + omap + "], iterator_types = [" +
         iters + "]} ins(" + e.name(n.input(0)) + " : " + tensor_type(in) + ") outs(" + acc +
         " : " + rt + ") {");
  std::string a = e.fresh(), b = e.fresh();
  e.line("^bb0(" + a + ": " + elem(in.dtype()) + ", " + b + ": " + elem(t) + "):");
  std::string x = e.convert(a, in.dtype(), t);
  std::string y = e.op(std::string(comb) + " " + x + ", " + b, elem(t));
  e.line("  linalg.yield " + y + " : " + elem(t));
  e.line("} -> " + rt);
  if (t != out.dtype()) {
    Operand o{r, reduced, t};
    r = e.generic(
        std::span<const Operand>(&o, 1), reduced, out.dtype(),
        [&](const std::vector<std::string>& v) { return e.convert(v[0], t, out.dtype()); });
    rt = tensor_type(reduced, out.dtype());
  }
  e.bind(n.output(), keepdim(e, r, reduced, red, out));
}

} // namespace

void lower_reduction(Emitter& e, const Node& n) {
  switch (n.op()) {
  case Op::argmax:
  case Op::argmin:
    if (n.input(0)->type().rank() == 0) {
      // The only element is the extremum: index 0.
      std::string r = e.fresh();
      e.line(r + " = arith.constant dense<0> : " + tensor_type(n.output()->type()));
      e.bind(n.output(), r);
      return;
    }
    arg_reduction(e, n);
    return;
  default: reduction(e, n); return;
  }
}

} // namespace kiln::ir::mlir
