// Lowering one fusion group to the loop IR: each stored output is computed at the group's
// canonical index by walking its producers back through the group (views and broadcasts
// become index maps), memoised per index; reductions become reduce loops, values of the
// reduced domain a map loop.
#include "codegen/lower_group.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "codegen/schedule.h"
#include "ir/kernel/domain.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

namespace kiln::codegen {
namespace {

using ir::kernel::broadcast_index;
using ir::kernel::Domain;
using ir::kernel::Index;
using ir::kernel::IndexVec;
using ir::kernel::Instr;
using ir::kernel::is_view;
using ir::kernel::Kernel;
using ir::kernel::linearize;
using ir::kernel::Loop;
using ir::kernel::view_operand_index;

double scalar_value(const Tensor& t, int64_t& ivalue) {
  Tensor c = t.to(DType::f64);
  Tensor i = t.to(DType::i64);
  ivalue = *static_cast<const int64_t*>(i.raw_data());
  return *static_cast<const double*>(c.raw_data());
}

/// The loop variable of each dim of a pointwise group's domain: the memory order (largest
/// stride first) of its first output stored in a permuted dense layout, or empty (the dims
/// in order) when every output is contiguous. Size-1 dims go first: they do not move.
std::vector<int> memory_order(const passes::FusionGroup& grp) {
  for (const ir::Value* v : grp.outputs) {
    const ir::Type& t = v->type();
    if (t.is_contiguous() || t.sizes() != grp.shape || !is_dense(t.sizes(), t.strides())) continue;
    const size_t rank = t.sizes().size();
    std::vector<int> dims(rank);
    for (size_t k = 0; k < rank; ++k)
      dims[k] = static_cast<int>(k);
    auto stride = [&](int d) {
      return t.sizes()[static_cast<size_t>(d)] == 1 ? INT64_MAX
                                                    : t.strides()[static_cast<size_t>(d)];
    };
    std::stable_sort(dims.begin(), dims.end(), [&](int a, int b) { return stride(a) > stride(b); });
    std::vector<int> var_of(rank);
    for (size_t v = 0; v < rank; ++v)
      var_of[static_cast<size_t>(dims[v])] = static_cast<int>(v);
    return var_of;
  }
  return {};
}

class Lowerer {
public:
  Lowerer(const passes::FusionGroup& grp, std::string name, std::vector<const ir::Value*>& buffers,
          bool in_cache)
      : grp_(grp), buffers_(buffers) {
    k_.name = std::move(name);
    for (const ir::Node* m : grp.nodes)
      members_.insert(m);
    dom_ = Domain{grp.reduction, grp.shape, grp.dims, {}};
    if (!grp.reduction) dom_.var_of = memory_order(grp);
    int64_t out_bytes = 0;
    for (const ir::Value* v : grp.outputs)
      out_bytes += v->type().numel() * itemsize(v->type().dtype());
    streamed_ = !in_cache && out_bytes >= kStreamBytes; // the heuristic's rule (choose_schedule)
    k_.outer = dom_.outer();
    k_.inner = dom_.inner();
    extents_ = k_.extents();
    n_outer_ = static_cast<int>(k_.outer.size());
  }

  Kernel run() {
    for (const ir::Value* v : grp_.inputs)
      if (!inlined_constant(v)) buffer(v, false);
    std::vector<std::pair<const ir::Value*, IndexVec>> full;
    for (const ir::Value* v : grp_.outputs) {
      std::optional<IndexVec> idx = dom_.canonical(v->type().sizes());
      KILN_ASSERT(idx.has_value(), "fusion: group output of shape ", shape_str(v->type().sizes()),
                  " is not iterated by the group's domain");
      if (dom_.is_full(v->type().sizes()) && !k_.inner.empty()) {
        full.emplace_back(v, *idx);
        continue;
      }
      store(v, *idx);
    }
    if (!full.empty()) {
      // The reduce loops first, in graph order, so that the map loop finds what they
      // computed (stashed()).
      for (const ir::Node* m : grp_.nodes)
        if (op_traits(m->op()).is_fold())
          if (std::optional<IndexVec> at = dom_.canonical(m->output()->type().sizes()))
            reduction(*m, *at);
      int loop = new_loop(Loop::Kind::map);
      int saved = current_loop_;
      current_loop_ = loop;
      for (auto& [v, idx] : full)
        store(v, idx);
      current_loop_ = saved;
      k_.items.push_back({-1, loop});
    }
    return std::move(k_);
  }

private:
  int buffer(const ir::Value* v, bool output) {
    auto [it, fresh] = buffer_of_.try_emplace(v, static_cast<int>(k_.buffers.size()));
    if (fresh) {
      const ir::Type& t = v->type();
      int64_t extent = 1;
      Shape strides = t.full_strides();
      for (size_t d = 0; d < t.sizes().size(); ++d) {
        if (t.sizes()[d] == 0) {
          extent = 0;
          break;
        }
        extent += (t.sizes()[d] - 1) * std::abs(strides[d]);
      }
      std::string name = (output ? "out" : "in") + std::to_string(k_.buffers.size());
      k_.buffers.push_back({name, t.dtype(), output, extent});
      buffers_.push_back(v);
    }
    return it->second;
  }

