// MLIR output, one lowering per op: pointwise and reductions as linalg.generic, matmul and
// convolution as named linalg ops, views as tensor/linalg ops, the rest as external calls.
#include <algorithm>

#include "ir/mlir_emitter.h"
#include "runtime/ops/dispatch.h"

namespace kiln::ir::mlir {
namespace {

/// The dtype arithmetic happens in: the given one, with f16/bf16 widened to f32.
DType compute(DType t) { return is_reduced_float(t) ? DType::f32 : t; }

bool is_compare(Op op) {
  return op == Op::eq || op == Op::ne || op == Op::lt || op == Op::le || op == Op::gt ||
         op == Op::ge;
}

/// One scalar op of a pointwise node over elements already converted to dtype c.
std::string scalar_op(Emitter& e, Op op, const std::vector<std::string>& x, DType c) {
  std::string t = elem(c);
  bool f = is_floating(c), u = c == DType::u8 || c == DType::bool_;
  auto bin = [&](const char* fop, const char* iop) {
    return e.op(std::string(f ? fop : iop) + " " + x[0] + ", " + x[1], t);
  };
  auto zero = [&]() { return e.op("arith.constant " + Emitter::scalar_literal(0, c), t); };
  auto un = [&](const char* mop) { return e.op(std::string(mop) + " " + x[0], t); };
  switch (op) {
  case Op::add: return c == DType::bool_ ? bin("", "arith.ori") : bin("arith.addf", "arith.addi");
  case Op::sub: return bin("arith.subf", "arith.subi");
  case Op::mul: return c == DType::bool_ ? bin("", "arith.andi") : bin("arith.mulf", "arith.muli");
  case Op::div: return bin("arith.divf", u ? "arith.divui" : "arith.divsi");
  case Op::maximum:
    return c == DType::bool_ ? bin("", "arith.ori")
                             : bin("arith.maximumf", u ? "arith.maxui" : "arith.maxsi");
  case Op::minimum:
    return c == DType::bool_ ? bin("", "arith.andi")
                             : bin("arith.minimumf", u ? "arith.minui" : "arith.minsi");
  case Op::pow: return bin("math.powf", "math.ipowi");
  case Op::floor_divide: {
    if (!f) return bin("", u ? "arith.divui" : "arith.floordivsi");
    std::string q = bin("arith.divf", "");
    return e.op("math.floor " + q, t);
  }
  case Op::remainder: {
    if (f) {
      std::string q = e.op("math.floor " + bin("arith.divf", ""), t);
      std::string p = e.op("arith.mulf " + q + ", " + x[1], t);
      return e.op("arith.subf " + x[0] + ", " + p, t);
    }
    if (u) return bin("", "arith.remui");
    // Python's modulo: the remainder takes the sign of the divisor.
    std::string r = bin("", "arith.remsi");
    std::string z = zero();
    std::string nz = e.op("arith.cmpi ne, " + r + ", " + z, t);
    std::string rn = e.op("arith.cmpi slt, " + r + ", " + z, t);
    std::string bn = e.op("arith.cmpi slt, " + x[1] + ", " + z, t);
    std::string differ = e.op("arith.xori " + rn + ", " + bn, "i1");
    std::string fix = e.op("arith.andi " + nz + ", " + differ, "i1");
    std::string sum = e.op("arith.addi " + r + ", " + x[1], t);
    return e.op("arith.select " + fix + ", " + sum + ", " + r, t);
  }
  case Op::neg:
    if (f) return un("arith.negf");
    return e.op("arith.subi " + zero() + ", " + x[0], t);
  case Op::abs: return un(f ? "math.absf" : "math.absi");
  case Op::relu:
    return e.op(std::string(f ? "arith.maximumf " : u ? "arith.maxui " : "arith.maxsi ") + x[0] +
                    ", " + zero(),
                t);
  case Op::floor: return f ? un("math.floor") : x[0];
  case Op::ceil: return f ? un("math.ceil") : x[0];
  case Op::round: return f ? un("math.roundeven") : x[0];
  case Op::exp: return un("math.exp");
  case Op::log: return un("math.log");
  case Op::sqrt: return un("math.sqrt");
  case Op::rsqrt: return un("math.rsqrt");
  case Op::sin: return un("math.sin");
  case Op::cos: return un("math.cos");
  case Op::tanh: return un("math.tanh");
  case Op::erf: return un("math.erf");
  case Op::sigmoid: {
    std::string n = un("arith.negf");
    std::string ex = e.op("math.exp " + n, t);
    std::string one = e.op("arith.constant " + Emitter::scalar_literal(1, c), t);
    std::string d = e.op("arith.addf " + one + ", " + ex, t);
    return e.op("arith.divf " + one + ", " + d, t);
  }
  case Op::eq:
  case Op::ne:
  case Op::lt:
  case Op::le:
  case Op::gt:
  case Op::ge: {
    static const char* fp[] = {"oeq", "une", "olt", "ole", "ogt", "oge"};
    static const char* si[] = {"eq", "ne", "slt", "sle", "sgt", "sge"};
    static const char* ui[] = {"eq", "ne", "ult", "ule", "ugt", "uge"};
    int k = static_cast<int>(op) - static_cast<int>(Op::eq);
    std::string r = e.fresh();
    e.line("  " + r + " = arith." + (f ? "cmpf " : "cmpi ") + (f ? fp : u ? ui : si)[k] + ", " +
           x[0] + ", " + x[1] + " : " + t);
    return r;
  }
  case Op::logical_not: {
    std::string one = e.op("arith.constant true", "i1");
    return e.op("arith.xori " + x[0] + ", " + one, "i1");
  }
  case Op::logical_and: return e.op("arith.andi " + x[0] + ", " + x[1], "i1");
  case Op::logical_or: return e.op("arith.ori " + x[0] + ", " + x[1], "i1");
  case Op::where: return e.op("arith.select " + x[0] + ", " + x[1] + ", " + x[2], t);
  case Op::cast: return x[0];
  default: KILN_UNREACHABLE("mlir: not a pointwise op");
  }
}

std::vector<Operand> operands_of(Emitter& e, const Node& n) {
  std::vector<Operand> ins;
  for (const Value* v : n.inputs()) ins.push_back({e.name(v), v->type().sizes(), v->type().dtype()});
  return ins;
}

void pointwise(Emitter& e, const Node& n) {
  const Type& out = n.output()->type();
  std::vector<Operand> ins = operands_of(e, n);
  // The dtype each operand is converted to before the scalar op.
  std::vector<DType> to(ins.size(), compute(out.dtype()));
  DType c = compute(out.dtype());
  if (is_compare(n.op())) {
    std::vector<TensorMeta> metas;
    for (const Value* v : n.inputs()) metas.push_back(v->type().to_meta());
    c = compute(result_type(metas));
    std::fill(to.begin(), to.end(), c);
  } else if (n.op() == Op::logical_not || n.op() == Op::logical_and ||
             n.op() == Op::logical_or) {
    c = DType::bool_;
    std::fill(to.begin(), to.end(), DType::bool_);
  } else if (n.op() == Op::where) {
    to[0] = DType::bool_;
  } else if (n.op() == Op::cast) {
    to[0] = out.dtype();
    c = out.dtype();
  }
  std::string r = e.generic(ins, out.sizes(), out.dtype(), [&](const std::vector<std::string>& x) {
    std::vector<std::string> cv;
    for (size_t i = 0; i < ins.size(); ++i) cv.push_back(e.convert(x[i], ins[i].dtype, to[i]));
    std::string res = scalar_op(e, n.op(), cv, c);
    DType res_t = is_compare(n.op()) ? DType::bool_ : c;
    return e.convert(res, res_t, out.dtype());
  });
  e.bind(n.output(), r);
}

std::vector<int64_t> norm_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> r;
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d) r.push_back(d);
  for (int64_t d : dims) r.push_back(d < 0 ? d + rank : d);
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

/// sum, prod, amax, amin: a fill of the identity, then a generic reducing into it.
void reduction(Emitter& e, const Node& n) {
  const Type& in = n.input(0)->type();
  const Type& out = n.output()->type();
  int64_t rank = in.rank();
  std::vector<int64_t> dims = norm_dims(n.attrs().ints(0), rank);
  std::vector<bool> red(static_cast<size_t>(rank), false);
  for (int64_t d : dims) red[static_cast<size_t>(d)] = true;
  Shape reduced; // sizes without the reduced dims
  std::string omap = "affine_map<(";
  for (int64_t i = 0; i < rank; ++i) omap += detail::str(i ? ", " : "", "d", i);
  omap += ") -> (";
  bool first = true;
  for (int64_t i = 0; i < rank; ++i)
    if (!red[static_cast<size_t>(i)]) {
      omap += detail::str(first ? "" : ", ", "d", i);
      first = false;
      reduced.push_back(in.sizes()[static_cast<size_t>(i)]);
    }
  omap += ")>";
  DType t = out.dtype();
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
    if (f) {
      init = float_literal(mx ? -1.0 / 0.0 : 1.0 / 0.0, t);
    } else if (t == DType::bool_) {
      init = mx ? "false" : "true";
    } else {
      int bits = static_cast<int>(itemsize(t) * 8);
      if (u)
        init = mx ? "0" : "-1";
      else
        init = mx ? detail::str(bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1)))
                  : detail::str(bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1);
    }
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
    iters += detail::str(i ? ", " : "", red[static_cast<size_t>(i)] ? "\"reduction\"" : "\"parallel\"");
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
  if (reduced != out.sizes()) { // keepdim: put the size-1 dims back
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
      for (size_t j = 0; j < groups[gi].size(); ++j) reassoc += detail::str(j ? ", " : "", groups[gi][j]);
      reassoc += "]";
    }
    reassoc += "]";
    std::string shape;
    for (size_t i = 0; i < out.sizes().size(); ++i) shape += detail::str(i ? ", " : "", out.sizes()[i]);
    e.line(s + " = tensor.expand_shape " + r + " " + reassoc + " output_shape [" + shape +
           "] : " + rt + " into " + tensor_type(out));
    r = s;
  }
  e.bind(n.output(), r);
}

