// MLIR output of the factories, views, data movement and matmul, and the dispatch of every
// op to its lowering (external calls for the ops with no linalg form here).
#include <algorithm>

#include "ir/mlir_emitter.h"

namespace kiln::ir::mlir {

std::string ints_list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += detail::str(i ? ", " : "", v[i]);
  return s;
}

/// A reshape through a rank-1 tensor: collapse everything, then expand to the new sizes.
std::string reshape(Emitter& e, const std::string& v, const Shape& in_sizes, const Shape& to,
                    DType t) {
  Type in(t, in_sizes);
  std::string cur = v;
  Shape flat{in.rank() == 0 ? 1 : in.numel()};
  auto all = [](size_t n) {
    std::string s = "[[";
    for (size_t i = 0; i < n; ++i)
      s += detail::str(i ? ", " : "", i);
    return s + "]]";
  };
  if (in.sizes() == to) return v;
  if (in.rank() == 0 || to.empty()) {
    std::string r = e.fresh();
    if (in.rank() == 0)
      e.line(r + " = tensor.expand_shape " + cur + " [] output_shape [" +
             [&] {
               std::string s;
               for (size_t i = 0; i < to.size(); ++i)
                 s += i ? ", 1" : "1";
               return s;
             }() +
             "] : " + tensor_type(in.sizes(), in.dtype()) + " into " + tensor_type(to, in.dtype()));
    else
      e.line(r + " = tensor.collapse_shape " + cur + " [] : " +
             tensor_type(in.sizes(), in.dtype()) + " into " + tensor_type(to, in.dtype()));
    return r;
  }
  if (in.rank() != 1) {
    std::string r = e.fresh();
    e.line(r + " = tensor.collapse_shape " + cur + " " + all(in.sizes().size()) + " : " +
           tensor_type(in.sizes(), in.dtype()) + " into " + tensor_type(flat, in.dtype()));
    cur = r;
  }
  if (to.size() != 1) {
    std::string r = e.fresh();
    std::string shape;
    for (size_t i = 0; i < to.size(); ++i)
      shape += detail::str(i ? ", " : "", to[i]);
    e.line(r + " = tensor.expand_shape " + cur + " " + all(to.size()) + " output_shape [" + shape +
           "] : " + tensor_type(flat, in.dtype()) + " into " + tensor_type(to, in.dtype()));
    cur = r;
  }
  return cur;
}

