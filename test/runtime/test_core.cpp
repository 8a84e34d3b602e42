// Core tensor machinery: dtypes, half conversions, shapes, dispatch, errors with call sites.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <kiln/kiln.h>

#include "runtime/ops/dispatch.h"

using namespace kiln;

TEST_CASE("dtype sizes and names", "[core]") {
  CHECK(itemsize(DType::f32) == 4);
  CHECK(itemsize(DType::bf16) == 2);
  CHECK(itemsize(DType::bool_) == 1);
  CHECK(dtype_name(DType::bool_) == "bool");
  DType t;
  CHECK(parse_dtype("bf16", t));
  CHECK(t == DType::bf16);
  CHECK_FALSE(parse_dtype("f128", t));
}

TEST_CASE("promote_types follows PyTorch", "[core]") {
  CHECK(promote_types(DType::i32, DType::f16) == DType::f16);
  CHECK(promote_types(DType::f16, DType::bf16) == DType::f32);
  CHECK(promote_types(DType::u8, DType::i8) == DType::i32);
  CHECK(promote_types(DType::bool_, DType::u8) == DType::u8);
  CHECK(promote_types(DType::i64, DType::i32) == DType::i64);
  CHECK(promote_types(DType::f32, DType::f64) == DType::f64);
  CHECK(promote_types(DType::u8, DType::i64) == DType::i64);
}

TEST_CASE("result_type: scalars and 0-d tensors only raise the category", "[core]") {
  auto meta = [](DType t, Shape s, bool wrapped = false) {
    return TensorMeta{t, Device::cpu(), s, {}, wrapped};
  };
  std::vector<TensorMeta> m1{meta(DType::i32, {3}), meta(DType::i64, {}, true)};
  CHECK(result_type(m1) == DType::i32);
  std::vector<TensorMeta> m2{meta(DType::i32, {3}), meta(DType::f64, {}, true)};
  CHECK(result_type(m2) == DType::f32);
  std::vector<TensorMeta> m3{meta(DType::f16, {3}), meta(DType::f64, {}, true)};
  CHECK(result_type(m3) == DType::f16);
  std::vector<TensorMeta> m4{meta(DType::f16, {3}), meta(DType::f64, {})};
  CHECK(result_type(m4) == DType::f16);
  std::vector<TensorMeta> m5{meta(DType::i32, {3}), meta(DType::f64, {})};
  CHECK(result_type(m5) == DType::f64);
  std::vector<TensorMeta> m6{meta(DType::bool_, {3}), meta(DType::i64, {}, true)};
  CHECK(result_type(m6) == DType::i64);
  std::vector<TensorMeta> m7{meta(DType::u8, {3}), meta(DType::i8, {2})};
  CHECK(result_type(m7) == DType::i32);
}

TEST_CASE("can_cast forbids float to int and number to bool", "[core]") {
  CHECK(can_cast(DType::i32, DType::f32));
  CHECK_FALSE(can_cast(DType::f32, DType::i64));
  CHECK_FALSE(can_cast(DType::i32, DType::bool_));
  CHECK(can_cast(DType::bool_, DType::i32));
}

TEST_CASE("half conversions round to nearest even", "[core]") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(65520.0f) == 0x7c00); // overflows to inf
  CHECK(float_to_half_bits(65519.0f) == 0x7bff);
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((float_to_half_bits(std::nanf("")) & 0x7c00) == 0x7c00);
  CHECK((float_to_half_bits(std::nanf("")) & 0x3ff) != 0);
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
  CHECK(float_to_half_bits(5.960464477539063e-08f) == 0x0001);   // smallest denormal
  CHECK(float_to_half_bits(2.98023223876953125e-08f) == 0x0000); // exactly half: ties to even
  CHECK(float_to_half_bits(2.98023224e-08f * 1.5f) == 0x0001);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  CHECK(float_to_half_bits(1.0f + 0x1p-11f) == 0x3c00);
  CHECK(float_to_half_bits(1.0f + 3 * 0x1p-11f) == 0x3c02);
  // Every half round-trips exactly.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7c00) == 0x7c00 && (b & 0x3ff)) continue; // NaN payloads
    REQUIRE(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(b))) == b);
  }
}

