// shrink_program: greedy delta debugging of a failing program.
#include "tools/fuzz_shrink.h"

#include <algorithm>
#include <set>

#include "tools/fuzz_rules.h"

namespace kiln::tools {
namespace {

void replace_refs(Program& p, auto&& map) {
  for (Step& s : p.steps)
    for (ValueRef& r : s.operands)
      r = map(r);
  for (ValueRef& r : p.outputs)
    r = map(r);
}

/// Tries `candidate`; on success makes it the current program.
class Shrinker {
public:
  Shrinker(Program p, const StillFails& fails, int budget)
      : p_(std::move(p)), fails_(fails), budget_(budget) {}

  Program run() {
    keep_one_output();
    for (bool changed = true; changed && budget_ > 0;) {
      changed = drop_steps();
      changed = try_take(drop_unused_inputs(p_)) || changed;
      changed = shrink_sizes() || changed;
    }
    return std::move(p_);
  }

private:
  bool try_take(Program candidate) {
    if (budget_ <= 0 || program_text(candidate) == program_text(p_)) return false;
    --budget_;
    if (!fails_(candidate)) return false;
    p_ = std::move(candidate);
    return true;
  }

  void keep_one_output() {
    if (p_.outputs.size() < 2) return;
    for (ValueRef r : std::vector<ValueRef>(p_.outputs)) {
      Program c = p_;
      c.outputs = {r};
      if (try_take(std::move(c))) return;
    }
  }

  bool drop_steps() {
    bool changed = false;
    for (size_t k = p_.steps.size(); k-- > 0;) {
      const Rule* rule = find_rule(p_.steps[k].rule);
      changed = try_take(drop_step(p_, k, rule && rule->traits.in_place)) || changed;
    }
    return changed;
  }

  bool shrink_sizes() {
    std::set<int64_t, std::greater<>> sizes;
    for (const ProgramInput& in : p_.inputs)
      for (int64_t d : in.sizes)
        if (d > 1) sizes.insert(d);
    bool changed = false;
    for (int64_t v : sizes)
      for (int64_t w : {int64_t{1}, v / 2}) {
        if (w >= v) continue;
        Program c = p_;
        for (ProgramInput& in : c.inputs)
          std::replace(in.sizes.begin(), in.sizes.end(), v, w);
        if (try_take(std::move(c))) {
          changed = true;
          break;
        }
      }
    return changed;
  }

  Program p_;
  const StillFails& fails_;
  int budget_;
};

} // namespace

Program drop_step(const Program& p, size_t k, bool in_place) {
  Program c = p;
  const Step& s = p.steps[k];
  ValueRef replacement = s.operands.empty() ? ValueRef{} : s.operands[0];
  if (!in_place || s.operands.empty()) {
    replacement = {true, static_cast<int>(c.inputs.size())};
    c.inputs.push_back({s.sizes, s.dtype, Layout::contiguous});
  }
  c.steps.erase(c.steps.begin() + static_cast<int64_t>(k));
  const int dropped = static_cast<int>(k);
  replace_refs(c, [&](ValueRef r) {
    if (r.input || r.index < dropped) return r;
    if (r.index == dropped) return replacement;
    return ValueRef{false, r.index - 1};
  });
  return c;
}

Program drop_unused_inputs(const Program& p) {
  std::vector<bool> used(p.inputs.size(), false);
  for (const Step& s : p.steps)
    for (ValueRef r : s.operands)
      if (r.input) used[static_cast<size_t>(r.index)] = true;
  for (ValueRef r : p.outputs)
    if (r.input) used[static_cast<size_t>(r.index)] = true;
  Program c = p;
  c.inputs.clear();
  std::vector<int> renumber(p.inputs.size(), -1);
  for (size_t k = 0; k < p.inputs.size(); ++k)
    if (used[k]) {
      renumber[k] = static_cast<int>(c.inputs.size());
      c.inputs.push_back(p.inputs[k]);
    }
  replace_refs(c, [&](ValueRef r) {
    return r.input ? ValueRef{true, renumber[static_cast<size_t>(r.index)]} : r;
  });
  return c;
}

Program shrink_program(Program p, const StillFails& fails, int budget) {
  return Shrinker(std::move(p), fails, budget).run();
}

} // namespace kiln::tools
