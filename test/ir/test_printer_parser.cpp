// The .kir printer and parser: round trips over built graphs, literals, and error messages.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/builder.h"
#include "ir/hash.h"
#include "ir/literal.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

Type f32(Shape s) { return Type(DType::f32, std::move(s)); }

/// Prints g, parses the text, prints again: the two texts must be equal, and the reparsed
/// graph structurally equal to g (unless g holds NaNs with a payload or sign, which the text
/// does not keep).
std::string check_round_trip(const Graph& g, bool same_bits = true) {
  std::string text = print(g);
  auto parsed = parse_graph(text, "rt.kir");
  INFO(text);
  if (!parsed) FAIL(parsed.error().message());
  CHECK(print(**parsed) == text);
  CHECK(structurally_equal(g, **parsed) == same_bits);
  return text;
}

/// The error message of parsing `text`, or "" when it parses.
std::string parse_error(std::string_view text) {
  auto m = parse_module(text, "t.kir");
  return m ? std::string() : m.error().message();
}

} // namespace

TEST_CASE("printer: the documented example prints exactly", "[ir][printer]") {
  Graph g("mlp");
  Builder b(g);
  Value* x = g.add_input(f32({8, 784}), InputKind::user, "x");
  Value* w = g.add_input(f32({256, 784}), InputKind::parameter, "fc1.weight");
  Value* two = b.scalar(2.0);
  b.set_location("mlp.cpp:12");
  Value* wt = b.create(Op::permute, {w}, {std::vector<int64_t>{1, 0}});
  b.set_location("");
  Value* h = b.create(Op::matmul, {x, wt});
  Value* s = b.create(Op::mul, {h, two});
  g.add_output(s);
  g.add_output(h);
  std::string text = check_round_trip(g);
  CHECK(text == "graph @mlp {\n"
                "  %0 : f32[8,784] = input \"x\"\n"
                "  %1 : f32[256,784] = param \"fc1.weight\"\n"
                "  %2 : f64 = const 2.0\n"
                "  %3 : f32[784,256]{1,784} = permute(%1) {dims = [1, 0]}  // at mlp.cpp:12\n"
                "  %4 : f32[8,256] = matmul(%0, %3)\n"
                "  %5 : f32[8,256] = mul(%4, %2)\n"
                "  return %5, %4\n"
                "}\n");
}

TEST_CASE("printer/parser: every attribute kind round-trips", "[ir][printer][parser]") {
  Graph g("attrs");
  Builder b(g);
  Value* x = g.add_input(f32({2, 3}), InputKind::user, "x");
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{2, 3}, Scalar(1.5), DType::f32}));
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{2}, Scalar(int64_t{-7}), DType::i64}));
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{}, Scalar(true), DType::bool_}));
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{1}, Scalar(-0.0), DType::f64}));
  g.add_output(b.create(Op::pad, {x}, {std::vector<int64_t>{1, 1}, 2.0}));           // float
  g.add_output(b.create(Op::argmax, {x}, {int64_t{-1}, true}));                      // int, bool
  g.add_output(b.create(Op::sum, {x}, {std::vector<int64_t>{}, false, DType::f64})); // ints []
  g.add_output(b.create(Op::cast, {x}, {DType::bf16}));                              // dtype
  g.add_output(b.create(Op::slice, {x}, {int64_t{1}, int64_t{0}, int64_t{3}, int64_t{2}}));
  std::string text = check_round_trip(g);
  CHECK_THAT(text, Catch::Contains("full() {sizes = [2], value = -7, dtype = i64}"));
  CHECK_THAT(text, Catch::Contains("full() {sizes = [], value = true, dtype = bool}"));
  CHECK_THAT(text, Catch::Contains("value = -0.0, dtype = f64}"));
  CHECK_THAT(text, Catch::Contains("pad(%0) {pads = [1, 1], value = 2.0}"));
  CHECK_THAT(text, Catch::Contains("{dims = [], keepdim = false, dtype = f64}"));
  CHECK_THAT(text, Catch::Contains("cast(%0) {dtype = bf16}"));
  // The scalar's kind survives: 1.5 is floating, -7 integral, true boolean.
  auto parsed = parse_graph(text);
  REQUIRE(parsed);
  std::vector<Node*> nodes = (*parsed)->node_list();
  CHECK(nodes[0]->attrs().scalar(1).is_floating());
  CHECK(nodes[1]->attrs().scalar(1).is_integral());
  CHECK(nodes[2]->attrs().scalar(1).is_bool());
}

