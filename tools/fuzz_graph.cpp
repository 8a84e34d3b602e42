// run_graph: a .kir graph interpreted node by node through kiln::dispatch.
#include "tools/fuzz_graph.h"

#include <algorithm>
#include <unordered_map>

#include "ir/node.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "tools/fuzz_program.h"

namespace kiln::tools {
namespace {

/// A constant input as the graph means it: a wrapped number stays a weak scalar operand.
Tensor constant_tensor(const ir::Value& v) {
  const Tensor& c = v.constant();
  if (!v.type().wrapped_number()) return c;
  if (c.dtype() == DType::bool_) return wrap_scalar(Scalar(c.item<bool>()));
  if (is_floating(c.dtype())) return wrap_scalar(Scalar(c.item<double>()));
  return wrap_scalar(Scalar(c.item<int64_t>()));
}

} // namespace

std::vector<Tensor> run_graph(const ir::Graph& g, std::span<const Tensor> args, RunMode mode) {
  std::unordered_map<const ir::Value*, Tensor> env;
  size_t next = 0;
  for (const ir::Value* in : g.inputs()) {
    if (in->is_constant()) {
      env[in] = constant_tensor(*in);
      continue;
    }
    KILN_CHECK(next < args.size(), "kiln run: graph @", g.name(), " has more inputs than the ",
               args.size(), " given");
    env[in] = args[next++];
  }
  for (const ir::Node* n : g.nodes()) {
    std::vector<Tensor> x;
    const OpKind kind = n->schema().kind;
    const bool sums = kind == OpKind::reduction || kind == OpKind::contraction;
    for (const ir::Value* v : n->inputs())
      x.push_back(run_operand(env.at(v), mode, sums));
    std::vector<Tensor> outs = dispatch(n->op(), x, n->attrs());
    for (size_t k = 0; k < outs.size(); ++k)
      env[n->output(k)] = outs[k];
  }
  // The graph's semantics: writes happen after every node, in order.
  for (const ir::InPlaceWrite& w : g.writes())
    env.at(w.target).copy_(env.at(w.source));
  std::vector<Tensor> out;
  for (const ir::Value* v : g.outputs())
    out.push_back(env.at(v));
  return out;
}

std::vector<Tensor> make_graph_inputs(const ir::Graph& g, uint64_t seed, bool specials) {
  std::vector<Tensor> out;
  for (const ir::Value* in : g.inputs()) {
    if (in->is_constant()) continue;
    const ir::Type& t = in->type();
    KILN_CHECK(t.is_static(), "kiln run: input ", out.size(), " of graph @", g.name(),
               " has symbolic sizes (", t.str(), "): no data can be made for it");
    out.push_back(make_input(t.sizes(), t.strides(), t.dtype(), seed, out.size(), specials));
  }
  return out;
}

bool graph_has_reordered_sums(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes()) {
    OpKind k = n->schema().kind;
    if (k == OpKind::reduction || k == OpKind::contraction) return true;
  }
  return false;
}

double graph_longest_sum(const ir::Graph& g) {
  auto numel = [](const Shape& s) {
    double n = 1;
    for (int64_t d : s)
      n *= static_cast<double>(std::max<int64_t>(d, 0));
    return n;
  };
  double longest = 1;
  for (const ir::Node* n : g.nodes()) {
    OpKind k = n->schema().kind;
    if ((k != OpKind::reduction && k != OpKind::contraction) || n->num_inputs() == 0) continue;
    const Shape& in = n->input(0)->type().sizes();
    longest = std::max(longest, numel(in) / std::max(numel(n->output()->type().sizes()), 1.0));
    if (!in.empty()) longest = std::max(longest, static_cast<double>(in.back()));
  }
  return longest;
}

} // namespace kiln::tools
