// The loop IR's parser and verifier: hand-written kernels round-trip through the printer, each
// verifier rule rejects a kernel that breaks it, and parse errors name their line and column.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "ir/kernel/parser.h"
#include "ir/kernel/verifier.h"

using namespace kiln;
using namespace kiln::ir::kernel;

namespace {

Kernel parsed(std::string_view text) {
  Expected<Kernel> k = parse_kernel(text, "t.kir");
  INFO(text);
  if (!k) FAIL(k.error().message());
  return *k;
}

std::string parse_error(std::string_view text) {
  Expected<std::vector<ParsedKernel>> k = parse_kernels(text, "t.kir");
  REQUIRE_FALSE(k);
  return k.error().message();
}

std::string verify_error(const Kernel& k, VerifyFailure* failed = nullptr) {
  Expected<void> r = verify(k, failed);
  REQUIRE_FALSE(r);
  return r.error().message();
}

// A pointwise kernel, a softmax with its stash, and argmax along an inner variable: every
// instruction kind, both loop kinds, and ids out of text order (as the lowering numbers them).
constexpr const char* kPointwise = R"(kernel pw outer[4] inner[]
  buffer in0:f32 in extent 4
  buffer in1:i64 in extent 4
  buffer out2:f32 out extent 4
  %0:f32 = load in0[v0]
  %1:i64 = load in1[3 - v0]
  %2:f32 = cast %1
  %3:f32 = constant 2.5 (0x4004000000000000) i2
  %4:f32 = mul %0, %3
  %5:bool = lt %4, %2
  %6:f32 = where %5, %4, %2
  %7:f32 = exp %6
  %8:f32 = store out2[v0], %7
)";

constexpr const char* kSoftmax = R"(kernel softmax outer[2] inner[3]
  buffer in0:f32 in extent 6
  buffer out1:f32 out extent 6
 reduce loop {
  %0:f32 = load in0[3*v0 + v1]
  %1:f32 = reduce.amax %0
 }
  %10:f32 = constant 0 (0x0000000000000000) i0
  %11:f32 = maximum %1, %10
 reduce loop {
  %2:f32 = load in0[3*v0 + v1]
  %3:f32 = sub %2, %11
  %4:f32 = exp %3
  %5:f32 = reduce.sum %4
  %9:f32 = store out1[3*v0 + v1], %4
 }
 map loop {
  %6:f32 = load out1[3*v0 + v1]
  %7:f32 = div %6, %5
  %8:f32 = store out1[3*v0 + v1], %7
 }
)";

constexpr const char* kArgmax = R"(kernel arg outer[2] inner[2,4]
  buffer in0:f32 in extent 16
  buffer out1:i64 out extent 2
  buffer out2:f32 out extent 2
 reduce loop {
  %0:f32 = load in0[8*v0 + (v1 + 2*v2 / 2) + 4*(v2 % 2)]
  %1:i64 = reduce.argmax %0 along v2
  %2:f32 = reduce.prod %0
 }
  %3:i64 = store out1[v0], %1
  %4:f32 = store out2[v0], %2
)";

} // namespace

TEST_CASE("kernel parser: hand-written kernels print back exactly", "[ir][kernel][parser]") {
  for (const char* text : {kPointwise, kSoftmax, kArgmax}) {
    Kernel k = parsed(text);
    CHECK(k.str() == text);
    CHECK(verify(k));
  }
}

