// Foreach kernels (codegen/foreach.h): which kernels join, the kernel they make, and the
// rules the verifier holds it to. Running them is test/frontend/test_foreach.cpp's.
#include <algorithm>
#include <catch2/catch.hpp>

#include "codegen/foreach.h"
#include "codegen/lower_group.h"
#include "ir/kernel/parser.h"
#include "ir/kernel/verifier.h"
#include "ir/parser.h"
#include "passes/fusion.h"

using namespace kiln;

namespace {

// Three updates of one body (p - g * lr, lr shared) over different shapes, one other body
// (exp), and one update that reads its parameter transposed (not one flat dim).
constexpr const char* kGraph = R"(graph @updates {
  %p1 : f32[16,8] = input "p1"
  %g1 : f32[16,8] = input "g1"
  %p2 : f32[8] = input "p2"
  %g2 : f32[8] = input "g2"
  %p3 : f32[3,5,2] = input "p3"
  %g3 : f32[3,5,2] = input "g3"
  %p4 : f32[6,4] = input "p4"
  %g4 : f32[4,6] = input "g4"
  %q : f32[8] = input "q"
  %lr : f32 = input "lr"
  %a1 : f32[16,8] = mul(%g1, %lr)
  %u1 : f32[16,8] = sub(%p1, %a1)
  %a2 : f32[8] = mul(%g2, %lr)
  %u2 : f32[8] = sub(%p2, %a2)
  %e : f32[8] = exp(%q)
  %a3 : f32[3,5,2] = mul(%g3, %lr)
  %u3 : f32[3,5,2] = sub(%p3, %a3)
  %pt : f32[4,6] = permute(%p4) {dims = [1, 0]}
  %a4 : f32[4,6] = mul(%g4, %lr)
  %u4 : f32[4,6] = sub(%pt, %a4)
  return %u1, %u2, %e, %u3, %u4
})";

} // namespace

TEST_CASE("foreach: kernels of one flat body join, the kernel has a part each", "[foreach]") {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(kGraph);
  REQUIRE(g);
  const passes::FusionResult fusion = passes::fuse(**g);
  std::vector<codegen::LoweredGroup> lowered;
  std::vector<codegen::Schedule> schedules;
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    lowered.push_back(codegen::lower_group(fusion.groups[k], "kiln_k" + std::to_string(k)));
    schedules.push_back(codegen::choose_schedule(lowered.back().kernel, 32));
  }
  REQUIRE(lowered.size() == 5);
  const std::vector<bool> in_cache(lowered.size(), false);
  const size_t groups = lowered.size();
  const codegen::ForeachPlan plan =
      codegen::form_foreach(fusion, lowered, schedules, in_cache, 32, {});
  CHECK(plan.kernels == 1);
  CHECK(plan.members == 3);
  REQUIRE(lowered.size() == groups + 1);
  REQUIRE(schedules.size() == groups + 1);
  const ir::kernel::Kernel& k = lowered.back().kernel;
  INFO(k.str());
  REQUIRE(ir::kernel::verify(k));
  REQUIRE(k.parts.size() == 3);
  CHECK(k.outer == std::vector<int64_t>{16 * 8 + 8 + 3 * 5 * 2});
  // Inputs p, g of each part and lr once; then the three outputs.
  CHECK(k.buffers.size() == 7 + 3);
  CHECK(std::count_if(k.buffers.begin(), k.buffers.end(),
                      [](const ir::kernel::Buffer& b) { return b.output; }) == 3);
  CHECK(lowered.back().buffers.size() == k.buffers.size());
  CHECK(schedules.back().rows(k) == schedules.back().rows(k.parts[0].kernel) +
                                        schedules.back().rows(k.parts[1].kernel) +
                                        schedules.back().rows(k.parts[2].kernel));
  // The members are not compiled; the last one's step runs the foreach, the others none.
  int runs = 0, skipped = 0;
  for (size_t grp = 0; grp < groups; ++grp) {
    if (plan.merged[grp]) {
      CHECK((plan.run_as[grp] == -1 || plan.run_as[grp] == static_cast<int64_t>(groups)));
      (plan.run_as[grp] == -1 ? skipped : runs)++;
    } else {
      CHECK(plan.run_as[grp] == static_cast<int64_t>(grp));
    }
  }
  CHECK(runs == 1);
  CHECK(skipped == 2);
  // A part's output may take its own parameter's buffer, never another part's.
  const ir::kernel::Part& p0 = k.parts[0];
  int out0 = -1, param0 = -1;
  for (size_t j = 0; j < p0.buffers.size(); ++j) {
    if (p0.kernel.buffers[j].output) out0 = p0.buffers[j];
    if (!p0.kernel.buffers[j].output && p0.kernel.buffers[j].extent == 16 * 8 &&
        p0.kernel.may_write_over(static_cast<int>(p0.buffers.size() - 1), static_cast<int>(j)))
      param0 = p0.buffers[j];
  }
  REQUIRE(out0 >= 0);
  REQUIRE(param0 >= 0);
  CHECK(k.may_write_over(out0, param0));
  const int param1 = k.parts[1].buffers[0];
  CHECK_FALSE(k.may_write_over(out0, param1));
  CHECK_THAT(k.str(), Catch::Contains(" part 2 buffers"));
  // The text form reads back as it was printed.
  Expected<ir::kernel::Kernel> parsed = ir::kernel::parse_kernel(k.str());
  REQUIRE(parsed);
  CHECK(parsed->str() == k.str());
  CHECK(ir::kernel::verify(*parsed));

  SECTION("the verifier holds a foreach kernel to its rules") {
    ir::kernel::Kernel bad = k;
    bad.parts[1].buffers.back() = out0; // an output two parts write
    CHECK_THAT(ir::kernel::verify(bad).error().message(), Catch::Contains("belongs to 2 parts"));
    bad = k;
    bad.outer = {k.outer[0] + 1};
    CHECK_THAT(ir::kernel::verify(bad).error().message(), Catch::Contains("the parts have"));
    bad = k;
    bad.parts[0].kernel.buffers[0].extent = 1 << 20; // larger than the kernel's buffer
    CHECK_THAT(ir::kernel::verify(bad).error().message(), Catch::Contains("is not buffer"));
  }
}

