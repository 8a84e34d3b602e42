// The loop IR's verifier: the domain, then the structure of items and loops, then one walk
// over the instructions in program order.
#include "ir/kernel/verifier.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <span>
#include <unordered_set>
#include <utility>

namespace kiln::ir::kernel {
namespace {

int64_t floor_div(int64_t a, int64_t d) {
  const int64_t q = a / d;
  return (a % d != 0 && (a < 0) != (d < 0)) ? q - 1 : q;
}

/// A closed range of int64 values; `overflow` when computing it left int64.
struct Range {
  int64_t lo = 0, hi = 0;
  bool overflow = false;
};

/// The range of an index over variables v in [0, extents[v]) (conservative: each term's range
/// is combined as if the terms were independent). Variables must be in range.
Range range_of(const Index& ix, std::span<const int64_t> extents) {
  Range r{ix.offset(), ix.offset()};
  for (const auto& [c, t] : ix.terms()) {
    int64_t tlo = 0, thi = 0;
    if (t.kind == Term::Kind::var) {
      thi = std::max<int64_t>(extents[static_cast<size_t>(t.var)] - 1, 0);
    } else {
      const Range in = range_of(*t.inner, extents);
      if (in.overflow) return in;
      if (t.kind == Term::Kind::div) {
        tlo = floor_div(in.lo, t.divisor);
        thi = floor_div(in.hi, t.divisor);
      } else if (in.lo >= 0 && in.hi < t.divisor) {
        tlo = in.lo;
        thi = in.hi;
      } else {
        thi = t.divisor - 1;
      }
    }
    int64_t a = 0, b = 0;
    if (__builtin_mul_overflow(c, tlo, &a) || __builtin_mul_overflow(c, thi, &b))
      return {0, 0, true};
    if (c < 0) std::swap(a, b);
    if (__builtin_add_overflow(r.lo, a, &r.lo) || __builtin_add_overflow(r.hi, b, &r.hi))
      return {0, 0, true};
  }
  return r;
}

/// "v2" or "v2..v4": the variables [from, to).
std::string var_span(int from, int to) {
  std::string s = "v" + std::to_string(from);
  if (to - from > 1) s += "..v" + std::to_string(to - 1);
  return s;
}

bool is_arg_reduction(Op op) { return op_traits(op).arg; }

bool is_loop_reduction(Op op) { return op_traits(op).is_fold(); }

/// Ops whose result is floating whatever their operands were (the lowering casts first).
bool is_floating_op(Op op) {
  switch (op) {
  case Op::exp:
  case Op::log:
  case Op::sqrt:
  case Op::rsqrt:
  case Op::sin:
  case Op::cos:
  case Op::tanh:
  case Op::sigmoid:
  case Op::erf:
  case Op::div:
  case Op::pow: return true;
  default: return false;
  }
}

bool is_comparison(Op op) {
  return op == Op::eq || op == Op::ne || op == Op::lt || op == Op::le || op == Op::gt ||
         op == Op::ge;
}

bool is_logical(Op op) {
  return op == Op::logical_not || op == Op::logical_and || op == Op::logical_or;
}

std::string_view kind_name(Instr::Kind k) {
  switch (k) {
  case Instr::Kind::load: return "load";
  case Instr::Kind::constant: return "constant";
  case Instr::Kind::op: return "op";
  case Instr::Kind::cast: return "cast";
  case Instr::Kind::reduce: return "reduce";
  case Instr::Kind::store: return "store";
  }
  return "?";
}

/// Whether an integer constant fits its dtype.
bool fits(int64_t v, DType t) {
  switch (t) {
  case DType::i8: return v >= -128 && v <= 127;
  case DType::u8: return v >= 0 && v <= 255;
  case DType::i32:
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  case DType::bool_: return v == 0 || v == 1;
  default: return true;
  }
}

/// Whether a floating constant is a value of its dtype (NaN and ±Inf are).
bool representable(double v, DType t) {
  if (std::isnan(v) || t == DType::f64) return true;
  const float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) return false;
  if (t == DType::f16) return static_cast<float>(Half(f)) == f;
  if (t == DType::bf16) return static_cast<float>(BFloat16(f)) == f;
  return true;
}

class Verifier {
public:
  explicit Verifier(const Kernel& k) : k_(k), n_(static_cast<int>(k.instrs.size())) {}

