// Foreach kernels: which kernels join one, and the kernel they make.
#include "codegen/foreach.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/shape.h"

namespace kiln::codegen {

using ir::kernel::Index;
using ir::kernel::Instr;
using ir::kernel::Kernel;

std::optional<Kernel> flatten_pointwise(const Kernel& k) {
  if (!k.parts.empty() || !k.loops.empty() || !k.inner.empty()) return std::nullopt;
  const int64_t n = k.outer_numel();
  if (n <= 0) return std::nullopt;
  // The row-major position of a point of the outer domain.
  Index linear = Index::constant(0);
  int64_t stride = 1;
  for (size_t d = k.outer.size(); d-- > 0;) {
    linear = linear + Index::var(static_cast<int>(d)) * stride;
    stride *= k.outer[d];
  }
  Kernel flat = k;
  flat.outer = {n};
  for (Instr& in : flat.instrs) {
    if (in.arg_var >= 0) return std::nullopt;
    if (in.kind != Instr::Kind::load && in.kind != Instr::Kind::store) continue;
    const int64_t extent = k.buffers.at(static_cast<size_t>(in.buffer)).extent;
    if (in.index == linear && extent == n) {
      in.index = Index::var(0);
    } else if (in.index.is_constant() && in.index.offset() == 0 && extent == 1 &&
               in.kind == Instr::Kind::load) {
      in.index = Index::constant(0);
    } else {
      return std::nullopt;
    }
  }
  return flat;
}

namespace {

/// What kernels must share to join: the flattened body, names and sizes aside.
std::string body_key(const Kernel& flat) {
  Kernel anon = flat;
  anon.name.clear();
  anon.outer = {0};
  for (size_t b = 0; b < anon.buffers.size(); ++b) {
    anon.buffers[b].name = "b" + std::to_string(b);
    anon.buffers[b].extent = 0;
  }
  return anon.str();
}

/// The foreach kernel of `members` (indices into lowered, with their flattened kernels).
LoweredGroup make_foreach(std::span<const LoweredGroup> lowered, std::span<const size_t> members,
                          std::span<const Kernel> flat, const std::string& name) {
  LoweredGroup out;
  Kernel& k = out.kernel;
  k.name = name;
  std::unordered_map<const ir::Value*, int> input_of; // a value read by several parts: one buffer
  std::vector<std::vector<int>> maps(members.size());
  auto add = [&](const ir::kernel::Buffer& b, const ir::Value* v) {
    k.buffers.push_back(b);
    k.buffers.back().name = (b.output ? "out" : "in") + std::to_string(k.buffers.size() - 1);
    out.buffers.push_back(v);
    return static_cast<int>(k.buffers.size() - 1);
  };
  for (bool outputs : {false, true}) {
    for (size_t m = 0; m < members.size(); ++m) {
      const LoweredGroup& lg = lowered[members[m]];
      maps[m].resize(lg.buffers.size(), -1);
      for (size_t b = 0; b < lg.buffers.size(); ++b) {
        const ir::kernel::Buffer& buf = flat[m].buffers[b];
        if (buf.output != outputs) continue;
        if (!outputs) {
          auto [it, fresh] = input_of.try_emplace(lg.buffers[b], -1);
          if (fresh) it->second = add(buf, lg.buffers[b]);
          maps[m][b] = it->second;
          auto& kb = k.buffers[static_cast<size_t>(it->second)];
          kb.extent = std::max(kb.extent, buf.extent);
        } else {
          maps[m][b] = add(buf, lg.buffers[b]);
        }
      }
    }
  }
  int64_t points = 0;
  for (size_t m = 0; m < members.size(); ++m) {
    k.parts.push_back({flat[m], maps[m]});
    k.parts.back().kernel.name = name + "_p" + std::to_string(m);
    points += flat[m].outer[0];
  }
  k.outer = {points};
  return out;
}

} // namespace

ForeachPlan form_foreach(const passes::FusionResult& fusion, std::vector<LoweredGroup>& lowered,
                         std::vector<Schedule>& schedules, const std::vector<bool>& in_cache,
                         int vector_bytes, const ScheduleOverride& fixed) {
  ForeachPlan plan;
  const size_t groups = fusion.groups.size();
  plan.run_as.resize(groups);
  for (size_t g = 0; g < groups; ++g)
    plan.run_as[g] = static_cast<int64_t>(g);
  plan.merged.assign(lowered.size(), false);
  // Where each group's step is, and the first step that reads each value.
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> at(groups, kNever);
  std::unordered_map<const ir::Value*, size_t> first_read;
  auto read = [&](const ir::Value* v, size_t k) { first_read.try_emplace(v, k); };
  for (size_t k = 0; k < fusion.order.size(); ++k) {
    const passes::FusionStep& fs = fusion.order[k];
    if (fs.library >= 0) {
      for (const ir::Value* v : fusion.library_calls[static_cast<size_t>(fs.library)].operands)
        read(v, k);
    } else if (fs.group >= 0) {
      const auto g = static_cast<size_t>(fs.group);
      at[g] = k;
      const LoweredGroup& lg = lowered[g];
      for (size_t b = 0; b < lg.buffers.size(); ++b)
        if (!lg.kernel.buffers[b].output) read(lg.buffers[b], k);
    } else if (fs.node != nullptr) {
      for (const ir::Value* v : fs.node->inputs())
        read(v, k);
    }
  }
  // The first step after a group's own that reads one of its results.
  auto first_use = [&](size_t g) {
    size_t first = kNever;
    const LoweredGroup& lg = lowered[g];
    for (size_t b = 0; b < lg.buffers.size(); ++b)
      if (lg.kernel.buffers[b].output)
        if (auto it = first_read.find(lg.buffers[b]); it != first_read.end())
          first = std::min(first, it->second);
    return first;
  };
  // Candidates by body, in step order; each body's runs split where a member's result is
  // read before the next member's step.
  struct Open {
    std::vector<size_t> members;
    std::vector<Kernel> flat;
    size_t read_at = kNever; // the members' first reader
  };
  std::map<std::string, Open> open;
  std::vector<Open> closed;
  for (size_t k = 0; k < fusion.order.size(); ++k) {
    const passes::FusionStep& fs = fusion.order[k];
    if (fs.group < 0 || fs.library >= 0) continue;
    const auto g = static_cast<size_t>(fs.group);
    if (in_cache[g]) continue;
    std::optional<Kernel> flat = flatten_pointwise(lowered[g].kernel);
    if (!flat) continue;
    Open& o = open[body_key(*flat)];
    if (!o.members.empty() && o.read_at <= k) {
      closed.push_back(std::move(o));
      o = Open{};
    }
    o.members.push_back(g);
    o.flat.push_back(std::move(*flat));
    o.read_at = std::min(o.read_at, first_use(g));
  }
  for (auto& [key, o] : open)
    closed.push_back(std::move(o));
  for (const Open& o : closed) {
    if (o.members.size() < 2) continue;
    const std::string name = "kiln_f" + std::to_string(plan.kernels);
    lowered.push_back(make_foreach(lowered, o.members, o.flat, name));
    // One schedule for every part: the largest part's.
    size_t largest = 0;
    for (size_t m = 1; m < o.flat.size(); ++m)
      if (o.flat[m].outer[0] > o.flat[largest].outer[0]) largest = m;
    Schedule s = choose_schedule(o.flat[largest], vector_bytes, fixed);
    s.stream = false;
    schedules.push_back(s);
    plan.merged.push_back(false);
    size_t last = o.members.front();
    for (size_t g : o.members) {
      plan.merged[g] = true;
      plan.run_as[g] = -1;
      if (at[g] > at[last]) last = g;
    }
    plan.run_as[last] = static_cast<int64_t>(lowered.size() - 1);
    ++plan.kernels;
    plan.members += o.members.size();
  }
  return plan;
}

} // namespace kiln::codegen
