// The groups fusion formed, as the steps of the compiled program, in a topological order.
#include <functional>
#include <queue>
#include <unordered_set>

#include "passes/fusion.h"
#include "passes/fusion_groups.h"
#include "runtime/error.h"

namespace kiln::passes {

using ir::kernel::is_view;
using ir::kernel::view_source;

void order_steps(Groups& groups, const std::unordered_map<const ir::Node*, int>& absorbed,
                 const std::unordered_map<const ir::Node*, int>& anchor_call,
                 FusionResult& result) {
  const int n = groups.size();
  // Groups in the order of their first member.
  std::unordered_map<int, int> group_index;
  for (int k = 0; k < n; ++k) {
    if (!groups.member_at(k)) continue;
    const int r = groups.find(k);
    auto [it, fresh] = group_index.try_emplace(r, static_cast<int>(result.groups.size()));
    if (!fresh) continue;
    FusionGroup& grp = result.groups.emplace_back();
    const ir::kernel::Domain& d = groups.domain(r);
    grp.reduction = d.reduction;
    grp.shape = d.shape;
    grp.dims = d.dims;
    for (int m : groups.members(r))
      grp.nodes.push_back(groups.node(m));
  }
  auto step_group = [&](const ir::Node* x) {
    return groups.member(x) ? group_index.at(groups.group_of(x)) : -1;
  };

  // Views that must exist as tensors: read by an extern node, an output, a write, or such a view.
  std::unordered_set<const ir::Node*> needed_views;
  for (int k = n - 1; k >= 0; --k) {
    const ir::Node* x = groups.node(k);
    if (!is_view(x)) continue;
    for (const ir::Use& u : x->output()->uses())
      if (u.kind != ir::Use::Kind::operand ||
          (is_view(u.user) ? needed_views.count(u.user) > 0 : !groups.member(u.user)))
        needed_views.insert(x);
  }
  for (FusionGroup& grp : result.groups) {
    const int me = step_group(grp.nodes.front());
    std::unordered_set<const ir::Value*> seen_inputs;
    for (const ir::Node* m : grp.nodes) {
      // Stored when something outside reads it (directly, or through a view that is not
      // inlined into this group).
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

  // The steps: groups, then every node that runs by itself (an extern call, a library call
  // with its epilogue, a view something outside a kernel reads).
  std::vector<int> unit_of_node(static_cast<size_t>(n), -1);
  std::vector<FusionStep> units;
  std::vector<int> unit_pos;
  for (int g = 0; g < static_cast<int>(result.groups.size()); ++g) {
    units.push_back({g, nullptr, -1});
    unit_pos.push_back(groups.pos(result.groups[static_cast<size_t>(g)].nodes.front()));
  }
  for (int k = 0; k < n; ++k) {
    const ir::Node* x = groups.node(k);
    if (groups.member(x)) {
      unit_of_node[static_cast<size_t>(k)] = step_group(x);
    } else if (auto a = absorbed.find(x); a != absorbed.end()) {
      // Part of a library call's epilogue: its anchor's step (which comes first).
      const ir::Node* anchor = result.library_calls[static_cast<size_t>(a->second)].anchor;
      unit_of_node[static_cast<size_t>(k)] = unit_of_node[static_cast<size_t>(groups.pos(anchor))];
    } else if (!is_view(x) || needed_views.count(x)) {
      unit_of_node[static_cast<size_t>(k)] = static_cast<int>(units.size());
      auto c = anchor_call.find(x);
      units.push_back({-1, x, c == anchor_call.end() ? -1 : c->second});
      unit_pos.push_back(k);
    }
  }

  // A topological order, always taking the ready step that comes first in the graph: steps
  // with effects on the generator (random ops) keep their order.
  std::vector<std::vector<int>> users(units.size());
  std::vector<int> pending(units.size(), 0);
  auto depend = [&](int u, const ir::Value* v) {
    if (!v->producer()) return;
    const int d = unit_of_node[static_cast<size_t>(groups.pos(v->producer()))];
    if (d < 0 || d == u) return;
    users[static_cast<size_t>(d)].push_back(u);
    ++pending[static_cast<size_t>(u)];
  };
  for (size_t u = 0; u < units.size(); ++u) {
    const int ui = static_cast<int>(u);
    if (units[u].group >= 0) {
      for (const ir::Value* v : result.groups[static_cast<size_t>(units[u].group)].inputs)
        depend(ui, v);
    } else if (units[u].library >= 0) {
      for (const ir::Value* v :
           result.library_calls[static_cast<size_t>(units[u].library)].operands)
        depend(ui, v);
    } else {
      for (const ir::Value* v : units[u].node->inputs())
        depend(ui, v);
    }
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (size_t u = 0; u < units.size(); ++u)
    if (pending[u] == 0) ready.push({unit_pos[u], static_cast<int>(u)});
  while (!ready.empty()) {
    const int u = ready.top().second;
    ready.pop();
    result.order.push_back(units[static_cast<size_t>(u)]);
    for (int w : users[static_cast<size_t>(u)])
      if (--pending[static_cast<size_t>(w)] == 0) ready.push({unit_pos[static_cast<size_t>(w)], w});
  }
  KILN_ASSERT(result.order.size() == units.size(), "fusion formed a cycle between steps");
}

} // namespace kiln::passes
