// Type promotion of the pointwise ops: tensors, 0-d tensors and scalar operands, per op family.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

using namespace kiln;

namespace {

const DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                      DType::u8,  DType::i32, DType::i64, DType::bool_};

} // namespace

TEST_CASE("add of every dtype pair gives promote_types and the right value", "[promotion]") {
  for (DType a : kAll) {
    for (DType b : kAll) {
      Tensor r = add(ones({2}, a), ones({2}, b));
      INFO(a << " + " << b);
      CHECK(r.dtype() == promote_types(a, b));
      // 1 + 1 = 2, except bool + bool (logical or) = true.
      CHECK(r.to_vector<double>() == std::vector<double>(2, r.dtype() == DType::bool_ ? 1.0 : 2.0));
      // The same with the second operand as a 0-d tensor: it only raises the category.
      Tensor z = add(ones({2}, a), scalar_tensor(1, b));
      bool raises = (is_floating(b) && !is_floating(a)) || (a == DType::bool_ && b != DType::bool_);
      CHECK(z.dtype() == (raises ? promote_types(a, b) : a));
    }
  }
}

TEST_CASE("scalars are weak operands", "[promotion]") {
  CHECK(add(ones({2}, DType::i32), 2.5).dtype() == DType::f32);
  CHECK(add(ones({2}, DType::i32), 2.5).to_vector<float>() == std::vector<float>{3.5f, 3.5f});
  CHECK(mul(ones({2}, DType::f16), 2.0).dtype() == DType::f16);
  CHECK(mul(ones({2}, DType::bf16), 2).dtype() == DType::bf16);
  CHECK(add(ones({2}, DType::f32), 1e-300).dtype() == DType::f32);
  CHECK(add(ones({2}, DType::i64), 3).dtype() == DType::i64);
  CHECK(add(ones({2}, DType::i8), 3).dtype() == DType::i8);
  CHECK(add(ones({2}, DType::bool_), 1).dtype() == DType::i64);
  CHECK(add(ones({2}, DType::bool_), 1.5).dtype() == DType::f32);
  CHECK(mul(ones({2}, DType::bool_), true).dtype() == DType::bool_);
  CHECK(add(ones({2}, DType::i32), true).dtype() == DType::i32);
  // The scalar is converted to the tensor's dtype: 1000 wraps to 232 in u8, as PyTorch.
  CHECK(add(ones({1}, DType::u8), 1000).to_vector<int32_t>() == std::vector<int32_t>{233});
}

TEST_CASE("0-d tensors take part by category, dim-ful tensors by dtype", "[promotion]") {
  CHECK(add(ones({2}, DType::i32), scalar_tensor(5)).dtype() == DType::i32); // i32 + i64 0-d
  CHECK(add(ones({2}, DType::i32), scalar_tensor(2.5, DType::f64)).dtype() == DType::f64);
  CHECK(add(ones({2}, DType::i64), scalar_tensor(2.5, DType::f16)).dtype() == DType::f16);
  CHECK(add(ones({2}, DType::f16), scalar_tensor(2.5, DType::f32)).dtype() == DType::f16);
  CHECK(add(ones({2}, DType::f16), ones({2}, DType::f32)).dtype() == DType::f32);
  CHECK(add(ones({2}, DType::f16), ones({2}, DType::bf16)).dtype() == DType::f32);
  CHECK(add(ones({2}, DType::i8), scalar_tensor(1, DType::u8)).dtype() == DType::i8);
  Tensor um = add(tensor<uint8_t>({200}), tensor<int8_t>({-1}));
  CHECK(um.dtype() == DType::i32);
  CHECK(um.to_vector<int32_t>() == std::vector<int32_t>{199});
  // Two 0-d tensors promote between themselves.
  CHECK(add(scalar_tensor(1, DType::i32), scalar_tensor(1, DType::i64)).dtype() == DType::i64);
  CHECK(add(scalar_tensor(1.0, DType::f32), scalar_tensor(1)).dtype() == DType::f32);
  // Two bools add as logical or.
  Tensor bb = add(tensor<bool>({true, false}), tensor<bool>({true, false}));
  CHECK(bb.dtype() == DType::bool_);
  CHECK(bb.to_vector<bool>() == std::vector<bool>{true, false});
}

TEST_CASE("op families: division, comparisons, unary math, where, pow", "[promotion]") {
  CHECK(div(ones({2}, DType::i32), ones({2}, DType::i32)).dtype() == DType::f32);
  CHECK(div(ones({2}, DType::i64), 2).dtype() == DType::f32);
  CHECK(div(ones({2}, DType::bool_), ones({2}, DType::bool_)).dtype() == DType::f32);
  CHECK(div(ones({2}, DType::f64), 2).dtype() == DType::f64);
  CHECK(div(ones({2}, DType::f16), 2).dtype() == DType::f16);
  CHECK(floor_divide(ones({2}, DType::i64), 2).dtype() == DType::i64);
  CHECK(floor_divide(ones({2}, DType::i64), 2.5).dtype() == DType::f32);
  CHECK(remainder(ones({2}, DType::u8), 2).dtype() == DType::u8);
  CHECK(lt(ones({2}, DType::i32), 2.5).dtype() == DType::bool_);
  CHECK(eq(ones({2}, DType::f16), ones({2}, DType::i64)).dtype() == DType::bool_);
  CHECK(logical_and(ones({2}, DType::f32), ones({2}, DType::i8)).dtype() == DType::bool_);
  CHECK(exp(ones({2}, DType::i32)).dtype() == DType::f32);
  CHECK(sigmoid(ones({2}, DType::bool_)).dtype() == DType::f32);
  CHECK(log(ones({2}, DType::f16)).dtype() == DType::f16);
  CHECK(erf(ones({2}, DType::bf16)).dtype() == DType::bf16);
  CHECK(neg(ones({2}, DType::u8)).dtype() == DType::u8);
  CHECK(abs(ones({2}, DType::i8)).dtype() == DType::i8);
  CHECK(relu(ones({2}, DType::i64)).dtype() == DType::i64);
  CHECK(logical_not(ones({2}, DType::f32)).dtype() == DType::bool_);
  CHECK(where(ones({2}, DType::bool_), ones({2}, DType::i8), ones({2}, DType::u8)).dtype() ==
        DType::i32);
  CHECK(where(ones({2}, DType::bool_), ones({2}, DType::i64), 1.5).dtype() == DType::f32);
  CHECK(pow(ones({2}, DType::i32), 2).dtype() == DType::i32);
  CHECK(pow(ones({2}, DType::i32), 2.0).dtype() == DType::f32);
  CHECK(pow(ones({2}, DType::f16), 2).dtype() == DType::f16);
  CHECK(maximum(ones({2}, DType::i32), ones({2}, DType::f16)).dtype() == DType::f16);
  CHECK(maximum(ones({2}, DType::u8), 300).to_vector<int32_t>() == std::vector<int32_t>{44, 44});
}

TEST_CASE("bool subtraction and negation are refused as in PyTorch", "[promotion]") {
  Tensor b = tensor<bool>({true, false});
  CHECK_THROWS_WITH(sub(b, b),
                    Catch::Contains("sub: subtraction") && Catch::Contains("two bool tensors"));
  CHECK_THROWS_WITH(sub(b, ones({2})), Catch::Contains("with a bool tensor"));
  CHECK_THROWS_WITH(1 - b, Catch::Contains("with a bool tensor"));
  CHECK_THROWS_WITH(-b, Catch::Contains("neg"));
  CHECK_THROWS_WITH(sub(ones({2}, DType::i32), true), Catch::Contains("with a bool tensor"));
}
