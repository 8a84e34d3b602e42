// The min-cut partition of a forward graph for its backward (see partition.h). The flow
// network, as AOTAutograd's: every value v is an edge in(v) -> out(v) whose capacity is what
// keeping v costs; an operand u of a recomputable node with result r is an edge
// out(u) -> in(r) of unbounded capacity (recomputing r needs u); the source feeds in(v) of
// every value the backward cannot compute (graph inputs, results of other nodes), and each
// needed value's out(v) feeds the sink. A cut of least capacity is a set of values whose
// keeping lets the backward compute every needed value from them by recomputable nodes.
#include "passes/partition.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "passes/aliasing.h"
#include "runtime/ops/op.h"

namespace kiln::passes {

bool is_recomputable(const ir::Node& n) {
  if (n.num_outputs() != 1) return false;
  switch (n.schema().kind) {
  case OpKind::pointwise:
  case OpKind::view: return true;
  case OpKind::factory: return n.op() == Op::full;
  default: return false;
  }
}

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;

/// Dinic's maximum flow on a small graph (a few thousand vertices): edges in insertion
/// order, so that the result does not depend on addresses.
class FlowNetwork {
public:
  explicit FlowNetwork(size_t vertices) : adjacency_(vertices) {}

  void add_edge(size_t from, size_t to, int64_t capacity) {
    adjacency_[from].push_back(edges_.size());
    edges_.push_back({to, capacity});
    adjacency_[to].push_back(edges_.size());
    edges_.push_back({from, 0});
  }

  void max_flow(size_t source, size_t sink) {
    while (levels(source, sink)) {
      next_.assign(adjacency_.size(), 0);
      while (push(source, sink, kUnbounded) > 0) {
      }
    }
  }

  /// The vertices that reach `sink` by edges with capacity left (the sink side of the cut
  /// nearest the sink).
  std::vector<bool> reaching(size_t sink) const {
    std::vector<bool> seen(adjacency_.size(), false);
    std::vector<size_t> stack{sink};
    seen[sink] = true;
    while (!stack.empty()) {
      const size_t v = stack.back();
      stack.pop_back();
      for (size_t e : adjacency_[v]) {
        // The edge u -> v paired with e (v -> u) has capacity left.
        const size_t u = edges_[e].to;
        if (!seen[u] && edges_[e ^ 1].capacity > 0) {
          seen[u] = true;
          stack.push_back(u);
        }
      }
    }
    return seen;
  }

private:
  struct Edge {
    size_t to;
    int64_t capacity; // left
  };

  bool levels(size_t source, size_t sink) {
    level_.assign(adjacency_.size(), -1);
    std::queue<size_t> q;
    q.push(source);
    level_[source] = 0;
    while (!q.empty()) {
      const size_t v = q.front();
      q.pop();
      for (size_t e : adjacency_[v])
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[v] + 1;
          q.push(edges_[e].to);
        }
    }
    return level_[sink] >= 0;
  }

  int64_t push(size_t v, size_t sink, int64_t limit) {
    if (v == sink) return limit;
    for (size_t& i = next_[v]; i < adjacency_[v].size(); ++i) {
      const size_t e = adjacency_[v][i];
      Edge& edge = edges_[e];
      if (edge.capacity <= 0 || level_[edge.to] != level_[v] + 1) continue;
      if (int64_t f = push(edge.to, sink, std::min(limit, edge.capacity)); f > 0) {
        edge.capacity -= f;
        edges_[e ^ 1].capacity += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<std::vector<size_t>> adjacency_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

int64_t bytes_of(const ir::Value* v) {
  return v->type().numel() * static_cast<int64_t>(itemsize(v->type().dtype()));
}

} // namespace

SavePartition partition_for_backward(const ir::Graph& g, std::span<const ir::Value* const> needed,
                                     std::span<const ir::Value* const> free) {
  // Values in graph order: inputs, then each node's results.
  std::vector<const ir::Value*> values;
  std::unordered_map<const ir::Value*, size_t> id;
  for (const ir::Value* v : g.inputs()) {
    id[v] = values.size();
    values.push_back(v);
  }
  for (const ir::Node* n : g.nodes())
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      id[n->output(k)] = values.size();
      values.push_back(n->output(k));
    }
  const std::unordered_set<const ir::Value*> is_free(free.begin(), free.end());
  auto free_value = [&](const ir::Value* v) {
    return is_free.count(v) != 0 || (v->is_input() && v->input_kind() != ir::InputKind::user);
  };
  // What keeping v costs: nothing for a free value; unbounded for a view (keeping it keeps
  // its base: the base is the value to weigh); else its bytes.
  auto cost = [&](const ir::Value* v) -> int64_t {
    if (free_value(v)) return 0;
    if (v->producer() && v->producer()->schema().kind == OpKind::view) return kUnbounded;
    return bytes_of(v);
  };
  const size_t n = values.size(), source = 2 * n, sink = 2 * n + 1;
  FlowNetwork net(2 * n + 2);
  for (size_t i = 0; i < n; ++i) {
    const ir::Value* v = values[i];
    net.add_edge(2 * i, 2 * i + 1, cost(v));
    const ir::Node* p = v->producer();
    if (!p || !is_recomputable(*p)) {
      net.add_edge(source, 2 * i, kUnbounded);
      continue;
    }
    for (const ir::Value* u : p->inputs())
      net.add_edge(2 * id.at(u) + 1, 2 * i, kUnbounded);
  }
  std::vector<const ir::Value*> wanted;
  for (const ir::Value* v : needed)
    if (std::find(wanted.begin(), wanted.end(), v) == wanted.end()) {
      wanted.push_back(v);
      net.add_edge(2 * id.at(v) + 1, sink, kUnbounded);
    }
  net.max_flow(source, sink);
  const std::vector<bool> sink_side = net.reaching(sink);

  SavePartition r;
  // Kept: on the source side of its own edge, its result wanted on the sink side.
  for (size_t i = 0; i < n; ++i)
    if (!sink_side[2 * i] && sink_side[2 * i + 1]) r.saved.push_back(values[i]);
  // Recomputed: the sink-side values the needed ones are computed from, back to kept ones.
  std::unordered_set<const ir::Node*> again;
  std::vector<const ir::Value*> stack;
  for (const ir::Value* v : wanted)
    if (sink_side[2 * id.at(v)]) stack.push_back(v);
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    const ir::Node* p = v->producer();
    if (!p || !again.insert(p).second) continue;
    for (const ir::Value* u : p->inputs())
      if (sink_side[2 * id.at(u)]) stack.push_back(u);
  }
  for (const ir::Node* node : g.nodes())
    if (again.count(node)) r.recompute.push_back(node);
  // Bytes, by storage: a view costs what its base does, once.
  auto bytes = [&](const std::vector<const ir::Value*>& vs) {
    std::unordered_set<const ir::Value*> roots;
    int64_t total = 0;
    for (const ir::Value* v : vs) {
      const ir::Value* root = storage_root(v);
      if (!free_value(root) && roots.insert(root).second) total += bytes_of(root);
    }
    return total;
  };
  r.needed_bytes = bytes(wanted);
  r.saved_bytes = bytes(r.saved);
  return r;
}

} // namespace kiln::passes