  static bool inlined_constant(const ir::Value* v) {
    return v->is_constant() && v->type().numel() == 1;
  }

  int new_loop(Loop::Kind kind) {
    k_.loops.push_back({kind, {}});
    return static_cast<int>(k_.loops.size() - 1);
  }

  bool uses_inner(const Index& i) const {
    for (int v = n_outer_; v < static_cast<int>(extents_.size()); ++v)
      if (i.uses(v)) return true;
    return false;
  }

  int add(Instr in, bool inner_dep) {
    int id = static_cast<int>(k_.instrs.size());
    k_.instrs.push_back(std::move(in));
    inner_dep_.push_back(inner_dep);
    if (inner_dep) {
      KILN_ASSERT(current_loop_ >= 0, "an inner-dependent value outside a loop");
      k_.loops[static_cast<size_t>(current_loop_)].body.push_back(id);
    } else {
      k_.items.push_back({id, -1});
    }
    return id;
  }

  int op(Op o, DType dt, std::vector<int> args) {
    bool dep = false;
    for (int a : args)
      dep = dep || inner_dep_[static_cast<size_t>(a)];
    Instr in;
    in.kind = Instr::Kind::op;
    in.op = o;
    in.dtype = dt;
    in.args = std::move(args);
    return add(std::move(in), dep);
  }

  int cast(int x, DType to) {
    const Instr& from = k_.instrs[static_cast<size_t>(x)];
    if (from.dtype == to) return x;
    if (from.kind == Instr::Kind::constant) {
      // Folded with the eager conversion rules.
      Tensor c = is_floating(from.dtype) ? kiln::full({}, from.value, from.dtype)
                                         : kiln::full({}, from.ivalue, from.dtype);
      int64_t iv = 0;
      double d = scalar_value(c.to(to), iv);
      return constant(d, iv, to);
    }
    std::string key = "cast " + std::to_string(x) + " " + std::string(dtype_name(to));
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    Instr in;
    in.kind = Instr::Kind::cast;
    in.dtype = to;
    in.args = {x};
    return memo_[key] = add(std::move(in), inner_dep_[static_cast<size_t>(x)]);
  }

  int constant(double value, int64_t ivalue, DType dt) {
    Instr in;
    in.kind = Instr::Kind::constant;
    in.dtype = dt;
    in.value = value;
    in.ivalue = ivalue;
    return add(std::move(in), false);
  }

  /// A load or store of graph value v's buffer at idx.
  Instr access(Instr::Kind kind, const ir::Value* v, const IndexVec& idx) {
    Instr in;
    in.kind = kind;
    in.dtype = v->type().dtype();
    in.buffer = buffer(v, kind == Instr::Kind::store);
    in.index = linearize(v->type(), idx);
    return in;
  }

  /// Appends an instruction to the body of `loop` (not the current one); returns its id.
  int add_to_loop(Instr in, int loop, bool inner_dep) {
    int id = static_cast<int>(k_.instrs.size());
    k_.instrs.push_back(std::move(in));
    inner_dep_.push_back(inner_dep);
    k_.loops[static_cast<size_t>(loop)].body.push_back(id);
    return id;
  }

