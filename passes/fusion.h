// Fusion: which nodes of a graph run together as one generated kernel. The graph itself is
// not rewritten: the lowering (codegen/lower) turns each group into a loop-IR kernel and
// runs every other node as a call of its eager kernel (an extern call), in `order`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/epilogue.h"

namespace kiln::passes {

struct FusionGroup {
  /// Member nodes in graph order: pointwise ops, reductions, `full`, `copy`. View nodes are
  /// never members; a member reads through them as index maps.
  std::vector<const ir::Node*> nodes;
  /// Member results the group stores: those read outside the group, graph outputs and
  /// write sources, in graph order.
  std::vector<const ir::Value*> outputs;
  /// Values from outside the group it reads (graph inputs, results of other steps), in first
  /// read order; views are looked through to their source.
  std::vector<const ir::Value*> inputs;
  bool reduction = false;
  /// The iteration domain: a pointwise group's shape, or a reduction's operand shape with
  /// the reduced dims (sorted).
  Shape shape;
  std::vector<int64_t> dims;
};

/// One step of the compiled program: a group's kernel, or one node run by dispatch (a
/// library call, an op with no lowering, or a view some extern step or output needs).
struct FusionStep {
  int group = -1;                 // >= 0: a kernel
  const ir::Node* node = nullptr; // otherwise
  int library = -1;               // >= 0: node is library_calls[library]'s anchor
};

/// A library contraction (matmul) with the pointwise ops after it that run inside the
/// library call as its epilogue (runtime/epilogue.h).
struct LibraryCall {
  const ir::Node* anchor = nullptr;
  /// The absorbed pointwise nodes, in graph order; none of their results but the last is
  /// read outside the call.
  std::vector<const ir::Node*> nodes;
  /// The step's operands: the anchor's inputs, then the epilogue's other operands.
  std::vector<const ir::Value*> operands;
  const ir::Value* output = nullptr; // the last absorbed node's result
  Epilogue epilogue;
};

struct FusionResult {
  std::vector<FusionGroup> groups;
  std::vector<FusionStep> order; // a topological order of the steps
  std::vector<LibraryCall> library_calls;
  /// One line per library call, per node that stays an eager call and why, per merge and
  /// per candidate pair that was not fused with the reason, and per formed group
  /// (`KILN_LOGS=fusion`, `kiln dump --stage fused`).
  std::vector<std::string> log;
};

struct FusionOptions {
  /// Off: every lowerable node is a group of its own (the "before fusion" count), and no
  /// epilogue joins a library call.
  bool fuse = true;
};

/// The library calls with epilogues in a graph: each f32 matmul or conv2d whose result feeds,
/// with no other reader, a chain of epilogue ops (relu, gelu in both of kiln::gelu's forms,
/// silu, sigmoid, tanh, and add/sub/mul/div by a one-element constant or by a tensor of the
/// result's shape or broadcast to it; after a conv2d, constants only). A node joins at most
/// one call. Empty when library epilogues are unavailable.
std::vector<LibraryCall> match_library_epilogues(const ir::Graph& g);

/// Why the code generator does not lower this node (the op, its attributes, dtypes and
/// devices), or nullopt when it does. Such a node runs as an eager call; the fusion log says
/// why (`eager: %N op: reason`).
std::optional<std::string> no_lowering(const ir::Node& n);
bool is_lowerable(const ir::Node& n);

/// Groups the nodes of a graph (see docs/ir.md, "Fusion", for the rules). Legality: a merge
/// never creates a cycle between steps; a cost rule inlines a producer into a consumer that
/// reads it at other indices (a broadcast, a view) only when that producer has no other use.
FusionResult fuse(const ir::Graph& g, const FusionOptions& options = {});

} // namespace kiln::passes
