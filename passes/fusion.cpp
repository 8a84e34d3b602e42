// Fusion groups (fuse) and their lowering to the loop IR (lower_group).
#include "passes/fusion.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ir/numbering.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/ops/reduce_dims.h"
#include "runtime/ops/view_geometry.h"

namespace kiln::passes {
namespace {

using ir::kernel::Index;
using ir::kernel::Instr;
using ir::kernel::Kernel;
using ir::kernel::Loop;
using IndexVec = std::vector<Index>;

bool is_view(const ir::Node* n) { return n && n->schema().kind == OpKind::view; }

bool is_reduction_op(Op op) {
  switch (op) {
  case Op::sum:
  case Op::prod:
  case Op::amax:
  case Op::amin:
  case Op::argmax:
  case Op::argmin: return true;
  default: return false;
  }
}

/// The value a view chain starts from.
const ir::Value* view_source(const ir::Value* v) {
  while (is_view(v->producer()))
    v = v->producer()->input(0);
  return v;
}

const Shape& sizes_of(const ir::Value* v) { return v->type().sizes(); }

/// Reduced dims of a reduction node, sorted; all dims for an empty list.
std::vector<int64_t> reduction_dims(const ir::Node& n) {
  int64_t rank = n.input(0)->type().rank();
  std::vector<int64_t> dims;
  if (n.op() == Op::argmax || n.op() == Op::argmin) {
    if (rank > 0) dims.push_back(wrap_dim(n.attrs().i(0), rank, "argmax"));
    return dims;
  }
  std::vector<bool> mask = reduced_dims_mask(n.attrs().ints(0), rank, op_name(n.op()).data());
  for (int64_t d = 0; d < rank; ++d)
    if (mask[static_cast<size_t>(d)]) dims.push_back(d);
  return dims;
}

// ---- index maps -------------------------------------------------------------------------

/// The index into an operand of shape `operand` that a pointwise result at `idx` reads
/// (numpy broadcasting: trailing dims align, size-1 dims read index 0).
IndexVec broadcast_index(const Shape& operand, const IndexVec& idx) {
  IndexVec r(operand.size());
  size_t lead = idx.size() - operand.size();
  for (size_t k = 0; k < operand.size(); ++k)
    r[k] = operand[k] == 1 ? Index::constant(0) : idx[lead + k];
  return r;
}

/// The operand index a view node's result at `idx` aliases.
IndexVec view_operand_index(const ir::Node& n, const IndexVec& idx,
                            std::span<const int64_t> extents) {
  const Shape& in = sizes_of(n.input(0));
  const Shape& out = sizes_of(n.output());
  switch (n.op()) {
  case Op::permute: {
    const auto& p = n.attrs().ints(0);
    IndexVec r(in.size());
    for (size_t k = 0; k < p.size(); ++k)
      r[static_cast<size_t>(wrap_dim(p[k], static_cast<int64_t>(in.size()), "permute"))] = idx[k];
    return r;
  }
  case Op::expand: return broadcast_index(in, idx);
  case Op::slice: {
    int64_t rank = static_cast<int64_t>(in.size());
    int64_t d = wrap_dim(n.attrs().i(0), rank, "slice");
    Shape ones(in.size(), 1);
    int64_t start =
        slice_geometry(in, ones, d, n.attrs().i(1), n.attrs().i(2), n.attrs().i(3)).offset;
    IndexVec r = idx;
    r[static_cast<size_t>(d)] =
        Index::constant(start) + idx[static_cast<size_t>(d)] * n.attrs().i(3);
    return r;
  }
  case Op::view: {
    // Same elements in row-major order: linearise in the result, split in the operand.
    // An empty view is never read (its domain has no points).
    if (std::find(in.begin(), in.end(), 0) != in.end())
      return IndexVec(in.size(), Index::constant(0));
    Shape rs = contiguous_strides(out), is = contiguous_strides(in);
    Index linear;
    for (size_t k = 0; k < out.size(); ++k)
      linear = linear + idx[k] * rs[k];
    IndexVec r(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k] == 1) {
        r[k] = Index::constant(0);
        continue;
      }
      Index q = Index::floordiv(linear, is[k], extents);
      r[k] = k == 0 ? q : Index::mod(q, in[k], extents);
    }
    return r;
  }
  default: KILN_UNREACHABLE("not a view op");
  }
}

