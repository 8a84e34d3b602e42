// plan_reuse: value numbering across a kernel's inner loops, then, loop by loop, what each
// loop must compute and what it can load from an earlier loop's stash.
#include "codegen/cpu/reuse_plan.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

namespace kiln::codegen::cpu {
namespace {

using ir::kernel::Instr;
using ir::kernel::Kernel;

/// Value numbers: instructions with one number compute one value at every inner point.
/// A load's number includes the count of loops with stores before it, so that no value read
/// before a store is taken for one read after it (a kernel may write over its input).
class ValueNumbers {
public:
  int number(const Kernel& k, int id, int store_epoch) {
    const Instr& in = k.instrs[static_cast<size_t>(id)];
    if (in.kind == Instr::Kind::reduce || in.kind == Instr::Kind::store) return fresh();
    std::string key;
    auto put = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(in.kind);
    put(in.op);
    put(in.dtype);
    put(in.value);
    put(in.ivalue);
    put(in.arg_var);
    for (int a : in.args)
      put(vn_.at(static_cast<size_t>(a)));
    if (in.kind == Instr::Kind::load) {
      put(in.buffer);
      put(store_epoch);
      key += in.index.str();
    }
    auto [it, inserted] = table_.try_emplace(std::move(key), next_);
    if (inserted) ++next_;
    return it->second;
  }
  int fresh() { return next_++; }
  std::vector<int> vn_;

private:
  std::unordered_map<std::string, int> table_;
  int next_ = 0;
};

bool stashable(const Instr& in) {
  return (in.kind == Instr::Kind::op || in.kind == Instr::Kind::cast) && in.dtype != DType::bool_;
}

} // namespace

ReusePlan plan_reuse(const Kernel& k, int min_repeated) {
  ReusePlan plan;
  const size_t n = k.instrs.size();
  // Value numbers in emission order: outer-level instructions and loop bodies as the items
  // run them.
  ValueNumbers vns;
  vns.vn_.assign(n, -1);
  std::vector<int> loop_of(n, -1); // the item index of the loop an instruction is in
  int epoch = 0;
  int repeated = 0, in_loops = 0, costly = 0;
  std::unordered_map<int, int> first_loop; // value number -> first loop computing it
  for (size_t item = 0; item < k.items.size(); ++item) {
    const auto& it = k.items[item];
    if (it.instr >= 0) {
      const auto id = static_cast<size_t>(it.instr);
      vns.vn_[id] = vns.number(k, it.instr, epoch);
      if (k.instrs[id].kind == Instr::Kind::store) ++epoch;
      continue;
    }
    bool stores = false;
    for (int id : k.loops[static_cast<size_t>(it.loop)].body) {
      const auto i = static_cast<size_t>(id);
      vns.vn_[i] = vns.number(k, id, epoch);
      loop_of[i] = static_cast<int>(item);
      stores = stores || k.instrs[i].kind == Instr::Kind::store;
      ++in_loops;
      auto [f, inserted] = first_loop.try_emplace(vns.vn_[i], static_cast<int>(item));
      if (!inserted && f->second != static_cast<int>(item)) {
        ++repeated;
        const Instr& in = k.instrs[i];
        if (in.kind == Instr::Kind::op && op_traits(in.op).costly) ++costly;
      }
    }
    if (stores) ++epoch;
  }
  if (costly == 0 && (repeated < min_repeated || 2 * repeated < in_loops)) return plan;

  plan.enabled = true;
  plan.compute.assign(n, true);
  plan.store_slot.assign(n, -1);
  plan.load_slot.assign(n, -1);
  // Loop by loop: from the folds and stores back through the operands, stopping at values an
  // earlier loop computed (loaded from its stash) and at outer-level values.
  std::unordered_map<int, int> producer; // value number -> instruction that stashes it
  std::vector<int> last_reader(n, -1);   // producer instruction -> last loop loading it
  std::vector<int> stashed_from(n, -1);  // reader instruction -> producer instruction
  std::vector<char> visited(n, 0);
  std::vector<int> stack;
  for (size_t item = 0; item < k.items.size(); ++item) {
    const auto& it = k.items[item];
    if (it.loop < 0) continue;
    const auto& body = k.loops[static_cast<size_t>(it.loop)].body;
    for (int id : body) {
      plan.compute[static_cast<size_t>(id)] = false;
      const Instr::Kind kind = k.instrs[static_cast<size_t>(id)].kind;
      if (kind == Instr::Kind::reduce || kind == Instr::Kind::store) stack.push_back(id);
    }
    while (!stack.empty()) {
      const auto id = static_cast<size_t>(stack.back());
      stack.pop_back();
      if (visited[id] || loop_of[id] != static_cast<int>(item)) continue;
      visited[id] = 1;
      const Instr& in = k.instrs[id];
      if (stashable(in)) {
        if (auto p = producer.find(vns.vn_[id]); p != producer.end()) {
          stashed_from[id] = p->second;
          last_reader[static_cast<size_t>(p->second)] = static_cast<int>(item);
          continue;
        }
      }
      plan.compute[id] = true;
      for (int a : in.args)
        stack.push_back(a);
    }
    // What this loop computes, later loops may load.
    for (int id : body)
      if (plan.compute[static_cast<size_t>(id)] && stashable(k.instrs[static_cast<size_t>(id)]))
        producer.try_emplace(vns.vn_[static_cast<size_t>(id)], id);
  }
  // Slots: one per stashed value, reused (same dtype) once the value's last reader has run.
  struct Live {
    int end;
    int slot;
  };
  std::vector<Live> live;
  std::vector<int> free_slots;
  for (size_t item = 0; item < k.items.size(); ++item) {
    const auto& it = k.items[item];
    if (it.loop < 0) continue;
    // Slots whose readers all ran before this loop are free again.
    for (size_t j = 0; j < live.size();) {
      if (live[j].end < static_cast<int>(item)) {
        free_slots.push_back(live[j].slot);
        live[j] = live.back();
        live.pop_back();
      } else {
        ++j;
      }
    }
    for (int id : k.loops[static_cast<size_t>(it.loop)].body) {
      const auto i = static_cast<size_t>(id);
      if (last_reader[i] < 0) continue;
      const DType t = k.instrs[i].dtype;
      auto f = std::find_if(free_slots.begin(), free_slots.end(),
                            [&](int s) { return plan.slots[static_cast<size_t>(s)] == t; });
      int slot;
      if (f != free_slots.end()) {
        slot = *f;
        free_slots.erase(f);
      } else {
        slot = static_cast<int>(plan.slots.size());
        plan.slots.push_back(t);
      }
      plan.store_slot[i] = slot;
      live.push_back({last_reader[i], slot});
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (stashed_from[i] >= 0)
      plan.load_slot[i] = plan.store_slot[static_cast<size_t>(stashed_from[i])];
  return plan;
}

} // namespace kiln::codegen::cpu
