// common-subexpression-elimination: merges equal constants, then equal nodes.
#include <bit>
#include <cstring>
#include <functional>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "passes/aliasing.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {

// ---- exact comparison of attributes ----

uint64_t bits_of(double d) { return std::bit_cast<uint64_t>(d); }

/// Scalars are equal when their kind and their bits are: 1 and 1.0 and true differ (they
/// promote differently), -0.0 and 0.0 differ, a NaN equals the same NaN bits.
bool same_scalar(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  return a.is_floating() ? bits_of(a.to_double()) == bits_of(b.to_double())
                         : a.to_int() == b.to_int();
}

bool same_attr(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, double>)
          return bits_of(x) == bits_of(y);
        else if constexpr (std::is_same_v<T, Scalar>)
          return same_scalar(x, y);
        else
          return x == y; // int, bool, ints, dtype, str: value equality is exact
      },
      a);
}

bool same_node(const ir::Node* a, const ir::Node* b) {
  if (a->op() != b->op() || a->num_inputs() != b->num_inputs() ||
      a->num_outputs() != b->num_outputs() || a->attrs().size() != b->attrs().size())
    return false;
  for (size_t i = 0; i < a->num_inputs(); ++i)
    if (a->input(i) != b->input(i)) return false;
  for (size_t k = 0; k < a->attrs().size(); ++k)
    if (!same_attr(a->attrs()[k], b->attrs()[k])) return false;
  for (size_t k = 0; k < a->num_outputs(); ++k)
    if (a->output(k)->type() != b->output(k)->type()) return false;
  return true;
}

// ---- hashing (only to find candidates; same_node decides) ----

void mix(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

size_t hash_attr(const AttrValue& v) {
  size_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          mix(h, bits_of(x));
        } else if constexpr (std::is_same_v<T, Scalar>) {
          mix(h, static_cast<size_t>(x.kind()));
          mix(h, x.is_floating() ? bits_of(x.to_double()) : static_cast<uint64_t>(x.to_int()));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t i : x)
            mix(h, static_cast<size_t>(i));
        } else if constexpr (std::is_same_v<T, DType>) {
          mix(h, static_cast<size_t>(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          mix(h, std::hash<std::string>{}(x));
        } else {
          mix(h, static_cast<size_t>(x)); // int64_t, bool
        }
      },
      v);
  return h;
}

size_t hash_node(const ir::Node* n) {
  size_t h = static_cast<size_t>(n->op());
  // Operand addresses only pick a bucket; the order of merging follows the node order.
  for (ir::Value* v : n->inputs())
    mix(h, std::hash<const ir::Value*>{}(v));
  for (const AttrValue& a : n->attrs().values())
    mix(h, hash_attr(a));
  return h;
}

/// Never merged: each random node is its own draw, each `empty` its own unspecified data.
bool mergeable(const ir::Node* n) {
  return n->schema().kind != OpKind::random && n->op() != Op::empty;
}

// ---- graph outputs ----

/// Whether replacing drop's results by keep's would make a graph output share storage with
/// another output (keep's result or a view of it) where eager code returns two tensors
/// (canonicalize's rule too). A view result is never a storage root, so two views of one
/// value, which alias already, still merge.
bool would_alias_outputs(const ir::Graph& g, const ir::Node* keep, const ir::Node* drop) {
  for (size_t k = 0; k < drop->num_outputs(); ++k) {
    if (!is_graph_output(drop->output(k))) continue;
    for (const ir::Value* o : g.outputs())
      if (o != drop->output(k) && storage_root(o) == keep->output(k)) return true;
  }
  return false;
}

// ---- constants ----

std::string_view bytes_of(const ir::Value* c) {
  const Tensor& t = c->constant();
  return {static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.numel() * t.itemsize())};
}

bool merge_constants(ir::Graph& g) {
  std::unordered_map<size_t, std::vector<ir::Value*>> seen; // lookups only, never iterated
  std::vector<ir::Value*> merged;
  for (ir::Value* c : g.inputs()) {
    if (!c->is_constant()) continue;
    size_t h = std::hash<std::string_view>{}(bytes_of(c));
    mix(h, std::hash<std::string>{}(c->type().str()));
    std::vector<ir::Value*>& bucket = seen[h];
    ir::Value* earlier = nullptr;
    for (ir::Value* e : bucket)
      if (e->type() == c->type() && bytes_of(e) == bytes_of(c)) {
        earlier = e;
        break;
      }
    if (!earlier) {
      bucket.push_back(c);
      continue;
    }
    c->replace_all_uses_with(earlier);
    merged.push_back(c);
  }
  for (ir::Value* c : merged)
    g.erase_input(c);
  return !merged.empty();
}

} // namespace

Expected<void> common_subexpression_elimination(ir::Graph& g, PassContext& ctx) {
  if (merge_constants(g)) ctx.changed = true;

  std::unordered_map<size_t, std::vector<ir::Node*>> seen; // lookups only, never iterated
  for (ir::Node* n = g.first_node(); n;) {
    ir::Node* next = n->next();
    if (mergeable(n)) {
      std::vector<ir::Node*>& bucket = seen[hash_node(n)];
      ir::Node* earlier = nullptr;
      for (ir::Node* e : bucket)
        if (same_node(e, n)) {
          earlier = e;
          break;
        }
      if (earlier && !would_alias_outputs(g, earlier, n)) {
        for (size_t k = 0; k < n->num_outputs(); ++k)
          n->output(k)->replace_all_uses_with(earlier->output(k));
        g.erase(n);
        ctx.changed = true;
      } else if (!earlier) {
        bucket.push_back(n);
      }
    }
    n = next;
  }
  return {};
}

} // namespace kiln::passes