TEST_CASE("kernel parser: the fields are what the text says", "[ir][kernel][parser]") {
  Kernel k = parsed(kSoftmax);
  CHECK(k.name == "softmax");
  CHECK(k.outer == std::vector<int64_t>{2});
  CHECK(k.inner == std::vector<int64_t>{3});
  REQUIRE(k.buffers.size() == 2);
  CHECK((k.buffers[1].name == "out1" && k.buffers[1].output && k.buffers[1].extent == 6));
  REQUIRE(k.instrs.size() == 12);
  REQUIRE(k.loops.size() == 3);
  CHECK(k.loops[0].kind == Loop::Kind::reduce);
  CHECK(k.loops[2].kind == Loop::Kind::map);
  CHECK(k.loops[1].body == std::vector<int>{2, 3, 4, 5, 9});
  REQUIRE(k.items.size() == 5);
  CHECK((k.items[1].instr == 10 && k.items[1].loop == -1));
  CHECK((k.items[3].instr == -1 && k.items[3].loop == 1));
  const Instr& reduce = k.instrs[5];
  CHECK((reduce.kind == Instr::Kind::reduce && reduce.op == Op::sum && reduce.args[0] == 4));
  const Instr& store = k.instrs[9];
  CHECK((store.kind == Instr::Kind::store && store.buffer == 1 && store.args[0] == 4));
  CHECK(store.index == Index::var(0) * 3 + Index::var(1));

  Kernel a = parsed(kArgmax);
  CHECK(a.instrs[1].arg_var == 2);
  CHECK(a.instrs[1].dtype == DType::i64);
  CHECK(a.instrs[2].arg_var == -1);
}

TEST_CASE("kernel parser: constants keep their exact bits and integer value",
          "[ir][kernel][parser]") {
  Kernel k = parsed(R"(kernel c outer[] inner[]
  buffer out0:f64 out extent 1
  %0:f64 = constant nan (0x7ff8000000000123) i0
  %1:f64 = constant -0 (0x8000000000000000) i0
  %2:i64 = constant -9.2233720368547758e+18 (0xc3e0000000000000) i-9223372036854775808
  %3:i64 = constant 9.2233720368547758e+18 (0x43e0000000000000) i9223372036854775806
  %4:f64 = constant 1e-300
  %5:f64 = store out0[0], %0
)");
  CHECK(std::bit_cast<uint64_t>(k.instrs[0].value) == 0x7ff8000000000123u);
  CHECK((k.instrs[1].value == 0 && std::signbit(k.instrs[1].value)));
  CHECK(k.instrs[2].ivalue == std::numeric_limits<int64_t>::min());
  CHECK(k.instrs[3].ivalue == std::numeric_limits<int64_t>::max() - 1);
  // Without bits and i-form the decimal gives both; the printer writes the full form.
  CHECK(k.instrs[4].value == 1e-300);
  CHECK(k.str().find("%4:f64 = constant 1e-300 (0x01a56e1fc2f8f359) i0") != std::string::npos);
  CHECK(parsed(k.str()).str() == k.str());
  // A decimal without bits is read in its dtype's precision.
  Kernel r = parsed("kernel r outer[] inner[]\n  buffer out0:f16 out extent 1\n"
                    "  %0:f32 = constant 0.1\n  %1:f16 = constant 0.1\n"
                    "  %2:f16 = store out0[0], %1\n");
  CHECK(r.instrs[0].value == static_cast<double>(0.1f));
  CHECK(r.instrs[1].value == static_cast<double>(static_cast<float>(Half(0.1f))));
  CHECK(verify(r));
}

TEST_CASE("kernel parser: index expressions round-trip in every form", "[ir][kernel][parser]") {
  // Built through the API the lowering uses, with and without simplification by extents.
  const std::vector<int64_t> ext{3, 4, 5};
  const Index v0 = Index::var(0), v1 = Index::var(1), v2 = Index::var(2);
  const std::vector<Index> forms{
      Index::constant(0),
      Index::constant(-7),
      v0 * -1 + Index::constant(11),
      v0 * -3 + v1 * 2,
      Index::floordiv(v0 * 4 + v1, 3, {}),
      Index::mod(v0 * 4 + v1 + Index::constant(1), 3, {}),
      Index::floordiv(Index::mod(v0 * 20 + v1 * 5 + v2, 7, ext), 2, ext) * 3 + v2,
      Index::mod(Index::floordiv(v1 + Index::constant(-1), 2, {}), 5, {}) * -2,
      Index::floordiv(v0 * 20 + v1 * 5 + v2, 5, ext),
  };
  for (const Index& ix : forms) {
    Kernel k;
    k.name = "ix";
    k.outer = {3, 4};
    k.inner = {5};
    k.buffers.push_back({"in0", DType::f32, false, 100});
    Instr load;
    load.kind = Instr::Kind::load;
    load.buffer = 0;
    load.index = ix;
    k.instrs.push_back(load);
    k.loops.push_back({Loop::Kind::map, {0}});
    k.items.push_back({-1, 0});
    INFO(ix.str());
    Kernel back = parsed(k.str());
    CHECK(back.instrs[0].index == ix);
    CHECK(back.str() == k.str());
  }
  // A leading minus, and terms written out of the printer's order, read as the same index.
  Kernel k = parsed("kernel k outer[4,4] inner[]\n  buffer in0:f32 in extent 9\n"
                    "  %0:f32 = load in0[-v0 + 3 + (v1 % 2) + 2*(v1 / 2)]\n");
  CHECK(k.instrs[0].index.str() == "3 - v0 + 2*(v1 / 2) + (v1 % 2)");
}

