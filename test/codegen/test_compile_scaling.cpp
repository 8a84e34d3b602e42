// What compile_kernels does for compile time (docs/performance.md, "Compile time"): the
// reuse plan across inner loops, out-of-line vector math, identical kernels compiled once and
// the short pipeline for large modules change no result: every kernel gives, bit for bit,
// what the plain code (all math inline, O3, each kernel its own function) gives.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/kernel_codegen.h"
#include "codegen/cpu/object_check.h"
#include "codegen/cpu/reuse_plan.h"
#include "codegen/lower_group.h"
#include "ir/parser.h"
#include "passes/fusion.h"

using namespace kiln::codegen::cpu;
using kiln::ir::kernel::Kernel;

namespace {

/// `n` ops, tanh and softmax alternately, on f32[5,37] (vector steps and scalar tails).
std::string chain_program(int n) {
  std::ostringstream s;
  s << "graph @chain {\n  %0 : f32[5,37] = input \"x\"\n";
  int last = 0, k = 1;
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      s << "  %" << k << " : f32[5,37] = tanh(%" << last << ")\n";
      last = k++;
      continue;
    }
    s << "  %" << k << " : f32[5,1] = amax(%" << last << ") {dims = [1], keepdim = true}\n"
      << "  %" << k + 1 << " : f32[5,37] = sub(%" << last << ", %" << k << ")\n"
      << "  %" << k + 2 << " : f32[5,37] = exp(%" << k + 1 << ")\n"
      << "  %" << k + 3 << " : f32[5,1] = sum(%" << k + 2
      << ") {dims = [-1], keepdim = true, dtype = f32}\n"
      << "  %" << k + 4 << " : f32[5,37] = div(%" << k + 2 << ", %" << k + 3 << ")\n";
    last = k + 4;
    k += 5;
  }
  s << "  return %" << last << "\n}\n";
  return s.str();
}

/// `n` cheap pointwise ops (mul by x and add x alternately) on f32[5,37], then a variance-like
/// tail: s1 = sum(c), d = c - s1, s2 = sum(d * d), d / s2. Two reductions in sequence, one
/// kernel, and each of its three loops reads the chain: the lowering recomputes it in each
/// (nothing costly to stash). Chains of softmaxes no longer fuse into one kernel (fusion runs
/// at most two reductions in sequence), so this is what leaves the reuse plan work.
std::string prologue_program(int n) {
  std::ostringstream s;
  s << "graph @prologue {\n  %0 : f32[5,37] = input \"x\"\n";
  int last = 0, k = 1;
  for (int i = 0; i < n; ++i, last = k++)
    s << "  %" << k << " : f32[5,37] = " << (i % 2 ? "add(%" : "mul(%") << last << ", %0)\n";
  s << "  %" << k << " : f32[5,1] = sum(%" << last
    << ") {dims = [1], keepdim = true, dtype = f32}\n"
    << "  %" << k + 1 << " : f32[5,37] = sub(%" << last << ", %" << k << ")\n"
    << "  %" << k + 2 << " : f32[5,37] = mul(%" << k + 1 << ", %" << k + 1 << ")\n"
    << "  %" << k + 3 << " : f32[5,1] = sum(%" << k + 2
    << ") {dims = [1], keepdim = true, dtype = f32}\n"
    << "  %" << k + 4 << " : f32[5,37] = div(%" << k + 1 << ", %" << k + 3 << ")\n"
    << "  return %" << k + 4 << "\n}\n";
  return s.str();
}

