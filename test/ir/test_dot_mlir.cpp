// Graphviz and MLIR output: string checks, and mlir-opt-22 verifying the MLIR of many graphs.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "ir/builder.h"
#include "ir/dot.h"
#include "ir/mlir.h"
#include "runtime/ops.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

Type ty(DType t, Shape s) { return Type(t, std::move(s)); }

/// Runs mlir-opt on the module; true when it verifies. Fills `log` with its diagnostics.
bool mlir_verifies(const std::string& module, std::string& log) {
  char path[] = "/tmp/kiln_mlir_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::string file = path;
  std::ofstream(file) << module;
  std::string cmd = std::string(KILN_MLIR_OPT) + " " + file + " > /dev/null 2> " + file + ".err";
  int rc = std::system(cmd.c_str());
  std::ifstream err(file + ".err");
  log.assign(std::istreambuf_iterator<char>(err), {});
  std::remove((file + ".err").c_str());
  std::remove(file.c_str());
  return rc == 0;
}

void check_mlir(const Graph& g) {
  std::string m = to_mlir(g);
  if (std::string(KILN_MLIR_OPT).empty()) {
    WARN("mlir-opt not found; skipping the MLIR verification of @" << g.name());
    return;
  }
  std::string log;
  INFO(m);
  bool ok = mlir_verifies(m, log);
  INFO(log);
  CHECK(ok);
}

/// x[8,784] @ permute(w)[784,256] + b, relu, softmax with keepdim.
std::unique_ptr<Graph> mlp() {
  auto g = std::make_unique<Graph>("mlp");
  Builder b(*g);
  Value* x = g->add_input(ty(DType::f32, {8, 784}), InputKind::user, "x");
  Value* w = g->add_input(ty(DType::f32, {256, 784}), InputKind::parameter, "w");
  Value* bias = g->add_input(ty(DType::f32, {256}), InputKind::parameter, "b");
  Value* wt = b.create(Op::permute, {w}, {std::vector<int64_t>{1, 0}});
  Value* h = b.create(Op::add, {b.create(Op::matmul, {x, wt}), bias});
  h = b.create(Op::relu, {h});
  Value* m = b.create(Op::amax, {h}, {std::vector<int64_t>{1}, true});
  Value* e = b.create(Op::exp, {b.create(Op::sub, {h, m})});
  Value* s = b.create(Op::sum, {e}, {std::vector<int64_t>{1}, true, DType::f32});
  g->add_output(b.create(Op::div, {e, s}));
  return g;
}

const Op kUnary[] = {Op::neg,   Op::abs,     Op::exp,  Op::log,   Op::sqrt,  Op::rsqrt,
                     Op::sin,   Op::cos,     Op::tanh, Op::sigmoid, Op::relu, Op::erf,
                     Op::floor, Op::ceil,    Op::round, Op::logical_not};
const Op kBinary[] = {Op::add, Op::sub, Op::mul, Op::div, Op::floor_divide, Op::remainder,
                      Op::pow, Op::maximum, Op::minimum, Op::eq, Op::ne, Op::lt, Op::le,
                      Op::gt, Op::ge, Op::logical_and, Op::logical_or};

} // namespace

TEST_CASE("mlir: the mlp with a permuted weight and softmax verifies", "[ir][mlir]") {
  auto g = mlp();
  std::string m = to_mlir(*g);
  CHECK(m.find("func.func @mlp(%v0: tensor<8x784xf32>, %v1: tensor<256x784xf32>") !=
        std::string::npos);
  CHECK(m.find("linalg.transpose") != std::string::npos);
  CHECK(m.find("linalg.matmul") != std::string::npos);
  CHECK(m.find("affine_map<(d0, d1) -> (d1)>") != std::string::npos); // the broadcast bias
  CHECK(m.find("tensor.expand_shape") != std::string::npos);          // keepdim
  CHECK(m.find("return ") != std::string::npos);
  CHECK(to_mlir(*g) == m); // deterministic
  check_mlir(*g);
}