TEST_CASE("kernel parser: schedule lines come with their kernel", "[ir][kernel][parser]") {
  Expected<std::vector<ParsedKernel>> m = parse_kernels(
      std::string("// a comment\n// schedule vector=outer lanes=8 unroll=1 block=8 grain=1\n") +
          kPointwise + "\nschedule vector=none lanes=1\n" + kSoftmax + kArgmax,
      "m.kir");
  REQUIRE(m);
  REQUIRE(m->size() == 3);
  CHECK((*m)[0].schedule == "vector=outer lanes=8 unroll=1 block=8 grain=1");
  CHECK(((*m)[0].schedule_at.line == 2 && (*m)[0].schedule_at.col == 1));
  CHECK((*m)[1].schedule == "vector=none lanes=1");
  CHECK_FALSE((*m)[2].schedule.has_value());
  CHECK((*m)[1].kernel.name == "softmax");
  // Where things were written: the kernel keyword, the %N of each instruction, each loop.
  CHECK(((*m)[0].at.line == 3 && (*m)[0].at.col == 1));
  CHECK(((*m)[0].instr_at[4].line == 11 && (*m)[0].instr_at[4].col == 3));
  CHECK(((*m)[1].loop_at[2].line == 34 && (*m)[1].loop_at[2].col == 2));
}

TEST_CASE("kernel parser: loop IR is told from graph IR", "[ir][kernel][parser]") {
  CHECK(is_kernel_text(kPointwise));
  CHECK(is_kernel_text("// RUN: kiln opt %s\n\n// CHECK: graph\nkernel k outer[] inner[]\n"));
  CHECK(is_kernel_text("// graph 0\n// schedule vector=none\nkernel k outer[] inner[]\n"));
  CHECK(is_kernel_text("schedule vector=none\n"));
  CHECK_FALSE(is_kernel_text("// RUN: kiln opt %s\ngraph @g {\n}\n"));
  CHECK_FALSE(is_kernel_text("// CHECK: kernel k\ngraph @g {\n}\n"));
  CHECK_FALSE(is_kernel_text("kernels\n"));
  CHECK_FALSE(is_kernel_text(""));
}