/// A reshape through a rank-1 tensor: collapse everything, then expand to the new sizes.
std::string reshape(Emitter& e, const std::string& v, const Type& in, const Shape& to) {
  std::string cur = v;
  Shape flat{in.rank() == 0 ? 1 : in.numel()};
  auto all = [](size_t n) {
    std::string s = "[[";
    for (size_t i = 0; i < n; ++i) s += detail::str(i ? ", " : "", i);
    return s + "]]";
  };
  if (in.sizes() == to) return v;
  if (in.rank() == 0 || to.empty()) {
    std::string r = e.fresh();
    if (in.rank() == 0)
      e.line(r + " = tensor.expand_shape " + cur + " [] output_shape [" + [&] {
        std::string s;
        for (size_t i = 0; i < to.size(); ++i) s += i ? ", 1" : "1";
        return s;
      }() + "] : " + tensor_type(in.sizes(), in.dtype()) + " into " + tensor_type(to, in.dtype()));
    else
      e.line(r + " = tensor.collapse_shape " + cur + " [] : " + tensor_type(in.sizes(), in.dtype()) +
             " into " + tensor_type(to, in.dtype()));
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
    for (size_t i = 0; i < to.size(); ++i) shape += detail::str(i ? ", " : "", to[i]);
    e.line(r + " = tensor.expand_shape " + cur + " " + all(to.size()) + " output_shape [" + shape +
           "] : " + tensor_type(flat, in.dtype()) + " into " + tensor_type(to, in.dtype()));
    cur = r;
  }
  return cur;
}

