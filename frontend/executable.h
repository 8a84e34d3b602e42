// Executable: a compiled graph, ready to run. Until the code generators land, every backend
// runs it as a flat program of eager kernel calls (the interpreter backend).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace kiln::frontend {

class Executable {
public:
  /// Takes the graph to run (already through the passes). `input_map[i]` is the position,
  /// among the caller's inputs, of the graph's input i (passes may have dropped inputs).
  Executable(std::unique_ptr<ir::Graph> graph, std::vector<size_t> input_map);

  /// Runs the graph on `inputs` (indexed like the caller's graph inputs; constants may be
  /// undefined), performs its in-place writes, and returns its outputs.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;

  const ir::Graph& graph() const { return *graph_; }
  /// Kernels and library calls one run launches (view ops, which move no data, excluded).
  int64_t kernels() const { return kernels_; }

private:
  struct Step {
    Op op;
    const Attrs* attrs;
    std::vector<size_t> operands; // slots
    std::vector<size_t> results;  // slots
    std::vector<size_t> release;  // slots whose last read is this step
  };
  std::unique_ptr<ir::Graph> graph_;
  std::vector<size_t> input_map_;
  size_t num_slots_ = 0;
  std::vector<std::pair<size_t, Tensor>> constants_; // slot, data
  std::vector<std::pair<size_t, size_t>> inputs_;    // slot, caller input index
  std::vector<Step> steps_;
  std::vector<size_t> outputs_;                   // slots
  std::vector<std::pair<size_t, size_t>> writes_; // target slot, source slot
  int64_t kernels_ = 0;
};

} // namespace kiln::frontend