  Expected<void> run(VerifyFailure* failed) {
    const bool ok = check_domain() && check_buffers() && check_structure() && check_values() &&
                    check_outputs_stored();
    if (failed) *failed = ok ? VerifyFailure{} : failure_;
    if (ok) return {};
    return Error::without_location(message_);
  }

private:
  // ---- failures ----
  template <typename... Args> bool fail_kernel(const Args&... args) {
    failure_ = {};
    message_ = "kernel " + k_.name + ": " + detail::str(args...);
    return false;
  }
  template <typename... Args> bool fail_instr(int id, const Args&... args) {
    const Instr& in = k_.instrs[static_cast<size_t>(id)];
    std::string what(kind_name(in.kind));
    if (in.kind == Instr::Kind::op) what = op_name(in.op);
    if (in.kind == Instr::Kind::reduce) what = "reduce." + std::string(op_name(in.op));
    failure_ = {id, -1, -1};
    message_ = detail::str("kernel ", k_.name, ": %", id, " = ", what, ": ", args...);
    return false;
  }
  template <typename... Args> bool fail_loop(int l, const Args&... args) {
    failure_ = {-1, l, -1};
    message_ = detail::str("kernel ", k_.name, ": loop ", l, ": ", args...);
    return false;
  }
  template <typename... Args> bool fail_buffer(int b, const Args&... args) {
    failure_ = {-1, -1, b};
    message_ = detail::str("kernel ", k_.name, ": buffer ", k_.buffers[static_cast<size_t>(b)].name,
                           ": ", args...);
    return false;
  }

  // ---- the domain and the buffers ----
  bool check_domain() {
    if (k_.name.empty()) return fail_kernel("the kernel has no name");
    for (char c : k_.name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
        return fail_kernel("the name is not a symbol (letters, digits, '_' and '.')");
    extents_ = k_.extents();
    int64_t points = 1;
    for (size_t v = 0; v < extents_.size(); ++v) {
      if (extents_[v] < 0)
        return fail_kernel("variable v", v, " has the negative extent ", extents_[v]);
      if (extents_[v] > 0 && __builtin_mul_overflow(points, extents_[v], &points))
        return fail_kernel("the domain's point count overflows int64");
    }
    return true;
  }

  bool check_buffers() {
    std::unordered_set<std::string> names;
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      const Buffer& buf = k_.buffers[b];
      const int bi = static_cast<int>(b);
      if (buf.name.empty()) return fail_buffer(bi, "a buffer without a name");
      if (!names.insert(buf.name).second) return fail_buffer(bi, "declared twice");
      if (buf.extent < 0) return fail_buffer(bi, "the negative extent ", buf.extent);
    }
    return true;
  }