/// The element offset of `idx` in a value laid out with the type's strides.
Index linearize(const ir::Type& t, const IndexVec& idx) {
  Shape strides = t.full_strides();
  Index r;
  for (size_t k = 0; k < idx.size(); ++k)
    if (t.sizes()[k] != 1) r = r + idx[k] * strides[k];
  return r;
}

// ---- the group domain -------------------------------------------------------------------

/// What a group iterates: a pointwise shape, or a reduction's operand shape S and dims.
struct Domain {
  bool reduction = false;
  Shape shape; // pointwise: the domain; reduction: S
  std::vector<int64_t> dims;
  friend bool operator==(const Domain&, const Domain&) = default;

  Shape outer() const {
    if (!reduction) return shape;
    Shape o;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (!std::binary_search(dims.begin(), dims.end(), d))
        o.push_back(shape[static_cast<size_t>(d)]);
    return o;
  }
  Shape inner() const {
    Shape i;
    for (int64_t d : dims)
      i.push_back(shape[static_cast<size_t>(d)]);
    return i;
  }
  /// The index of a value of `sizes` at the canonical point (outer vars, then inner vars),
  /// or nullopt when the domain does not iterate such a value: pointwise, the domain shape;
  /// a reduction, S (in its loops) or the reduced shape with or without the kept dims.
  std::optional<IndexVec> canonical(const Shape& sizes) const {
    if (!reduction) {
      if (sizes != shape) return std::nullopt;
      IndexVec r;
      for (size_t k = 0; k < shape.size(); ++k)
        r.push_back(var(static_cast<int>(k), shape[k]));
      return r;
    }
    int n_outer = static_cast<int>(shape.size() - dims.size());
    IndexVec full, kept, flat;
    int o = 0, i = 0;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      bool red = std::binary_search(dims.begin(), dims.end(), d);
      const int64_t extent = shape[static_cast<size_t>(d)];
      if (red) {
        full.push_back(var(n_outer + i++, extent));
        kept.push_back(Index::constant(0));
      } else {
        full.push_back(var(o, extent));
        kept.push_back(var(o, extent));
        flat.push_back(var(o, extent));
        ++o;
      }
    }
    if (sizes == shape) return full;
    Shape keep_shape, flat_shape;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      bool red = std::binary_search(dims.begin(), dims.end(), d);
      keep_shape.push_back(red ? 1 : shape[static_cast<size_t>(d)]);
      if (!red) flat_shape.push_back(shape[static_cast<size_t>(d)]);
    }
    if (sizes == keep_shape) return kept;
    if (sizes == flat_shape) return flat;
    return std::nullopt;
  }
  /// Loop variable v over [0, extent): the constant 0 when the extent is 1, so that
  /// broadcasting (which reads index 0 of a size-1 dim) gives the same index.
  static Index var(int v, int64_t extent) {
    return extent == 1 ? Index::constant(0) : Index::var(v);
  }
  /// Whether a value of these sizes is iterated inside the inner loops.
  bool is_full(const Shape& sizes) const { return reduction && sizes == shape; }
};

Domain node_domain(const ir::Node& n) {
  if (is_reduction_op(n.op())) return {true, sizes_of(n.input(0)), reduction_dims(n)};
  return {false, sizes_of(n.output()), {}};
}

bool expensive(Op op) {
  switch (op) {
  case Op::exp:
  case Op::log:
  case Op::tanh:
  case Op::sigmoid:
  case Op::erf:
  case Op::sin:
  case Op::cos:
  case Op::pow:
  case Op::div:
  case Op::sqrt:
  case Op::rsqrt: return true;
  default: return false;
  }
}

} // namespace