TEST_CASE("kernel parser: errors name the file, line and column", "[ir][kernel][parser]") {
  CHECK(parse_error("") == "t.kir:1:1: error: expected 'kernel', got end of file");
  CHECK(parse_error("kernel k outer[2 inner[]\n") ==
        "t.kir:1:18: error: expected ',', got 'inner'");
  CHECK(parse_error("kernel k outer[] inner[]\n  %0:f32 = load in0[0]\n") ==
        "t.kir:2:17: error: unknown buffer 'in0'");
  CHECK(parse_error("kernel k outer[4] inner[]\n  buffer b:f32 in extent 4\n"
                    "  %0:f32 = load b[(v0 / 0)]\n") ==
        "t.kir:3:25: error: a divisor must be at least 2, got 0");
  CHECK(parse_error("kernel k outer[4] inner[]\n  buffer b:f32 in extent 4\n"
                    "  %0:f32 = load b[v0 3]\n") == "t.kir:3:22: error: expected ']', got '3'");
  CHECK(parse_error("kernel k outer[] inner[]\n  %0:f32 = constant 1 (0x3ff0000000000000) iz\n") ==
        "t.kir:2:44: error: expected the integer value 'iN', got 'iz'");
  CHECK(parse_error("kernel k outer[] inner[]\n  %0:f32 = constant 0 (0x8000000000000000) i0\n") ==
        "t.kir:2:21: error: constant 0 does not match its bits 0x8000000000000000 (-0.0)");
  CHECK(parse_error("kernel k outer[] inner[]\n  %0:f32 = reduce.exp %1\n") ==
        "t.kir:2:23: error: use of undefined value %1");
  CHECK(parse_error("kernel k outer[] inner[]\n  %1:f32 = constant 1\n") ==
        "t.kir:2:3: error: instruction ids of a kernel run from %0 without gaps: %1 is defined "
        "but %0 is not");
  CHECK(parse_error("kernel k outer[] inner[]\n  %99999999999:f32 = constant 1\n") ==
        "t.kir:2:3: error: instruction id 99999999999 out of range");
  CHECK(parse_error("kernel k outer[4] inner[]\n  buffer b:f32 in extent 4\n"
                    "  %0:f32 = load b[9223372036854775807*v0 + 9223372036854775807*v0]\n") ==
        "t.kir:3:44: error: term v0 appears twice in one index expression (write it once, with "
        "the summed coefficient)");
  std::string deep = "kernel k outer[] inner[]\n  buffer b:f32 in extent 4\n  %0:f32 = load b[";
  for (int i = 0; i < 40; ++i)
    deep += "(";
  CHECK(parse_error(deep).find("index expression nested more than 32 deep") != std::string::npos);
  CHECK(parse_error(std::string(kPointwise) + "  garbage\n") ==
        "t.kir:14:3: error: expected an instruction, a loop, 'kernel' or end of file, got "
        "'garbage'");
  Expected<Kernel> two = parse_kernel(std::string(kPointwise) + kSoftmax, "t.kir");
  REQUIRE_FALSE(two);
  CHECK(two.error().message() == "t.kir: error: expected one kernel, got 2");
}

TEST_CASE("kernel parser: every prefix of a text parses or fails cleanly", "[ir][kernel][parser]") {
  // What a truncated file gives: a kernel (which the verifier may reject) or a parse error,
  // never a crash.
  const std::string text = std::string("schedule vector=none\n") + kSoftmax + kArgmax;
  int kernels = 0;
  for (size_t n = 0; n <= text.size(); ++n) {
    Expected<std::vector<ParsedKernel>> m = parse_kernels(text.substr(0, n), "p.kir");
    if (!m) continue;
    for (const ParsedKernel& pk : *m) {
      (void)verify(pk, "p.kir");
      ++kernels;
    }
  }
  CHECK(kernels > 0);
}

// ---- the verifier ----

TEST_CASE("kernel verifier: a kernel in the lowering's style verifies", "[ir][kernel][verifier]") {
  VerifyFailure f{1, 2, 3};
  CHECK(verify(parsed(kSoftmax), &f));
  CHECK((f.instr == -1 && f.loop == -1 && f.buffer == -1));
  // An instruction of an empty domain never runs: its index is not held to the extent.
  CHECK(verify(parsed("kernel e outer[0] inner[]\n  buffer b:f32 out extent 0\n"
                      "  %0:f32 = constant 1\n  %1:f32 = store b[v0 + 5], %0\n")));
}