  // ---- items and loops ----
  bool check_structure() {
    loop_of_.assign(static_cast<size_t>(n_), kUnplaced);
    std::vector<int> loop_items(k_.loops.size(), 0);
    auto place = [&](int id, int where) {
      if (id < 0 || id >= n_)
        return fail_kernel(where == kOuter ? "an item" : detail::str("loop ", where, "'s body"),
                           " names %", id, ", but the kernel has ", n_, " instructions");
      if (loop_of_[static_cast<size_t>(id)] != kUnplaced)
        return fail_instr(id, "appears twice in the kernel's items and loop bodies");
      loop_of_[static_cast<size_t>(id)] = where;
      return true;
    };
    for (size_t it = 0; it < k_.items.size(); ++it) {
      const Item& item = k_.items[it];
      if ((item.instr >= 0) == (item.loop >= 0))
        return fail_kernel("item ", it, " must be one instruction or one loop");
      if (item.instr >= 0) {
        if (!place(item.instr, kOuter)) return false;
        continue;
      }
      if (item.loop >= static_cast<int>(k_.loops.size()))
        return fail_kernel("item ", it, " names loop ", item.loop, ", but the kernel has ",
                           k_.loops.size(), " loops");
      if (loop_items[static_cast<size_t>(item.loop)]++ > 0)
        return fail_loop(item.loop, "appears twice in the kernel's items");
      for (int id : k_.loops[static_cast<size_t>(item.loop)].body)
        if (!place(id, item.loop)) return false;
    }
    for (size_t l = 0; l < k_.loops.size(); ++l)
      if (loop_items[l] == 0) return fail_loop(static_cast<int>(l), "is in no item");
    for (int id = 0; id < n_; ++id)
      if (loop_of_[static_cast<size_t>(id)] == kUnplaced)
        return fail_instr(id, "is in no item or loop body");
    return true;
  }

  // ---- values, in program order ----
  enum class State : uint8_t {
    undefined,
    live,       // defined and usable here
    own_reduce, // a reduce of the loop being walked: usable after the loop
    other_loop, // defined inside a loop that has ended
  };

  bool check_values() {
    state_.assign(static_cast<size_t>(n_), State::undefined);
    for (const Item& item : k_.items) {
      if (item.instr >= 0) {
        if (!check_instr(item.instr, -1)) return false;
        state_[static_cast<size_t>(item.instr)] = State::live;
        continue;
      }
      const Loop& l = k_.loops[static_cast<size_t>(item.loop)];
      for (int id : l.body) {
        if (!check_instr(id, item.loop)) return false;
        const bool reduce = k_.instrs[static_cast<size_t>(id)].kind == Instr::Kind::reduce;
        state_[static_cast<size_t>(id)] = reduce ? State::own_reduce : State::live;
      }
      for (int id : l.body) {
        const bool reduce = k_.instrs[static_cast<size_t>(id)].kind == Instr::Kind::reduce;
        state_[static_cast<size_t>(id)] = reduce ? State::live : State::other_loop;
      }
    }
    return true;
  }

  bool check_operand(int id, int a) {
    if (a < 0 || a >= n_)
      return fail_instr(id, "operand %", a, " is not an instruction of the kernel (it has ", n_,
                        ")");
    if (k_.instrs[static_cast<size_t>(a)].kind == Instr::Kind::store)
      return fail_instr(id, "operand %", a, " is a store, which defines no value");
    switch (state_[static_cast<size_t>(a)]) {
    case State::live: return true;
    case State::undefined: return fail_instr(id, "uses %", a, " before it is defined");
    case State::own_reduce:
      return fail_instr(id, "uses %", a,
                        ", a reduction of its own loop, whose result exists only after the loop");
    case State::other_loop:
      return fail_instr(id, "uses %", a,
                        ", which is defined inside another loop (only reduce results leave "
                        "their loop)");
    }
    return true;
  }

  bool check_instr(int id, int loop) {
    const Instr& in = k_.instrs[static_cast<size_t>(id)];
    if (!check_arity(id, in)) return false;
    for (int a : in.args)
      if (!check_operand(id, a)) return false;
    switch (in.kind) {
    case Instr::Kind::load:
    case Instr::Kind::store: return check_access(id, in, loop);
    case Instr::Kind::constant: return check_constant(id, in);
    case Instr::Kind::cast: return true;
    case Instr::Kind::op: return check_op(id, in);
    case Instr::Kind::reduce: return check_reduce(id, in, loop);
    }
    return true;
  }

  DType dtype_of(int a) const { return k_.instrs[static_cast<size_t>(a)].dtype; }

