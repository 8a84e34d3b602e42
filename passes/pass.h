// The pass manager: named passes over a Graph, straight pipelines, logging, timing, verifying.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "runtime/error.h"

namespace kiln::passes {

struct FusionResult;

/// What a pass may read besides the graph, and where it reports. One per pipeline run.
struct PassContext {
  /// Set by a pass that changed the graph (the manager prints IR only after those).
  bool changed = false;
  /// Verify after every pass (always on in debug builds).
  bool verify_each = false;
  /// Print the IR after every pass, changed or not (`--print-after-all`).
  bool print_after_all = false;
  /// Print the IR after each pass that changed it, with the pass's time (`KILN_LOGS=passes`).
  bool log_passes = false;
  /// Where logs go (stderr when null).
  std::ostream* log = nullptr;
  /// Set by the `fuse` pass: the graph's fusion groups (its nodes are the graph's, so no
  /// pass may run after it).
  std::shared_ptr<const FusionResult> fusion;
};

using PassFn = std::function<Expected<void>(ir::Graph&, PassContext&)>;

/// A named pass: kebab-case name (`--passes=constant-fold`), one-line summary.
struct PassInfo {
  std::string name;
  std::string summary;
  PassFn run;
};

/// Every pass kiln knows, in a stable order (for `kiln opt` and error messages).
const std::vector<PassInfo>& registered_passes();
/// The pass of that name, or null.
const PassInfo* find_pass(std::string_view name);

/// A straight list of passes, run in order.
class PassManager {
public:
  PassManager() = default;
  /// Appends a registered pass by name; an unknown name is a kiln::Error that lists the
  /// known ones.
  void add(std::string_view name);
  void add(PassInfo pass) { passes_.push_back(std::move(pass)); }
  /// Parses "a,b,c" into add() calls.
  static PassManager parse(std::string_view comma_list);
  const std::vector<PassInfo>& passes() const { return passes_; }

  /// Runs the passes in order. Stops at the first failing pass or failed verification,
  /// returning an error that names the pass.
  Expected<void> run(ir::Graph& g, PassContext& ctx) const;

private:
  std::vector<PassInfo> passes_;
};

} // namespace kiln::passes
