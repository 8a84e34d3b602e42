// The table of registered passes and the default simplification pipeline.
#include "passes/fusion.h"
#include "passes/passes.h"

namespace kiln::passes {

const std::vector<PassInfo>& registered_passes() {
  // One entry per pass, kebab-case; `dce` and `cse` are the short names the user guide uses
  // (`kiln opt --passes=cse,dce`): the same functions under a second name.
  static const std::vector<PassInfo> kPasses = {
      {"canonicalize", "algebraic simplifications that keep results bit-identical", canonicalize},
      {"constant-fold", "evaluate nodes of constants with the eager kernels", constant_fold},
      {"common-subexpression-elimination", "merge equal nodes and equal constants",
       common_subexpression_elimination},
      {"dead-code-elimination", "remove unused nodes and constants", dead_code_elimination},
      {"cse", "short for common-subexpression-elimination", common_subexpression_elimination},
      {"dce", "short for dead-code-elimination", dead_code_elimination},
      {"channels-last", "store conv-net activations channels-last (NHWC) where oneDNN runs",
       channels_last},
      {"fuse", "group nodes into kernels (leaves the graph; last; kiln opt --print=kernels)",
       [](ir::Graph& g, PassContext& ctx) -> Expected<void> {
         ctx.fusion = std::make_shared<const FusionResult>(fuse(g));
         return {};
       }},
  };
  return kPasses;
}

PassManager default_pipeline() {
  PassManager pm;
  pm.add("canonicalize");
  pm.add("constant-fold");
  pm.add("common-subexpression-elimination");
  pm.add("dead-code-elimination");
  return pm;
}

} // namespace kiln::passes
