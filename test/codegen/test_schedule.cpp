// The schedule override (KILN_SCHEDULE, CompileOptions::schedule): its text form, its errors,
// and that the heuristic and the plan obey it.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

#include "codegen/schedule.h"
#include "frontend/frontend_testing.h"
#include "ir/kernel/kernel.h"

using namespace kiln;
using codegen::choose_schedule;
using codegen::parse_schedule_override;
using codegen::Schedule;
using codegen::ScheduleOverride;

namespace {

/// The loop IR of a one-op pointwise kernel over f32 or f64: enough for the heuristic.
ir::kernel::Kernel pointwise_kernel(DType t, int64_t n) {
  ir::kernel::Kernel k;
  k.outer = {n};
  ir::kernel::Instr in;
  in.kind = ir::kernel::Instr::Kind::op;
  in.dtype = t;
  in.op = Op::add;
  k.instrs.push_back(in);
  return k;
}

std::string error_of(std::string_view text) {
  try {
    (void)parse_schedule_override(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("schedule override: the text form parses and prints back") {
  CHECK(parse_schedule_override("").empty());
  ScheduleOverride o = parse_schedule_override("lanes=8,threads=3,grain=1");
  CHECK(o.lanes == 8);
  CHECK(o.threads == 3);
  CHECK(o.grain == 1);
  CHECK(o.str() == "lanes=8,threads=3,grain=1");
  CHECK(parse_schedule_override(o.str()).str() == o.str());
  CHECK(parse_schedule_override("threads=2").str() == "threads=2");
}

TEST_CASE("schedule override: bad text is an error naming the item and the keys") {
  CHECK_THAT(error_of("lanes=3"), Catch::Contains("lanes must be 1, 2, 4, 8 or 16, got 3"));
  CHECK_THAT(error_of("lanes=32"), Catch::Contains("lanes must be"));
  CHECK_THAT(error_of("lanes"), Catch::Contains("'lanes' is not KEY=N"));
  CHECK_THAT(error_of("threads=0"), Catch::Contains("positive N"));
  CHECK_THAT(error_of("threads=-2"), Catch::Contains("positive N"));
  CHECK_THAT(error_of("grain=1x"), Catch::Contains("'grain=1x'"));
  CHECK_THAT(error_of("width=512"), Catch::Contains("unknown key 'width'"));
  CHECK_THAT(error_of("width=512"), Catch::Contains("keys: lanes, threads, grain"));
  // A compile with a bad override fails at once, not at the first kernel.
  CompileOptions o;
  o.schedule = "lanes=7";
  CHECK_THROWS_WITH(compile([](const Tensor& a) { return a + 1; }, o),
                    Catch::Contains("lanes must be"));
}

TEST_CASE("schedule text: Schedule::str() parses back, and a bad field is named") {
  Schedule s;
  s.vector = Schedule::Vector::inner;
  s.lanes = 8;
  s.unroll = 4;
  s.block = 3;
  s.grain = 16;
  s.tile = 5;
  s.jam = 3;
  s.threads = 2;
  s.stream = true;
  Expected<Schedule> p = codegen::parse_schedule(s.str());
  REQUIRE(p);
  CHECK(p->str() == s.str());
  CHECK(codegen::parse_schedule("")->str() == Schedule{}.str());
  CHECK(codegen::parse_schedule("  grain=7   vector=outer ")->str() ==
        "vector=outer lanes=1 unroll=1 block=1 grain=7");
  auto error = [](std::string_view text) {
    Expected<Schedule> r = codegen::parse_schedule(text);
    return r ? std::string("parsed") : r.error().message();
  };
  CHECK(error("lanes=3") == "schedule 'lanes=3': 'lanes=3' is not 1, 2, 4, 8 or 16");
  CHECK(error("vector=diagonal") ==
        "schedule 'vector=diagonal': 'vector=diagonal' is not none, outer or inner");
  CHECK(error("block=0") == "schedule 'block=0': 'block=0' is not at least 1");
  CHECK(error("unroll=17") == "schedule 'unroll=17': 'unroll=17' is not in 1..16");
  CHECK(error("lanes=8 lanes=8") == "schedule 'lanes=8 lanes=8': 'lanes=8' repeats a key");
  CHECK(error("grain=-1") == "schedule 'grain=-1': 'grain=-1' does not give a number in [0, 2^40]");
  CHECK(error("lanes") == "schedule 'lanes': 'lanes' is not KEY=VALUE");
  CHECK(error("tile=0") == "schedule 'tile=0': 'tile=0' is not at least 1");
  CHECK(error("jam=17") == "schedule 'jam=17': 'jam=17' is not in 1..16");
  CHECK(error("speed=2") == "schedule 'speed=2': 'speed=2' has an unknown key (keys: vector, "
                            "lanes, unroll, block, grain, tile, jam, threads, stream)");
  CHECK(error("stream=2") == "schedule 'stream=2': 'stream=2' is not 0 or 1");
}

TEST_CASE("schedule check: vector code needs its variable, and inner vector code no argmax") {
  ir::kernel::Kernel k = pointwise_kernel(DType::f32, 16);
  k.name = "k";
  Schedule outer;
  outer.vector = Schedule::Vector::outer;
  outer.lanes = 8;
  CHECK(codegen::check_schedule(outer, k));
  Schedule inner = outer;
  inner.vector = Schedule::Vector::inner;
  Expected<void> r = codegen::check_schedule(inner, k);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "schedule vector=inner lanes=8 unroll=1 block=1 grain=1: "
                               "vector=inner needs an inner variable, and kernel k has none");
  k.inner = {32};
  CHECK(codegen::check_schedule(inner, k));
  k.instrs[0].kind = ir::kernel::Instr::Kind::reduce;
  k.instrs[0].op = Op::argmin;
  r = codegen::check_schedule(inner, k);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "schedule vector=inner lanes=8 unroll=1 block=1 grain=1: "
                               "vector=inner cannot run the argmin of kernel k");
  Schedule jammed = outer;
  jammed.jam = 4;
  jammed.tile = 2;
  k.outer = {3, 16};
  r = codegen::check_schedule(jammed, k);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "schedule vector=outer lanes=8 unroll=1 block=1 grain=1 tile=2 "
                               "jam=4: a jam of 4 needs a tile at least as large");
  jammed.tile = 4;
  CHECK(codegen::check_schedule(jammed, k));
  k.outer.clear();
  r = codegen::check_schedule(outer, k);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "schedule vector=outer lanes=8 unroll=1 block=1 grain=1: "
                               "vector=outer needs an outer variable, and kernel k has none");
}