TEST_CASE("printer/parser: constants of every dtype round-trip bit for bit",
          "[ir][printer][parser]") {
  Graph g("consts");
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  g.add_constant(tensor<float>({nan, inf, -inf, -0.0f, 0.1f, 1e-45f, 3.4028235e38f}));
  g.add_constant(tensor<double>({0.1, -1e-300, 1e300, 5e-324}));
  g.add_constant(tensor<Half>({Half(0.1f), Half(65504.0f), Half(-0.0f), Half(inf)}));
  g.add_constant(tensor<BFloat16>({BFloat16(0.1f), BFloat16(3e38f), BFloat16(-inf)}));
  g.add_constant(tensor<int64_t>(
      {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0}));
  g.add_constant(tensor<int32_t>({std::numeric_limits<int32_t>::min(), 7}, {2, 1}));
  g.add_constant(tensor<int8_t>({-128, 127}));
  g.add_constant(tensor<uint8_t>({255, 0}));
  g.add_constant(tensor<bool>({true, false, true}));
  g.add_constant(tensor<float>({2.5f, 2.5f, 2.5f, 2.5f}, {2, 2}), false, "splat");
  g.add_constant(scalar_tensor(Scalar(int64_t{3})), true);
  g.add_constant(scalar_tensor(Scalar(true)), false);
  for (Value* v : g.inputs())
    g.add_output(v);
  std::string text = check_round_trip(g);
  CHECK_THAT(text, Catch::Contains("%0 : f32[7] = const [nan, inf, -inf, -0.0, 0.1, 1e-45, "
                                   "3.4028235e+38]"));
  CHECK_THAT(text, Catch::Contains("%1 : f64[4] = const [0.1, -1e-300, 1e+300, 5e-324]"));
  CHECK_THAT(text, Catch::Contains("%2 : f16[4] = const [0.099975586, 65504.0, -0.0, inf]"));
  CHECK_THAT(text, Catch::Contains("%4 : i64[3] = const [-9223372036854775808, "
                                   "9223372036854775807, 0]"));
  CHECK_THAT(text, Catch::Contains("%7 : u8[2] = const [255, 0]"));
  CHECK_THAT(text, Catch::Contains("%8 : bool[3] = const [true, false, true]"));
  CHECK_THAT(text, Catch::Contains("%9 : f32[2,2] = const 2.5 \"splat\""));
  CHECK_THAT(text, Catch::Contains("%10 : i64 = const 3"));
  CHECK_THAT(text, Catch::Contains("%11 : bool[] = const true"));
  // Bit for bit (NaN aside): compare the data of every constant.
  auto parsed = parse_graph(text);
  REQUIRE(parsed);
  for (size_t i = 1; i < g.num_inputs(); ++i) {
    const Tensor& a = g.input(i)->constant();
    const Tensor& b = (*parsed)->input(i)->constant();
    REQUIRE(a.numel() == b.numel());
    CHECK(std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel() * a.itemsize())) ==
          0);
    CHECK((*parsed)->input(i)->type() == g.input(i)->type());
  }
  CHECK(std::isnan((*parsed)->input(0)->constant().to_vector<float>()[0]));
}