namespace {

void external_node(Emitter& e, const Node& n) {
  std::vector<std::string> names;
  std::vector<Type> types;
  for (const Value* v : n.inputs()) {
    names.push_back(e.name(v));
    types.push_back(v->type());
  }
  e.bind(n.output(), e.external(n, names, types));
}

/// arange: start + i * step computed in f64 (as the eager kernel), converted to the dtype.
std::string arange(Emitter& e, const Node& n) {
  const Type& out = n.output()->type();
  double start = n.attrs().scalar(0).to_double(), step = n.attrs().scalar(2).to_double();
  return e.generic({}, out.sizes(), out.dtype(), [&](const std::vector<std::string>&) {
    std::string i = e.op("linalg.index 0", "index");
    std::string ii = e.op("arith.index_cast " + i, "index to i64");
    std::string fi = e.op("arith.sitofp " + ii, "i64 to f64");
    std::string st = e.op("arith.constant " + float_literal(step, DType::f64), "f64");
    std::string s0 = e.op("arith.constant " + float_literal(start, DType::f64), "f64");
    std::string m = e.op("arith.mulf " + fi + ", " + st, "f64");
    std::string a = e.op("arith.addf " + s0 + ", " + m, "f64");
    return e.convert(a, DType::f64, out.dtype());
  });
}

std::string permute(Emitter& e, const Node& n) {
  const Type& in = n.input(0)->type();
  const Type& out = n.output()->type();
  if (in.rank() <= 1) return e.name(n.input(0));
  std::vector<int64_t> p = n.attrs().ints(0);
  for (int64_t& d : p)
    d = d < 0 ? d + in.rank() : d;
  std::string init = e.empty(out.sizes(), out.dtype());
  std::string r = e.fresh();
  e.line(r + " = linalg.transpose ins(" + e.name(n.input(0)) + " : " + tensor_type(in) + ") outs(" +
         init + " : " + tensor_type(out) + ") permutation = [" + ints_list(p) + "]");
  return r;
}

/// slice: tensor.extract_slice with the start normalised and clamped as the view does, the
/// step as stride, and the size from the result type.
std::string slice(Emitter& e, const Node& n) {
  const Type& in = n.input(0)->type();
  const Type& out = n.output()->type();
  int64_t rank = in.rank();
  int64_t dim = n.attrs().i(0);
  if (dim < 0) dim += rank;
  int64_t size = in.sizes()[static_cast<size_t>(dim)];
  int64_t start = n.attrs().i(1);
  if (start < 0) start += size;
  start = std::clamp<int64_t>(start, 0, size);
  std::vector<int64_t> offs(static_cast<size_t>(rank), 0), strides(static_cast<size_t>(rank), 1);
  offs[static_cast<size_t>(dim)] = start;
  strides[static_cast<size_t>(dim)] = n.attrs().i(3);
  std::string r = e.fresh();
  e.line(r + " = tensor.extract_slice " + e.name(n.input(0)) + "[" + ints_list(offs) + "] [" +
         ints_list(out.sizes()) + "] [" + ints_list(strides) + "] : " + tensor_type(in) + " to " +
         tensor_type(out));
  return r;
}

/// cat: operands converted to the result dtype, then tensor.concat. 1-d empty operands are
/// skipped, as cat's inference skips them (PyTorch's legacy rule).
std::string cat(Emitter& e, const Node& n) {
  const Type& out = n.output()->type();
  int64_t dim = n.attrs().i(0);
  if (dim < 0) dim += out.rank();
  std::vector<std::string> args, types;
  for (const Value* v : n.inputs()) {
    const Shape& s = v->type().sizes();
    if (s.size() == 1 && s[0] == 0 && out.rank() != 1) continue;
    args.push_back(convert_tensor(e, e.name(v), s, v->type().dtype(), out.dtype()));
    types.push_back(tensor_type(s, out.dtype()));
  }
  if (args.empty()) return e.empty(out.sizes(), out.dtype());
  if (args.size() == 1) return args[0];
  std::string a, ts;
  for (size_t i = 0; i < args.size(); ++i) {
    a += (i ? ", " : "") + args[i];
    ts += (i ? ", " : "") + types[i];
  }
  std::string r = e.fresh();
  e.line(r + detail::str(" = tensor.concat dim(", dim, ") ") + a + " : (" + ts + ") -> " +
         tensor_type(out));
  return r;
}

/// pad: negative pads crop first (tensor.extract_slice), then tensor.pad adds the positive
/// ones, yielding `value` in the element type.
std::string pad(Emitter& e, const Node& n) {
  const Type& in = n.input(0)->type();
  const Type& out = n.output()->type();
  const auto& pads = n.attrs().ints(0);
  size_t rank = static_cast<size_t>(in.rank());
  std::vector<int64_t> lo(rank, 0), hi(rank, 0), crop_lo(rank, 0), mid = in.sizes(), ones(rank, 1);
  bool crops = false, pads_any = false;
  for (size_t k = 0; k + 1 < pads.size(); k += 2) {
    size_t d = rank - 1 - k / 2;
    lo[d] = std::max<int64_t>(pads[k], 0);
    hi[d] = std::max<int64_t>(pads[k + 1], 0);
    crop_lo[d] = std::max<int64_t>(-pads[k], 0);
    mid[d] -= crop_lo[d] + std::max<int64_t>(-pads[k + 1], 0);
    crops = crops || pads[k] < 0 || pads[k + 1] < 0;
    pads_any = pads_any || pads[k] > 0 || pads[k + 1] > 0;
  }
  std::string v = e.name(n.input(0));
  if (crops) {
    std::string r = e.fresh();
    e.line(r + " = tensor.extract_slice " + v + "[" + ints_list(crop_lo) + "] [" + ints_list(mid) +
           "] [" + ints_list(ones) + "] : " + tensor_type(in) + " to " +
           tensor_type(mid, in.dtype()));
    v = r;
  }
  if (!pads_any) return v;
  std::string c = e.fresh();
  e.line(c + " = " +
         constant_op(Emitter::scalar_literal(n.attrs().f(1), out.dtype()), out.dtype()));
  std::string r = e.fresh();
  std::string idx;
  for (size_t i = 0; i < rank; ++i)
    idx += detail::str(i ? ", " : "", "%i", i, ": index");
  e.line(r + " = tensor.pad " + v + " low[" + ints_list(lo) + "] high[" + ints_list(hi) + "] {");
  e.line("^bb0(" + idx + "):");
  e.line("  tensor.yield " + c + " : " + elem(out.dtype()));
  e.line("} : " + tensor_type(mid, in.dtype()) + " to " + tensor_type(out));
  return r;
}

/// gather and index_select: a generic over the result that reads the index element and
/// `tensor.extract`s the input at the indexed position. The eager kernels check that every
/// index lies in range; in MLIR an out-of-range index is undefined behaviour.
std::string indexed_read(Emitter& e, const Node& n) {
  const Type& x = n.input(0)->type();
  const Type& idx = n.input(1)->type();
  const Type& out = n.output()->type();
  if (x.rank() == 0) return e.name(n.input(0)); // the index can only be 0 (eager checks)
  int64_t rank = x.rank();
  int64_t dim = n.attrs().i(0);
  if (dim < 0) dim += rank;
  Operand index{e.name(n.input(1)), idx.sizes(), idx.dtype()};
  if (n.op() == Op::index_select) {
    // The 1-d (or 0-d) index runs along `dim` of the result.
    std::string m = "affine_map<(";
    for (int64_t i = 0; i < rank; ++i)
      m += detail::str(i ? ", " : "", "d", i);
    index.map = m + ") -> (" + (idx.rank() == 1 ? detail::str("d", dim) : std::string()) + ")>";
  }
  std::string xv = e.name(n.input(0));
  return e.generic(
      std::span<const Operand>(&index, 1), out.sizes(), out.dtype(),
      [&](const std::vector<std::string>& v) {
        std::string at;
        for (int64_t i = 0; i < rank; ++i) {
          std::string c = i == dim
                              ? e.op("arith.index_cast " + v[0], elem(idx.dtype()) + " to index")
                              : e.op(detail::str("linalg.index ", i), "index");
          at += (i ? ", " : "") + c;
        }
        std::string r = e.fresh();
        e.line("  " + r + " = tensor.extract " + xv + "[" + at + "] : " + tensor_type(x));
        return r;
      });
}

/// matmul: linalg.matmul (2-d), linalg.batch_matmul (3-d, equal batch), otherwise a generic
/// over (batch..., n, m, k) whose maps broadcast the batch dims. f16/bf16 accumulate in f32
/// and round once (as the eager kernel); integers wrap in their own width.
std::string matmul(Emitter& e, const Node& n) {
  const Type& a = n.input(0)->type();
  const Type& b = n.input(1)->type();
  const Type& out = n.output()->type();
  DType t = out.dtype(), c = compute_dtype(t);
  std::string acc = e.filled(out.sizes(), c, Emitter::scalar_literal(0, c));
  std::string ct = tensor_type(out.sizes(), c);
  std::string r = e.fresh();
  std::string ins = "ins(" + e.name(n.input(0)) + ", " + e.name(n.input(1)) + " : " +
                    tensor_type(a) + ", " + tensor_type(b) + ") outs(" + acc + " : " + ct + ")";
  if (a.rank() == 2 && b.rank() == 2) {
    e.line(r + " = linalg.matmul " + ins + " -> " + ct);
  } else if (a.rank() == 3 && b.rank() == 3 && a.sizes()[0] == b.sizes()[0]) {
    e.line(r + " = linalg.batch_matmul " + ins + " -> " + ct);
  } else {
    size_t R = static_cast<size_t>(out.rank()), L = R + 1;
    auto map = [&](const Type& x, bool is_a) {
      std::string m = "affine_map<(";
      for (size_t i = 0; i < L; ++i)
        m += detail::str(i ? ", " : "", "d", i);
      m += ") -> (";
      size_t xr = static_cast<size_t>(x.rank()), nb = xr - 2, ob = R - 2;
      for (size_t j = 0; j < nb; ++j) {
        size_t od = ob - nb + j;
        m += (x.sizes()[j] == 1 && out.sizes()[od] != 1) ? std::string("0") : detail::str("d", od);
        m += ", ";
      }
      m += is_a ? detail::str("d", R - 2, ", d", R) : detail::str("d", R, ", d", R - 1);
      return m + ")>";
    };
    std::string omap = Emitter::broadcast_map(out.sizes(), out.sizes(), L);
    std::string iters;
    for (size_t i = 0; i < L; ++i)
      iters += i + 1 < L ? "\"parallel\", " : "\"reduction\"";
    e.line(r + " = linalg.generic {indexing_maps = [" + map(a, true) + ", " + map(b, false) + ", " +
           omap + "], iterator_types = [" + iters + "]} " + ins + " {");
    std::string x = e.fresh(), y = e.fresh(), z = e.fresh();
    e.line("^bb0(" + x + ": " + elem(t) + ", " + y + ": " + elem(t) + ", " + z + ": " + elem(c) +
           "):");
    bool f = is_floating(c);
    std::string xc = e.convert(x, t, c), yc = e.convert(y, t, c);
    std::string p = e.op(std::string(f ? "arith.mulf " : "arith.muli ") + xc + ", " + yc, elem(c));
    std::string s = e.op(std::string(f ? "arith.addf " : "arith.addi ") + z + ", " + p, elem(c));
    e.line("  linalg.yield " + s + " : " + elem(c));
    e.line("} -> " + ct);
  }
  return convert_tensor(e, r, out.sizes(), c, t);
}

} // namespace