  void store(const ir::Value* v, const IndexVec& idx) {
    storing_ = v;
    storing_idx_ = &idx;
    int x = emit(v, idx);
    storing_ = nullptr;
    storing_idx_ = nullptr;
    Instr in = access(Instr::Kind::store, v, idx);
    in.args = {x};
    add(std::move(in), uses_inner(in.index) || inner_dep_[static_cast<size_t>(x)]);
  }

  /// The memo key of v at idx: per loop for values that depend on the inner variables.
  std::string key(const ir::Value* v, const IndexVec& idx, bool* inner_out = nullptr) const {
    std::string s = std::to_string(reinterpret_cast<uintptr_t>(v));
    bool inner = false;
    for (const Index& i : idx) {
      s += "|" + i.str();
      inner = inner || uses_inner(i);
    }
    if (inner_out) *inner_out = inner;
    if (inner) s += "@" + std::to_string(current_loop_);
    return s;
  }

  int emit(const ir::Value* v, const IndexVec& idx) {
    const ir::Node* p = v->producer();
    if (is_view(p)) return emit(p->input(0), view_operand_index(*p, idx, extents_));
    bool inner = false;
    std::string kk = key(v, idx, &inner);
    if (auto it = memo_.find(kk); it != memo_.end()) return it->second;
    const std::string across_loops = inner ? kk.substr(0, kk.rfind('@')) : kk;
    if (inner) {
      if (std::optional<int> r = stashed(v, idx, across_loops)) return memo_[kk] = *r;
    }
    int r = compute(v, idx);
    memo_[kk] = r;
    if (inner && current_loop_ >= 0 &&
        k_.loops[static_cast<size_t>(current_loop_)].kind == Loop::Kind::reduce)
      in_reduce_loop_[across_loops] = {current_loop_, r};
    return r;
  }

  /// An expensive value a reduce loop computed at this very index, needed again by the map
  /// loop while it computes the output it stores at that index (softmax's exp(x - max)): the
  /// reduce loop stores it into that output's buffer and the map loop loads it back, instead
  /// of computing it twice. The load comes before the output's own store at the index. Not
  /// in a kernel whose outputs hold kStreamBytes or more: its stores are streamed past the
  /// caches (Schedule::stream), so the load would go to memory; computing again costs less.
  std::optional<int> stashed(const ir::Value* v, const IndexVec& idx, const std::string& k) {
    if (current_loop_ < 0 || k_.loops[static_cast<size_t>(current_loop_)].kind != Loop::Kind::map)
      return std::nullopt;
    if (streamed_) return std::nullopt;
    auto it = in_reduce_loop_.find(k);
    const ir::Node* p = v->producer();
    if (it == in_reduce_loop_.end() || p == nullptr || !op_traits(p->op()).costly || !storing_ ||
        storing_->type().dtype() != v->type().dtype() || *storing_idx_ != idx ||
        stash_of_.count(storing_))
      return std::nullopt;
    const auto [loop, value] = it->second;
    Instr st = access(Instr::Kind::store, storing_, idx);
    st.args = {value};
    add_to_loop(std::move(st), loop, true);
    // The store above made the buffer an output one; the load reads it back.
    Instr ld = access(Instr::Kind::load, storing_, idx);
    stash_of_.insert(storing_);
    return add(std::move(ld), true);
  }