TEST_CASE("kernel verifier: values are defined before use and stay in their loop",
          "[ir][kernel][verifier]") {
  Kernel k = parsed(kSoftmax);
  VerifyFailure f;
  // %11 = maximum %1, %10 moved before the first loop: %1 does not exist yet.
  std::swap(k.items[0], k.items[2]);
  CHECK(verify_error(k, &f) == "kernel softmax: %11 = maximum: uses %1 before it is defined");
  CHECK(f.instr == 11);

  k = parsed(kSoftmax);
  k.instrs[7].args[0] = 3; // the map loop's div reads the second reduce loop's sub
  CHECK(verify_error(k, &f) == "kernel softmax: %7 = div: uses %3, which is defined inside "
                               "another loop (only reduce results leave their loop)");
  k = parsed(kSoftmax);
  k.instrs[9].args[0] = 5; // the stash stores the sum of its own loop
  CHECK(verify_error(k) == "kernel softmax: %9 = store: uses %5, a reduction of its own loop, "
                           "whose result exists only after the loop");
  k = parsed(kSoftmax);
  k.instrs[3].args[0] = 5; // the sub reads the sum, defined later in the loop
  CHECK(verify_error(k) == "kernel softmax: %3 = sub: uses %5 before it is defined");
  k = parsed(kSoftmax);
  k.instrs[4].args[0] = 9; // a store as an operand
  CHECK(verify_error(k) ==
        "kernel softmax: %4 = exp: operand %9 is a store, which defines no value");
  k = parsed(kSoftmax);
  k.instrs[4].args[0] = 40;
  CHECK(verify_error(k) ==
        "kernel softmax: %4 = exp: operand %40 is not an instruction of the kernel (it has 12)");
}

TEST_CASE("kernel verifier: every instruction and loop is placed exactly once",
          "[ir][kernel][verifier]") {
  Kernel k = parsed(kSoftmax);
  VerifyFailure f;
  k.loops[2].body.push_back(10);
  CHECK(verify_error(k, &f) ==
        "kernel softmax: %10 = constant: appears twice in the kernel's items and loop bodies");
  CHECK(f.instr == 10);
  k = parsed(kSoftmax);
  k.items.erase(k.items.begin() + 1); // %10 nowhere
  CHECK(verify_error(k) == "kernel softmax: %10 = constant: is in no item or loop body");
  k = parsed(kSoftmax);
  k.items.push_back({-1, 0});
  CHECK(verify_error(k, &f) == "kernel softmax: loop 0: appears twice in the kernel's items");
  CHECK(f.loop == 0);
  k = parsed(kSoftmax);
  k.items.pop_back();
  CHECK(verify_error(k) == "kernel softmax: loop 2: is in no item");
  k = parsed(kSoftmax);
  k.items[1] = {10, 0};
  CHECK(verify_error(k) == "kernel softmax: item 1 must be one instruction or one loop");
  k = parsed(kSoftmax);
  k.items.push_back({12, -1});
  CHECK(verify_error(k) == "kernel softmax: an item names %12, but the kernel has 12 instructions");
  k = parsed(kSoftmax);
  k.items.push_back({-1, 3});
  CHECK(verify_error(k) == "kernel softmax: item 5 names loop 3, but the kernel has 3 loops");
}

TEST_CASE("kernel verifier: indices use the kernel's variables and stay in their buffer",
          "[ir][kernel][verifier]") {
  Kernel k = parsed(kSoftmax);
  k.instrs[0].index = Index::var(0) * 3 + Index::var(1) + Index::constant(1);
  CHECK(verify_error(k) == "kernel softmax: %0 = load: index 1 + 3*v0 + v1 ranges over [1, 6], "
                           "outside buffer in0's extent 6");
  k = parsed(kSoftmax);
  k.instrs[0].index = Index::var(0) * 3 + Index::var(2);
  CHECK(verify_error(k) == "kernel softmax: %0 = load: index 3*v0 + v2 uses v2, not a variable "
                           "of the kernel (v0..v1)");
  k = parsed(kSoftmax);
  k.instrs[10] = k.instrs[0]; // an outer-level load indexed by the inner variable
  CHECK(verify_error(k) == "kernel softmax: %10 = load: index 3*v0 + v1 uses the inner variable "
                           "v1 outside a loop");
  k = parsed(kSoftmax);
  k.instrs[0].index = Index::var(0) * (int64_t{1} << 62);
  k.outer = {4};
  CHECK(verify_error(k) ==
        "kernel softmax: %0 = load: index 4611686018427387904*v0 overflows int64");
  k = parsed(kArgmax);
  k.instrs[0].index = Index::floordiv(Index::var(1) + Index::constant(-1), 2, {});
  CHECK(verify_error(k) == "kernel arg: %0 = load: index (-1 + v1 / 2): -1 + v1 may be negative "
                           "(down to -1) where it is divided");
}