// ---- lowerability -------------------------------------------------------------------------

bool is_lowerable(const ir::Node& n) {
  for (const ir::Value* v : n.inputs())
    if (v->type().device().type != DeviceType::cpu) return false;
  const ir::Type& out = n.output()->type();
  if (out.device().type != DeviceType::cpu) return false;
  switch (n.op()) {
  case Op::full: return true;
  case Op::copy: return true;
  case Op::floor_divide:
  case Op::remainder: return false; // fmod and the division-by-zero error stay eager
  case Op::pow: return is_floating(out.dtype());
  default: break;
  }
  if (n.schema().kind == OpKind::pointwise) return true;
  if ((n.op() == Op::argmax || n.op() == Op::argmin) && n.input(0)->type().rank() == 0)
    return false; // no dim to index along: the eager kernel answers 0
  if (is_reduction_op(n.op()))
    return n.input(0)->type().numel() > 0 || n.op() == Op::sum || n.op() == Op::prod;
  return false;
}

// ---- fuse ---------------------------------------------------------------------------------

FusionResult fuse(const ir::Graph& g, const FusionOptions& options) {
  FusionResult result;
  std::vector<ir::Node*> nodes = g.node_list();
  std::unordered_map<const ir::Node*, int> pos;
  for (size_t k = 0; k < nodes.size(); ++k)
    pos[nodes[k]] = static_cast<int>(k);
  const int n = static_cast<int>(nodes.size());
  const ir::ValueNumbering numbering(g);
  // "%14 add": the node by its result's number, as the printer shows it.
  auto label = [&](const ir::Node* x) {
    return "%" + std::to_string(numbering[x->output()]) + " " + std::string(x->name());
  };

  std::vector<int> parent(static_cast<size_t>(n), -1); // -1: not a member
  std::vector<Domain> domain(static_cast<size_t>(n));
  std::function<int(int)> find = [&](int x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] =
          parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  // Library calls with epilogues take their pointwise tails before grouping does.
  if (options.fuse) result.library_calls = match_library_epilogues(g);
  std::unordered_map<const ir::Node*, int> absorbed, anchor_call;
  for (size_t c = 0; c < result.library_calls.size(); ++c) {
    const LibraryCall& call = result.library_calls[c];
    anchor_call[call.anchor] = static_cast<int>(c);
    for (const ir::Node* x : call.nodes)
      absorbed[x] = static_cast<int>(c);
    std::string line = "library " + label(call.anchor) + " + " + call.epilogue.str() + " ->";
    for (const ir::Node* x : call.nodes)
      line += " " + label(x);
    result.log.push_back(line);
  }
  for (int k = 0; k < n; ++k)
    if (!is_view(nodes[static_cast<size_t>(k)]) && !absorbed.count(nodes[static_cast<size_t>(k)]) &&
        is_lowerable(*nodes[static_cast<size_t>(k)])) {
      parent[static_cast<size_t>(k)] = k;
      domain[static_cast<size_t>(k)] = node_domain(*nodes[static_cast<size_t>(k)]);
    }
  auto member = [&](const ir::Node* x) {
    return x && !is_view(x) && parent[static_cast<size_t>(pos.at(x))] >= 0;
  };
  auto group_of = [&](const ir::Node* x) { return find(pos.at(x)); };

  // Readers of a value through view chains: the non-view nodes, plus whether a graph output,
  // a write or a view that must exist as a tensor reads it.
  std::function<void(const ir::Value*, std::vector<const ir::Node*>&, bool&)> readers =
      [&](const ir::Value* v, std::vector<const ir::Node*>& out, bool& escapes) {
        for (const ir::Use& u : v->uses()) {
          if (u.kind != ir::Use::Kind::operand) {
            escapes = true;
            continue;
          }
          if (is_view(u.user))
            readers(u.user->output(), out, escapes);
          else
            out.push_back(u.user);
        }
      };

  // Is there a path from group a to group b through a step outside both? (Views between
  // them are index maps, not steps; a view reached from outside is part of that path.)
  auto path_outside = [&](int a, int b) {
    int limit = 0;
    for (int k = 0; k < n; ++k)
      if (parent[static_cast<size_t>(k)] >= 0 && find(k) == b) limit = std::max(limit, k);
    std::vector<char> seen(static_cast<size_t>(2 * n), 0);
    std::vector<std::pair<int, bool>> stack;
    bool cycle = false;
    auto push_users = [&](const ir::Node* x, bool outside) {
      for (const ir::Value* o : x->outputs())
        for (const ir::Use& u : o->uses()) {
          if (!u.user) continue;
          int p = pos.at(u.user);
          if (p > limit) continue;
          if (member(u.user) && find(p) == b) {
            cycle = cycle || outside;
            continue;
          }
          if (member(u.user) && find(p) == a) continue;
          bool next = outside || !is_view(u.user);
          size_t key = static_cast<size_t>(2 * p + (next ? 1 : 0));
          if (seen[key]) continue;
          seen[key] = 1;
          stack.push_back({p, next});
        }
    };
    for (int k = 0; k < n; ++k)
      if (parent[static_cast<size_t>(k)] >= 0 && find(k) == a)
        push_users(nodes[static_cast<size_t>(k)], false);
    while (!stack.empty() && !cycle) {
      auto [p, outside] = stack.back();
      stack.pop_back();
      push_users(nodes[static_cast<size_t>(p)], outside);
    }
    return cycle;
  };

  auto only_output_is = [&](int grp, const ir::Node* p, const ir::Node* consumer) {
    // Every member of grp other than p is read only inside grp; p only by consumer's group.
    int cg = group_of(consumer);
    for (int k = 0; k < n; ++k) {
      if (parent[static_cast<size_t>(k)] < 0 || find(k) != grp) continue;
      const ir::Node* m = nodes[static_cast<size_t>(k)];
      std::vector<const ir::Node*> rs;
      bool escapes = false;
      readers(m->output(), rs, escapes);
      if (escapes) return false;
      for (const ir::Node* r : rs) {
        bool inside = member(r) && find(pos.at(r)) == grp;
        bool in_consumer = member(r) && find(pos.at(r)) == cg;
        if (m == p ? !(inside || in_consumer) : !inside) return false;
      }
    }
    return true;
  };

  auto log_refusal = [&](const ir::Node* p, const ir::Node* c, const std::string& why) {
    result.log.push_back("not fused: " + label(p) + " -> " + label(c) + ": " + why);
  };

  if (options.fuse) {
    for (int k = 0; k < n; ++k) {
      const ir::Node* c = nodes[static_cast<size_t>(k)];
      if (!member(c)) continue;
      for (size_t slot = 0; slot < c->num_inputs(); ++slot) {
        const ir::Value* operand = c->input(slot);
        const ir::Value* src = view_source(operand);
        const ir::Node* p = src->producer();
        if (!member(p)) continue;
        int g1 = group_of(p), g2 = group_of(c);
        if (g1 == g2) continue;
        const Domain &d1 = domain[static_cast<size_t>(g1)], &d2 = domain[static_cast<size_t>(g2)];
        bool direct = operand == src;
        bool same_shape = sizes_of(src) == sizes_of(c->output());
        std::string kind;
        Domain merged;
        if (!d1.reduction && !d2.reduction && direct && d1 == d2) {
          kind = "vertical";
          merged = d2;
        } else if (!d1.reduction && d2.reduction && direct && d1.shape == d2.shape) {
          kind = "prologue";
          merged = d2;
        } else if (d1.reduction && d2.reduction && d1 == d2) {
          kind = "reductions over the same domain";
          merged = d1;
        } else if (d1.reduction && !d2.reduction && direct) {
          // An epilogue: the consumer's group iterates S or the reduced shape, and it reads
          // the reduced value at the kernel's own outer index.
          std::optional<IndexVec> at = d1.canonical(d2.shape);
          std::optional<IndexVec> want = d1.canonical(sizes_of(src));
          bool ok = at && want && broadcast_index(sizes_of(src), *at) == *want;
          if (!ok) {
            log_refusal(p, c, "the consumer's shape is not the reduction's domain or result");
            continue;
          }
          kind = "epilogue";
          merged = d1;
        } else if (!d1.reduction && only_output_is(g1, p, c) &&
                   (!d2.reduction || d2.canonical(sizes_of(c->output())))) {
          // Inline: the producer is read only here, at other indices (broadcast or view).
          bool costly = false;
          for (int m = 0; m < n; ++m)
            if (parent[static_cast<size_t>(m)] >= 0 && find(m) == g1 &&
                expensive(nodes[static_cast<size_t>(m)]->op()))
              costly = true;
          std::vector<const ir::Node*> rs;
          bool escapes = false;
          readers(src, rs, escapes);
          if (costly && rs.size() > 1) {
            log_refusal(p, c, "would recompute an expensive producer for each of its readers");
            continue;
          }
          kind = "inline";
          merged = d2;
        } else {
          log_refusal(p, c,
                      same_shape ? "domains differ"
                                 : "the producer is read at other indices and also elsewhere");
          continue;
        }
        if (path_outside(g1, g2) || path_outside(g2, g1)) {
          log_refusal(p, c, "fusing would create a cycle through another step");
          continue;
        }
        int root = std::min(g1, g2), other = std::max(g1, g2);
        parent[static_cast<size_t>(other)] = root;
        domain[static_cast<size_t>(root)] = merged;
        result.log.push_back("fused (" + kind + "): " + label(p) + " -> " + label(c));
      }
    }
    // Horizontal: pointwise groups over the same domain reading the same value.
    std::map<const ir::Value*, std::vector<int>> by_input;
    for (int k = 0; k < n; ++k) {
      if (parent[static_cast<size_t>(k)] < 0) continue;
      for (const ir::Value* v : nodes[static_cast<size_t>(k)]->inputs()) {
        const ir::Value* src = view_source(v);
        if (src->producer() && member(src->producer())) continue;
        if (src->type().numel() <= 1) continue;
        by_input[src].push_back(k);
      }
    }
    for (auto& [v, users] : by_input) {
      for (size_t a = 0; a < users.size(); ++a)
        for (size_t b = a + 1; b < users.size(); ++b) {
          int g1 = find(users[a]), g2 = find(users[b]);
          if (g1 == g2) continue;
          const Domain &d1 = domain[static_cast<size_t>(g1)], &d2 = domain[static_cast<size_t>(g2)];
          if (!(d1 == d2)) continue;
          if (path_outside(g1, g2) || path_outside(g2, g1)) continue;
          int root = std::min(g1, g2), other = std::max(g1, g2);
          parent[static_cast<size_t>(other)] = root;
          result.log.push_back("fused (horizontal, both read %" + std::to_string(numbering[v]) +
                               "): " + label(nodes[static_cast<size_t>(users[a])]) + " and " +
                               label(nodes[static_cast<size_t>(users[b])]));
        }
    }
  }

  // Groups, with their stored outputs and inputs.
  std::unordered_map<int, int> group_index;
  for (int k = 0; k < n; ++k) {
    if (parent[static_cast<size_t>(k)] < 0) continue;
    int r = find(k);
    auto [it, fresh] = group_index.try_emplace(r, static_cast<int>(result.groups.size()));
    if (fresh) {
      result.groups.emplace_back();
      const Domain& d = domain[static_cast<size_t>(r)];
      result.groups.back().reduction = d.reduction;
      result.groups.back().shape = d.shape;
      result.groups.back().dims = d.dims;
    }
    result.groups[static_cast<size_t>(it->second)].nodes.push_back(nodes[static_cast<size_t>(k)]);
  }
  auto step_group = [&](const ir::Node* x) { return member(x) ? group_index.at(group_of(x)) : -1; };

  // Views that must exist as tensors: read by an extern node, an output, a write, or such a view.
  std::unordered_set<const ir::Node*> needed_views;
  for (int k = n - 1; k >= 0; --k) {
    const ir::Node* x = nodes[static_cast<size_t>(k)];
    if (!is_view(x)) continue;
    for (const ir::Use& u : x->output()->uses())
      if (u.kind != ir::Use::Kind::operand ||
          (is_view(u.user) ? needed_views.count(u.user) > 0 : !member(u.user)))
        needed_views.insert(x);
  }
  for (FusionGroup& grp : result.groups) {
    int me = step_group(grp.nodes.front());
    std::unordered_set<const ir::Value*> seen_inputs;
    for (const ir::Node* m : grp.nodes) {
      // Stored when something outside reads it (directly, or through a view that is not
      // inlined into this group).
      std::vector<const ir::Node*> rs;
      bool escapes = false;
      std::function<void(const ir::Value*)> walk = [&](const ir::Value* v) {
        for (const ir::Use& u : v->uses()) {
          if (u.kind != ir::Use::Kind::operand) {
            escapes = true;
          } else if (is_view(u.user)) {
            if (needed_views.count(u.user)) escapes = true;
            walk(u.user->output());
          } else if (step_group(u.user) != me) {
            escapes = true;
          }
        }
      };
      walk(m->output());
      if (escapes) grp.outputs.push_back(m->output());
      for (const ir::Value* v : m->inputs()) {
        const ir::Value* src = view_source(v);
        if (src->producer() && step_group(src->producer()) == me) continue;
        if (seen_inputs.insert(src).second) grp.inputs.push_back(src);
      }
    }
  }

  // A topological order of the steps, always taking the ready step that comes first in the
  // graph: steps with effects on the generator (random ops) keep their order.
  const int num_groups = static_cast<int>(result.groups.size());
  std::vector<int> unit_of_node(static_cast<size_t>(n), -1);
  std::vector<FusionStep> units;
  std::vector<int> unit_pos;
  for (int g2 = 0; g2 < num_groups; ++g2) {
    units.push_back({g2, nullptr, -1});
    unit_pos.push_back(pos.at(result.groups[static_cast<size_t>(g2)].nodes.front()));
  }
  for (int k = 0; k < n; ++k) {
    const ir::Node* x = nodes[static_cast<size_t>(k)];
    if (member(x)) {
      unit_of_node[static_cast<size_t>(k)] = step_group(x);
    } else if (auto a = absorbed.find(x); a != absorbed.end()) {
      // Part of a library call's epilogue: its anchor's step (which comes first).
      const ir::Node* anchor = result.library_calls[static_cast<size_t>(a->second)].anchor;
      unit_of_node[static_cast<size_t>(k)] = unit_of_node[static_cast<size_t>(pos.at(anchor))];
    } else if (!is_view(x) || needed_views.count(x)) {
      unit_of_node[static_cast<size_t>(k)] = static_cast<int>(units.size());
      auto c = anchor_call.find(x);
      units.push_back({-1, x, c == anchor_call.end() ? -1 : c->second});
      unit_pos.push_back(k);
    }
  }
  std::vector<std::vector<int>> users(units.size());
  std::vector<int> pending(units.size(), 0);
  auto depend = [&](int u, const ir::Value* v) {
    if (!v->producer()) return;
    int d = unit_of_node[static_cast<size_t>(pos.at(v->producer()))];
    if (d < 0 || d == u) return;
    users[static_cast<size_t>(d)].push_back(u);
    ++pending[static_cast<size_t>(u)];
  };
  for (size_t u = 0; u < units.size(); ++u) {
    if (units[u].group >= 0) {
      for (const ir::Value* v : result.groups[static_cast<size_t>(units[u].group)].inputs)
        depend(static_cast<int>(u), v);
    } else if (units[u].library >= 0) {
      for (const ir::Value* v :
           result.library_calls[static_cast<size_t>(units[u].library)].operands)
        depend(static_cast<int>(u), v);
    } else {
      for (const ir::Value* v : units[u].node->inputs())
        depend(static_cast<int>(u), v);
    }
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (size_t u = 0; u < units.size(); ++u)
    if (pending[u] == 0) ready.push({unit_pos[u], static_cast<int>(u)});
  while (!ready.empty()) {
    int u = ready.top().second;
    ready.pop();
    result.order.push_back(units[static_cast<size_t>(u)]);
    for (int w : users[static_cast<size_t>(u)])
      if (--pending[static_cast<size_t>(w)] == 0) ready.push({unit_pos[static_cast<size_t>(w)], w});
  }
  // A cycle is a fusion bug; the caller then runs the graph on the interpreter.
  KILN_CHECK(result.order.size() == units.size(), "fusion formed a cycle between steps");
  for (size_t k = 0; k < result.groups.size(); ++k) {
    const FusionGroup& grp = result.groups[k];
    std::string line = "group " + std::to_string(k) + (grp.reduction ? " (reduction):" : ":");
    for (const ir::Node* m : grp.nodes)
      line += " " + label(m);
    line += ", stores " + std::to_string(grp.outputs.size());
    result.log.push_back(line);
  }
  return result;
}

// ---- lower_group ----------------------------------------------------------------------------

namespace {

double scalar_value(const Tensor& t, int64_t& ivalue) {
  Tensor c = t.to(DType::f64);
  Tensor i = t.to(DType::i64);
  ivalue = *static_cast<const int64_t*>(i.raw_data());
  return *static_cast<const double*>(c.raw_data());
}

class Lowerer {
public:
  Lowerer(const FusionGroup& grp, std::string name, std::vector<const ir::Value*>& buffers)
      : grp_(grp), buffers_(buffers) {
    k_.name = std::move(name);
    for (const ir::Node* m : grp.nodes)
      members_.insert(m);
    dom_ = Domain{grp.reduction, grp.shape, grp.dims};
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
      std::optional<IndexVec> idx = dom_.canonical(sizes_of(v));
      KILN_CHECK(idx.has_value(), "fusion: group output of shape ", shape_str(sizes_of(v)),
                 " is not iterated by the group's domain");
      if (dom_.is_full(sizes_of(v)) && !k_.inner.empty()) {
        full.emplace_back(v, *idx);
        continue;
      }
      store(v, *idx);
    }
    if (!full.empty()) {
      // The reduce loops first, in graph order, so that the map loop finds what they
      // computed (stashed()).
      for (const ir::Node* m : grp_.nodes)
        if (is_reduction_op(m->op()))
          if (std::optional<IndexVec> at = dom_.canonical(sizes_of(m->output())))
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
  /// of computing it twice. The load comes before the output's own store at the index.
  std::optional<int> stashed(const ir::Value* v, const IndexVec& idx, const std::string& k) {
    if (current_loop_ < 0 || k_.loops[static_cast<size_t>(current_loop_)].kind != Loop::Kind::map)
      return std::nullopt;
    auto it = in_reduce_loop_.find(k);
    const ir::Node* p = v->producer();
    if (it == in_reduce_loop_.end() || p == nullptr || !expensive(p->op()) || !storing_ ||
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
    if (is_reduction_op(p->op())) return reduction(*p, idx);
    // Pointwise.
    std::vector<int> a;
    for (const ir::Value* in : p->inputs())
      a.push_back(emit(in, broadcast_index(sizes_of(in), idx)));
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
    std::optional<IndexVec> want = dom_.canonical(sizes_of(r.output()));
    KILN_CHECK(want && *want == idx, "fusion: reduction ", r.name(),
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
    if (r.op() == Op::argmax || r.op() == Op::argmin) {
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

  const FusionGroup& grp_;
  std::vector<const ir::Value*>& buffers_;
  Kernel k_;
  Domain dom_;
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

Kernel lower_group(const FusionGroup& group, std::string name,
                   std::vector<const ir::Value*>& buffers) {
  buffers.clear();
  return Lowerer(group, std::move(name), buffers).run();
}

} // namespace kiln::passes