TEST_CASE("mlir: every pointwise op over f32, f16, i32 and bool verifies", "[ir][mlir]") {
  for (DType t : {DType::f32, DType::f16, DType::i32, DType::bool_, DType::u8, DType::bf16}) {
    Graph g("pointwise");
    Builder b(g);
    Value* x = g.add_input(ty(t, {4, 3}));
    Value* y = g.add_input(ty(t, {3}));
    Value* c = g.add_input(ty(DType::bool_, {4, 1}));
    for (Op op : kUnary) {
      if (t == DType::bool_ && (op == Op::neg || op == Op::abs || op == Op::relu ||
                                op == Op::floor || op == Op::ceil || op == Op::round))
        continue;
      g.add_output(b.create(op, {x}));
    }
    for (Op op : kBinary) {
      if (t == DType::bool_ && (op == Op::sub || op == Op::floor_divide ||
                                op == Op::remainder || op == Op::pow))
        continue;
      g.add_output(b.create(op, {x, y}));
    }
    g.add_output(b.create(Op::where, {c, x, y}));
    for (DType to : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8,
                     DType::i32, DType::i64, DType::bool_})
      g.add_output(b.create(Op::cast, {x}, {to}));
    INFO("dtype " << dtype_name(t));
    check_mlir(g);
  }
}