TEST_CASE("bfloat16 conversions round to nearest even", "[core]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80); // tie → even
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82); // tie → even (up)
  CHECK(float_to_bf16_bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  uint16_t nan = float_to_bf16_bits(std::nanf(""));
  CHECK((nan & 0x7f80) == 0x7f80);
  CHECK((nan & 0x7f) != 0);
  CHECK(bf16_bits_to_float(0xc000) == -2.0f);
}

TEST_CASE("shapes: broadcasting, numel overflow, dim wrapping", "[core]") {
  CHECK(broadcast_shapes(Shape{3, 1}, Shape{4}, "add") == Shape{3, 4});
  CHECK(broadcast_shapes(Shape{}, Shape{2, 2}, "add") == Shape{2, 2});
  CHECK_THROWS_WITH(broadcast_shapes(Shape{3}, Shape{4}, "add"),
                    Catch::Contains("add: shapes [3] and [4] are not broadcastable"));
  CHECK_THROWS_WITH(checked_numel(Shape{1LL << 40, 1LL << 40}, "zeros"), Catch::Contains("zeros"));
  CHECK(wrap_dim(-1, 3, "sum") == 2);
  CHECK_THROWS_WITH(wrap_dim(3, 3, "sum"), Catch::Contains("sum: dim 3 is out of range"));
  CHECK(contiguous_strides(Shape{2, 3, 4}) == Shape{12, 4, 1});
  CHECK(is_contiguous(Shape{2, 1, 3}, Shape{3, 99, 1}));
}

TEST_CASE("errors carry the user's call site", "[core][errors]") {
  try {
    wrap_dim(5, 2, "select");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK_THAT(e.location(), Catch::Contains("test_core.cpp:"));
    CHECK_THAT(e.what(), Catch::Contains("(at "));
  }
}

TEST_CASE("op table: every op has a schema with parsed attributes", "[core]") {
  CHECK(kNumOps > 50);
  CHECK(schema(Op::sum).attrs.size() == 3);
  CHECK(schema(Op::sum).attrs[0].name == "dims");
  CHECK(schema(Op::sum).attrs[0].kind == AttrKind::ints);
  CHECK(find_op("conv2d") == Op::conv2d);
  CHECK_FALSE(find_op("nope").has_value());
  for (int i = 0; i < kNumOps; ++i) {
    const OpSchema& s = schema(static_cast<Op>(i));
    CHECK(s.op == static_cast<Op>(i));
    CHECK(!s.name.empty());
  }
}

TEST_CASE("storage is 64-byte aligned and versions are shared by views", "[core]") {
  Tensor t = make_tensor({3, 5}, DType::f32);
  CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  Tensor v = make_view(t, {5}, {1}, 5);
  CHECK(v.version() == t.version());
  t.impl().storage->bump_version();
  CHECK(v.version() == 1);
}

TEST_CASE("Philox 4x32-10 matches the Random123 known-answer vectors", "[core][random]") {
  auto a = philox4x32_10(0, 0, 0);
  CHECK(a == std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  auto b = philox4x32_10(~0ULL, ~0ULL, ~0ULL);
  CHECK(b == std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  auto c = philox4x32_10(0x85a308d3243f6a88ULL, 0x0370734413198a2eULL, 0x299f31d0a4093822ULL);
  CHECK(c == std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("docs/ops.md documents every primitive of the op table", "[core][docs]") {
  std::ifstream in(std::string(KILN_TEST_DIR) + "/../docs/ops.md");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  for (int i = 0; i < kNumOps; ++i) {
    std::string name = "| `" + std::string(schema(static_cast<Op>(i)).name) + "` |";
    INFO(name);
    CHECK(text.str().find(name) != std::string::npos);
  }
}
