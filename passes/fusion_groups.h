// Groups: the fusion groups of one graph while fusion forms them. Nodes are numbered by their
// position in the graph; each group keeps its member list, its iteration domain and whether
// a member is costly, so that questions about a group cost its size, not the graph's.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/kernel/domain.h"
#include "ir/numbering.h"
#include "runtime/union_find.h"

namespace kiln::passes {

class Groups {
public:
  explicit Groups(const ir::Graph& g);

  int size() const { return static_cast<int>(nodes_.size()); }
  const ir::Node* node(int p) const { return nodes_[static_cast<size_t>(p)]; }
  /// A node's position in the graph.
  int pos(const ir::Node* x) const { return pos_.at(x); }
  /// "%14 add": a node by its result's number, as the printer shows it.
  std::string label(const ir::Node* x) const;
  const ir::ValueNumbering& numbering() const { return numbering_; }

  /// Makes the node at p a group of its own.
  void add(int p);
  /// Whether a node is in some group (views never are).
  bool member(const ir::Node* x) const { return x && member_[static_cast<size_t>(pos(x))] != 0; }
  bool member_at(int p) const { return member_[static_cast<size_t>(p)] != 0; }
  /// The group (its root position) of the member at p.
  int find(int p) { return static_cast<int>(sets_.find(static_cast<size_t>(p))); }
  int group_of(const ir::Node* x) { return find(pos(x)); }
  /// Per group (by root): its members' positions, ascending; its domain; whether a member
  /// is a costly op (ops.def traits).
  const std::vector<int>& members(int root) const { return members_[static_cast<size_t>(root)]; }
  const ir::kernel::Domain& domain(int root) const { return domain_[static_cast<size_t>(root)]; }
  bool costly(int root) const { return costly_[static_cast<size_t>(root)] != 0; }
  /// Joins groups a and b (roots) into one iterating `merged`.
  void merge(int a, int b, ir::kernel::Domain merged);

  /// Whether joining groups a and b would put a step outside both on a path from one to the
  /// other (the joined kernel would then both feed and read that step). A path may pass
  /// through a third group: all of it, as one kernel.
  bool would_cycle(int a, int b);
  /// Whether every member of group grp other than p is read only inside grp, and p only
  /// by consumer's group: inlining grp into that group recomputes nothing another step reads.
  bool only_output_is(int grp, const ir::Node* p, const ir::Node* consumer);
  /// The non-view nodes that read v (through view chains), and whether a graph output, a
  /// write or a view that must exist as a tensor reads it.
  static void readers(const ir::Value* v, std::vector<const ir::Node*>& out, bool& escapes);

private:
  /// Whether a path leads from group `from` to group `to` through a step outside both,
  /// searched forward from `from`'s members or backward from `to`'s.
  bool path(int from, int to, bool forward);

  /// How many groups other than `a` and `b` have members on both sides of position p (a
  /// group's span is from its first member to its last). Pruning a search by position is
  /// sound only when none does: a group is one kernel, so a path that reaches its late member
  /// continues from its early ones.
  int straddling(int p, int a, int b) const;
  void cover(int root, int delta); // adds a group's span to span_count_

  std::vector<ir::Node*> nodes_;
  /// Spans of groups as a Fenwick tree of range additions: the prefix sum at p counts the
  /// groups with first < p < last.
  std::vector<int> span_count_;
  std::unordered_map<const ir::Node*, int> pos_;
  ir::ValueNumbering numbering_;
  std::vector<char> member_;
  UnionFind sets_;
  // By root position; empty for positions that are no group's root.
  std::vector<std::vector<int>> members_;
  std::vector<ir::kernel::Domain> domain_;
  std::vector<char> costly_;
};

} // namespace kiln::passes

namespace kiln::passes {

struct FusionResult;

/// The last part of fuse(): the groups as FusionGroups (members, stored outputs, inputs)
/// and a topological order of all steps. `absorbed` maps each node a library call took into
/// its epilogue to the call; `anchor_call`, each call's anchor to the call.
void order_steps(Groups& groups, const std::unordered_map<const ir::Node*, int>& absorbed,
                 const std::unordered_map<const ir::Node*, int>& anchor_call, FusionResult& result);

} // namespace kiln::passes