TEST_CASE("mlir: mixed dtypes and wrapped numbers promote", "[ir][mlir]") {
  Graph g("promote");
  Builder b(g);
  Value* h = g.add_input(ty(DType::f16, {2, 3}));
  Value* i = g.add_input(ty(DType::i32, {3}));
  Value* l = g.add_input(ty(DType::i64, {2, 1}));
  g.add_output(b.create(Op::add, {h, i}));
  g.add_output(b.create(Op::mul, {i, b.scalar(Scalar(2.5))}));
  g.add_output(b.create(Op::add, {i, b.scalar(Scalar(3))}));
  g.add_output(b.create(Op::lt, {h, b.scalar(Scalar(1))}));
  g.add_output(b.create(Op::sub, {l, i}));
  g.add_output(b.create(Op::div, {i, l}));
  g.add_output(b.create(Op::maximum, {h, b.scalar(Scalar(true))}));
  std::string m = to_mlir(g);
  CHECK(m.find("arith.constant dense<2.5> : tensor<f64>") != std::string::npos);
  CHECK(m.find("arith.sitofp") != std::string::npos);
  CHECK(m.find("arith.extf") != std::string::npos);
  CHECK(m.find("arith.truncf") != std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: views, slices, expand, cat, pad and constants verify", "[ir][mlir]") {
  Graph g("views");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {2, 3, 4}));
  Value* s = g.add_input(ty(DType::f32, {}));
  g.add_output(b.create(Op::view, {x}, {std::vector<int64_t>{6, 4}}));
  g.add_output(b.create(Op::view, {x}, {std::vector<int64_t>{24}}));
  g.add_output(b.create(Op::view, {s}, {std::vector<int64_t>{1, 1}}));
  Value* p = b.create(Op::permute, {x}, {std::vector<int64_t>{2, 0, 1}});
  g.add_output(b.create(Op::copy, {p}));
  g.add_output(b.create(Op::slice, {x}, {int64_t{2}, int64_t{1}, int64_t{4}, int64_t{2}}));
  g.add_output(b.create(Op::slice, {x}, {int64_t{-1}, int64_t{-3}, int64_t{100}, int64_t{1}}));
  Value* one = b.create(Op::slice, {x}, {int64_t{1}, int64_t{0}, int64_t{1}, int64_t{1}});
  g.add_output(b.create(Op::expand, {one}, {std::vector<int64_t>{2, 5, 4}}));
  g.add_output(b.create(Op::expand, {s}, {std::vector<int64_t>{3, 2}}));
  Value* i = g.add_input(ty(DType::i32, {2, 1, 4}));
  g.add_output(b.create(Op::cat, {x, i, x}, {int64_t{1}}));
  g.add_output(b.create(Op::pad, {x}, {std::vector<int64_t>{1, 2, 0, 1}, 0.5}));
  Tensor c = kiln::arange(0, 6).to(DType::f32).view({2, 3});
  g.add_output(b.create(Op::add, {b.constant(c), b.constant(kiln::full({3}, 1.5))}));
  Tensor ci = kiln::arange(0, 4).view({2, 2});
  g.add_output(b.create(Op::mul, {b.constant(ci), b.scalar(Scalar(7))}));
  std::string m = to_mlir(g);
  CHECK(m.find("tensor.extract_slice") != std::string::npos);
  CHECK(m.find("tensor.concat dim(1)") != std::string::npos);
  CHECK(m.find("tensor.pad") != std::string::npos);
  CHECK(m.find("dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]> : tensor<2x3xf32>") != std::string::npos);
  CHECK(m.find("dense<1.5> : tensor<3xf32>") != std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: reductions, factories and batched matmul verify", "[ir][mlir]") {
  Graph g("reduce");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {2, 3, 4}));
  Value* i = g.add_input(ty(DType::i32, {2, 3}));
  Value* q = g.add_input(ty(DType::bool_, {5}));
  g.add_output(b.create(Op::sum, {x}, {std::vector<int64_t>{}, false, DType::f32}));
  g.add_output(b.create(Op::sum, {x}, {std::vector<int64_t>{0, 2}, true, DType::f64}));
  g.add_output(b.create(Op::prod, {i}, {std::vector<int64_t>{-1}, false, DType::i64}));
  g.add_output(b.create(Op::amin, {i}, {std::vector<int64_t>{0}, true}));
  g.add_output(b.create(Op::amax, {q}, {std::vector<int64_t>{0}, false}));
  g.add_output(b.create(Op::sum, {q}, {std::vector<int64_t>{0}, false, DType::i64}));
  g.add_output(b.create(Op::argmax, {x}, {int64_t{1}, false}));
  g.add_output(b.create(Op::cumsum, {x}, {int64_t{2}, DType::f32}));
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{2, 2}, Scalar(3), DType::i32}));
  g.add_output(b.create(Op::empty, {}, {std::vector<int64_t>{3}, DType::f16}));
  g.add_output(
      b.create(Op::arange, {}, {Scalar(1), Scalar(10), Scalar(2), DType::i64}));
  g.add_output(b.create(Op::randn, {}, {std::vector<int64_t>{4}, DType::f32}));
  g.add_output(b.create(Op::rand, {}, {std::vector<int64_t>{2}, DType::f32}));
  Value* a3 = g.add_input(ty(DType::f32, {5, 2, 3}));
  Value* b3 = g.add_input(ty(DType::f32, {5, 3, 4}));
  Value* b1 = g.add_input(ty(DType::f32, {1, 3, 4}));
  Value* a4 = g.add_input(ty(DType::f32, {2, 1, 2, 3}));
  g.add_output(b.create(Op::matmul, {a3, b3}));
  g.add_output(b.create(Op::matmul, {a3, b1}));
  g.add_output(b.create(Op::matmul, {a4, b3}));
  std::string m = to_mlir(g);
  CHECK(m.find("linalg.batch_matmul") != std::string::npos);
  CHECK(m.find("func.func private @kiln.argmax(tensor<2x3x4xf32>) -> tensor<2x4xi64>") !=
        std::string::npos);
  CHECK(m.find("func.call @kiln.randn() {kiln_sizes = array<i64: 4>") != std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: conv2d and pools verify; gather and scatter are external", "[ir][mlir]") {
  Graph g("conv");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {1, 3, 9, 9}));
  Value* w = g.add_input(ty(DType::f32, {8, 3, 3, 3}), InputKind::parameter);
  Value* bias = g.add_input(ty(DType::f32, {8}), InputKind::parameter);
  std::vector<int64_t> one{1, 1}, two{2, 2}, zero{0, 0};
  Value* y = b.create(Op::conv2d, {x, w, bias}, {two, one, one, int64_t{1}});
  g.add_output(b.create(Op::max_pool2d, {y}, {two, two, zero, one, false}));
  g.add_output(b.create(Op::max_pool2d, {y}, {std::vector<int64_t>{3, 3}, two, one, one, true}));
  g.add_output(b.create(Op::avg_pool2d, {y}, {two, two, zero, false, true}));
  g.add_output(b.create(Op::avg_pool2d, {y}, {two, two, one, true, false}));
  g.add_output(b.create(Op::conv2d, {x, w}, {one, zero, one, int64_t{1}}));
  Value* idx = g.add_input(ty(DType::i64, {2, 9}));
  Value* flat = b.create(Op::view, {x}, {std::vector<int64_t>{27, 9}});
  g.add_output(b.create(Op::gather, {flat, idx}, {int64_t{0}}));
  g.add_output(b.create(Op::index_select, {flat, g.add_input(ty(DType::i64, {4}))}, {int64_t{0}}));
  std::string m = to_mlir(g);
  CHECK(m.find("linalg.conv_2d_nchw_fchw") != std::string::npos);
  CHECK(m.find("linalg.pooling_nchw_max") != std::string::npos);
  CHECK(m.find("linalg.pooling_nchw_sum") != std::string::npos);
  CHECK(m.find("func.call @kiln.avg_pool2d(") != std::string::npos); // ceil_mode
  CHECK(m.find("func.call @kiln.gather(") != std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: writes become extra results; no outputs is an empty return", "[ir][mlir]") {
  Graph g("step");
  Builder b(g);
  Value* p = g.add_input(ty(DType::f32, {4}), InputKind::parameter, "w");
  Value* gr = g.add_input(ty(DType::f32, {4}));
  Value* np = b.create(Op::sub, {p, b.create(Op::mul, {gr, b.scalar(Scalar(0.1))})});
  g.add_write(p, np);
  std::string m = to_mlir(g);
  CHECK(m.find("-> (tensor<4xf32>)") != std::string::npos);
  check_mlir(g);
  Graph e("nothing");
  CHECK(to_mlir(e).find("    return\n") != std::string::npos);
  check_mlir(e);
}

