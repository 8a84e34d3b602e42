// Groups: membership, merging and the legality questions fusion asks of groups.
#include "passes/fusion_groups.h"

#include <algorithm>
#include <iterator>

#include "runtime/ops/op.h"

namespace kiln::passes {

using ir::kernel::Domain;
using ir::kernel::is_view;

Groups::Groups(const ir::Graph& g)
    : nodes_(g.node_list()), span_count_(nodes_.size() + 2, 0), numbering_(g),
      member_(nodes_.size(), 0), sets_(nodes_.size()), members_(nodes_.size()),
      domain_(nodes_.size()), costly_(nodes_.size(), 0) {
  for (size_t k = 0; k < nodes_.size(); ++k)
    pos_[nodes_[k]] = static_cast<int>(k);
}

std::string Groups::label(const ir::Node* x) const {
  std::string s = "%";
  s += std::to_string(numbering_[x->output()]);
  s += ' ';
  s += x->name();
  return s;
}

void Groups::add(int p) {
  const ir::Node* x = node(p);
  member_[static_cast<size_t>(p)] = 1;
  const auto at = static_cast<size_t>(p);
  members_[at] = {p};
  domain_[at] = Domain::of(*x);
  costly_[at] = op_traits(x->op()).costly ? 1 : 0;
}

void Groups::cover(int root, int delta) {
  const std::vector<int>& m = members(root);
  if (m.back() - m.front() < 2) return; // no position strictly inside
  auto add = [&](int at, int d) {
    for (size_t i = static_cast<size_t>(at) + 1; i < span_count_.size(); i += i & (~i + 1))
      span_count_[i] += d;
  };
  add(m.front() + 1, delta); // positions first+1 .. last-1
  add(m.back(), -delta);
}

int Groups::straddling(int p, int a, int b) const {
  int n = 0;
  for (size_t i = static_cast<size_t>(p) + 1; i > 0; i -= i & (~i + 1))
    n += span_count_[i];
  for (int g : {a, b})
    if (members(g).front() < p && p < members(g).back()) --n;
  return n;
}

void Groups::merge(int a, int b, Domain merged) {
  cover(a, -1);
  cover(b, -1);
  const int root = static_cast<int>(sets_.unite(static_cast<size_t>(a), static_cast<size_t>(b)));
  const int other = root == a ? b : a;
  const auto r = static_cast<size_t>(root), o = static_cast<size_t>(other);
  std::vector<int> all;
  all.reserve(members_[r].size() + members_[o].size());
  std::merge(members_[r].begin(), members_[r].end(), members_[o].begin(), members_[o].end(),
             std::back_inserter(all));
  members_[r] = std::move(all);
  members_[o] = {};
  domain_[r] = std::move(merged);
  domain_[o] = {};
  costly_[r] = costly_[r] | costly_[o];
  costly_[o] = 0;
  cover(root, +1);
}

void Groups::readers(const ir::Value* v, std::vector<const ir::Node*>& out, bool& escapes) {
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
}

// The search walks from the members of one group toward the other (forward along uses, or
// backward along operands). A state is (position, whether the path so far passed a step
// outside both groups): views are index maps, not steps, but a view reached from outside is
// part of the path. A third group is one kernel: reaching any member of it reaches all of
// it, since each of its results may depend on each of its operands.
bool Groups::path(int from, int to, bool forward) {
  const int bound = forward ? members(to).back() : members(from).front();
  const int start = forward ? from : to, goal = forward ? to : from;
  // Positions order the nodes, not the groups: past the bound, a path may still come back
  // through a group with members on both sides of it. Without such a group, none can.
  const bool prune = straddling(bound, from, to) == 0;
  std::vector<char> seen(static_cast<size_t>(2 * size()), 0);
  std::vector<int> expanded; // third groups reached
  std::vector<std::pair<int, bool>> stack;
  auto push = [&](int p, bool outside) {
    const size_t key = static_cast<size_t>(2 * p + (outside ? 1 : 0));
    if (seen[key]) return;
    seen[key] = 1;
    stack.push_back({p, outside});
  };
  // Reaching node y; true when that closes a path through an outside step.
  auto visit = [&](const ir::Node* y, bool outside) {
    const int p = pos(y);
    if (prune && (forward ? p > bound : p < bound)) return false;
    if (member(y)) {
      const int g = find(p);
      if (g == goal) return outside;
      if (g == start) return false;
      if (std::find(expanded.begin(), expanded.end(), g) != expanded.end()) return false;
      expanded.push_back(g);
      for (int m : members(g))
        push(m, true);
      return false;
    }
    push(p, outside || !is_view(y));
    return false;
  };
  auto step = [&](const ir::Node* x, bool outside) {
    if (forward) {
      for (const ir::Value* o : x->outputs())
        for (const ir::Use& u : o->uses())
          if (u.user && visit(u.user, outside)) return true;
    } else {
      for (const ir::Value* v : x->inputs())
        if (v->producer() && visit(v->producer(), outside)) return true;
    }
    return false;
  };
  for (int m : members(start))
    if (step(node(m), false)) return true;
  while (!stack.empty()) {
    auto [p, outside] = stack.back();
    stack.pop_back();
    if (step(node(p), outside)) return true;
  }
  return false;
}

bool Groups::would_cycle(int a, int b) {
  // Each path is searched from the smaller side: merging a chain into a growing group then
  // costs the new member's neighbourhood, not the group.
  auto path_between = [&](int from, int to) {
    return path(from, to, members(from).size() <= members(to).size());
  };
  return path_between(a, b) || path_between(b, a);
}

bool Groups::only_output_is(int grp, const ir::Node* p, const ir::Node* consumer) {
  const int cg = group_of(consumer);
  for (int k : members(grp)) {
    const ir::Node* m = node(k);
    std::vector<const ir::Node*> rs;
    bool escapes = false;
    readers(m->output(), rs, escapes);
    if (escapes) return false;
    for (const ir::Node* r : rs) {
      const bool inside = member(r) && group_of(r) == grp;
      const bool in_consumer = member(r) && group_of(r) == cg;
      if (m == p ? !(inside || in_consumer) : !inside) return false;
    }
  }
  return true;
}

} // namespace kiln::passes