TEST_CASE("printer: a constant is a splat exactly when its elements print the same",
          "[ir][printer]") {
  Graph g("splats");
  uint32_t quiet = 0x7fc00000, payload = 0x7fc00001, negative = 0xffc00000;
  float nans[3];
  std::memcpy(&nans[0], &quiet, 4);
  std::memcpy(&nans[1], &payload, 4);
  std::memcpy(&nans[2], &negative, 4);
  g.add_constant(tensor<float>({nans[0], nans[1], nans[2]})); // bitwise unequal NaNs
  g.add_constant(tensor<float>({0.0f, -0.0f}));               // equal, but not bitwise
  g.add_constant(tensor<double>({1.0, 1.0, 1.0 + 1e-16}));    // 1e-16 is below an ulp
  g.add_constant(tensor<double>({1.0, 1.0, std::nextafter(1.0, 2.0)}));
  g.add_constant(tensor<Half>({Half(1.0f), Half(1.0f)}));
  g.add_constant(tensor<bool>({false, false}));
  g.add_constant(tensor<float>({7.0f}, {1, 1, 1}));
  g.add_constant(zeros({0, 3}));
  g.add_constant(zeros({3, 0}, TensorOptions(DType::i64)));
  g.add_constant(zeros({512, 513}, TensorOptions(DType::f64))); // a large splat
  Tensor ramp = arange(Scalar(int64_t{0}), Scalar(int64_t{1000}), Scalar(int64_t{1}),
                       TensorOptions(DType::i32));
  g.add_constant(ramp);
  for (Value* v : g.inputs())
    g.add_output(v);
  std::string text = check_round_trip(g, /*same_bits=*/false);
  CHECK_THAT(text, Catch::Contains("%0 : f32[3] = const nan\n"));
  CHECK_THAT(text, Catch::Contains("%1 : f32[2] = const [0.0, -0.0]\n"));
  CHECK_THAT(text, Catch::Contains("%2 : f64[3] = const 1.0\n"));
  CHECK_THAT(text, Catch::Contains("%3 : f64[3] = const [1.0, 1.0, 1.0000000000000002]\n"));
  CHECK_THAT(text, Catch::Contains("%4 : f16[2] = const 1.0\n"));
  CHECK_THAT(text, Catch::Contains("%5 : bool[2] = const false\n"));
  CHECK_THAT(text, Catch::Contains("%6 : f32[1,1,1] = const 7.0\n"));
  CHECK_THAT(text, Catch::Contains("%7 : f32[0,3] = const []\n"));
  CHECK_THAT(text, Catch::Contains("%8 : i64[3,0] = const []\n"));
  CHECK_THAT(text, Catch::Contains("%9 : f64[512,513] = const 0.0\n"));
  CHECK_THAT(text, Catch::Contains("%10 : i32[1000] = const [0, 1, 2, "));
  CHECK_THAT(text, Catch::Contains(", 998, 999]\n"));
}

TEST_CASE("printer/parser: types, devices, symbols, writes, names, several graphs",
          "[ir][printer][parser]") {
  Graph g("types.v1");
  Value* a = g.add_input(Type(DType::f32, {3, 2}, {1, 3}), InputKind::user, "a\"b\\c\n\x01");
  g.add_input(Type(DType::f16, {4}, {}, Device::cuda(1)), InputKind::parameter);
  g.add_input(Type(DType::f32, {Type::symbol(0), 16}));
  g.add_input(Type(DType::i64, {}, {}, Device::cpu(), true));
  Value* z = g.add_input(Type(DType::f32, {}));
  Builder b(g);
  b.set_location("model.py:42 in forward");
  Value* n = b.create(Op::neg, {a});
  g.add_write(a, n);
  g.add_write(z, z);
  std::string text = check_round_trip(g);
  CHECK_THAT(text, Catch::Contains("%0 : f32[3,2]{1,3} = input \"a\\\"b\\\\c\\n\\x01\""));
  CHECK_THAT(text, Catch::Contains("%1 : f16[4]@cuda:1 = param\n"));
  CHECK_THAT(text, Catch::Contains("%2 : f32[s0,16] = input\n"));
  CHECK_THAT(text, Catch::Contains("%3 : i64 = input\n"));
  CHECK_THAT(text, Catch::Contains("%4 : f32[] = input\n"));
  CHECK_THAT(text, Catch::Contains("  // at model.py:42 in forward\n"));
  CHECK_THAT(text, Catch::Contains("  write %0, %5\n  write %4, %4\n  return\n}\n"));

  Graph h("second");
  h.add_output(h.add_input(f32({1})));
  std::string both = print(g) + "\n" + print(h);
  auto m = parse_module(both, "two.kir");
  REQUIRE(m);
  REQUIRE(m->graphs.size() == 2);
  CHECK(print(*m->graphs[0]) + "\n" + print(*m->graphs[1]) == both);
  CHECK_FALSE(parse_graph(both));
  // lines: the neg node was on line 7 of the text.
  Node* neg = m->graphs[0]->first_node();
  CHECK(m->lines.at(neg) == 7);
}

