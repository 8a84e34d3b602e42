// The memory plan of a runtime Plan: which results live in one arena per run, at which
// offsets (runtime/plan.h, "Memory plan"): a buffer lives from the step that defines it to
// the last read of it or of any view of it; buffers whose lifetimes do not meet share bytes,
// placed largest first at the lowest offset free for their lifetime; a kernel result may
// take the bytes of an operand that dies at that step when the kernel allows it.
#include "codegen/memory_plan.h"

#include <algorithm>

#include "runtime/allocator.h"
#include "runtime/attention.h"
#include "runtime/ops/op.h"
#include "runtime/union_find.h"

namespace kiln::codegen {
namespace {

size_t aligned(size_t nbytes) {
  return (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
}

/// The bytes of one or more buffers that share them (in place), alive over steps
/// [first, last].
struct Block {
  int64_t first = 0, last = 0;
  size_t nbytes = 0, offset = 0;
};

/// Places blocks largest first, each at the lowest offset free over its lifetime; returns
/// the arena's size.
size_t place_blocks(std::vector<Block>& blocks) {
  size_t arena = 0;
  std::vector<size_t> order(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b)
    order[b] = b;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].nbytes > blocks[b].nbytes; });
  std::vector<size_t> placed;
  for (size_t b : order) {
    Block& me = blocks[b];
    std::vector<std::pair<size_t, size_t>> busy; // [offset, end) of blocks alive with me
    for (size_t o : placed)
      if (blocks[o].first <= me.last && me.first <= blocks[o].last)
        busy.push_back({blocks[o].offset, blocks[o].offset + blocks[o].nbytes});
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + me.nbytes <= lo) break;
      offset = std::max(offset, hi);
    }
    me.offset = offset;
    arena = std::max(arena, offset + me.nbytes);
    placed.push_back(b);
  }
  return arena;
}

/// The writes whose source a generated kernel can compute straight into the target input
/// (Plan::set_in_place_writes): the source is that kernel's result, written by no other write
/// and not an output; the target is written once, and neither it nor any view of it (its
/// alias class) is read after that kernel, read by it other than where it may write over it,
/// an output, or another write's source.
std::vector<std::pair<size_t, size_t>> in_place_writes(const Plan& plan,
                                                       std::span<const int64_t> def,
                                                       std::span<const int64_t> end,
                                                       UnionFind& classes) {
  const std::span<const Plan::Step> steps = plan.steps();
  const std::span<const Plan::Write> writes = plan.writes();
  auto count = [&](size_t s, size_t Plan::Write::*field) {
    return std::count_if(writes.begin(), writes.end(),
                         [&](const Plan::Write& w) { return w.*field == s; });
  };
  std::vector<std::pair<size_t, size_t>> out;
  for (const Plan::Write& w : writes) {
    const size_t t = w.target, s = w.source;
    const size_t cls = classes.find(t);
    if (count(t, &Plan::Write::target) != 1 || count(s, &Plan::Write::source) != 1) continue;
    if (def[s] < 0) continue;
    const auto k = static_cast<size_t>(def[s]);
    const Plan::Step& st = steps[k];
    if (st.kernel < 0 || end[cls] > static_cast<int64_t>(k)) continue;
    const auto i = static_cast<size_t>(std::find(st.results.begin(), st.results.end(), s) -
                                       st.results.begin());
    bool ok = i < st.results.size();
    for (size_t s2 : plan.outputs())
      ok = ok && s2 != s && classes.find(s2) != cls;
    for (const Plan::Write& o : writes)
      ok = ok && (&o == &w || classes.find(o.source) != cls);
    for (size_t j = 0; ok && j < st.operands.size(); ++j)
      if (classes.find(st.operands[j]) == cls)
        ok = st.operands[j] == t &&
             std::find(st.may_reuse.begin(), st.may_reuse.end(), std::pair<size_t, size_t>{i, j}) !=
                 st.may_reuse.end();
    if (ok) out.emplace_back(s, t);
  }
  return out;
}

} // namespace

