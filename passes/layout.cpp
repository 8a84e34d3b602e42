// channels-last: the layout pass of conv nets (passes/layout.h).
#include "passes/layout.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/numbering.h"
#include "passes/fusion.h"
#include "passes/passes.h"
#include "runtime/epilogue.h"
#include "runtime/plan.h"
#include "runtime/union_find.h"

namespace kiln::passes {

namespace {

/// A conv2d that oneDNN runs as a library call (f32 throughout, 4-D, static, on the CPU) and,
/// left to choose, on NHWC source and result (library_conv_runs_nhwc): in a channels-last
/// region it runs the very kernel eager code runs, and the reorders the region saves are
/// those oneDNN makes around it.
bool is_library_conv(const ir::Node* n) {
  if (!n || n->op() != Op::conv2d || n->num_outputs() != 1) return false;
  const ir::Type& t = n->output()->type();
  if (t.dtype() != DType::f32 || t.rank() != 4 || !t.is_static() ||
      t.device().type != DeviceType::cpu || t.numel() == 0)
    return false;
  if (!std::all_of(n->inputs().begin(), n->inputs().end(), [](const ir::Value* v) {
        return v->type().dtype() == DType::f32 && v->type().numel() > 0 && v->type().is_static();
      }))
    return false;
  return library_conv_runs_nhwc(n->input(0)->type().sizes(), n->input(1)->type().sizes(), t.sizes(),
                                n->num_inputs() == 3, n->attrs());
}

/// Whether channels-last differs from the contiguous layout for a type: a static 4-D
/// tensor with more than one channel and more than one pixel.
bool has_channels_last(const ir::Type& t) {
  if (t.rank() != 4 || !t.is_static() || t.numel() == 0) return false;
  return !is_contiguous(t.sizes(), channels_last_strides(t.sizes()));
}

ir::Type channels_last_type(const ir::Type& t) {
  return ir::Type(t.dtype(), t.sizes(), channels_last_strides(t.sizes()), t.device(),
                  t.wrapped_number());
}

/// Whether a value is stored channels-last already (a graph input given so).
bool stored_channels_last(const ir::Type& t) {
  return !t.is_contiguous() && t.strides() == channels_last_type(t).strides();
}

/// A node the generated code runs as a kernel that may store any dense layout.
bool is_pointwise_kernel(const ir::Node* n) {
  return n->schema().kind == OpKind::pointwise && n->num_outputs() == 1 && is_lowerable(*n);
}

/// Uses that need the layout eager code gives: graph outputs (the caller's tensors), views
/// (their strides are their meaning) and convs that are not a region's (`region_conv`): oneDNN
/// picks its kernel by the source's layout, and kernels differ in how a non-finite weight
/// meets padding, so such a conv reads what it reads eagerly.
template <typename RegionConv> bool needs_plain(const ir::Use& u, RegionConv region_conv) {
  if (u.kind == ir::Use::Kind::graph_output) return true;
  if (u.kind != ir::Use::Kind::operand) return false;
  if (u.user->schema().kind == OpKind::view) return true;
  return u.user->op() == Op::conv2d && !(u.slot == 0 && region_conv(u.user));
}

/// What one more step costs beside its bytes (a launch, and a pass over cold caches), in
/// bytes moved: about a microsecond at the copy rate. A small conv's reorders are not worth
/// a copy step of their own.
constexpr int64_t kStepBytes = 64 << 10;

/// Whether a sum or product reads v (through views too). Such a reduction over a
/// channels-last value runs its long reduced extent in one accumulator per lane, where the
/// contiguous layout's vector lanes split it: results move by more than eager's rounding
/// (batch norm's statistics in train mode), so those values keep the contiguous layout.
bool read_by_sum(const ir::Value* v) {
  for (const ir::Use& u : v->uses()) {
    if (u.kind != ir::Use::Kind::operand) continue;
    const OpTraits::Fold f = op_traits(u.user->op()).fold;
    if (f == OpTraits::Fold::sum || f == OpTraits::Fold::prod) return true;
    if (u.user->schema().kind == OpKind::view)
      for (const ir::Value* r : u.user->outputs())
        if (read_by_sum(r)) return true;
  }
  return false;
}

int64_t bytes_of(const ir::Value* v) { return v->type().numel() * itemsize(v->type().dtype()); }

/// A region's cost either way and what it holds, for the choice and its log line.
struct Region {
  int64_t convs = 0, values = 0;
  int64_t reorder_bytes = 0; // stored contiguous: oneDNN's reorders of conv sources and results
  int64_t convert_bytes = 0; // stored channels-last: the copies at the boundary
  const ir::Node* first = nullptr;
};

} // namespace

LayoutStats assign_channels_last(ir::Graph& g) {
  LayoutStats stats;
  if (!library_epilogues_available()) return stats;
  const std::vector<ir::Node*> nodes = g.node_list();
  // Asked once per conv: the answer builds a oneDNN primitive descriptor.
  std::unordered_set<const ir::Node*> library_convs;
  for (const ir::Node* n : nodes)
    if (is_library_conv(n)) library_convs.insert(n);
  auto is_conv = [&](const ir::Node* n) { return library_convs.count(n) > 0; };
  // Forward: conv results, and the pointwise results of a channels-last operand's shape.
  std::unordered_set<const ir::Value*> cl;
  for (const ir::Node* n : nodes) {
    const ir::Value* y = n->num_outputs() == 1 ? n->output() : nullptr;
    if (!y || !y->type().is_contiguous() || !has_channels_last(y->type()) || read_by_sum(y))
      continue;
    if (is_conv(n)) {
      cl.insert(y);
    } else if (is_pointwise_kernel(n)) {
      for (const ir::Value* v : n->inputs())
        if (cl.count(v) && v->type().sizes() == y->type().sizes()) {
          cl.insert(y);
          break;
        }
    }
  }
  // Backward: a pointwise result no channels-last reader wants is stored contiguous (its
  // kernel transposes on the way). A conv keeps its mark: its source and result in one
  // layout is oneDNN's fast case.
  auto wants_cl = [&](const ir::Use& u) {
    if (u.kind != ir::Use::Kind::operand) return false;
    if (u.user->num_outputs() != 1 || !cl.count(u.user->output())) return false;
    return !is_conv(u.user) || u.slot == 0;
  };
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Value* y = (*it)->num_outputs() == 1 ? (*it)->output() : nullptr;
    if (!y || !cl.count(y) || is_conv(*it)) continue;
    if (std::none_of(y->uses().begin(), y->uses().end(), wants_cl)) cl.erase(y);
  }
  if (cl.empty()) return stats;