TEST_CASE("kernel verifier: the domain and the buffers are well formed", "[ir][kernel][verifier]") {
  Kernel k = parsed(kSoftmax);
  VerifyFailure f;
  k.inner = {-3};
  CHECK(verify_error(k) == "kernel softmax: variable v1 has the negative extent -3");
  k = parsed(kSoftmax);
  k.outer = {int64_t{1} << 40, int64_t{1} << 40};
  CHECK(verify_error(k) == "kernel softmax: the domain's point count overflows int64");
  k = parsed(kSoftmax);
  k.buffers[1].name = "in0";
  CHECK(verify_error(k, &f) == "kernel softmax: buffer in0: declared twice");
  CHECK(f.buffer == 1);
  k = parsed(kSoftmax);
  k.name = "soft max";
  CHECK(verify_error(k) ==
        "kernel soft max: the name is not a symbol (letters, digits, '_' and '.')");
  k = parsed(kPointwise);
  k.buffers.push_back({"out3", DType::f32, true, 4});
  CHECK(verify_error(k, &f) == "kernel pw: buffer out3: an output buffer that nothing stores to");
  CHECK(f.buffer == 3);
}

TEST_CASE("kernel verifier: kinds, arities and placements of reductions",
          "[ir][kernel][verifier]") {
  Kernel k = parsed(kPointwise);
  k.instrs[4].args.push_back(0);
  CHECK(verify_error(k) == "kernel pw: %4 = mul: takes 2 operands, got 3");
  k = parsed(kPointwise);
  k.instrs[7].op = Op::cast;
  CHECK(verify_error(k) == "kernel pw: %7 = cast: cast is written as the cast instruction");
  k = parsed(kPointwise);
  k.instrs[4].op = Op::remainder;
  CHECK(verify_error(k) == "kernel pw: %4 = remainder: remainder is not a pointwise op of the "
                           "loop IR");
  k = parsed(kPointwise);
  k.instrs[4].op = Op::matmul;
  CHECK(verify_error(k) == "kernel pw: %4 = matmul: matmul is not a pointwise op of the loop IR");
  k = parsed(kPointwise);
  k.instrs[8].args.clear();
  CHECK(verify_error(k) == "kernel pw: %8 = store: takes 1 operand, got 0");
  k = parsed(kPointwise);
  k.instrs[8].buffer = 7;
  CHECK(verify_error(k) == "kernel pw: %8 = store: buffer 7 is not a buffer of the kernel");

  k = parsed(kArgmax);
  k.instrs[2].op = Op::cumsum;
  CHECK(verify_error(k) == "kernel arg: %2 = reduce.cumsum: cumsum is not a reduction of the loop "
                           "IR (sum, prod, amax, amin, argmax, argmin)");
  k = parsed(kArgmax);
  k.instrs[1].arg_var = 3;
  CHECK(verify_error(k) ==
        "kernel arg: %1 = reduce.argmax: goes along v3, not an inner variable (v1..v2)");
  k = parsed(kArgmax);
  k.instrs[2].arg_var = 1;
  CHECK(verify_error(k) == "kernel arg: %2 = reduce.prod: 'along' is for argmax and argmin only");
  k = parsed(kArgmax);
  k.instrs[1].dtype = DType::i32;
  CHECK(verify_error(k) == "kernel arg: %1 = reduce.argmax: gives i64, not i32");
  k = parsed(kArgmax);
  k.loops[0].kind = Loop::Kind::map;
  CHECK(verify_error(k) == "kernel arg: %1 = reduce.argmax: a reduction in a map loop "
                           "(reductions belong to reduce loops)");
  k = parsed(kArgmax);
  k.inner.clear();
  k.instrs[0].index = Index::var(0);
  CHECK(verify_error(k) == "kernel arg: %1 = reduce.argmax: needs an inner variable to go along, "
                           "and the kernel has none");
}

