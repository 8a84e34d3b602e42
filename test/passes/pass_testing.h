// Helpers shared by the pass tests: run a graph eagerly, compare results bit for bit.
#pragma once

#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <vector>

#include <kiln/kiln.h>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/ops/dispatch.h"

namespace kiln::testing {

/// Runs g node by node with the eager kernels: `args` bind the user and parameter inputs in
/// order, constants bind their data. Returns the outputs (writes are not performed).
inline std::vector<Tensor> run_graph(const ir::Graph& g, const std::vector<Tensor>& args) {
  std::vector<std::pair<const ir::Value*, Tensor>> env; // small graphs: a linear lookup
  auto lookup = [&](const ir::Value* v) -> const Tensor& {
    for (const auto& [k, t] : env)
      if (k == v) return t;
    KILN_ASSERT(false, "run_graph: value not computed");
    return env.front().second;
  };
  size_t next_arg = 0;
  for (const ir::Value* in : g.inputs()) {
    if (in->is_constant()) {
      env.emplace_back(in, in->constant());
    } else {
      KILN_ASSERT(next_arg < args.size(), "run_graph: too few arguments");
      env.emplace_back(in, args[next_arg++]);
    }
  }
  for (const ir::Node* n : g.nodes()) {
    std::vector<Tensor> ins;
    for (const ir::Value* v : n->inputs())
      ins.push_back(lookup(v));
    std::vector<Tensor> outs = dispatch(n->op(), ins, n->attrs());
    for (size_t k = 0; k < outs.size(); ++k)
      env.emplace_back(n->output(k), outs[k]);
  }
  std::vector<Tensor> results;
  for (const ir::Value* o : g.outputs())
    results.push_back(lookup(o));
  return results;
}

/// Same dtype, sizes and bytes of every element (so -0.0 != 0.0 and a NaN equals itself).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<size_t>(ca.numel() * ca.itemsize())) == 0;
}

/// Whether before and after compute bit-identical outputs on args.
inline bool same_results(const ir::Graph& before, const ir::Graph& after,
                         const std::vector<Tensor>& args) {
  std::vector<Tensor> x = run_graph(before, args), y = run_graph(after, args);
  if (x.size() != y.size()) return false;
  for (size_t k = 0; k < x.size(); ++k)
    if (!bitwise_equal(x[k], y[k])) return false;
  return true;
}

/// f32 values where simplifications go wrong: both zeros, NaN, infinities, extremes.
inline Tensor hostile_f32(Shape shape = {8}) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> base = {-0.0f, 0.0f,  std::numeric_limits<float>::quiet_NaN(), inf, -inf,
                             1.5f,  -2.0f, std::numeric_limits<float>::max()};
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = base[i % base.size()];
  return tensor<float>(v, shape);
}

/// i32 values including both ends of the range (negation and subtraction wrap there).
inline Tensor hostile_i32(Shape shape = {6}) {
  std::vector<int32_t> base = {std::numeric_limits<int32_t>::min(), -1, 0, 1, 7,
                               std::numeric_limits<int32_t>::max()};
  std::vector<int32_t> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = base[i % base.size()];
  return tensor<int32_t>(v, shape);
}

/// Whether g verifies; prints the graph and the message when it does not.
inline bool verifies(const ir::Graph& g) {
  Expected<void> r = ir::verify(g);
  if (!r) UNSCOPED_INFO(r.error().message() << "\n" << ir::print(g));
  return static_cast<bool>(r);
}

} // namespace kiln::testing