TEST_CASE("schedule override: the heuristic takes its lanes, grain and threads") {
  const ir::kernel::Kernel k32 = pointwise_kernel(DType::f32, 100000);
  const ir::kernel::Kernel k64 = pointwise_kernel(DType::f64, 100000);
  // Without an override: the target's registers (64 bytes: 16 f32 lanes, 8 f64 lanes).
  CHECK(choose_schedule(k32, 64).lanes == 16);
  CHECK(choose_schedule(k64, 64).lanes == 8);
  for (int lanes : {4, 8, 16}) {
    INFO("lanes " << lanes);
    ScheduleOverride o;
    o.lanes = lanes;
    // The same override on a 32- or 64-byte target: lanes are the override's, f64 half.
    for (int bytes : {16, 32, 64}) {
      CHECK(choose_schedule(k32, bytes, o).lanes == lanes);
      CHECK(choose_schedule(k64, bytes, o).lanes == std::max(1, lanes / 2));
    }
  }
  // One lane is scalar code, never a vector of one (whose math the generator does not emit):
  // 1 f32 lane, or 2 over f64 values.
  CHECK(choose_schedule(k32, 64, parse_schedule_override("lanes=1")).vector ==
        Schedule::Vector::none);
  CHECK(choose_schedule(k64, 64, parse_schedule_override("lanes=2")).vector ==
        Schedule::Vector::none);
  CHECK(choose_schedule(k32, 64, parse_schedule_override("lanes=2")).lanes == 2);
  ScheduleOverride o = parse_schedule_override("threads=3,grain=2");
  Schedule s = choose_schedule(k32, 32, o);
  CHECK(s.threads == 3);
  CHECK(s.grain == 2);
  CHECK_THAT(s.str(), Catch::EndsWith("grain=2 threads=3"));
  // No threads field in the text without an override: the kernel cache keys stay as they were.
  CHECK_THAT(choose_schedule(k32, 32).str(), !Catch::Contains("threads"));
}

TEST_CASE("schedule override: every width and thread count computes the same pointwise bits",
          "[llvm]") {
  // Pointwise math has no order to change: every configuration gives eager's bits.
  manual_seed(3);
  Tensor x = randn({37, 1001}), y = randn({1001});
  auto fn = [](const Tensor& a, const Tensor& b) { return (a * b + 1).relu() - b; };
  const Tensor want = fn(x, y);
  // f64 with rsqrt through kiln's vector math: at 2 f32 lanes that is one f64 lane.
  Tensor x64 = x.to(DType::f64), y64 = y.to(DType::f64).abs() + 1;
  auto fn64 = [](const Tensor& a, const Tensor& b) { return a * rsqrt(b) - 1; };
  const Tensor want64 = fn64(x64, y64);
  for (const char* cfg : {"lanes=4", "lanes=8", "lanes=16", "lanes=1", "lanes=2",
                          "threads=1,grain=1", "threads=2,grain=1", "threads=3,grain=3"}) {
    INFO(cfg);
    CompileOptions o;
    o.schedule = cfg;
    auto f = compile(fn, o);
    KILN_REQUIRE_BITWISE(f(x, y), want);
    KILN_REQUIRE_BITWISE(f(x, y), want);
    CHECK(f.stats().generated_kernels == 1);
    auto g = compile(fn64, o);
    KILN_REQUIRE_CLOSE(g(x64, y64), fn64, x64, y64);
  }
}