TEST_CASE("parser: names are free, spacing is free inside a line, comments are ignored",
          "[ir][parser]") {
  auto g = parse_graph("// leading comment\n\n"
                       "graph @g {   // trailing comment\n"
                       "  %x.in : f32 [ 2 , 3 ] = input\n"
                       "\n"
                       "  %y_1 : f32[2,3]=neg( %x.in )  // at   f.cpp:1  \n"
                       "  // at nowhere (a location comment on its own line is ignored)\n"
                       "  return %y_1\n"
                       "}");
  REQUIRE(g);
  CHECK((*g)->first_node()->location() == "  f.cpp:1");
  CHECK(print(**g) == "graph @g {\n  %0 : f32[2,3] = input\n"
                      "  %1 : f32[2,3] = neg(%0)  // at   f.cpp:1\n  return %1\n}\n");
}

TEST_CASE("parser: errors give file:line:col, what was expected and what was found",
          "[ir][parser]") {
  const std::string head = "graph @g {\n  %0 : f32[2] = input\n";
  CHECK(parse_error(head + "  %1 f32[2] = neg(%0)\n  return %1\n}\n") ==
        "t.kir:3:6: error: expected ':', got 'f32'");
  CHECK(parse_error(head + "  %1 : f32[2] = neg(%0\n  return %1\n}\n") ==
        "t.kir:3:23: error: expected ',' or ')', got end of line");
  CHECK(parse_error(head + "  %1 : f32[2] = neg(%9)\n  return %1\n}\n") ==
        "t.kir:3:21: error: use of undefined value %9");
  CHECK(parse_error(head + "  %0 : f32[2] = neg(%0)\n  return %0\n}\n") ==
        "t.kir:3:3: error: value %0 defined twice");
  CHECK(parse_error(head + "  %1 : f32[2] = nope(%0)\n  return %1\n}\n") ==
        "t.kir:3:17: error: unknown op 'nope'");
  CHECK(parse_error("graph @g {\n  %0 : q7[2] = input\n  return\n}\n") ==
        "t.kir:2:8: error: unknown dtype 'q7'");
  CHECK(parse_error(head + "}\n") == "t.kir:3:1: error: graph @g has no return");
  CHECK(parse_error(head + "  return %0\n}\nx\n") ==
        "t.kir:5:1: error: expected 'graph' or end of file, got 'x'");
  CHECK(parse_error(head + "  return %0\n} x\n") ==
        "t.kir:4:3: error: expected end of line, got 'x'");
  CHECK(parse_error(head + "  %1 : f32[2] = neg(%0)\n  %2 : f32[2] = input\n  return\n}\n") ==
        "t.kir:4:17: error: input %2 after the first node (inputs come first)");
  CHECK(parse_error("") == "t.kir:1:1: error: expected 'graph', got end of file");
  CHECK(parse_error("graph @g {\n  %0 : f32[2,3]{1} = input\n  return\n}\n") ==
        "t.kir:2:16: error: 1 strides for a rank-2 type");
}