  bool check_arity(int id, const Instr& in) {
    size_t want = 0;
    switch (in.kind) {
    case Instr::Kind::load:
    case Instr::Kind::constant: want = 0; break;
    case Instr::Kind::cast:
    case Instr::Kind::reduce:
    case Instr::Kind::store: want = 1; break;
    case Instr::Kind::op: {
      const OpSchema& s = schema(in.op);
      if (s.kind != OpKind::pointwise || in.op == Op::cast || in.op == Op::floor_divide ||
          in.op == Op::remainder)
        return fail_instr(id, op_name(in.op),
                          in.op == Op::cast ? " is written as the cast instruction"
                                            : " is not a pointwise op of the loop IR");
      want = static_cast<size_t>(s.num_inputs);
      break;
    }
    }
    if (in.args.size() != want)
      return fail_instr(id, "takes ", want, " operand", want == 1 ? "" : "s", ", got ",
                        in.args.size());
    return true;
  }

  bool check_access(int id, const Instr& in, int loop) {
    if (in.buffer < 0 || in.buffer >= static_cast<int>(k_.buffers.size()))
      return fail_instr(id, "buffer ", in.buffer, " is not a buffer of the kernel");
    const Buffer& b = k_.buffers[static_cast<size_t>(in.buffer)];
    const bool store = in.kind == Instr::Kind::store;
    if (store && !b.output) return fail_instr(id, "stores to ", b.name, ", an input buffer");
    if (in.dtype != b.dtype)
      return fail_instr(id, "has dtype ", in.dtype, " but buffer ", b.name, " holds ", b.dtype);
    if (store && dtype_of(in.args[0]) != in.dtype)
      return fail_instr(id, "stores %", in.args[0], " of dtype ", dtype_of(in.args[0]), " into ",
                        b.name, " of dtype ", b.dtype);
    if (store) stored_.insert(in.buffer);
    return check_index(id, in.index, loop, b);
  }

  /// Variables in range, divisors positive, no inner variable at outer level.
  bool check_index_vars(int id, const Index& ix, int loop, const std::string& whole) {
    const int n_outer = static_cast<int>(k_.outer.size());
    for (const auto& [c, t] : ix.terms()) {
      if (t.kind == Term::Kind::var) {
        if (t.var < 0 || t.var >= k_.num_vars())
          return fail_instr(
              id, "index ", whole, " uses v", t.var, ", not a variable of the kernel (",
              k_.num_vars() == 0 ? std::string("it has none") : var_span(0, k_.num_vars()), ")");
        if (loop < 0 && t.var >= n_outer)
          return fail_instr(id, "index ", whole, " uses the inner variable v", t.var,
                            " outside a loop");
        continue;
      }
      if (!t.inner || t.divisor <= 0)
        return fail_instr(id, "index ", whole, " divides by ", t.divisor);
      if (!check_index_vars(id, *t.inner, loop, whole)) return false;
    }
    return true;
  }

  /// Every / and % divides an operand >= 0 (code generation divides unsigned).
  bool check_division_operands(int id, const Index& ix, const std::string& whole) {
    for (const auto& [c, t] : ix.terms()) {
      if (t.kind == Term::Kind::var) continue;
      const Range in = range_of(*t.inner, extents_);
      if (in.overflow) return fail_instr(id, "index ", whole, " overflows int64");
      if (in.lo < 0)
        return fail_instr(id, "index ", whole, ": ", t.inner->str(), " may be negative (down to ",
                          in.lo, ") where it is divided");
      if (!check_division_operands(id, *t.inner, whole)) return false;
    }
    return true;
  }

  bool check_index(int id, const Index& ix, int loop, const Buffer& b) {
    const std::string whole = ix.str();
    if (!check_index_vars(id, ix, loop, whole)) return false;
    // An instruction over an empty domain never runs: nothing to check against the buffer.
    const size_t vars = loop < 0 ? k_.outer.size() : extents_.size();
    for (size_t v = 0; v < vars; ++v)
      if (extents_[v] == 0) return true;
    if (!check_division_operands(id, ix, whole)) return false;
    const Range r = range_of(ix, extents_);
    if (r.overflow) return fail_instr(id, "index ", whole, " overflows int64");
    if (r.lo < 0 || r.hi >= b.extent)
      return fail_instr(id, "index ", whole, " ranges over [", r.lo, ", ", r.hi,
                        "], outside buffer ", b.name, "'s extent ", b.extent);
    return true;
  }

