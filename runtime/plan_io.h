// A Plan as bytes and back: what an ahead-of-time compiled model carries besides its kernels'
// code (`kiln aot`, include/kiln/kiln_aot.h). The bytes hold everything Plan::run uses (slots,
// constants, the caller's inputs, kernel calls, steps with their attributes, epilogues and
// attention calls, outputs, writes, the memory plan) and name each generated kernel by its
// symbol, which the loader resolves (in a library, the kernels linked into it).
//
// Loading checks what it reads: malformed bytes (truncated, a bad magic or version, an index
// out of range, an unknown op) are a kiln::Error naming what is wrong, never a crash.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attention.h"
#include "runtime/epilogue.h"
#include "runtime/plan.h"

namespace kiln {

/// The bytes of `plan`.
std::string save_plan(const Plan& plan);

/// A plan loaded from bytes, with what its steps point into.
struct LoadedPlan {
  Plan plan;
  std::deque<Attrs> attrs;
  std::deque<Epilogue> epilogues;
  std::deque<AttentionCall> attention;
};

/// A kernel's entry by its symbol; null when there is none of that name.
using KernelResolver = std::function<KernelEntry(std::string_view name)>;

/// The plan `bytes` hold, its kernels resolved by name. Throws kiln::Error on malformed bytes
/// or a kernel the resolver does not know.
std::unique_ptr<LoadedPlan> load_plan(std::string_view bytes, const KernelResolver& resolve);

} // namespace kiln