/// Every polynomial op of vector_math on `dtype`, summed, then a pow: one pointwise kernel.
std::string math_program(const char* dtype) {
  std::ostringstream s;
  s << "graph @math {\n  %0 : " << dtype << "[5,37] = input \"x\"\n";
  int acc = -1, k = 1;
  for (const char* op : {"exp", "log", "tanh", "erf", "sigmoid", "sin", "cos", "exp", "tanh"}) {
    s << "  %" << k << " : " << dtype << "[5,37] = " << op << "(%0)\n";
    if (acc < 0) {
      acc = k++;
      continue;
    }
    s << "  %" << k + 1 << " : " << dtype << "[5,37] = add(%" << acc << ", %" << k << ")\n";
    acc = k + 1;
    k += 2;
  }
  s << "  %" << k << " : " << dtype << "[5,37] = pow(%0, %" << acc << ")\n";
  s << "  return %" << k << "\n}\n";
  return s.str();
}

struct Lowered {
  std::vector<Kernel> kernels;
  std::vector<kiln::codegen::Schedule> schedules;
};

void lower(const std::string& text, int lanes, Lowered& out) {
  kiln::Expected<std::unique_ptr<kiln::ir::Graph>> g = kiln::ir::parse_graph(text);
  INFO((g ? std::string() : g.error().message()));
  REQUIRE(g);
  kiln::passes::FusionResult fusion = kiln::passes::fuse(**g);
  kiln::codegen::ScheduleOverride o;
  o.lanes = lanes;
  for (const auto& group : fusion.groups) {
    std::string name = "k"; // (a concatenation here trips GCC 12's -Wstringop-overflow)
    name += std::to_string(out.kernels.size());
    out.kernels.push_back(kiln::codegen::lower_group(group, name).kernel);
    out.schedules.push_back(kiln::codegen::choose_schedule(out.kernels.back(), 64, o));
  }
}

/// Runs every kernel of `object` on the same inputs (values in [-4, 4] with NaN, infinities
/// and signed zeros among them) and returns each kernel's output bytes.
std::vector<std::string> run_all(const std::string& object, const Lowered& l) {
  std::shared_ptr<JitLibrary> lib = load_object(object, "scaling");
  std::vector<std::string> results;
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    const Kernel& k = l.kernels[i];
    std::vector<std::vector<double>> storage; // 8-byte aligned, large enough for any dtype
    std::vector<char*> ptrs;
    uint64_t state = 12345;
    for (const auto& b : k.buffers) {
      storage.emplace_back(static_cast<size_t>(b.extent) + 1, 0.0);
      auto* p = reinterpret_cast<char*>(storage.back().data());
      ptrs.push_back(p);
      if (b.output) continue;
      for (int64_t e = 0; e < b.extent; ++e) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        double x = static_cast<double>(state >> 11) / 9007199254740992.0 * 8 - 4;
        if (e % 29 == 3) x = std::numeric_limits<double>::quiet_NaN();
        if (e % 31 == 5) x = e % 2 ? std::numeric_limits<double>::infinity() : -0.0;
        if (b.dtype == kiln::DType::f64) {
          std::memcpy(p + 8 * e, &x, 8);
        } else {
          const auto f = static_cast<float>(x);
          std::memcpy(p + 4 * e, &f, 4);
        }
      }
    }
    auto entry = reinterpret_cast<KernelEntry>(lib->lookup(k.name));
    entry(ptrs.data(), 0, l.schedules[i].rows(k));
    for (size_t b = 0; b < k.buffers.size(); ++b)
      if (k.buffers[b].output)
        results.emplace_back(ptrs[b], static_cast<size_t>(k.buffers[b].extent) *
                                          kiln::itemsize(k.buffers[b].dtype));
  }
  return results;
}

} // namespace