TEST_CASE("kernel verifier: dtypes agree, conversions are explicit", "[ir][kernel][verifier]") {
  Kernel k = parsed(kPointwise);
  k.instrs[0].dtype = DType::f64;
  CHECK(verify_error(k) == "kernel pw: %0 = load: has dtype f64 but buffer in0 holds f32");
  k = parsed(kPointwise);
  k.instrs[2].dtype = DType::f64; // the cast now gives f64, compared with an f32
  CHECK(verify_error(k) == "kernel pw: %5 = lt: compares f32 with f64");
  k = parsed(kPointwise);
  k.instrs[4].args[1] = 1;
  CHECK(verify_error(k) ==
        "kernel pw: %4 = mul: operand %1 has dtype i64, not f32 (conversions are explicit casts)");
  k = parsed(kPointwise);
  k.instrs[6].args[0] = 4;
  CHECK(verify_error(k) == "kernel pw: %6 = where: condition %4 has dtype f32, not bool");
  k = parsed("kernel e outer[] inner[]\n  buffer out0:i64 out extent 1\n"
             "  %0:i64 = constant 1\n  %1:i64 = exp %0\n  %2:i64 = store out0[0], %1\n");
  CHECK(verify_error(k) == "kernel e: %1 = exp: gives a floating dtype, not i64");
  // An f16 op may read an f32 operand (PyTorch's precise scalar); an f32 op not an f16 one.
  k = parsed("kernel h outer[] inner[]\n  buffer out0:f16 out extent 1\n"
             "  %0:f16 = constant 1\n  %1:f32 = constant 0.5\n  %2:f16 = add %0, %1\n"
             "  %3:f16 = store out0[0], %2\n");
  CHECK(verify(k));
  k.instrs[2].args = {1, 0};
  CHECK(verify(k));
  k.instrs[2].dtype = DType::f32;
  k.instrs[3].args = {0};
  CHECK(verify_error(k) == "kernel h: %2 = add: operand %0 has dtype f16, not f32 (conversions "
                           "are explicit casts)");
  // Constants hold values of their dtype.
  k = parsed("kernel c outer[] inner[]\n  buffer out0:f16 out extent 1\n"
             "  %0:f16 = constant 65520 (0x40effe0000000000)\n  %1:f16 = store out0[0], %0\n");
  CHECK(verify_error(k) == "kernel c: %0 = constant: value 65520 is not a f16 value");
  k.instrs[0].dtype = DType::bool_;
  k.instrs[0].ivalue = 2;
  k.buffers[0].dtype = k.instrs[1].dtype = DType::bool_;
  CHECK(verify_error(k) == "kernel c: %0 = constant: value i2 does not fit bool");
}

TEST_CASE("kernel verifier: errors of a parsed kernel point at its line",
          "[ir][kernel][verifier]") {
  Expected<std::vector<ParsedKernel>> m = parse_kernels(
      std::string(kPointwise) + "kernel bad outer[4] inner[]\n  buffer in0:f32 in extent 4\n"
                                "  buffer out1:f32 out extent 4\n  %0:f32 = load in0[v0 + 1]\n"
                                "  %1:f32 = store out1[v0], %0\n",
      "f.kir");
  REQUIRE(m);
  CHECK(verify((*m)[0], "f.kir"));
  Expected<void> r = verify((*m)[1], "f.kir");
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "f.kir:17:3: error: kernel bad: %0 = load: index 1 + v0 ranges "
                               "over [1, 4], outside buffer in0's extent 4");
  // An error about a buffer points at its declaration, one about the kernel at `kernel`.
  (*m)[1].kernel.buffers[1].dtype = DType::f64;
  (*m)[1].kernel.instrs[1].dtype = DType::f64;
  (*m)[1].kernel.instrs[0].index = Index::var(0);
  (*m)[1].kernel.instrs[1].args = {0};
  r = verify((*m)[1], "f.kir");
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "f.kir:18:3: error: kernel bad: %1 = store: stores %0 of dtype "
                               "f32 into out1 of dtype f64");
  (*m)[1].kernel.outer = {-1};
  r = verify((*m)[1], "f.kir");
  REQUIRE_FALSE(r);
  CHECK(r.error().message() ==
        "f.kir:14:1: error: kernel bad: variable v0 has the negative extent -1");
}