  // Regions, and the cost model's choice for each.
  const ir::ValueNumbering num(g);
  UnionFind uf(static_cast<size_t>(num.size()));
  auto id = [&](const ir::Value* v) { return static_cast<size_t>(num[v]); };
  for (const ir::Node* n : nodes)
    if (n->num_outputs() == 1 && cl.count(n->output()))
      for (size_t k = 0; k < n->inputs().size(); ++k)
        if (cl.count(n->input(k)) && (!is_conv(n) || k == 0))
          uf.unite(id(n->input(k)), id(n->output()));
  std::map<size_t, Region> regions; // by root: ordered by the ids, so the log is stable
  std::unordered_set<const ir::Value*> converted; // conv sources copied once for all readers
  for (const ir::Node* n : nodes) {
    if (n->num_outputs() != 1 || !cl.count(n->output())) continue;
    const ir::Value* y = n->output();
    Region& r = regions[uf.find(id(y))];
    ++r.values;
    if (std::any_of(y->uses().begin(), y->uses().end(),
                    [&](const ir::Use& u) { return needs_plain(u, is_conv); }))
      r.convert_bytes += bytes_of(y) + kStepBytes;
    if (!is_conv(n)) continue;
    if (!r.first) r.first = n;
    ++r.convs;
    const ir::Value* x = n->input(0);
    r.reorder_bytes += bytes_of(x) + bytes_of(y);
    if (!cl.count(x) && has_channels_last(x->type()) && !stored_channels_last(x->type()) &&
        converted.insert(x).second)
      r.convert_bytes += bytes_of(x) + kStepBytes;
  }
  std::unordered_set<size_t> plain;
  for (const auto& [root, r] : regions) {
    const bool keep = r.convert_bytes < r.reorder_bytes;
    (keep ? stats.regions : stats.plain_regions) += 1;
    if (!keep) plain.insert(root);
    stats.log.push_back("layout: region of %" + std::to_string(num[r.first->output()]) + " " +
                        std::string(op_name(r.first->op())) + " (" + std::to_string(r.convs) +
                        " conv" + (r.convs == 1 ? "" : "s") + ", " + std::to_string(r.values) +
                        (r.values == 1 ? " value): " : " values): ") +
                        (keep ? "channels-last" : "contiguous") + ", conversions " +
                        mib_str(static_cast<size_t>(r.convert_bytes)) + (keep ? " < " : " >= ") +
                        "oneDNN's reorders " + mib_str(static_cast<size_t>(r.reorder_bytes)));
  }
  for (auto it = cl.begin(); it != cl.end();)
    it = plain.count(uf.find(id(*it))) ? cl.erase(it) : std::next(it);
  // A conv of a region that stays: its result marked (the region's choice is made).
  auto region_conv = [&](const ir::Node* n) { return is_conv(n) && cl.count(n->output()) > 0; };

  // Store the marked values channels-last; copies back where a plain layout is needed.
  for (ir::Node* n : nodes) {
    if (n->num_outputs() != 1 || !cl.count(n->output())) continue;
    ir::Value* y = n->output();
    const ir::Type plain_type = y->type();
    y->set_type(channels_last_type(plain_type));
    ++stats.channels_last;
    std::vector<ir::Use> plain_uses;
    for (const ir::Use& u : y->uses())
      if (needs_plain(u, region_conv)) plain_uses.push_back(u);
    if (plain_uses.empty()) continue;
    ir::Node* copy =
        g.create_node(Op::copy, {y}, Attrs{}, std::span<const ir::Type>(&plain_type, 1), n->next());
    copy->set_location(n->location());
    ++stats.conversions;
    for (const ir::Use& u : plain_uses) {
      if (u.kind == ir::Use::Kind::graph_output)
        g.set_output(u.slot, copy->output());
      else
        u.user->set_input(u.slot, copy->output());
    }
  }
  // Entries: a conv with a channels-last result reads a channels-last source (one copy of a
  // contiguous or otherwise strided one, for all its readers).
  std::unordered_map<const ir::Value*, ir::Value*> copies;
  for (ir::Node* n : nodes) {
    if (!is_conv(n) || !cl.count(n->output())) continue;
    ir::Value* x = n->input(0);
    if (!has_channels_last(x->type()) || stored_channels_last(x->type())) continue;
    ir::Value*& c = copies[x];
    if (!c) {
      const ir::Type t = channels_last_type(x->type());
      ir::Node* copy = g.create_node(Op::copy, {x}, Attrs{}, std::span<const ir::Type>(&t, 1), n);
      copy->set_location(n->location());
      c = copy->output();
      ++stats.conversions;
    }
    n->set_input(0, c);
  }
  return stats;
}

Expected<void> channels_last(ir::Graph& g, PassContext& ctx) {
  const LayoutStats stats = assign_channels_last(g);
  ctx.changed = stats.channels_last > 0;
  return {};
}

} // namespace kiln::passes