  bool check_constant(int id, const Instr& in) {
    if (is_floating(in.dtype)) {
      if (!representable(in.value, in.dtype))
        return fail_instr(id, "value ", in.value, " is not a ", in.dtype, " value");
      return true;
    }
    if (!fits(in.ivalue, in.dtype))
      return fail_instr(id, "value i", in.ivalue, " does not fit ", in.dtype);
    return true;
  }

  bool check_op(int id, const Instr& in) {
    const DType t = in.dtype;
    if (is_comparison(in.op) || is_logical(in.op)) {
      if (t != DType::bool_) return fail_instr(id, "gives bool, not ", t);
      for (int a : in.args)
        if (is_logical(in.op) && dtype_of(a) != DType::bool_)
          return fail_instr(id, "operand %", a, " has dtype ", dtype_of(a), ", not bool");
      if (is_comparison(in.op) && dtype_of(in.args[0]) != dtype_of(in.args[1]))
        return fail_instr(id, "compares ", dtype_of(in.args[0]), " with ", dtype_of(in.args[1]));
      return true;
    }
    if (is_floating_op(in.op) && !is_floating(t))
      return fail_instr(id, "gives a floating dtype, not ", t);
    for (size_t k = 0; k < in.args.size(); ++k) {
      const int a = in.args[k];
      const DType at = dtype_of(a);
      if (in.op == Op::where && k == 0) {
        if (at != DType::bool_)
          return fail_instr(id, "condition %", a, " has dtype ", at, ", not bool");
        continue;
      }
      // An f16/bf16 op may read an f32 operand (PyTorch's precise scalar).
      if (at != t && !(is_reduced_float(t) && at == DType::f32))
        return fail_instr(id, "operand %", a, " has dtype ", at, ", not ", t,
                          " (conversions are explicit casts)");
    }
    return true;
  }

  bool check_reduce(int id, const Instr& in, int loop) {
    if (!is_loop_reduction(in.op))
      return fail_instr(id, op_name(in.op),
                        " is not a reduction of the loop IR (sum, prod, amax, amin, argmax, "
                        "argmin)");
    if (loop < 0) return fail_instr(id, "a reduction outside a loop");
    if (k_.loops[static_cast<size_t>(loop)].kind != Loop::Kind::reduce)
      return fail_instr(id, "a reduction in a map loop (reductions belong to reduce loops)");
    const int n_outer = static_cast<int>(k_.outer.size());
    if (is_arg_reduction(in.op)) {
      if (in.dtype != DType::i64) return fail_instr(id, "gives i64, not ", in.dtype);
      if (in.arg_var < n_outer || in.arg_var >= k_.num_vars()) {
        if (k_.inner.empty())
          return fail_instr(id, "needs an inner variable to go along, and the kernel has none");
        return fail_instr(id, "goes along v", in.arg_var, ", not an inner variable (",
                          var_span(n_outer, k_.num_vars()), ")");
      }
      return true;
    }
    if (in.arg_var >= 0) return fail_instr(id, "'along' is for argmax and argmin only");
    if (dtype_of(in.args[0]) != in.dtype)
      return fail_instr(id, "folds %", in.args[0], " of dtype ", dtype_of(in.args[0]), " into ",
                        in.dtype, " (conversions are explicit casts)");
    return true;
  }

  bool check_outputs_stored() {
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      if (k_.buffers[b].output && !stored_.count(static_cast<int>(b)))
        return fail_buffer(static_cast<int>(b), "an output buffer that nothing stores to");
    return true;
  }

  static constexpr int kUnplaced = -2;
  static constexpr int kOuter = -1;