void Emitter::lower(const Node& n) {
  const Type& out = n.output()->type();
  switch (n.schema().kind) {
  case OpKind::pointwise: lower_pointwise(*this, n); return;
  case OpKind::random: external_node(*this, n); return; // the Philox stream
  default: break;
  }
  switch (n.op()) {
  case Op::empty: bind(n.output(), empty(out.sizes(), out.dtype())); return;
  case Op::full: {
    std::string r = fresh();
    line(r + " = arith.constant dense<" +
         scalar_literal(n.attrs().scalar(1).to_double(), out.dtype()) + "> : " + tensor_type(out));
    bind(n.output(), r);
    return;
  }
  case Op::arange: bind(n.output(), arange(*this, n)); return;
  case Op::sum:
  case Op::prod:
  case Op::amax:
  case Op::amin:
  case Op::argmax:
  case Op::argmin: lower_reduction(*this, n); return;
  case Op::view:
    bind(n.output(),
         reshape(*this, name(n.input(0)), n.input(0)->type().sizes(), out.sizes(), out.dtype()));
    return;
  case Op::permute: bind(n.output(), permute(*this, n)); return;
  case Op::expand: {
    std::vector<Operand> ins = operands_of(*this, n);
    bind(n.output(), generic(ins, out.sizes(), out.dtype(),
                             [](const std::vector<std::string>& x) { return x[0]; }));
    return;
  }
  case Op::slice: bind(n.output(), slice(*this, n)); return;
  case Op::copy: bind(n.output(), name(n.input(0))); return; // tensors are values
  case Op::cat: bind(n.output(), cat(*this, n)); return;
  case Op::pad: bind(n.output(), pad(*this, n)); return;
  case Op::gather:
  case Op::index_select: bind(n.output(), indexed_read(*this, n)); return;
  case Op::matmul: bind(n.output(), matmul(*this, n)); return;
  default: break;
  }
  if (lower_conv_pool(*this, n)) return;
  // cumsum (a scan) and scatter (data-dependent writes, the last one winning).
  external_node(*this, n);
}

} // namespace kiln::ir::mlir
