// Running a .kir graph node by node on the eager kernels (through kiln::dispatch), so that the
// same function runs eagerly, traced by kiln::compile and on f64 inputs: `kiln run FILE.kir`
// and the repros `kiln fuzz` writes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"
#include "tools/fuzz_program.h"

namespace kiln::tools {

/// Runs g on `args` (one tensor per input that is not a constant, in order): each node through
/// kiln::dispatch with its op and attributes, then the graph's writes into the arguments.
/// Returns the outputs. A kiln::Error from an op propagates. `mode` as for run_program
/// (reductions and contractions are the steps that sum).
std::vector<Tensor> run_graph(const ir::Graph& g, std::span<const Tensor> args,
                              RunMode mode = RunMode::as_written);

/// The arguments of g drawn from `seed` (make_input of each non-constant input's type, by its
/// position among them), with NaN, ±Inf and ±0.0 among floating values when `specials`.
std::vector<Tensor> make_graph_inputs(const ir::Graph& g, uint64_t seed, bool specials);

/// Whether g sums in an order a backend may change (reductions, matmul, convolution).
bool graph_has_reordered_sums(const ir::Graph& g);
/// The most terms such a node sums per result element (as longest_sum for programs).
double graph_longest_sum(const ir::Graph& g);

} // namespace kiln::tools