std::string ints_list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += detail::str(i ? ", " : "", v[i]);
  return s;
}

void external_node(Emitter& e, const Node& n) {
  std::vector<std::string> names;
  std::vector<Type> types;
  for (const Value* v : n.inputs()) {
    names.push_back(e.name(v));
    types.push_back(v->type());
  }
  e.bind(n.output(), e.external(n, names, types));
}

/// Pads a 4-d NCHW tensor on H and W with `value`.
std::string pad_hw(Emitter& e, const std::string& v, const Type& t, int64_t ph, int64_t pw,
                   int64_t eh, int64_t ew, const std::string& value) {
  if (ph == 0 && pw == 0 && eh == 0 && ew == 0) return v;
  Shape s = t.sizes();
  Shape o = {s[0], s[1], s[2] + ph + eh, s[3] + pw + ew};
  std::string c = e.fresh();
  e.line(c + " = arith.constant " + value + " : " + elem(t.dtype()));
  std::string r = e.fresh();
  e.line(r + " = tensor.pad " + v + detail::str(" low[0, 0, ", ph, ", ", pw, "] high[0, 0, ", eh,
                                                ", ", ew, "] {"));
  e.line("^bb0(%i0: index, %i1: index, %i2: index, %i3: index):");
  e.line("  tensor.yield " + c + " : " + elem(t.dtype()));
  e.line("} : " + tensor_type(t) + " to " + tensor_type(o, t.dtype()));
  return r;
}

