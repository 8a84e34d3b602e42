// Fusion: which nodes run together as one generated kernel. Every lowerable node starts as
// a group of its own; each consumer, in graph order, then tries to join the group of each
// producer it reads, by the first merge rule that applies (kRules), unless the rule refuses
// or the merge would create a cycle; last, pointwise groups over one domain that read the
// same value join (horizontal). order_steps turns the groups into the program's steps.
#include "passes/fusion.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "passes/fusion_groups.h"
#include "runtime/error.h"

namespace kiln::passes {

using ir::kernel::broadcast_index;
using ir::kernel::Domain;
using ir::kernel::IndexVec;
using ir::kernel::is_view;
using ir::kernel::view_source;

// ---- lowerability -------------------------------------------------------------------------

std::optional<std::string> no_lowering(const ir::Node& n) {
  // Kernels run where the result is (the CPU or a CUDA device). A CPU scalar (a 0-d tensor or
  // wrapped number) moves there with the plan's constants and inputs.
  const ir::Type& out = n.output()->type();
  for (const ir::Value* v : n.inputs())
    if (v->type().device() != out.device() && v->type().rank() != 0)
      return "operands on two devices";
  const OpTraits& traits = op_traits(n.op());
  if (n.schema().kind == OpKind::contraction)
    return "a contraction: its library call (oneDNN) or kiln's eager kernel";
  if (!traits.lowerable) return "the op has no lowering (ops.def traits: eager)";
  if (n.op() == Op::pow && !is_floating(out.dtype())) return "integer pow";
  if (!traits.is_fold()) return std::nullopt;
  const ir::Type& in = n.input(0)->type();
  if (traits.arg && in.rank() == 0) return "a 0-d operand (no dim to index along)";
  // An empty max or min is an error eagerly; an empty sum or product is its identity.
  if (in.numel() == 0 && traits.fold != OpTraits::Fold::sum && traits.fold != OpTraits::Fold::prod)
    return "an empty operand (the eager kernel reports the error)";
  return std::nullopt;
}

bool is_lowerable(const ir::Node& n) { return !no_lowering(n); }

// ---- the merge rules ----------------------------------------------------------------------

namespace {

/// A producer p and a consumer c that reads it (through `operand`, maybe a view of `src`),
/// in groups g1 and g2 with domains d1 and d2.
struct Candidate {
  Groups& groups;
  const ir::Node* p;
  const ir::Node* c;
  const ir::Value* operand;
  const ir::Value* src;
  int g1, g2;
  const Domain& d1;
  const Domain& d2;
  /// c reads p's result itself, at c's own index (no view between).
  bool direct() const { return operand == src; }
};

/// A way two groups may merge: when it applies (tried in kRules' order, the first that
/// applies decides), why it may still refuse (empty: merge), and which group's domain the
/// merged group iterates.
struct MergeRule {
  std::string_view name;
  bool (*applies)(const Candidate&);
  std::string (*refusal)(const Candidate&);
  enum class Keeps : uint8_t { producer, consumer } keeps;
};

std::string no_refusal(const Candidate&) { return {}; }

/// An epilogue reads the reduced value at the kernel's own outer index: the consumer's
/// group iterates S or the reduced shape.
std::string epilogue_refusal(const Candidate& x) {
  std::optional<IndexVec> at = x.d1.canonical(x.d2.shape);
  auto read_at_outer_index = [&](const ir::Value* v) {
    std::optional<IndexVec> want = x.d1.canonical(v->type().sizes());
    return at && want && broadcast_index(v->type().sizes(), *at) == *want;
  };
  if (!read_at_outer_index(x.src))
    return "the consumer's shape is not the reduction's domain or result";
  // Every other value of the reduction's group the consumer reads must be read there too:
  // the kernel computes them at its outer index only (a fuzz finding: a reduction's result,
  // and one element of a value after it through a slice, read by one consumer).
  for (const ir::Value* v : x.c->inputs()) {
    const ir::Value* src = view_source(v);
    if (src == x.src || !src->producer() || !x.groups.member(src->producer()) ||
        x.groups.group_of(src->producer()) != x.g1)
      continue;
    if (v != src || !read_at_outer_index(src))
      return "it also reads " + x.groups.label(src->producer()) +
             " of the reduction's group at another index";
  }
  return {};
}

/// A reduce loop recomputes, at each of its points, every value of its kernel it reads that
/// an earlier loop computed: a kernel whose folds run in a long sequence (a chain of
/// softmaxes) recomputes a prefix that grows with the chain. Two in sequence (softmax's max
/// then sum, layer_norm's mean then variance) is what one kernel holds.
constexpr int kMaxFoldsInSequence = 2;

/// Per member of group g (by position), the most folds of g in sequence on a path to it:
/// how many reduce loops must run before its value is known. Members come in graph order,
/// so producers come first.
std::unordered_map<const ir::Node*, int> fold_depths(Groups& groups, int g) {
  std::unordered_map<const ir::Node*, int> depth;
  for (int m : groups.members(g)) {
    const ir::Node* x = groups.node(m);
    int d = 0;
    for (const ir::Value* v : x->inputs())
      if (auto it = depth.find(view_source(v)->producer()); it != depth.end())
        d = std::max(d, it->second);
    depth[x] = d + (op_traits(x->op()).is_fold() ? 1 : 0);
  }
  return depth;
}

std::string sequence_refusal(const Candidate& x) {
  const int before = fold_depths(x.groups, x.g1).at(x.p);
  int after = 0;
  for (const auto& [node, d] : fold_depths(x.groups, x.g2))
    after = std::max(after, d);
  if (before + after <= kMaxFoldsInSequence) return {};
  return "its reductions would run " + std::to_string(before + after) +
         " in sequence, each recomputing what the ones before it read";
}

/// Inlining recomputes the producer at each index a reader asks for: not for a costly
/// producer that other nodes read too.
std::string inline_refusal(const Candidate& x) {
  std::vector<const ir::Node*> rs;
  bool escapes = false;
  Groups::readers(x.src, rs, escapes);
  if (x.groups.costly(x.g1) && rs.size() > 1)
    return "would recompute an expensive producer for each of its readers";
  // A lone copy its consumer reads many times over (through a broadcast: a generated GEMM's
  // B, copied row-major) is that operand's layout: inlined, every read would go back to the
  // strided source.
  if (x.p->op() == Op::copy && x.groups.members(x.g1).size() == 1 &&
      numel_of(x.d2.shape) > numel_of(x.src->type().sizes()))
    return "a copy read many times over is its operand's layout";
  return {};
}

constexpr MergeRule kRules[] = {
    // Pointwise into pointwise over the same domain.
    {"vertical",
     [](const Candidate& x) {
       return !x.d1.reduction && !x.d2.reduction && x.direct() && x.d1 == x.d2;
     },
     no_refusal, MergeRule::Keeps::consumer},
    // Pointwise into the reduction that reads it over its whole domain.
    {"prologue",
     [](const Candidate& x) {
       return !x.d1.reduction && x.d2.reduction && x.direct() && x.d1.shape == x.d2.shape;
     },
     no_refusal, MergeRule::Keeps::consumer},
    {"reductions over the same domain",
     [](const Candidate& x) { return x.d1.reduction && x.d2.reduction && x.d1 == x.d2; },
     sequence_refusal, MergeRule::Keeps::producer},
    // Pointwise after a reduction, reading it at the kernel's outer index.
    {"epilogue", [](const Candidate& x) { return x.d1.reduction && !x.d2.reduction && x.direct(); },
     epilogue_refusal, MergeRule::Keeps::producer},
    // The producer is read only here, at other indices (a broadcast or a view).
    {"inline",
     [](const Candidate& x) {
       return !x.d1.reduction && x.groups.only_output_is(x.g1, x.p, x.c) &&
              (!x.d2.reduction || x.d2.canonical(x.c->output()->type().sizes()));
     },
     inline_refusal, MergeRule::Keeps::consumer},
};

} // namespace

// ---- fuse ---------------------------------------------------------------------------------

namespace {

void refuse(const Groups& groups, const ir::Node* p, const ir::Node* c, const std::string& why,
            FusionResult& result) {
  result.log.push_back("not fused: " + groups.label(p) + " -> " + groups.label(c) + ": " + why);
}

/// Each consumer, in graph order, tries to join the group of each producer it reads: the
/// first rule of kRules that applies decides, unless it refuses or the merge makes a cycle.
void merge_producers(Groups& groups, FusionResult& result) {
  for (int k = 0; k < groups.size(); ++k) {
    const ir::Node* c = groups.node(k);
    if (!groups.member(c)) continue;
    for (const ir::Value* operand : c->inputs()) {
      const ir::Value* src = view_source(operand);
      const ir::Node* p = src->producer();
      if (!groups.member(p)) continue;
      const int g1 = groups.group_of(p), g2 = groups.group_of(c);
      if (g1 == g2) continue;
      const Candidate x{groups, p, c, operand, src, g1, g2, groups.domain(g1), groups.domain(g2)};
      const MergeRule* rule = nullptr;
      for (const MergeRule& r : kRules)
        if (r.applies(x)) {
          rule = &r;
          break;
        }
      if (!rule) {
        refuse(groups, p, c,
               src->type().sizes() == c->output()->type().sizes()
                   ? "domains differ"
                   : "the producer is read at other indices and also elsewhere",
               result);
        continue;
      }
      if (std::string why = rule->refusal(x); !why.empty()) {
        refuse(groups, p, c, why, result);
        continue;
      }
      if (groups.would_cycle(g1, g2)) {
        refuse(groups, p, c, "fusing would create a cycle through another step", result);
        continue;
      }
      Domain merged = rule->keeps == MergeRule::Keeps::producer ? x.d1 : x.d2;
      groups.merge(g1, g2, std::move(merged));
      result.log.push_back("fused (" + std::string(rule->name) + "): " + groups.label(p) + " -> " +
                           groups.label(c));
    }
  }
}

/// Horizontal: groups over the same domain that read the same value (a graph input or
/// another step's result, of more than one element), in the order of the values' numbers,
/// unless the merge makes a cycle.
void merge_horizontal(Groups& groups, FusionResult& result) {
  std::map<int64_t, std::vector<int>> readers; // value number -> member positions
  for (int k = 0; k < groups.size(); ++k) {
    if (!groups.member_at(k)) continue;
    for (const ir::Value* v : groups.node(k)->inputs()) {
      const ir::Value* src = view_source(v);
      if (src->producer() && groups.member(src->producer())) continue;
      if (src->type().numel() <= 1) continue;
      readers[groups.numbering()[src]].push_back(k);
    }
  }
  for (const auto& [number, users] : readers)
    for (size_t a = 0; a < users.size(); ++a)
      for (size_t b = a + 1; b < users.size(); ++b) {
        const int g1 = groups.find(users[a]), g2 = groups.find(users[b]);
        if (g1 == g2 || !(groups.domain(g1) == groups.domain(g2))) continue;
        if (groups.would_cycle(g1, g2)) continue;
        groups.merge(g1, g2, groups.domain(g1));
        result.log.push_back("fused (horizontal, both read %" + std::to_string(number) +
                             "): " + groups.label(groups.node(users[a])) + " and " +
                             groups.label(groups.node(users[b])));
      }
}

} // namespace

FusionResult fuse(const ir::Graph& g, const FusionOptions& options) {
  FusionResult result;
  Groups groups(g);
  // Library calls with epilogues take their pointwise tails before grouping does.
  if (options.fuse) result.library_calls = match_library_epilogues(g);
  std::unordered_map<const ir::Node*, int> absorbed, anchor_call;
  for (size_t c = 0; c < result.library_calls.size(); ++c) {
    const LibraryCall& call = result.library_calls[c];
    anchor_call[call.anchor] = static_cast<int>(c);
    std::string line = "library " + groups.label(call.anchor) + " + " + call.epilogue.str() + " ->";
    for (const ir::Node* x : call.nodes) {
      absorbed[x] = static_cast<int>(c);
      line += ' ';
      line += groups.label(x);
    }
    result.log.push_back(line);
  }
  for (int k = 0; k < groups.size(); ++k) {
    const ir::Node* x = groups.node(k);
    if (is_view(x) || absorbed.count(x)) continue;
    if (std::optional<std::string> why = no_lowering(*x)) {
      // An eager call: a library call (its log line above, or none without epilogues) or an
      // op the code generator does not lower.
      if (!anchor_call.count(x)) result.log.push_back("eager: " + groups.label(x) + ": " + *why);
      continue;
    }
    groups.add(k);
  }
  if (options.fuse) {
    merge_producers(groups, result);
    merge_horizontal(groups, result);
  }
  order_steps(groups, absorbed, anchor_call, result);
  for (size_t k = 0; k < result.groups.size(); ++k) {
    const FusionGroup& grp = result.groups[k];
    std::string line = "group " + std::to_string(k) + (grp.reduction ? " (reduction):" : ":");
    for (const ir::Node* m : grp.nodes) {
      line += ' ';
      line += groups.label(m);
    }
    line += ", stores " + std::to_string(grp.outputs.size());
    result.log.push_back(line);
  }
  return result;
}

} // namespace kiln::passes