  const Kernel& k_;
  const int n_;
  std::vector<int64_t> extents_;
  std::vector<int> loop_of_; // per instruction: its loop, kOuter or kUnplaced
  std::vector<State> state_;
  std::unordered_set<int> stored_;
  VerifyFailure failure_;
  std::string message_;
};

} // namespace

namespace {

/// A foreach kernel's rules: only parts, each a verified one-dimensional pointwise kernel
/// whose buffers are the kernel's, of their dtypes and directions and no larger; the parts'
/// points add up to the kernel's; every buffer is some part's, an output exactly one part's.
Expected<void> verify_foreach(const Kernel& k) {
  auto fail = [&](const auto&... args) -> Expected<void> {
    return Error::without_location(detail::str("kernel ", k.name, ": ", args...));
  };
  if (!k.instrs.empty() || !k.items.empty() || !k.loops.empty() || !k.inner.empty() ||
      k.outer.size() != 1)
    return fail("a foreach kernel has one outer dim, its parts and nothing else");
  std::unordered_set<std::string> names;
  for (const Buffer& b : k.buffers)
    if (b.name.empty() || !names.insert(b.name).second)
      return fail("buffer '", b.name, "' is unnamed or declared twice");
  std::vector<int> used(k.buffers.size(), 0);
  int64_t points = 0;
  for (size_t p = 0; p < k.parts.size(); ++p) {
    const Part& part = k.parts[p];
    const Kernel& pk = part.kernel;
    if (!pk.parts.empty() || !pk.loops.empty() || !pk.inner.empty() || pk.outer.size() != 1)
      return fail("part ", p, " is not a one-dimensional pointwise kernel");
    if (Expected<void> ok = verify(pk); !ok) return fail("part ", p, ": ", ok.error().message());
    if (part.buffers.size() != pk.buffers.size())
      return fail("part ", p, " names ", part.buffers.size(), " buffers for its ",
                  pk.buffers.size());
    for (size_t j = 0; j < part.buffers.size(); ++j) {
      const int b = part.buffers[j];
      if (b < 0 || static_cast<size_t>(b) >= k.buffers.size())
        return fail("part ", p, " names buffer ", b, " of ", k.buffers.size());
      const Buffer &mine = pk.buffers[j], &theirs = k.buffers[static_cast<size_t>(b)];
      if (mine.dtype != theirs.dtype || mine.output != theirs.output || mine.extent > theirs.extent)
        return fail("part ", p, "'s buffer ", mine.name, " is not buffer ", theirs.name,
                    " (dtype, direction or extent)");
      ++used[static_cast<size_t>(b)];
    }
    points += pk.outer[0];
  }
  if (points != k.outer[0])
    return fail("the parts have ", points, " points, the kernel ", k.outer[0]);
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (used[b] == 0) return fail("buffer ", k.buffers[b].name, " is no part's");
    if (k.buffers[b].output && used[b] != 1)
      return fail("output buffer ", k.buffers[b].name, " belongs to ", used[b], " parts");
  }
  return {};
}

} // namespace

Expected<void> verify(const Kernel& k, VerifyFailure* failed) {
  if (!k.parts.empty()) {
    if (failed) *failed = {};
    return verify_foreach(k);
  }
  return Verifier(k).run(failed);
}

Expected<void> verify(const ParsedKernel& k, std::string_view file_name) {
  VerifyFailure f;
  Expected<void> r = verify(k.kernel, &f);
  if (r) return r;
  SourceLoc at = k.at;
  auto pick = [&](int i, const std::vector<SourceLoc>& table) {
    if (i >= 0 && static_cast<size_t>(i) < table.size()) at = table[static_cast<size_t>(i)];
  };
  pick(f.buffer, k.buffer_at);
  pick(f.loop, k.loop_at);
  pick(f.instr, k.instr_at);
  std::string where(file_name);
  if (at.line > 0) where += ":" + std::to_string(at.line) + ":" + std::to_string(at.col);
  return Error::without_location(where + ": error: " + r.error().message());
}

} // namespace kiln::ir::kernel
