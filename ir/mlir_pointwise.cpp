// MLIR output of the pointwise ops: one all-parallel linalg.generic per node, operands
// broadcast through their indexing maps and converted to the compute dtype in the body.
#include <algorithm>

#include "ir/mlir_emitter.h"
#include "runtime/ops/dispatch.h"

namespace kiln::ir::mlir {
namespace {

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
  case Op::abs: return u ? x[0] : un(f ? "math.absf" : "math.absi"); // u8: already |x|
  case Op::relu:
    return e.op(std::string(f   ? "arith.maximumf "
                            : u ? "arith.maxui "
                                : "arith.maxsi ") +
                    x[0] + ", " + zero(),
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
    e.line("  " + r + " = arith." + (f ? "cmpf " : "cmpi ") +
           (f   ? fp
            : u ? ui
                : si)[k] +
           ", " + x[0] + ", " + x[1] + " : " + t);
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

} // namespace

DType compute_dtype(DType t) { return is_reduced_float(t) ? DType::f32 : t; }

std::vector<Operand> operands_of(const Emitter& e, const Node& n) {
  std::vector<Operand> ins;
  for (const Value* v : n.inputs())
    ins.push_back({e.name(v), v->type().sizes(), v->type().dtype()});
  return ins;
}

void lower_pointwise(Emitter& e, const Node& n) {
  const Type& out = n.output()->type();
  std::vector<Operand> ins = operands_of(e, n);
  // The dtype each operand is converted to before the scalar op.
  std::vector<DType> to(ins.size(), compute_dtype(out.dtype()));
  DType c = compute_dtype(out.dtype());
  if (is_compare(n.op())) {
    std::vector<TensorMeta> metas;
    for (const Value* v : n.inputs())
      metas.push_back(v->type().to_meta());
    c = compute_dtype(result_type(metas));
    std::fill(to.begin(), to.end(), c);
  } else if (n.op() == Op::logical_not || n.op() == Op::logical_and || n.op() == Op::logical_or) {
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
    for (size_t i = 0; i < ins.size(); ++i)
      cv.push_back(e.convert(x[i], ins[i].dtype, to[i]));
    std::string res = scalar_op(e, n.op(), cv, c);
    DType res_t = is_compare(n.op()) ? DType::bool_ : c;
    return e.convert(res, res_t, out.dtype());
  });
  e.bind(n.output(), r);
}

std::string convert_tensor(Emitter& e, const std::string& v, const Shape& sizes, DType from,
                           DType to) {
  if (elem(from) == elem(to)) return v;
  Operand o{v, sizes, from};
  return e.generic(std::span<const Operand>(&o, 1), sizes, to,
                   [&](const std::vector<std::string>& x) { return e.convert(x[0], from, to); });
}

} // namespace kiln::ir::mlir
