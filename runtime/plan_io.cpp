// Plans as bytes (runtime/plan_io.h). Little-endian fixed-width fields: u8, u32, i64, f64;
// a string or a list is its count (i64) then its items.
#include "runtime/plan_io.h"

#include <bit>
#include <cstring>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/ops/op.h"

namespace kiln {
namespace {

constexpr std::string_view kMagic = "KILNPLAN";
constexpr uint32_t kVersion = 1;

static_assert(std::endian::native == std::endian::little, "plan bytes are little-endian");

class Writer {
public:
  template <typename T> void num(T v) {
    static_assert(std::is_arithmetic_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void u8(uint8_t v) { num(v); }
  void i64(int64_t v) { num(v); }
  void str(std::string_view s) {
    i64(static_cast<int64_t>(s.size()));
    out_.append(s);
  }
  void ints(IntList v) {
    i64(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      i64(x);
  }
  void scalar(const Scalar& s) {
    u8(static_cast<uint8_t>(s.kind()));
    if (s.is_floating())
      num(s.to_double());
    else
      i64(s.to_int());
  }
  void attrs(const Attrs& a) {
    i64(static_cast<int64_t>(a.size()));
    for (const AttrValue& v : a.values()) {
      u8(static_cast<uint8_t>(v.index()));
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, int64_t>)
              i64(x);
            else if constexpr (std::is_same_v<T, double>)
              num(x);
            else if constexpr (std::is_same_v<T, bool>)
              u8(x ? 1 : 0);
            else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
              ints(x);
            else if constexpr (std::is_same_v<T, DType>)
              u8(static_cast<uint8_t>(x));
            else if constexpr (std::is_same_v<T, std::string>)
              str(x);
            else
              scalar(x);
          },
          v);
    }
  }
  void tensor(const Tensor& t) {
    const Tensor c = t.contiguous();
    u8(static_cast<uint8_t>(c.dtype()));
    u8(c.impl().wrapped_number ? 1 : 0);
    ints(c.sizes());
    const auto nbytes = static_cast<size_t>(c.numel() * c.itemsize());
    i64(static_cast<int64_t>(nbytes));
    if (nbytes > 0) out_.append(static_cast<const char*>(c.raw_data()), nbytes);
  }
  void epilogue(const Epilogue& ep) {
    i64(static_cast<int64_t>(ep.contraction_operands));
    i64(static_cast<int64_t>(ep.ops.size()));
    for (const PostOp& p : ep.ops) {
      u8(static_cast<uint8_t>(p.kind));
      str(op_name(p.op));
      i64(static_cast<int64_t>(p.operand));
      u8(p.operand_first ? 1 : 0);
      u8(p.is_scalar ? 1 : 0);
      num(p.scalar);
    }
    ints(ep.sizes);
    ints(ep.strides);
    u8(static_cast<uint8_t>(ep.dtype));
    u8(ep.weights_are_parameters ? 1 : 0);
  }
  void indices(const std::vector<size_t>& v) {
    i64(static_cast<int64_t>(v.size()));
    for (size_t x : v)
      i64(static_cast<int64_t>(x));
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

class Reader {
public:
  explicit Reader(std::string_view in) : in_(in) {}

  template <typename T> T num(const char* what) {
    if (in_.size() - at_ < sizeof(T)) fail("truncated in ", what);
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  uint8_t u8(const char* what) { return num<uint8_t>(what); }
  int64_t i64(const char* what) { return num<int64_t>(what); }
  bool flag(const char* what) {
    const uint8_t v = u8(what);
    if (v > 1) fail(what, " is ", int(v), ", not 0 or 1");
    return v == 1;
  }
  /// A count of items of at least `item_bytes` bytes each, checked against what is left.
  size_t count(const char* what, size_t item_bytes = 1) {
    const int64_t n = i64(what);
    if (n < 0 || static_cast<uint64_t>(n) > (in_.size() - at_) / std::max<size_t>(item_bytes, 1))
      fail(what, ": a count of ", n, " with ", in_.size() - at_, " bytes left");
    return static_cast<size_t>(n);
  }
  /// An index below `bound`.
  size_t index(const char* what, size_t bound) {
    const int64_t v = i64(what);
    if (v < 0 || static_cast<uint64_t>(v) >= bound)
      fail(what, " ", v, " is out of range [0, ", bound, ")");
    return static_cast<size_t>(v);
  }
  std::string_view bytes(size_t n, const char* what) {
    if (in_.size() - at_ < n) fail("truncated in ", what);
    std::string_view v = in_.substr(at_, n);
    at_ += n;
    return v;
  }
  std::string str(const char* what) { return std::string(bytes(count(what), what)); }
  Shape ints(const char* what) {
    Shape v(count(what, 8));
    for (int64_t& x : v)
      x = i64(what);
    return v;
  }
  DType dtype(const char* what) {
    const uint8_t v = u8(what);
    if (v >= kNumDTypes) fail(what, ": dtype ", int(v), " is not one");
    return static_cast<DType>(v);
  }
  Op op(const char* what) {
    const std::string name = str(what);
    const std::optional<Op> op = find_op(name);
    if (!op) fail(what, ": no op is named '", name, "'");
    return *op;
  }
  Scalar scalar(const char* what) {
    const uint8_t kind = u8(what);
    switch (static_cast<Scalar::Kind>(kind)) {
    case Scalar::Kind::floating: return Scalar(num<double>(what));
    case Scalar::Kind::integral: return Scalar(i64(what));
    case Scalar::Kind::boolean: return Scalar(i64(what) != 0);
    }
    fail(what, ": scalar kind ", int(kind), " is not one");
  }
  Attrs attrs() {
    std::vector<AttrValue> values(count("attributes"));
    for (AttrValue& v : values) {
      switch (u8("attribute kind")) {
      case 0: v = i64("int attribute"); break;
      case 1: v = num<double>("float attribute"); break;
      case 2: v = flag("bool attribute"); break;
      case 3: v = ints("ints attribute"); break;
      case 4: v = dtype("dtype attribute"); break;
      case 5: v = str("string attribute"); break;
      case 6: v = scalar("scalar attribute"); break;
      default: fail("an attribute of an unknown kind");
      }
    }
    return Attrs(std::move(values));
  }
  Tensor tensor() {
    const DType dt = dtype("constant");
    const bool wrapped = flag("constant");
    const Shape sizes = ints("constant sizes");
    for (int64_t s : sizes)
      if (s < 0) fail("constant sizes ", shape_str(sizes), " are negative");
    const auto nbytes = count("constant bytes");
    if (static_cast<int64_t>(nbytes) != numel_of(sizes) * itemsize(dt))
      fail("constant of ", shape_str(sizes), " ", dtype_name(dt), " holds ", nbytes, " bytes");
    Tensor t = empty_with_layout(sizes, {}, dt);
    const std::string_view data = bytes(nbytes, "constant data");
    if (nbytes > 0) std::memcpy(t.raw_data(), data.data(), nbytes);
    t.impl().wrapped_number = wrapped;
    return t;
  }
  Epilogue epilogue(size_t operands) {
    Epilogue ep;
    ep.contraction_operands = index("contraction operands", operands + 1);
    ep.ops.resize(count("post-ops", 8));
    for (PostOp& p : ep.ops) {
      const uint8_t kind = u8("post-op kind");
      if (kind > static_cast<uint8_t>(PostOp::Kind::binary)) fail("post-op kind ", int(kind));
      p.kind = static_cast<PostOp::Kind>(kind);
      p.op = op("post-op");
      p.operand = static_cast<size_t>(i64("post-op operand"));
      if (p.kind == PostOp::Kind::binary && p.operand >= operands)
        fail("post-op operand ", p.operand, " of ", operands);
      p.operand_first = flag("post-op");
      p.is_scalar = flag("post-op");
      p.scalar = num<double>("post-op scalar");
    }
    ep.sizes = ints("epilogue sizes");
    ep.strides = ints("epilogue strides");
    ep.dtype = dtype("epilogue");
    ep.weights_are_parameters = flag("epilogue");
    return ep;
  }
  std::vector<size_t> indices(const char* what, size_t bound) {
    std::vector<size_t> v(count(what, 8));
    for (size_t& x : v)
      x = index(what, bound);
    return v;
  }
  bool done() const { return at_ == in_.size(); }

  template <typename... A> [[noreturn]] void fail(const A&... a) const {
    throw Error(detail::str("plan bytes: ", a..., " (at byte ", at_, " of ", in_.size(), ")"));
  }

private:
  std::string_view in_;
  size_t at_ = 0;
};

} // namespace

std::string save_plan(const Plan& plan) {
  Writer w;
  for (char c : kMagic)
    w.num(c);
  w.num(kVersion);
  w.i64(static_cast<int64_t>(plan.num_slots()));
  w.i64(static_cast<int64_t>(plan.constants().size()));
  for (const auto& [slot, t] : plan.constants()) {
    w.i64(static_cast<int64_t>(slot));
    w.tensor(t);
  }
  w.i64(static_cast<int64_t>(plan.inputs().size()));
  for (auto [slot, index] : plan.inputs()) {
    w.i64(static_cast<int64_t>(slot));
    w.i64(static_cast<int64_t>(index));
  }
  w.i64(static_cast<int64_t>(plan.kernels().size()));
  for (const Plan::KernelCall& k : plan.kernels()) {
    KILN_CHECK(!k.name.empty(), "save_plan: a kernel call without its symbol's name");
    w.str(k.name);
    w.i64(k.rows);
    w.i64(k.grain);
    w.i64(k.threads);
    w.i64(static_cast<int64_t>(k.outputs.size()));
    for (const Plan::KernelCall::Output& o : k.outputs) {
      w.ints(o.sizes);
      w.u8(static_cast<uint8_t>(o.dtype));
      w.ints(o.strides);
    }
  }
  w.i64(static_cast<int64_t>(plan.steps().size()));
  for (const Plan::Step& st : plan.steps()) {
    w.i64(st.kernel);
    w.str(op_name(st.op));
    w.attrs(st.attrs ? *st.attrs : Attrs());
    w.indices(st.operands);
    w.indices(st.results);
    w.i64(static_cast<int64_t>(st.may_reuse.size()));
    for (auto [r, o] : st.may_reuse) {
      w.i64(static_cast<int64_t>(r));
      w.i64(static_cast<int64_t>(o));
    }
    w.u8(st.epilogue ? 1 : 0);
    if (st.epilogue) w.epilogue(*st.epilogue);
    w.u8(st.attention ? 1 : 0);
    if (const AttentionCall* a = st.attention) {
      w.indices(a->scores_operands);
      w.epilogue(a->scores);
      w.indices(a->out_operands);
      w.epilogue(a->out);
      w.i64(a->kernel);
      w.ints(a->kernel_buffers);
      w.i64(a->block);
      w.i64(a->kernel_rows_per);
      w.ints(a->key_end);
      w.i64(static_cast<int64_t>(a->narrow.size()));
      for (const AttentionCall::Narrowed& n : a->narrow) {
        w.i64(n.width);
        w.str(n.name);
        w.i64(n.rows_per);
      }
    }
  }
  w.indices(std::vector<size_t>(plan.outputs().begin(), plan.outputs().end()));
  w.i64(static_cast<int64_t>(plan.writes().size()));
  for (const Plan::Write& wr : plan.writes()) {
    w.i64(static_cast<int64_t>(wr.target));
    w.i64(static_cast<int64_t>(wr.source));
  }
  for (size_t s = 0; s < plan.num_slots(); ++s) {
    const Plan::Placement& p = plan.placement(s);
    w.u8(p.planned ? 1 : 0);
    w.i64(static_cast<int64_t>(p.offset));
    w.i64(static_cast<int64_t>(p.nbytes));
    w.ints(p.sizes);
    w.ints(p.strides);
    w.u8(static_cast<uint8_t>(p.dtype));
  }
  const Plan::MemoryPlan& m = plan.memory_plan();
  for (size_t v : {m.arena_bytes, m.planned_bytes, m.buffers, m.in_place})
    w.i64(static_cast<int64_t>(v));
  return w.take();
}

std::unique_ptr<LoadedPlan> load_plan(std::string_view bytes, const KernelResolver& resolve) {
  Reader r(bytes);
  if (r.bytes(kMagic.size(), "the magic") != kMagic) r.fail("not a kiln plan (bad magic)");
  if (const auto v = r.num<uint32_t>("the version"); v != kVersion)
    r.fail("version ", v, ", this kiln reads version ", kVersion);
  auto out = std::make_unique<LoadedPlan>();
  Plan& plan = out->plan;
  const size_t slots = r.count("slots"); // each has a placement, of more than a byte
  for (size_t n = r.count("constants", 8); n-- > 0;) {
    const size_t slot = r.index("constant slot", slots);
    plan.bind_constant(slot, r.tensor());
  }
  for (size_t n = r.count("inputs", 16); n-- > 0;) {
    const size_t slot = r.index("input slot", slots);
    plan.bind_input(slot, static_cast<size_t>(r.index("input index", slots)));
  }
  auto entry = [&](const std::string& name) {
    KernelEntry e = resolve(name);
    if (!e) r.fail("no kernel named '", name, "' to run");
    return e;
  };
  const size_t kernels = r.count("kernels", 8);
  for (size_t k = 0; k < kernels; ++k) {
    Plan::KernelCall call;
    call.name = r.str("kernel name");
    call.entry = entry(call.name);
    call.rows = r.i64("kernel rows");
    call.grain = r.i64("kernel grain");
    call.threads = static_cast<int>(r.i64("kernel threads"));
    if (call.rows < 0 || call.grain < 1 || call.threads < 0)
      r.fail("kernel ", call.name, ": rows ", call.rows, ", grain ", call.grain, ", threads ",
             call.threads);
    call.outputs.resize(r.count("kernel outputs", 17));
    for (Plan::KernelCall::Output& o : call.outputs) {
      o.sizes = r.ints("kernel output sizes");
      o.dtype = r.dtype("kernel output");
      o.strides = r.ints("kernel output strides");
      if (!o.strides.empty() && !is_dense(o.sizes, o.strides))
        r.fail("kernel ", call.name, ": output strides ", shape_str(o.strides), " of ",
               shape_str(o.sizes), " are not dense");
    }
    plan.add_kernel(std::move(call));
  }
  const size_t steps = r.count("steps", 8);
  for (size_t k = 0; k < steps; ++k) {
    Plan::Step st;
    const int64_t kernel = r.i64("step kernel");
    if (kernel < -1 || kernel >= static_cast<int64_t>(kernels)) r.fail("step kernel ", kernel);
    st.kernel = static_cast<int>(kernel);
    st.op = r.op("step");
    st.attrs = &out->attrs.emplace_back(r.attrs());
    st.operands = r.indices("step operands", slots);
    st.results = r.indices("step results", slots);
    for (size_t n = r.count("in-place pairs", 16); n-- > 0;) {
      const size_t res = r.index("in-place result", st.results.size());
      st.may_reuse.push_back({res, r.index("in-place operand", st.operands.size())});
    }
    if (st.kernel >= 0 &&
        plan.kernels()[static_cast<size_t>(st.kernel)].outputs.size() != st.results.size())
      r.fail("step ", k, ": kernel ", st.kernel, " has ",
             plan.kernels()[static_cast<size_t>(st.kernel)].outputs.size(), " outputs, the step ",
             st.results.size(), " results");
    if (r.flag("step epilogue")) {
      st.epilogue = &out->epilogues.emplace_back(r.epilogue(st.operands.size()));
      if (st.results.size() != 1)
        r.fail("step ", k, ": a library call with ", st.results.size(), " results");
    }
    if (r.flag("step attention")) {
      AttentionCall& a = out->attention.emplace_back();
      const size_t ops = st.operands.size();
      a.scores_operands = r.indices("attention scores operands", ops);
      a.scores = r.epilogue(a.scores_operands.size());
      a.out_operands = r.indices("attention output operands", ops);
      a.out = r.epilogue(a.out_operands.size());
      a.kernel = static_cast<int>(r.index("attention kernel", kernels));
      a.kernel_buffers = r.ints("attention kernel buffers");
      for (int64_t b : a.kernel_buffers)
        if (b != AttentionCall::kScores && b != AttentionCall::kProbs &&
            (b < 0 || static_cast<size_t>(b) >= ops))
          r.fail("attention kernel buffer ", b, " of ", ops, " operands");
      a.block = r.i64("attention block");
      a.kernel_rows_per = r.i64("attention kernel rows");
      a.key_end = r.ints("attention key ends");
      if (a.scores_operands.size() < 2 || a.out_operands.size() < 2 || a.block < 1 ||
          a.kernel_rows_per < 1 || a.block % a.kernel_rows_per != 0 || a.scores.sizes.size() < 2 ||
          st.results.size() != 1)
        r.fail("step ", k, ": a malformed attention call");
      const int64_t keys = a.scores.sizes.back();
      const auto rows = a.scores.sizes[a.scores.sizes.size() - 2];
      if (!a.key_end.empty() &&
          static_cast<int64_t>(a.key_end.size()) != (rows + a.block - 1) / a.block)
        r.fail("step ", k, ": ", a.key_end.size(), " key ends for ", rows, " rows in blocks of ",
               a.block);
      for (int64_t e : a.key_end)
        if (e < 1 || e > keys) r.fail("attention key end ", e, " of ", keys, " keys");
      for (size_t n = r.count("narrowed kernels", 16); n-- > 0;) {
        AttentionCall::Narrowed& nk = a.narrow.emplace_back();
        nk.width = r.i64("narrowed width");
        nk.name = r.str("narrowed kernel name");
        nk.entry = entry(nk.name);
        nk.rows_per = r.i64("narrowed kernel rows");
        if (nk.rows_per < 1) r.fail("a narrowed kernel of ", nk.rows_per, " rows per row");
      }
      st.attention = &a;
    }
    plan.add_step(std::move(st));
  }
  for (size_t o : r.indices("outputs", slots))
    plan.add_output(o);
  for (size_t n = r.count("writes", 16); n-- > 0;) {
    const size_t target = r.index("write target", slots);
    plan.add_write(target, r.index("write source", slots));
  }
  plan.finish(slots);
  std::vector<Plan::Placement> placement(slots);
  for (Plan::Placement& p : placement) {
    p.planned = r.flag("placement");
    p.offset = static_cast<size_t>(r.i64("placement offset"));
    p.nbytes = static_cast<size_t>(r.i64("placement bytes"));
    p.sizes = r.ints("placement sizes");
    p.strides = r.ints("placement strides");
    p.dtype = r.dtype("placement");
  }
  Plan::MemoryPlan m;
  for (size_t* v : {&m.arena_bytes, &m.planned_bytes, &m.buffers, &m.in_place})
    *v = static_cast<size_t>(r.i64("memory plan"));
  for (const Plan::Placement& p : placement)
    if (p.planned && (p.offset > m.arena_bytes || p.nbytes > m.arena_bytes - p.offset ||
                      static_cast<int64_t>(p.nbytes) != numel_of(p.sizes) * itemsize(p.dtype)))
      r.fail("a placement of ", p.nbytes, " bytes at ", p.offset, " in an arena of ",
             m.arena_bytes);
  if (!r.done()) r.fail("bytes after the plan");
  plan.set_memory(std::move(placement), m);
  return out;
}

} // namespace kiln
