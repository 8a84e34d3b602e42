// The pass manager: runs a straight list of passes, logging, timing and verifying.
#include <chrono>
#include <iostream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace kiln::passes {

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : registered_passes())
    if (p.name == name) return &p;
  return nullptr;
}

void PassManager::add(std::string_view name) {
  const PassInfo* p = find_pass(name);
  if (!p) {
    std::string known;
    for (const PassInfo& q : registered_passes())
      known += (known.empty() ? "" : ", ") + q.name;
    throw Error::without_location(
        detail::str("unknown pass '", name, "'; the known passes are: ", known));
  }
  passes_.push_back(*p);
}

PassManager PassManager::parse(std::string_view list) {
  PassManager pm;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    if (!name.empty()) pm.add(name);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return pm;
}

Expected<void> PassManager::run(ir::Graph& g, PassContext& ctx) const {
#ifndef NDEBUG
  const bool verify = true;
#else
  const bool verify = ctx.verify_each;
#endif
  std::ostream& log = ctx.log ? *ctx.log : std::cerr;
  for (const PassInfo& p : passes_) {
    if (ctx.fusion)
      return Error::without_location(detail::str(
          "pass '", p.name, "' after 'fuse': fusion groups the graph as it is, so it comes last"));
    ctx.changed = false;
    auto start = std::chrono::steady_clock::now();
    Expected<void> r = p.run(g, ctx);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r)
      return Error::without_location(detail::str("pass '", p.name, "': ", r.error().message()));
    if (verify) {
      if (auto v = ir::verify(g); !v)
        return Error::without_location(
            detail::str("verifier failed after pass '", p.name, "': ", v.error().message()));
    }
    if (ctx.print_after_all || (ctx.log_passes && ctx.changed)) {
      log << "// ----- IR after " << p.name << " (" << (ctx.changed ? "changed" : "unchanged")
          << ", " << ms << " ms) -----\n";
      ir::print(log, g);
    }
  }
  return {};
}

} // namespace kiln::passes
