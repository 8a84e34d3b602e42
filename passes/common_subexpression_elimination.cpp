// common-subexpression-elimination: merges equal constants, then equal nodes, keeping the first.
#include <bit>
#include <cstring>
#include <unordered_map>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // FNV-1a style combination; only for bucketing, equality decides.
  return (h ^ v) * 1099511628211ull;
}

bool same_scalar(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_floating())
    return std::bit_cast<uint64_t>(a.to_double()) == std::bit_cast<uint64_t>(b.to_double());
  return a.to_int() == b.to_int();
}

/// Exact equality of attribute values: floats by their bits (-0.0 != 0.0, a NaN equals the
/// same NaN bits), scalars by kind and bits.
bool same_attr(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, double>)
          return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
        else if constexpr (std::is_same_v<T, Scalar>)
          return same_scalar(x, y);
        else
          return x == y;
      },
      a);
}

uint64_t hash_attr(const AttrValue& a) {
  uint64_t h = mix(14695981039346656037ull, a.index());
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          h = mix(h, static_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, double>) {
          h = mix(h, std::bit_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, DType>) {
          h = mix(h, static_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t x : v)
            h = mix(h, static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          for (char c : v)
            h = mix(h, static_cast<unsigned char>(c));
        } else {
          h = mix(h, static_cast<uint64_t>(v.kind()));
          h = mix(h, v.is_floating() ? std::bit_cast<uint64_t>(v.to_double())
                                     : static_cast<uint64_t>(v.to_int()));
        }
      },
      a);
  return h;
}

/// Ops whose two calls with the same operands are different values.
bool never_merged(const ir::Node* n) {
  return n->schema().kind == OpKind::random || n->op() == Op::empty;
}

uint64_t hash_node(const ir::Node* n) {
  uint64_t h = mix(14695981039346656037ull, static_cast<uint64_t>(n->op()));
  // Pointer bits only pick a bucket; buckets are never iterated in a way that reaches the
  // output (candidates are tried in graph order).
  for (ir::Value* v : n->inputs())
    h = mix(h, reinterpret_cast<uintptr_t>(v));
  for (const AttrValue& a : n->attrs().values())
    h = mix(h, hash_attr(a));
  return h;
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

bool is_graph_output(const ir::Value* v) {
  for (const ir::Use& u : v->uses())
    if (u.kind == ir::Use::Kind::graph_output) return true;
  return false;
}

/// Merging would make two graph outputs one tensor, where eager code returns two.
bool would_alias_outputs(const ir::Node* keep, const ir::Node* drop) {
  for (size_t k = 0; k < drop->num_outputs(); ++k)
    if (is_graph_output(drop->output(k)) && is_graph_output(keep->output(k))) return true;
  return false;
}

size_t constant_bytes(const ir::Value* v) {
  return static_cast<size_t>(v->constant().numel() * v->constant().itemsize());
}

bool same_constant(const ir::Value* a, const ir::Value* b) {
  if (a->type() != b->type()) return false;
  size_t n = constant_bytes(a);
  return n == constant_bytes(b) &&
         (n == 0 || std::memcmp(a->constant().raw_data(), b->constant().raw_data(), n) == 0);
}

uint64_t hash_constant(const ir::Value* v) {
  uint64_t h = mix(14695981039346656037ull, static_cast<uint64_t>(v->type().dtype()));
  for (int64_t s : v->type().sizes())
    h = mix(h, static_cast<uint64_t>(s));
  h = mix(h, v->type().wrapped_number());
  size_t n = constant_bytes(v);
  const auto* p = n ? static_cast<const unsigned char*>(v->constant().raw_data()) : nullptr;
  for (size_t i = 0; i < n; ++i)
    h = mix(h, p[i]);
  return h;
}

bool merge_constants(ir::Graph& g) {
  std::unordered_map<uint64_t, std::vector<ir::Value*>> seen; // lookups only
  std::vector<ir::Value*> dropped;
  for (ir::Value* in : g.inputs()) {
    if (!in->is_constant()) continue;
    std::vector<ir::Value*>& bucket = seen[hash_constant(in)];
    ir::Value* keep = nullptr;
    for (ir::Value* c : bucket)
      if (same_constant(c, in)) {
        keep = c;
        break;
      }
    if (!keep) {
      bucket.push_back(in);
      continue;
    }
    // Constants are graph inputs: two outputs naming them would alias already.
    in->replace_all_uses_with(keep);
    dropped.push_back(in);
  }
  for (ir::Value* v : dropped)
    g.erase_input(v);
  return !dropped.empty();
}

bool merge_nodes(ir::Graph& g) {
  std::unordered_map<uint64_t, std::vector<ir::Node*>> seen; // lookups only
  bool changed = false;
  for (ir::Node* n = g.first_node(); n;) {
    ir::Node* next = n->next();
    if (never_merged(n)) {
      n = next;
      continue;
    }
    std::vector<ir::Node*>& bucket = seen[hash_node(n)];
    ir::Node* keep = nullptr;
    for (ir::Node* c : bucket)
      if (same_node(c, n)) {
        keep = c;
        break;
      }
    if (!keep) {
      bucket.push_back(n);
    } else if (!would_alias_outputs(keep, n)) {
      for (size_t k = 0; k < n->num_outputs(); ++k)
        n->output(k)->replace_all_uses_with(keep->output(k));
      g.erase(n);
      changed = true;
    }
    n = next;
  }
  return changed;
}

} // namespace

Expected<void> common_subexpression_elimination(ir::Graph& g, PassContext& ctx) {
  // Constants first, so that nodes reading equal constants become equal nodes.
  if (merge_constants(g)) ctx.changed = true;
  if (merge_nodes(g)) ctx.changed = true;
  return {};
}

} // namespace kiln::passes