void plan_memory(Plan& plan) {
  using Placement = Plan::Placement;
  const size_t num_slots = plan.num_slots();
  const std::span<const Plan::Step> steps = plan.steps();
  std::vector<Placement> placement(num_slots);
  Plan::MemoryPlan memory;
  // What the caller sees (outputs, writes' targets and sources) is never planned.
  std::vector<bool> keep(num_slots, false);
  for (size_t s : plan.outputs())
    keep.at(s) = true;
  for (const Plan::Write& w : plan.writes())
    keep.at(w.target) = keep.at(w.source) = true;
  // Alias classes: a view's result shares storage with its operands.
  UnionFind classes(num_slots);
  auto find = [&](size_t s) { return classes.find(s); };
  std::vector<int64_t> def(num_slots, -1);
  for (size_t k = 0; k < steps.size(); ++k) {
    const Plan::Step& st = steps[k];
    auto place = [&](size_t slot, IntList sizes, IntList strides, DType dtype) {
      KILN_CHECK(strides.empty() || is_dense(sizes, strides), "plan: result of step ", k,
                 " has a layout that is not dense: sizes ", shape_str(sizes), ", strides ",
                 shape_str(strides));
      placement[slot] = {true,
                         0,
                         static_cast<size_t>(numel_of(sizes) * itemsize(dtype)),
                         Shape(sizes.begin(), sizes.end()),
                         Shape(strides.begin(), strides.end()),
                         dtype};
      def[slot] = static_cast<int64_t>(k);
    };
    if (st.kernel >= 0) {
      const Plan::KernelCall& call = plan.kernels()[static_cast<size_t>(st.kernel)];
      for (size_t i = 0; i < st.results.size(); ++i)
        place(st.results[i], call.outputs[i].sizes, call.outputs[i].strides, call.outputs[i].dtype);
    } else if (st.epilogue) {
      place(st.results[0], st.epilogue->sizes, st.epilogue->strides, st.epilogue->dtype);
    } else if (st.attention) {
      const Epilogue& ep = st.attention->out;
      place(st.results[0], ep.sizes, ep.strides, ep.dtype);
    } else if (schema(st.op).kind == OpKind::view) {
      for (size_t r : st.results)
        for (size_t o : st.operands)
          classes.unite(r, o);
    }
    // Any other eager call returns fresh tensors.
  }
  // A class lives until the last read of any member; one the caller sees is not planned.
  std::vector<int64_t> end(num_slots, -1);
  std::vector<char> escapes(num_slots, 0);
  for (size_t k = 0; k < steps.size(); ++k)
    for (size_t s : steps[k].operands)
      end[find(s)] = std::max(end[find(s)], static_cast<int64_t>(k));
  for (size_t s = 0; s < num_slots; ++s)
    if (keep[s]) escapes[find(s)] = 1;
  std::vector<Block> blocks;
  std::vector<int64_t> block_of(num_slots, -1);
  for (size_t k = 0; k < steps.size(); ++k) {
    const Plan::Step& st = steps[k];
    std::vector<size_t> taken; // operands written over at this step
    for (size_t i = 0; i < st.results.size(); ++i) {
      const size_t r = st.results[i];
      Placement& p = placement[r];
      if (!p.planned) continue;
      if (escapes[find(r)]) {
        p.planned = false;
        continue;
      }
      const int64_t last = std::max(end[find(r)], def[r]);
      ++memory.buffers;
      memory.planned_bytes += aligned(p.nbytes);
      // In place: an operand buffer of the same size whose class dies here.
      int64_t reuse = -1;
      for (auto [res, op] : st.may_reuse) {
        if (res != i) continue;
        const size_t o = st.operands.at(op);
        if (block_of[o] < 0 || end[find(o)] != static_cast<int64_t>(k) ||
            placement[o].nbytes != p.nbytes ||
            std::find(taken.begin(), taken.end(), o) != taken.end())
          continue;
        reuse = block_of[o];
        taken.push_back(o);
        break;
      }
      if (reuse >= 0) {
        Block& b = blocks[static_cast<size_t>(reuse)];
        b.last = std::max(b.last, last);
        block_of[r] = reuse;
        ++memory.in_place;
        continue;
      }
      block_of[r] = static_cast<int64_t>(blocks.size());
      blocks.push_back({static_cast<int64_t>(k), last, aligned(p.nbytes), 0});
    }
  }
  plan.set_in_place_writes(in_place_writes(plan, def, end, classes));
  memory.arena_bytes = place_blocks(blocks);
  for (size_t s = 0; s < num_slots; ++s)
    if (placement[s].planned) placement[s].offset = blocks[static_cast<size_t>(block_of[s])].offset;
  plan.set_memory(std::move(placement), memory);
}

} // namespace kiln::codegen