TEST_CASE("parser: constant and attribute errors name the dtype, op and attribute",
          "[ir][parser]") {
  auto in_graph = [](const std::string& line) {
    return parse_error("graph @g {\n  %0 : f32[2,3] = input\n" + line + "\n  return\n}\n");
  };
  CHECK_THAT(in_graph("  %1 : i64[2,2] = const [1, 2, 3]"),
             Catch::Contains("needs 4 elements, got 3"));
  CHECK_THAT(in_graph("  %1 : i64[2] = const [1, 2, 3]"), Catch::Contains("more than 2 elements"));
  CHECK_THAT(in_graph("  %1 : u8 = const 256"), Catch::Contains("literal 256 out of range for u8"));
  CHECK_THAT(in_graph("  %1 : i8 = const -129"), Catch::Contains("out of range for i8"));
  CHECK_THAT(in_graph("  %1 : i32 = const 2147483648"), Catch::Contains("out of range for i32"));
  CHECK_THAT(in_graph("  %1 : i64 = const 2.0"), Catch::Contains("expected an integer literal"));
  CHECK_THAT(in_graph("  %1 : f32 = const 1e39"), Catch::Contains("out of range for f32"));
  CHECK_THAT(in_graph("  %1 : f16 = const 65520.0"), Catch::Contains("out of range for f16"));
  CHECK_THAT(in_graph("  %1 : bool = const 1"), Catch::Contains("expected 'true' or 'false'"));
  CHECK_THAT(in_graph("  %1 : f32[2]{1} = const 1.0"), Catch::Contains("no strides"));
  CHECK_THAT(in_graph("  %1 : f32[2]@cuda:0 = const 1.0"), Catch::Contains("on the CPU"));
  CHECK_THAT(in_graph("  %1 : f32[s1] = const 1.0"), Catch::Contains("symbolic size"));
  CHECK_THAT(in_graph("  %1 : f32[4096,4096,4096] = const 1.0"),
             Catch::Contains("more than 16777216 elements"));
  CHECK_THAT(in_graph("  %1 : f32[9223372036854775807,9223372036854775807] = const 1.0"),
             Catch::Contains("t.kir:3:8: error: the element count of type "
                             "f32[9223372036854775807,9223372036854775807] overflows int64"));
  // The sizes of an empty constant are bounded too: its layout must not overflow.
  CHECK_THAT(in_graph("  %1 : f32[0,4611686018427387904,4] = const []"),
             Catch::Contains("overflows int64"));
  CHECK_THAT(in_graph("  %1 : f32[0,4611686018427387903,2] = const []"),
             Catch::Contains("more than 16777216 elements"));
  // Any type, not only a constant's: layouts are computed in int64.
  CHECK_THAT(in_graph("  %1 : f32[4294967296,4294967296]{1,1} = input"),
             Catch::Contains("overflows int64"));
  CHECK(in_graph("  %1 : f32[4294967296,2147483647,s0] = input").empty());
  CHECK_THAT(in_graph("  %1 : f32[3,2] = permute(%0) {dims = [1, 0], foo = 1}"),
             Catch::Contains("unknown attribute 'foo' for permute"));
  CHECK_THAT(in_graph("  %1 : f32[3,2] = permute(%0) {dims = [1, 0], dims = [1, 0]}"),
             Catch::Contains("duplicate attribute 'dims' for permute"));
  CHECK_THAT(in_graph("  %1 : f32[3,2] = permute(%0)"),
             Catch::Contains("missing attribute 'dims' for permute"));
  CHECK_THAT(in_graph("  %1 : f32[3,2] = permute(%0) {dims = 1}"),
             Catch::Contains("expected a list of ints '[...]' for attribute 'dims' of permute, "
                             "got '1'"));
  CHECK_THAT(in_graph("  %1 : i64[2] = argmax(%0) {dim = 1.5, keepdim = false}"),
             Catch::Contains("expected an int for attribute 'dim' of argmax, got '1.5'"));
  CHECK_THAT(in_graph("  %1 : f32[2,3] = cast(%0) {dtype = f33}"),
             Catch::Contains("unknown dtype 'f33' for attribute 'dtype' of cast"));
  CHECK_THAT(in_graph("  %1 : f32[2,3] = add(%0)"), Catch::Contains("add"));
  CHECK_THAT(in_graph("  %1 : f32[2,3] = input \"x\\q\""), Catch::Contains("invalid escape"));
}