TEST_CASE("mlir: symbolic sizes and cuda values are errors", "[ir][mlir]") {
  Graph g("sym");
  g.add_output(g.add_input(Type(DType::f32, {Type::symbol(0), 4})));
  CHECK_THROWS_WITH(to_mlir(g), Catch::Contains("symbolic sizes"));
  Graph c("cuda");
  c.add_output(c.add_input(Type(DType::f32, {4}, {}, Device::cuda(0))));
  CHECK_THROWS_WITH(to_mlir(c), Catch::Contains("only cpu graphs"));
}

TEST_CASE("dot: inputs, ops, edges, outputs and writes", "[ir][dot]") {
  Graph g("g\"1");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {2, 3}), InputKind::user, "x<\"in\">");
  Value* w = g.add_input(ty(DType::f32, {3, 2}), InputKind::parameter, "w");
  Value* s = b.scalar(Scalar(2.0));
  Value* m = b.create(Op::matmul, {x, w});
  Value* r = b.create(Op::mul, {m, s});
  Value* t = b.create(Op::permute, {r}, {std::vector<int64_t>{1, 0}});
  Value* e = b.create(Op::exp, {b.create(Op::permute, {t}, {std::vector<int64_t>{1, 0}})});
  g.add_output(e);
  g.add_output(m);
  g.add_write(x, b.create(Op::copy, {r}));
  std::string d = to_dot(g);
  INFO(d);
  CHECK(d.rfind("digraph \"g\\\"1\" {\n", 0) == 0);
  CHECK(d.find("v0 [shape=ellipse, label=\"%0 input \\\"x\\<\\\"in\\\"\\>\\\"\\nf32[2,3]\"];") !=
        std::string::npos);
  CHECK(d.find("v1 [shape=ellipse, label=\"%1 param \\\"w\\\"\\nf32[3,2]\"];") !=
        std::string::npos);
  CHECK(d.find("v2 [shape=ellipse, label=\"%2 const\\nf64\"];") != std::string::npos);
  CHECK(d.find("n0 [shape=box, label=\"%3 = matmul\\n: f32[2,2]\"];") != std::string::npos);
  CHECK(d.find("n2 [shape=box, label=\"%5 = permute\\ndims = [1, 0]\\n: f32[2,2]\\{1,2\\}\"];") !=
        std::string::npos);
  CHECK(d.find("v0 -> n0 [label=\"0\"];") != std::string::npos);
  CHECK(d.find("v1 -> n0 [label=\"1\"];") != std::string::npos);
  CHECK(d.find("n2 -> n3;") != std::string::npos); // one operand: no label
  CHECK(d.find("n4 -> out0;") != std::string::npos);
  CHECK(d.find("n0 -> out1;") != std::string::npos);
  CHECK(d.find("n5 -> v0 [style=dashed, color=red, constraint=false, label=\"write 0\"];") !=
        std::string::npos);
  CHECK(to_dot(g) == d);
  auto c = g.clone();
  CHECK(to_dot(*c) == d);
}