  int compute(const ir::Value* v, const IndexVec& idx) {
    const ir::Node* p = v->producer();
    const DType dt = v->type().dtype();
    if (!p || !members_.count(p)) {
      if (inlined_constant(v)) {
        int64_t iv = 0;
        double d = scalar_value(v->constant(), iv);
        return constant(d, iv, dt);
      }
      Instr in = access(Instr::Kind::load, v, idx);
      // An empty input is read at no point of the domain, but a load of it at outer level
      // (its index may use no inner variable) would run once per outer point, past its end.
      if (k_.buffers[static_cast<size_t>(in.buffer)].extent == 0) return constant(0, 0, dt);
      bool dep = uses_inner(in.index);
      return add(std::move(in), dep);
    }
    switch (p->op()) {
    case Op::full: {
      Tensor t = kiln::full({}, p->attrs().scalar(1), dt);
      int64_t iv = 0;
      double d = scalar_value(t, iv);
      return constant(d, iv, dt);
    }
    case Op::copy: return emit(p->input(0), idx);
    default: break;
    }
    if (op_traits(p->op()).is_fold()) return reduction(*p, idx);
    // Pointwise.
    std::vector<int> a;
    for (const ir::Value* in : p->inputs())
      a.push_back(emit(in, broadcast_index(in->type().sizes(), idx)));
    auto is_0d = [&](size_t k) { return p->input(k)->type().rank() == 0; };
    switch (p->op()) {
    case Op::cast: return cast(a[0], dt);
    case Op::logical_not: return op(p->op(), dt, {cast(a[0], DType::bool_)});
    case Op::logical_and:
    case Op::logical_or:
      return op(p->op(), dt, {cast(a[0], DType::bool_), cast(a[1], DType::bool_)});
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge: {
      std::vector<TensorMeta> metas{p->input(0)->type().to_meta(), p->input(1)->type().to_meta()};
      DType common = result_type(metas);
      return op(p->op(), dt, {cast(a[0], common), cast(a[1], common)});
    }
    case Op::where:
      return op(p->op(), dt, {cast(a[0], DType::bool_), cast(a[1], dt), cast(a[2], dt)});
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div: {
      // PyTorch's precise scalar: a 0-d operand beside a dim-ful one is read at f32 when the
      // result is f16/bf16, not rounded to the result dtype first.
      bool low = dt == DType::f16 || dt == DType::bf16;
      std::vector<int> c;
      for (size_t k = 0; k < 2; ++k)
        c.push_back(cast(a[k], low && is_0d(k) && !is_0d(1 - k) ? DType::f32 : dt));
      return op(p->op(), dt, c);
    }
    default: {
      std::vector<int> c;
      for (int x : a)
        c.push_back(cast(x, dt));
      return op(p->op(), dt, c);
    }
    }
  }

  int reduction(const ir::Node& r, const IndexVec& idx) {
    std::optional<IndexVec> want = dom_.canonical(r.output()->type().sizes());
    KILN_ASSERT(want && *want == idx, "fusion: reduction ", r.name(),
                " read at another index than its kernel's outer index");
    if (auto it = reduced_.find(&r); it != reduced_.end()) return it->second;
    int loop = new_loop(Loop::Kind::reduce);
    int saved = current_loop_;
    current_loop_ = loop;
    IndexVec full = *dom_.canonical(dom_.shape);
    int x = emit(r.input(0), full);
    const DType dt = r.output()->type().dtype();
    Instr in;
    in.kind = Instr::Kind::reduce;
    in.op = r.op();
    in.dtype = dt;
    if (op_traits(r.op()).arg) {
      in.args = {x};
      in.arg_var = n_outer_;
    } else {
      in.args = {cast(x, dt)};
    }
    int id = add_to_loop(std::move(in), loop, false);
    current_loop_ = saved;
    k_.items.push_back({-1, loop});
    reduced_[&r] = id;
    return id;
  }

  const passes::FusionGroup& grp_;
  std::vector<const ir::Value*>& buffers_;
  Kernel k_;
  Domain dom_;
  bool streamed_ = false; // the outputs hold kStreamBytes or more
  std::unordered_set<const ir::Node*> members_;
  std::unordered_map<const ir::Value*, int> buffer_of_;
  std::unordered_map<std::string, int> memo_;
  std::unordered_map<const ir::Node*, int> reduced_;
  // Values a reduce loop computed, by their memo key without the loop: (loop, instruction).
  std::unordered_map<std::string, std::pair<int, int>> in_reduce_loop_;
  std::unordered_set<const ir::Value*> stash_of_; // outputs that hold a stashed value
  const ir::Value* storing_ = nullptr;            // the output store() is emitting
  const IndexVec* storing_idx_ = nullptr;
  std::vector<bool> inner_dep_;
  std::vector<int64_t> extents_;
  int n_outer_ = 0;
  int current_loop_ = -1;
};

} // namespace

LoweredGroup lower_group(const passes::FusionGroup& group, std::string name, bool in_cache) {
  LoweredGroup out;
  out.kernel = Lowerer(group, std::move(name), out.buffers, in_cache).run();
  return out;
}

} // namespace kiln::codegen