TEST_CASE("parser: location comments off node lines are ignored", "[ir][parser]") {
  auto g = parse_graph("graph @g {  // at top\n  %0 : f32[0,5] = const []  // at in\n"
                       "  write %0, %0  // at w\n  return  // at r\n}  // at end\n");
  REQUIRE(g);
  CHECK(print(**g) == "graph @g {\n  %0 : f32[0,5] = const []\n  write %0, %0\n  return\n}\n");
}

TEST_CASE("printer: a location the comment cannot hold is printed so that it reads back",
          "[ir][printer]") {
  Graph g("locs");
  Builder b(g);
  Value* x = g.add_input(f32({2}));
  b.set_location("two\nlines\r\n");
  Value* y = b.create(Op::neg, {x});
  b.set_location(" \t ");
  g.add_output(b.create(Op::neg, {y}));
  std::string text = print(g);
  CHECK_THAT(text, Catch::Contains("neg(%0)  // at two lines\n"));
  CHECK_THAT(text, Catch::Contains("neg(%1)\n"));
  auto parsed = parse_graph(text);
  REQUIRE(parsed);
  CHECK(print(**parsed) == text);
  CHECK((*parsed)->first_node()->location() == "two lines");
}

TEST_CASE("literal: floats print shortest and read back exactly", "[ir][literal]") {
  CHECK(format_double(1.0) == "1.0");
  CHECK(format_double(-0.0) == "-0.0");
  CHECK(format_double(2.5e-8) == "2.5e-08");
  CHECK(format_double(1e300) == "1e+300");
  CHECK(format_double(std::nan("")) == "nan");
  CHECK(format_double(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(format_float(0.1f) == "0.1");
  CHECK(format_float(16777216.0f) == "16777216.0");
  double d = 0;
  CHECK(parse_double("0.1", d) == LiteralStatus::ok);
  CHECK(d == 0.1);
  CHECK(parse_double("-inf", d) == LiteralStatus::ok);
  CHECK(d == -std::numeric_limits<double>::infinity());
  CHECK(parse_double("1e999", d) == LiteralStatus::out_of_range);
  CHECK(parse_double("-123456.7e99999999999999999999", d) == LiteralStatus::out_of_range);
  CHECK(parse_double("0.0000001e309", d) == LiteralStatus::ok);
  CHECK(d == 1e302);
  // Too small for the type: a signed zero, as strtod and PyTorch give.
  CHECK(parse_double("1e-400", d) == LiteralStatus::ok);
  CHECK((d == 0 && !std::signbit(d)));
  CHECK(parse_double("-0.000e-99999999999999999999", d) == LiteralStatus::ok);
  CHECK((d == 0 && std::signbit(d)));
  CHECK(parse_double("-1000e-400", d) == LiteralStatus::ok);
  CHECK((d == 0 && std::signbit(d)));
  CHECK(parse_double("4.9e-324", d) == LiteralStatus::ok);
  CHECK(d == std::numeric_limits<double>::denorm_min());
  CHECK(parse_double("1x", d) == LiteralStatus::syntax);
  CHECK(parse_double("infinity", d) == LiteralStatus::syntax);
  float f = 0;
  CHECK(parse_float("3.4028235e+38", f) == LiteralStatus::ok);
  CHECK(f == std::numeric_limits<float>::max());
  CHECK(parse_float("3.5e38", f) == LiteralStatus::out_of_range);
  CHECK(parse_float("1e-46", f) == LiteralStatus::ok);
  CHECK(f == 0);
  CHECK(parse_float("1e-45", f) == LiteralStatus::ok);
  CHECK(f == std::numeric_limits<float>::denorm_min());
  int64_t i = 0;
  CHECK(parse_int("-9223372036854775808", i) == LiteralStatus::ok);
  CHECK(i == std::numeric_limits<int64_t>::min());
  CHECK(parse_int("9223372036854775808", i) == LiteralStatus::out_of_range);
  CHECK(parse_int("1.0", i) == LiteralStatus::syntax);
  CHECK(is_float_literal("1e5"));
  CHECK(is_float_literal("-nan"));
  CHECK_FALSE(is_float_literal("-12"));
  CHECK(quote_string("a\"\\\n\t\x7f") == "\"a\\\"\\\\\\n\\t\\x7f\"");
}