Type padded_type(const Type& t, int64_t h, int64_t w) {
  Shape s = t.sizes();
  return Type(t.dtype(), {s[0], s[1], s[2] + h, s[3] + w});
}

} // namespace

void Emitter::lower(const Node& n) {
  const Type& out = n.output()->type();
  switch (n.schema().kind) {
  case OpKind::pointwise: pointwise(*this, n); return;
  case OpKind::random: external_node(*this, n); return;
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
  case Op::arange: {
    double start = n.attrs().scalar(0).to_double(), step = n.attrs().scalar(2).to_double();
    std::string r = generic({}, out.sizes(), out.dtype(), [&](const std::vector<std::string>&) {
      std::string i = op("linalg.index 0", "index");
      std::string ii = op("arith.index_cast " + i, "index to i64");
      std::string fi = op("arith.sitofp " + ii, "i64 to f64");
      std::string st = op("arith.constant " + float_literal(step, DType::f64), "f64");
      std::string s0 = op("arith.constant " + float_literal(start, DType::f64), "f64");
      std::string m = op("arith.mulf " + fi + ", " + st, "f64");
      std::string a = op("arith.addf " + s0 + ", " + m, "f64");
      return convert(a, DType::f64, out.dtype());
    });
    bind(n.output(), r);
    return;
  }
  case Op::sum:
  case Op::prod:
  case Op::amax:
  case Op::amin: reduction(*this, n); return;
  case Op::view: bind(n.output(), reshape(*this, name(n.input(0)), n.input(0)->type(), out.sizes())); return;
  case Op::permute: {
    const Type& in = n.input(0)->type();
    if (in.rank() <= 1) {
      bind(n.output(), name(n.input(0)));
      return;
    }
    std::vector<int64_t> p = n.attrs().ints(0);
    for (int64_t& d : p) d = d < 0 ? d + in.rank() : d;
    std::string init = empty(out.sizes(), out.dtype());
    std::string r = fresh();
    line(r + " = linalg.transpose ins(" + name(n.input(0)) + " : " + tensor_type(in) + ") outs(" +
         init + " : " + tensor_type(out) + ") permutation = [" + ints_list(p) + "]");
    bind(n.output(), r);
    return;
  }
  case Op::expand: {
    std::vector<Operand> ins = operands_of(*this, n);
    bind(n.output(), generic(ins, out.sizes(), out.dtype(),
                             [](const std::vector<std::string>& x) { return x[0]; }));
    return;
  }
  case Op::slice: {
    const Type& in = n.input(0)->type();
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
    std::string r = fresh();
    line(r + " = tensor.extract_slice " + name(n.input(0)) + "[" + ints_list(offs) + "] [" +
         ints_list(out.sizes()) + "] [" + ints_list(strides) + "] : " + tensor_type(in) + " to " +
         tensor_type(out));
    bind(n.output(), r);
    return;
  }
  case Op::copy: bind(n.output(), name(n.input(0))); return;
  case Op::cat: {
    int64_t dim = n.attrs().i(0);
    if (dim < 0) dim += out.rank();
    std::string args, types;
    for (const Value* v : n.inputs()) {
      std::string nm = name(v);
      if (v->type().dtype() != out.dtype()) {
        Operand o{nm, v->type().sizes(), v->type().dtype()};
        nm = generic(std::span<const Operand>(&o, 1), v->type().sizes(), out.dtype(),
                     [&](const std::vector<std::string>& x) {
                       return convert(x[0], v->type().dtype(), out.dtype());
                     });
      }
      args += (args.empty() ? "" : ", ") + nm;
      types += (types.empty() ? "" : ", ") + tensor_type(v->type().sizes(), out.dtype());
    }
    if (n.num_inputs() == 1) {
      bind(n.output(), args);
      return;
    }
    std::string r = fresh();
    line(r + detail::str(" = tensor.concat dim(", dim, ") ") + args + " : (" + types + ") -> " +
         tensor_type(out));
    bind(n.output(), r);
    return;
  }
  case Op::pad: {
    const Type& in = n.input(0)->type();
    const auto& pads = n.attrs().ints(0);
    bool negative = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; });
    if (negative) break;
    std::vector<int64_t> lo(static_cast<size_t>(in.rank()), 0), hi = lo;
    for (size_t k = 0; k + 1 < pads.size(); k += 2) {
      size_t d = static_cast<size_t>(in.rank()) - 1 - k / 2;
      lo[d] = pads[k];
      hi[d] = pads[k + 1];
    }
    std::string c = fresh();
    line(c + " = arith.constant " + scalar_literal(n.attrs().f(1), out.dtype()) + " : " +
         elem(out.dtype()));
    std::string r = fresh();
    std::string idx;
    for (int64_t i = 0; i < in.rank(); ++i) idx += detail::str(i ? ", " : "", "%i", i, ": index");
    line(r + " = tensor.pad " + name(n.input(0)) + " low[" + ints_list(lo) + "] high[" +
         ints_list(hi) + "] {");
    line("^bb0(" + idx + "):");
    line("  tensor.yield " + c + " : " + elem(out.dtype()));
    line("} : " + tensor_type(in) + " to " + tensor_type(out));
    bind(n.output(), r);
    return;
  }
  case Op::matmul: {
    const Type& a = n.input(0)->type();
    const Type& b = n.input(1)->type();
    DType t = out.dtype();
    std::string acc = filled(out.sizes(), t, scalar_literal(0, t));
    std::string r = fresh();
    std::string ins = "ins(" + name(n.input(0)) + ", " + name(n.input(1)) + " : " +
                      tensor_type(a) + ", " + tensor_type(b) + ") outs(" + acc + " : " +
                      tensor_type(out) + ")";
    if (a.rank() == 2 && b.rank() == 2) {
      line(r + " = linalg.matmul " + ins + " -> " + tensor_type(out));
    } else if (a.rank() == 3 && b.rank() == 3 && a.sizes()[0] == b.sizes()[0]) {
      line(r + " = linalg.batch_matmul " + ins + " -> " + tensor_type(out));
    } else {
      // Broadcast batches: a generic over (batch..., n, m, k).
      size_t R = static_cast<size_t>(out.rank()), L = R + 1;
      auto map = [&](const Type& x, bool is_a) {
        std::string m = "affine_map<(";
        for (size_t i = 0; i < L; ++i) m += detail::str(i ? ", " : "", "d", i);
        m += ") -> (";
        size_t xr = static_cast<size_t>(x.rank()), nb = xr - 2, ob = R - 2;
        for (size_t j = 0; j < nb; ++j) {
          size_t od = ob - nb + j;
          m += (x.sizes()[j] == 1 && out.sizes()[od] != 1) ? std::string("0")
                                                           : detail::str("d", od);
          m += ", ";
        }
        m += is_a ? detail::str("d", R - 2, ", d", R) : detail::str("d", R, ", d", R - 1);
        return m + ")>";
      };
      std::string omap = Emitter::broadcast_map(out.sizes(), out.sizes(), L);
      std::string iters;
      for (size_t i = 0; i < L; ++i) iters += i + 1 < L ? "\"parallel\", " : "\"reduction\"";
      line(r + " = linalg.generic {indexing_maps = [" + map(a, true) + ", " + map(b, false) + ", " +
           omap + "], iterator_types = [" + iters + "]} " + ins + " {");
      std::string x = fresh(), y = fresh(), z = fresh();
      line("^bb0(" + x + ": " + elem(t) + ", " + y + ": " + elem(t) + ", " + z + ": " + elem(t) +
           "):");
      bool f = is_floating(t);
      std::string p = op(std::string(f ? "arith.mulf " : "arith.muli ") + x + ", " + y, elem(t));
      std::string s = op(std::string(f ? "arith.addf " : "arith.addi ") + z + ", " + p, elem(t));
      line("  linalg.yield " + s + " : " + elem(t));
      line("} -> " + tensor_type(out));
    }
    bind(n.output(), r);
    return;
  }
  case Op::conv2d: {
    if (n.attrs().i(3) != 1 || !is_floating(out.dtype())) break;
    const Type& x = n.input(0)->type();
    const auto& pad = n.attrs().ints(1);
    int64_t ph = pad.empty() ? 0 : pad[0], pw = pad.size() > 1 ? pad[1] : ph;
    std::string px = pad_hw(*this, name(n.input(0)), x, ph, pw, ph, pw, scalar_literal(0, x.dtype()));
    Type pt = padded_type(x, 2 * ph, 2 * pw);
    std::string acc = filled(out.sizes(), out.dtype(), scalar_literal(0, out.dtype()));
    std::string r = fresh();
    line(r + " = linalg.conv_2d_nchw_fchw {dilations = dense<[" + ints_list(n.attrs().ints(2)) +
         "]> : tensor<2xi64>, strides = dense<[" + ints_list(n.attrs().ints(0)) +
         "]> : tensor<2xi64>} ins(" + px + ", " + name(n.input(1)) + " : " + tensor_type(pt) +
         ", " + tensor_type(n.input(1)->type()) + ") outs(" + acc + " : " + tensor_type(out) +
         ") -> " + tensor_type(out));
    if (n.num_inputs() == 3) {
      Operand o[2] = {{r, out.sizes(), out.dtype()}, {name(n.input(2)), {}, out.dtype()}};
      const Type& bt = n.input(2)->type();
      // Bias [O] broadcasts along dim 1: give it the shape [O, 1, 1] first.
      std::string b3 = reshape(*this, o[1].name, bt, {bt.sizes()[0], 1, 1});
      o[1] = {b3, {bt.sizes()[0], 1, 1}, bt.dtype()};
      r = generic(std::span<const Operand>(o, 2), out.sizes(), out.dtype(),
                  [&](const std::vector<std::string>& v) {
                    std::string bb = convert(v[1], bt.dtype(), out.dtype());
                    return op("arith.addf " + v[0] + ", " + bb, elem(out.dtype()));
                  });
    }
    bind(n.output(), r);
    return;
  }
  case Op::max_pool2d:
  case Op::avg_pool2d: {
    bool mx = n.op() == Op::max_pool2d;
    const Type& x = n.input(0)->type();
    if (!is_floating(out.dtype())) break;
    const auto& k = n.attrs().ints(0);
    std::vector<int64_t> s = n.attrs().ints(1);
    if (s.empty()) s = k;
    const auto& p = n.attrs().ints(2);
    std::vector<int64_t> dil = mx ? n.attrs().ints(3) : std::vector<int64_t>{1, 1};
    bool ceil_mode = n.attrs().b(mx ? 4 : 3);
    if (!mx && (ceil_mode || !n.attrs().b(4))) break;
    auto two = [](const std::vector<int64_t>& v, int64_t d) {
      return v.empty() ? std::vector<int64_t>{d, d} : v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
    };
    std::vector<int64_t> kk = two(k, 1), ss = two(s, 1), pp = two(p, 0), dd = two(dil, 1);
    // High padding so that exactly the result's windows fit (covers ceil_mode for max).
    int64_t eh = (out.sizes()[2] - 1) * ss[0] + dd[0] * (kk[0] - 1) + 1 - x.sizes()[2] - pp[0];
    int64_t ew = (out.sizes()[3] - 1) * ss[1] + dd[1] * (kk[1] - 1) + 1 - x.sizes()[3] - pp[1];
    eh = std::max<int64_t>(eh, 0);
    ew = std::max<int64_t>(ew, 0);
    std::string fill = mx ? float_literal(-1.0 / 0.0, x.dtype()) : scalar_literal(0, x.dtype());
    std::string px = pad_hw(*this, name(n.input(0)), x, pp[0], pp[1], eh, ew, fill);
    Type pt = padded_type(x, pp[0] + eh, pp[1] + ew);
    std::string acc = filled(out.sizes(), out.dtype(), fill);
    std::string win = empty({kk[0], kk[1]}, out.dtype());
    std::string r = fresh();
    line(r + " = linalg." + (mx ? "pooling_nchw_max" : "pooling_nchw_sum") +
         " {dilations = dense<[" + ints_list(dd) + "]> : tensor<2xi64>, strides = dense<[" +
         ints_list(ss) + "]> : tensor<2xi64>} ins(" + px + ", " + win + " : " + tensor_type(pt) +
         ", " + tensor_type({kk[0], kk[1]}, out.dtype()) + ") outs(" + acc + " : " +
         tensor_type(out) + ") -> " + tensor_type(out));
    if (!mx) {
      Operand o{r, out.sizes(), out.dtype()};
      double area = static_cast<double>(kk[0] * kk[1]);
      r = generic(std::span<const Operand>(&o, 1), out.sizes(), out.dtype(),
                  [&](const std::vector<std::string>& v) {
                    std::string c = op("arith.constant " + float_literal(area, out.dtype()),
                                       elem(out.dtype()));
                    return op("arith.divf " + v[0] + ", " + c, elem(out.dtype()));
                  });
    }
    bind(n.output(), r);
    return;
  }
  default: break;
  }
  external_node(*this, n);
}

} // namespace kiln::ir::mlir