TEST_CASE("foreach: an input several parts read is never written over", "[foreach]") {
  // Two parts s * c over one point each, sharing c: alone, each may write its result over c.
  using ir::kernel::Index;
  using ir::kernel::Instr;
  ir::kernel::Kernel part;
  part.name = "part";
  part.outer = {1};
  part.buffers = {
      {"s", DType::f32, false, 1}, {"c", DType::f32, false, 1}, {"out", DType::f32, true, 1}};
  auto instr = [](Instr::Kind kind, std::vector<int> args, int buffer) {
    Instr in;
    in.kind = kind;
    in.op = Op::mul;
    in.args = std::move(args);
    in.buffer = buffer;
    if (buffer >= 0) in.index = Index::var(0);
    return in;
  };
  part.instrs = {instr(Instr::Kind::load, {}, 0), instr(Instr::Kind::load, {}, 1),
                 instr(Instr::Kind::op, {0, 1}, -1), instr(Instr::Kind::store, {2}, 2)};
  part.items = {{0, -1}, {1, -1}, {2, -1}, {3, -1}};
  REQUIRE(ir::kernel::verify(part));
  REQUIRE(part.may_write_over(2, 1));
  ir::kernel::Kernel k;
  k.name = "fe";
  k.outer = {2};
  k.buffers = {{"s1", DType::f32, false, 1},
               {"s2", DType::f32, false, 1},
               {"c", DType::f32, false, 1},
               {"o1", DType::f32, true, 1},
               {"o2", DType::f32, true, 1}};
  k.parts = {{part, {0, 2, 3}}, {part, {1, 2, 4}}};
  REQUIRE(ir::kernel::verify(k));
  CHECK(k.may_write_over(3, 0));       // its own input
  CHECK_FALSE(k.may_write_over(3, 2)); // c, which the other part reads too
  CHECK_FALSE(k.may_write_over(3, 1)); // another part's input
}

TEST_CASE("foreach: only pointwise kernels over their points in order flatten", "[foreach]") {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(kGraph);
  REQUIRE(g);
  const passes::FusionResult fusion = passes::fuse(**g);
  int flat = 0;
  for (const passes::FusionGroup& group : fusion.groups) {
    const ir::kernel::Kernel k = codegen::lower_group(group, "k").kernel;
    const std::optional<ir::kernel::Kernel> f = codegen::flatten_pointwise(k);
    if (!f) continue;
    ++flat;
    CHECK(f->outer == std::vector<int64_t>{k.outer_numel()});
    CHECK(ir::kernel::verify(*f));
  }
  CHECK(flat == 4); // all but the transposed read
}