TEST_CASE("compile-time measures give the plain code's results bit for bit", "[codegen]") {
  for (int lanes : {1, 4, 8, 16}) {
    INFO("lanes " << lanes);
    Lowered l;
    lower(prologue_program(40), lanes, l);
    lower(chain_program(24), lanes, l); // twelve kernels, one body
    lower(math_program("f32"), lanes, l);
    lower(math_program("f64"), lanes, l);
    // A copy of the first kernel under another name: compiled once, as an alias.
    l.kernels.push_back(l.kernels.front());
    l.kernels.back().name = "k_copy";
    l.schedules.push_back(l.schedules.front());
    REQUIRE(plan_reuse(l.kernels.front()).enabled);

    CodegenOptions plain;
    plain.inline_math_limit = -1;
    plain.dedupe = false;
    plain.reuse = false;
    plain.large_module_instructions = -1;
    plain.parallel = 1;
    CodegenOptions all; // every measure, whatever the size
    all.inline_math_limit = 0;
    all.large_module_instructions = 0;
    all.parallel = 3; // three modules compiled at once: a bundle of three objects
    const std::vector<std::string> want =
        run_all(compile_kernels(l.kernels, l.schedules, "plain", host_target(), plain), l);
    const std::string bundle = compile_kernels(l.kernels, l.schedules, "all", host_target(), all);
    kiln::Expected<std::vector<std::string_view>> parts = split_objects(bundle);
    REQUIRE(parts);
    CHECK(parts->size() == 3);
    const std::vector<std::string> got = run_all(bundle, l);
    const std::vector<std::string> defaults =
        run_all(compile_kernels(l.kernels, l.schedules, "defaults"), l);
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("output " << i);
      CHECK(want[i] == got[i]);
      CHECK(want[i] == defaults[i]);
    }
    CHECK(want.front() == want.back()); // the alias runs the first kernel's code
  }
}

TEST_CASE("the reuse plan leaves kernels that recompute little alone", "[codegen]") {
  // One softmax of x * 2: its exp is stashed by the lowering already, and what each loop
  // computes again (a load and a multiply) costs less than a stash.
  Lowered l;
  lower(R"(graph @g {
  %x : f32[5,37] = input "x"
  %c : f32[] = full() {sizes = [], value = 2.0, dtype = f32}
  %y : f32[5,37] = mul(%x, %c)
  %m : f32[5,1] = amax(%y) {dims = [1], keepdim = true}
  %d : f32[5,37] = sub(%y, %m)
  %e : f32[5,37] = exp(%d)
  %s : f32[5,1] = sum(%e) {dims = [-1], keepdim = true, dtype = f32}
  %p : f32[5,37] = div(%e, %s)
  return %p
})",
        16, l);
  REQUIRE(l.kernels.size() == 1);
  CHECK_FALSE(plan_reuse(l.kernels.front()).enabled);
}

TEST_CASE("the reuse plan stashes a costly op each loop computes again", "[codegen]") {
  // tanh, then a softmax: both reduce loops compute tanh(x) (the map loop loads exp back
  // from the output).
  Lowered l;
  lower(chain_program(2), 16, l);
  REQUIRE(l.kernels.size() == 1);
  const Kernel& k = l.kernels.front();
  ReusePlan p = plan_reuse(k);
  REQUIRE(p.enabled);
  int tanhs = 0, computed_tanhs = 0;
  for (size_t i = 0; i < k.instrs.size(); ++i)
    if (k.instrs[i].kind == kiln::ir::kernel::Instr::Kind::op && k.instrs[i].op == kiln::Op::tanh) {
      ++tanhs;
      computed_tanhs += p.compute[i] ? 1 : 0;
    }
  CHECK(tanhs == 2);
  CHECK(computed_tanhs == 1);
}

TEST_CASE("the reuse plan computes each value of a long chain once per row", "[codegen]") {
  Lowered l;
  lower(prologue_program(120), 16, l);
  REQUIRE(l.kernels.size() == 1);
  const Kernel& k = l.kernels.front();
  ReusePlan p = plan_reuse(k);
  REQUIRE(p.enabled);
  int computed = 0;
  for (size_t i = 0; i < k.instrs.size(); ++i)
    computed += p.compute[i] ? 1 : 0;
  // The kernel computes the chain in each of its three loops; the plan computes each of the
  // chain's 120 values about once, plus the loads and the tail.
  CHECK(k.instrs.size() > 3 * 120);
  CHECK(computed < 120 + 30);
  CHECK(p.slots.size() <= 4); // slots are reused along the chain
}
