// Graphviz and MLIR output: string checks, and mlir-opt-22 verifying the MLIR of many graphs.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/dot.h"
#include "ir/mlir.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

Type ty(DType t, Shape s) { return Type(t, std::move(s)); }

/// Runs mlir-opt on the module; true when it verifies. Fills `log` with its diagnostics.
bool mlir_verifies(const std::string& module, std::string& log, const std::string& flags = "") {
  char path[] = "/tmp/kiln_mlir_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::string file = path;
  std::ofstream(file) << module;
  std::string cmd =
      std::string(KILN_MLIR_OPT) + " " + flags + " " + file + " > /dev/null 2> " + file + ".err";
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
  // Beyond verifying: the tensors bufferize and the linalg ops lower to loops.
  std::string lowered_log;
  bool lowered = mlir_verifies(m, lowered_log,
                               "--one-shot-bufferize=bufferize-function-boundaries "
                               "--convert-linalg-to-loops");
  INFO(lowered_log);
  CHECK(lowered);
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

const Op kUnary[] = {Op::neg,   Op::abs,  Op::exp,   Op::log,        Op::sqrt, Op::rsqrt,
                     Op::sin,   Op::cos,  Op::tanh,  Op::sigmoid,    Op::relu, Op::erf,
                     Op::floor, Op::ceil, Op::round, Op::logical_not};
const Op kBinary[] = {Op::add,         Op::sub,       Op::mul,     Op::div,     Op::floor_divide,
                      Op::remainder,   Op::pow,       Op::maximum, Op::minimum, Op::eq,
                      Op::ne,          Op::lt,        Op::le,      Op::gt,      Op::ge,
                      Op::logical_and, Op::logical_or};

// ---- running the MLIR: mlir-opt lowers it to the LLVM dialect, mlir-runner executes it ----

/// mlir-runner and its runtime libraries, found next to mlir-opt (LLVM's bin/ and lib/).
struct MlirRunner {
  std::string runner, libs;
};

MlirRunner find_runner() {
  namespace fs = std::filesystem;
  if (std::string(KILN_MLIR_OPT).empty()) return {};
  std::error_code ec;
  fs::path bin = fs::canonical(KILN_MLIR_OPT, ec).parent_path();
  if (ec || !fs::exists(bin / "mlir-runner")) return {};
  std::vector<std::string> libs;
  for (const char* name : {"libmlir_runner_utils.so", "libmlir_c_runner_utils.so"}) {
    std::vector<std::string> found;
    for (const auto& f : fs::directory_iterator(bin.parent_path() / "lib", ec))
      if (f.path().filename().string().rfind(name, 0) == 0) found.push_back(f.path().string());
    if (found.empty()) return {};
    std::sort(found.begin(), found.end());
    libs.push_back(found.front());
  }
  return {(bin / "mlir-runner").string(), libs[0] + "," + libs[1]};
}

/// The values a graph returns (outputs, then write sources), computed by the eager kernels;
/// the graph's inputs must all be constants.
std::vector<Tensor> run_eager(const Graph& g) {
  std::unordered_map<const Value*, Tensor> env; // lookups only
  for (const Value* v : g.inputs()) {
    REQUIRE(v->is_constant());
    env[v] = v->constant();
  }
  for (const Node* n : g.nodes()) {
    std::vector<Tensor> args;
    for (const Value* v : n->inputs())
      args.push_back(env.at(v));
    std::vector<Tensor> r = dispatch(n->op(), args, n->attrs());
    for (size_t k = 0; k < r.size(); ++k)
      env[n->output(k)] = r[k];
  }
  std::vector<Tensor> out;
  for (const Value* v : g.outputs())
    out.push_back(env.at(v));
  for (const InPlaceWrite& w : g.writes())
    out.push_back(env.at(w.source));
  return out;
}

/// MLIR element type of a dtype, as the MLIR output spells it.
std::string mlir_elem(DType t) {
  switch (t) {
  case DType::bool_: return "i1";
  case DType::u8: return "i8";
  default: return std::string(dtype_name(t));
  }
}

/// A @main that calls the graph's function and prints every result, floats widened to f64
/// (printMemrefF64), integers and bools to i64 (printMemrefI64).
std::string runner_main(const Graph& g, const std::vector<Tensor>& results) {
  std::string types, body;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string shape;
    for (int64_t d : results[i].sizes())
      shape += std::to_string(d) + "x";
    types += (i ? ", " : "") + ("tensor<" + shape + mlir_elem(results[i].dtype()) + ">");
  }
  std::string call = results.size() == 1 ? "%r" : "%r:" + std::to_string(results.size());
  body += "    " + call + " = call @" + g.name() + "() : () -> (" + types + ")\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor& t = results[i];
    std::string r = results.size() == 1 ? "%r" : "%r#" + std::to_string(i);
    bool fl = is_floating(t.dtype());
    std::string wide = fl ? "f64" : "i64", shape, dims, maps;
    for (int64_t d = 0; d < t.dim(); ++d) {
      shape += std::to_string(t.sizes()[static_cast<size_t>(d)]) + "x";
      dims += (d ? ", d" : "d") + std::to_string(d);
      maps += d ? ", \"parallel\"" : "\"parallel\"";
    }
    std::string from = "tensor<" + shape + mlir_elem(t.dtype()) + ">";
    std::string to = "tensor<" + shape + wide + ">";
    std::string conv = t.dtype() == DType::f64 || t.dtype() == DType::i64    ? ""
                       : fl                                                  ? "arith.extf"
                       : t.dtype() == DType::u8 || t.dtype() == DType::bool_ ? "arith.extui"
                                                                             : "arith.extsi";
    std::string id = "affine_map<(" + dims + ") -> (" + dims + ")>";
    std::string n = std::to_string(i);
    body += "    %e" + n + " = tensor.empty() : " + to + "\n";
    body += "    %c" + n + " = linalg.generic {indexing_maps = [" + id + ", " + id +
            "], iterator_types = [" + maps + "]} ins(" + r + " : " + from + ") outs(%e" + n +
            " : " + to + ") {\n";
    body += "    ^bb0(%a: " + mlir_elem(t.dtype()) + ", %o: " + wide + "):\n";
    if (conv.empty()) {
      body += "      linalg.yield %a : " + wide + "\n";
    } else {
      body += "      %w = " + conv + " %a : " + mlir_elem(t.dtype()) + " to " + wide + "\n";
      body += "      linalg.yield %w : " + wide + "\n";
    }
    body += "    } -> " + to + "\n";
    std::string un = "tensor<*x" + wide + ">";
    body += "    %u" + n + " = tensor.cast %c" + n + " : " + to + " to " + un + "\n";
    body += "    call @printMemref" + std::string(fl ? "F64" : "I64") + "(%u" + n + ") : (" + un +
            ") -> ()\n";
  }
  return "  func.func private @printMemrefF64(tensor<*xf64>) attributes {llvm.emit_c_interface}\n"
         "  func.func private @printMemrefI64(tensor<*xi64>) attributes {llvm.emit_c_interface}\n"
         "  func.func @main() {\n" +
         body + "    return\n  }\n";
}

/// The numbers after each "data =" of the runner's output, one list per printed memref.
std::vector<std::vector<double>> parse_printed(const std::string& text) {
  std::vector<std::vector<double>> out;
  size_t pos = 0;
  while ((pos = text.find("data =", pos)) != std::string::npos) {
    pos += 6;
    size_t end = text.find("Unranked Memref", pos);
    std::string block = text.substr(pos, end == std::string::npos ? end : end - pos);
    std::vector<double> values;
    std::string tok;
    auto flush = [&] {
      if (!tok.empty()) values.push_back(std::strtod(tok.c_str(), nullptr));
      tok.clear();
    };
    for (char c : block) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+')
        tok += c;
      else
        flush();
    }
    flush();
    out.push_back(std::move(values));
  }
  return out;
}

std::vector<double> as_doubles(const Tensor& t) {
  Tensor c = t.contiguous().to(DType::f64);
  const double* p = static_cast<const double*>(c.raw_data());
  return std::vector<double>(p, p + c.numel());
}

/// Lowers the graph's MLIR to LLVM, runs it, and compares every result with eager execution:
/// integers exactly, floats within the printing precision (and a rounding of the dtype).
void check_mlir_runs(const Graph& g) {
  static const MlirRunner runner = find_runner();
  if (runner.runner.empty()) {
    WARN("mlir-runner not found; skipping the execution of @" << g.name());
    return;
  }
  std::vector<Tensor> expected = run_eager(g);
  std::string m = to_mlir(g);
  REQUIRE(m.size() > 2);
  m = m.substr(0, m.size() - 2) + runner_main(g, expected) + "}\n";
  INFO(m);
  char path[] = "/tmp/kiln_mlir_run_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::string file = path;
  std::ofstream(file) << m;
  std::string pipeline =
      "--one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops "
      "--expand-strided-metadata --lower-affine --convert-scf-to-cf --convert-math-to-funcs "
      "--convert-math-to-llvm --convert-math-to-libm --finalize-memref-to-llvm "
      "--convert-arith-to-llvm --convert-func-to-llvm --convert-cf-to-llvm "
      "--reconcile-unrealized-casts";
  std::string cmd = std::string(KILN_MLIR_OPT) + " " + pipeline + " " + file + " -o " + file +
                    ".ll 2> " + file + ".err && " + runner.runner + " " + file +
                    ".ll -e main -entry-point-result=void -shared-libs=" + runner.libs + " > " +
                    file + ".out 2>> " + file + ".err";
  int rc = std::system(cmd.c_str());
  auto slurp = [](const std::string& f) {
    std::ifstream in(f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string out = slurp(file + ".out"), err = slurp(file + ".err");
  for (const char* ext : {"", ".ll", ".err", ".out"})
    std::remove((file + ext).c_str());
  INFO(err);
  REQUIRE(rc == 0);
  std::vector<std::vector<double>> got = parse_printed(out);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::vector<double> want = as_doubles(expected[i]);
    DType t = expected[i].dtype();
    double rel = t == DType::f16 ? 2e-3 : t == DType::bf16 ? 1.6e-2 : 3e-5;
    INFO("result " << i << " of @" << g.name() << ", dtype " << dtype_name(t));
    REQUIRE(got[i].size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      double a = got[i][k], b = want[k];
      bool ok = (std::isnan(a) && std::isnan(b)) || a == b ||
                (is_floating(t) && std::abs(a - b) <= 1e-6 + rel * std::abs(b));
      if (!ok) {
        INFO("element " << k << ": mlir gives " << a << ", eager " << b);
        CHECK(ok);
        break;
      }
    }
  }
}

/// Deterministic test data of dtype t: small values (quarter steps for floats, so f16 holds
/// them exactly), or, with `nonzero`, values that are never 0.
Tensor data(Shape sizes, DType t, int seed, bool nonzero = false) {
  int64_t n = 1;
  for (int64_t d : sizes)
    n *= d;
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = (i * 7 + seed * 13) % 17 - 8; // -8..8
    if (t == DType::u8) k += 8;
    if (nonzero && k == 0) k = 3;
    if (t == DType::bool_) k = (i + seed) % 3 == 0;
    v.push_back(is_floating(t) ? static_cast<double>(k) * 0.25 : static_cast<double>(k));
  }
  return kiln::tensor(v, sizes).to(t);
}

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
      if (t == DType::bool_ &&
          (op == Op::sub || op == Op::floor_divide || op == Op::remainder || op == Op::pow))
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
  g.add_output(b.create(Op::argmin, {i}, {int64_t{-1}, true}));
  g.add_output(b.create(Op::argmax, {q}, {int64_t{0}, false}));
  g.add_output(b.create(Op::sum, {g.add_input(Type(DType::f16, {4, 4}))},
                        {std::vector<int64_t>{1}, false, DType::f16}));
  g.add_output(b.create(Op::cumsum, {x}, {int64_t{2}, DType::f32}));
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{2, 2}, Scalar(3), DType::i32}));
  g.add_output(b.create(Op::empty, {}, {std::vector<int64_t>{3}, DType::f16}));
  g.add_output(b.create(Op::arange, {}, {Scalar(1), Scalar(10), Scalar(2), DType::i64}));
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
  CHECK(m.find("func.func private @kiln.cumsum(tensor<2x3x4xf32>) -> tensor<2x3x4xf32>") !=
        std::string::npos);
  CHECK(m.find(":2 = linalg.generic") != std::string::npos); // argmax: (value, index)
  CHECK(m.find("@kiln.argm") == std::string::npos);
  CHECK(m.find("func.call @kiln.randn() {kiln_sizes = array<i64: 4>") != std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: conv2d and pools verify across groups, dtypes, ranks and modes", "[ir][mlir]") {
  Graph g("conv");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {1, 4, 9, 9}));
  Value* w = g.add_input(ty(DType::f32, {8, 4, 3, 3}), InputKind::parameter);
  Value* wg = g.add_input(ty(DType::f32, {6, 2, 3, 3}), InputKind::parameter);
  Value* bias = g.add_input(ty(DType::f32, {8}), InputKind::parameter);
  Value* bias6 = g.add_input(ty(DType::f32, {6}), InputKind::parameter);
  std::vector<int64_t> one{1, 1}, two{2, 2}, zero{0, 0}, three{3, 3};
  Value* y = b.create(Op::conv2d, {x, w, bias}, {two, one, one, int64_t{1}});
  g.add_output(b.create(Op::conv2d, {x, w}, {one, zero, two, int64_t{1}}));
  g.add_output(b.create(Op::conv2d, {x, wg, bias6}, {one, one, one, int64_t{2}}));
  Value* xh = g.add_input(ty(DType::f16, {2, 4, 6, 6}));
  Value* wh = g.add_input(ty(DType::f16, {4, 1, 3, 3}));
  g.add_output(b.create(Op::conv2d, {xh, wh}, {one, one, one, int64_t{4}}));
  g.add_output(b.create(Op::max_pool2d, {y}, {two, two, zero, one, false}));
  g.add_output(b.create(Op::max_pool2d, {y}, {three, two, one, one, true}));
  g.add_output(b.create(Op::max_pool2d, {y}, {two, one, zero, two, false})); // dilation 2
  g.add_output(b.create(Op::avg_pool2d, {y}, {two, two, zero, false, true}));
  g.add_output(b.create(Op::avg_pool2d, {y}, {two, two, one, true, false}));
  g.add_output(b.create(Op::avg_pool2d, {y}, {three, two, one, true, true}));
  for (DType t : {DType::i32, DType::u8, DType::f16, DType::i64}) {
    Value* p = g.add_input(ty(t, {3, 7, 7})); // 3-d (C, H, W)
    g.add_output(b.create(Op::max_pool2d, {p}, {three, two, one, one, true}));
    g.add_output(b.create(Op::avg_pool2d, {p}, {three, two, one, false, false}));
  }
  std::string m = to_mlir(g);
  CHECK(m.find("linalg.conv_2d_nchw_fchw") != std::string::npos);
  CHECK(m.find("linalg.conv_2d_ngchw_gfchw") != std::string::npos);
  CHECK(m.find("linalg.pooling_nchw_max") != std::string::npos);
  CHECK(m.find("linalg.pooling_nchw_sum") != std::string::npos);
  CHECK(m.find("arith.divsi") != std::string::npos); // integer average pools truncate
  CHECK(m.find("func.call") == std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: gather and index_select use tensor.extract and scatter a call", "[ir][mlir]") {
  Graph g("index");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {5, 4}));
  g.add_output(b.create(Op::gather, {x, g.add_input(ty(DType::i64, {2, 4}))}, {int64_t{0}}));
  g.add_output(b.create(Op::gather, {x, g.add_input(ty(DType::i32, {5, 2}))}, {int64_t{-1}}));
  g.add_output(b.create(Op::index_select, {x, g.add_input(ty(DType::i64, {3}))}, {int64_t{1}}));
  g.add_output(b.create(Op::index_select, {x, g.add_input(ty(DType::i32, {}))}, {int64_t{0}}));
  Value* s = g.add_input(ty(DType::f32, {}));
  g.add_output(b.create(Op::index_select, {s, g.add_input(ty(DType::i64, {1}))}, {int64_t{0}}));
  Value* idx = g.add_input(ty(DType::i64, {2, 4}));
  Value* src = g.add_input(ty(DType::f32, {2, 4}));
  g.add_output(b.create(Op::scatter, {x, idx, src}, {int64_t{0}}));
  std::string m = to_mlir(g);
  CHECK(m.find("tensor.extract %v0[") != std::string::npos);
  CHECK(m.find("func.func private @kiln.scatter(tensor<5x4xf32>, tensor<2x4xi64>, "
               "tensor<2x4xf32>) -> tensor<5x4xf32>") != std::string::npos);
  CHECK(m.find("@kiln.gather") == std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: edge cases: crops, empty cat operands, 0-d reductions, f16 and int matmul",
          "[ir][mlir]") {
  Graph g("edges");
  Builder b(g);
  Value* x = g.add_input(ty(DType::f32, {3, 4}));
  g.add_output(b.create(Op::pad, {x}, {std::vector<int64_t>{-1, 2, 1, -2}, 0.0}));
  g.add_output(b.create(Op::pad, {x}, {std::vector<int64_t>{-1, -1}, 0.0}));
  g.add_output(b.create(Op::cat, {x, g.add_input(ty(DType::f32, {0})), x}, {int64_t{0}}));
  g.add_output(b.create(Op::cat, {g.add_input(ty(DType::i32, {0})), x}, {int64_t{1}}));
  Value* s = g.add_input(ty(DType::f32, {}));
  g.add_output(b.create(Op::argmax, {s}, {int64_t{0}, false}));
  g.add_output(b.create(Op::argmin, {s}, {int64_t{-1}, true}));
  g.add_output(b.create(Op::sum, {s}, {std::vector<int64_t>{}, false, DType::f32}));
  g.add_output(b.create(Op::amax, {s}, {std::vector<int64_t>{0}, true}));
  g.add_output(b.create(Op::sum, {x}, {std::vector<int64_t>{0, 1}, true, DType::f32}));
  g.add_output(
      b.create(Op::view, {g.add_input(ty(DType::f32, {0, 3}))}, {std::vector<int64_t>{3, 0}}));
  Value* h = g.add_input(ty(DType::f16, {2, 3}));
  Value* hw = g.add_input(ty(DType::f16, {3, 5}));
  g.add_output(b.create(Op::matmul, {h, hw}));
  g.add_output(b.create(Op::matmul, {g.add_input(ty(DType::bf16, {2, 2, 3})),
                                     g.add_input(ty(DType::bf16, {1, 3, 5}))}));
  g.add_output(b.create(Op::matmul, {g.add_input(ty(DType::i32, {4, 1, 2, 3})),
                                     g.add_input(ty(DType::i32, {3, 3, 2}))}));
  std::string m = to_mlir(g);
  CHECK(m.find("arith.constant dense<0> : tensor<i64>") != std::string::npos);
  CHECK(m.find("tensor.extract_slice") != std::string::npos);
  CHECK(m.find("outs(%t") != std::string::npos);
  check_mlir(g);
}

TEST_CASE("mlir: writes become extra results and no outputs is an empty return", "[ir][mlir]") {
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
  Value* x = g.add_input(ty(DType::f32, {2, 3}), InputKind::user, "x<\"in\">\n");
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
  // The name as .kir quotes it (`"x<\"in\">\n"`), then escaped for the dot label.
  CHECK(d.find(R"(v0 [shape=ellipse, label="%0 input \"x<\\\"in\\\">\\n\"\nf32[2,3]"];)") !=
        std::string::npos);
  CHECK(d.find("v1 [shape=ellipse, label=\"%1 param \\\"w\\\"\\nf32[3,2]\"];") !=
        std::string::npos);
  CHECK(d.find("v2 [shape=ellipse, label=\"%2 const\\nf64\"];") != std::string::npos);
  CHECK(d.find("n0 [shape=box, label=\"%3 = matmul\\n: f32[2,2]\"];") != std::string::npos);
  CHECK(d.find("n2 [shape=box, label=\"%5 = permute\\ndims = [1, 0]\\n: f32[2,2]{1,2}\"];") !=
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

// ---- executing the MLIR and comparing with the eager kernels ----

TEST_CASE("mlir run: the mlp computes what eager computes", "[ir][mlir][run]") {
  Graph g("mlp_run");
  Builder b(g);
  Value* x = b.constant(data({4, 6}, DType::f32, 1));
  Value* w = b.constant(data({5, 6}, DType::f32, 2));
  Value* bias = b.constant(data({5}, DType::f32, 3));
  Value* h = b.create(
      Op::add,
      {b.create(Op::matmul, {x, b.create(Op::permute, {w}, {std::vector<int64_t>{1, 0}})}), bias});
  h = b.create(Op::relu, {h});
  Value* m = b.create(Op::amax, {h}, {std::vector<int64_t>{1}, true});
  Value* e = b.create(Op::exp, {b.create(Op::sub, {h, m})});
  Value* s = b.create(Op::sum, {e}, {std::vector<int64_t>{1}, true, DType::f32});
  g.add_output(b.create(Op::div, {e, s}));
  g.add_output(h);
  check_mlir_runs(g);
}

TEST_CASE("mlir run: every pointwise op over f32, f16, bf16, i32, u8 and bool", "[ir][mlir][run]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8, DType::bool_}) {
    INFO("dtype " << dtype_name(t));
    Graph g("pointwise_run");
    Builder b(g);
    bool is_int = !is_floating(t) && t != DType::bool_;
    Value* x = b.constant(data({3, 4}, t, 1));
    Value* y = b.constant(data({4}, t, 2, /*nonzero=*/is_int));
    // Integer pow: small non-negative exponents (eager refuses negative ones).
    Value* p = b.constant(kiln::tensor(std::vector<double>{0, 1, 2, 3}, {4}).to(t));
    Value* c = b.constant(data({3, 1}, DType::bool_, 3));
    for (Op op : kUnary) {
      if (t == DType::bool_ && (op == Op::neg || op == Op::abs || op == Op::relu ||
                                op == Op::floor || op == Op::ceil || op == Op::round))
        continue;
      g.add_output(b.create(op, {x}));
    }
    for (Op op : kBinary) {
      if (t == DType::bool_ &&
          (op == Op::sub || op == Op::floor_divide || op == Op::remainder || op == Op::pow))
        continue;
      g.add_output(b.create(op, {x, op == Op::pow && is_int ? p : y}));
    }
    g.add_output(b.create(Op::where, {c, x, y}));
    for (DType to : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8,
                     DType::i32, DType::i64, DType::bool_}) {
      if (is_floating(t) && to == DType::u8) continue; // negative floats to u8: undefined
      g.add_output(b.create(Op::cast, {x}, {to}));
    }
    check_mlir_runs(g);
  }
}

TEST_CASE("mlir run: promotion with wrapped numbers and mixed dtypes", "[ir][mlir][run]") {
  Graph g("promote_run");
  Builder b(g);
  Value* h = b.constant(data({2, 3}, DType::f16, 1));
  Value* i = b.constant(data({3}, DType::i32, 2, true));
  Value* l = b.constant(data({2, 1}, DType::i64, 3, true));
  Value* u = b.constant(data({3}, DType::u8, 4, true));
  g.add_output(b.create(Op::add, {h, i}));
  g.add_output(b.create(Op::mul, {i, b.scalar(Scalar(2.5))}));
  g.add_output(b.create(Op::add, {i, b.scalar(Scalar(3))}));
  g.add_output(b.create(Op::lt, {h, b.scalar(Scalar(1))}));
  g.add_output(b.create(Op::sub, {l, i}));
  g.add_output(b.create(Op::div, {i, l}));
  g.add_output(b.create(Op::floor_divide, {l, i}));
  g.add_output(b.create(Op::remainder, {l, i}));
  g.add_output(b.create(Op::maximum, {h, b.scalar(Scalar(true))}));
  g.add_output(b.create(Op::sub, {u, i}));
  g.add_output(b.create(Op::floor_divide, {u, b.create(Op::cast, {i}, {DType::u8})}));
  g.add_output(b.create(Op::gt, {u, b.scalar(Scalar(5))}));
  check_mlir_runs(g);
}

TEST_CASE("mlir run: reductions, arg reductions with ties and NaN, factories", "[ir][mlir][run]") {
  Graph g("reduce_run");
  Builder b(g);
  Value* x = b.constant(data({2, 3, 4}, DType::f32, 1));
  Tensor nan = data({3, 4}, DType::f32, 2);
  static_cast<float*>(nan.raw_data())[5] = std::nanf("");
  Value* xn = b.constant(nan);
  Value* i = b.constant(data({2, 3}, DType::i32, 3));
  Value* q = b.constant(data({5}, DType::bool_, 4));
  Value* h = b.constant(data({4, 4}, DType::f16, 5));
  Value* u = b.constant(data({2, 4}, DType::u8, 6));
  g.add_output(b.create(Op::sum, {x}, {std::vector<int64_t>{}, false, DType::f32}));
  g.add_output(b.create(Op::sum, {x}, {std::vector<int64_t>{0, 2}, true, DType::f64}));
  g.add_output(b.create(Op::prod, {i}, {std::vector<int64_t>{-1}, false, DType::i64}));
  g.add_output(b.create(Op::amin, {i}, {std::vector<int64_t>{0}, true}));
  g.add_output(b.create(Op::amax, {q}, {std::vector<int64_t>{0}, false}));
  g.add_output(b.create(Op::sum, {q}, {std::vector<int64_t>{0}, false, DType::i64}));
  g.add_output(b.create(Op::amax, {xn}, {std::vector<int64_t>{1}, false}));
  g.add_output(b.create(Op::amin, {u}, {std::vector<int64_t>{1}, false}));
  g.add_output(b.create(Op::amax, {u}, {std::vector<int64_t>{0}, true}));
  for (Op op : {Op::argmax, Op::argmin}) {
    g.add_output(b.create(op, {x}, {int64_t{1}, false}));
    g.add_output(b.create(op, {xn}, {int64_t{1}, true}));
    g.add_output(b.create(op, {i}, {int64_t{-1}, false}));
    g.add_output(b.create(op, {q}, {int64_t{0}, false}));
    g.add_output(b.create(op, {u}, {int64_t{1}, false}));
  }
  g.add_output(b.create(Op::sum, {h}, {std::vector<int64_t>{1}, false, DType::f16}));
  g.add_output(b.create(Op::prod, {h}, {std::vector<int64_t>{0}, false, DType::f32}));
  g.add_output(b.create(Op::full, {}, {std::vector<int64_t>{2, 2}, Scalar(3), DType::i32}));
  g.add_output(b.create(Op::arange, {}, {Scalar(1), Scalar(10), Scalar(2), DType::i64}));
  g.add_output(b.create(Op::arange, {}, {Scalar(0.5), Scalar(2.0), Scalar(0.25), DType::f32}));
  check_mlir_runs(g);
}

TEST_CASE("mlir run: views, slices, cat, pad and casts", "[ir][mlir][run]") {
  Graph g("views_run");
  Builder b(g);
  Value* x = b.constant(data({2, 3, 4}, DType::f32, 1));
  Value* s = b.constant(data({}, DType::f32, 2));
  g.add_output(b.create(Op::view, {x}, {std::vector<int64_t>{6, 4}}));
  g.add_output(b.create(Op::view, {s}, {std::vector<int64_t>{1, 1}}));
  Value* p = b.create(Op::permute, {x}, {std::vector<int64_t>{2, 0, 1}});
  g.add_output(b.create(Op::copy, {p}));
  g.add_output(b.create(Op::slice, {x}, {int64_t{2}, int64_t{1}, int64_t{4}, int64_t{2}}));
  g.add_output(b.create(Op::slice, {x}, {int64_t{-1}, int64_t{-3}, int64_t{100}, int64_t{1}}));
  Value* one = b.create(Op::slice, {x}, {int64_t{1}, int64_t{0}, int64_t{1}, int64_t{1}});
  g.add_output(b.create(Op::expand, {one}, {std::vector<int64_t>{2, 5, 4}}));
  g.add_output(b.create(Op::expand, {s}, {std::vector<int64_t>{3, 2}}));
  Value* i = b.constant(data({2, 1, 4}, DType::i32, 3));
  g.add_output(b.create(Op::cat, {x, i, x}, {int64_t{1}}));
  g.add_output(b.create(Op::cat, {b.constant(kiln::zeros({0})), x}, {int64_t{-1}}));
  g.add_output(b.create(Op::pad, {x}, {std::vector<int64_t>{1, 2, 0, 1}, 0.5}));
  g.add_output(b.create(Op::pad, {x}, {std::vector<int64_t>{-1, 2, 1, -2}, -1.0}));
  Value* xi = b.create(Op::cast, {x}, {DType::i64});
  g.add_output(b.create(Op::pad, {xi}, {std::vector<int64_t>{2, 0}, 7.0}));
  g.add_output(b.create(Op::permute, {b.create(Op::view, {p}, {std::vector<int64_t>{4, 6}})},
                        {std::vector<int64_t>{1, 0}}));
  check_mlir_runs(g);
}

TEST_CASE("mlir run: conv2d and pools across groups, dtypes, ranks and modes", "[ir][mlir][run]") {
  Graph g("conv_run");
  Builder b(g);
  std::vector<int64_t> one{1, 1}, two{2, 2}, zero{0, 0}, three{3, 3};
  Value* x = b.constant(data({1, 4, 7, 7}, DType::f32, 1));
  Value* w = b.constant(data({6, 4, 3, 3}, DType::f32, 2));
  Value* wg = b.constant(data({6, 2, 3, 3}, DType::f32, 3));
  Value* bias = b.constant(data({6}, DType::f32, 4));
  Value* y = b.create(Op::conv2d, {x, w, bias}, {two, one, one, int64_t{1}});
  g.add_output(y);
  g.add_output(b.create(Op::conv2d, {x, wg, bias}, {one, one, two, int64_t{2}}));
  g.add_output(b.create(
      Op::conv2d, {b.create(Op::cast, {x}, {DType::f16}), b.create(Op::cast, {w}, {DType::f16})},
      {one, zero, one, int64_t{1}}));
  g.add_output(b.create(Op::max_pool2d, {x}, {three, two, one, one, true}));
  g.add_output(b.create(Op::max_pool2d, {x}, {two, one, zero, two, false}));
  g.add_output(b.create(Op::avg_pool2d, {x}, {two, two, zero, false, true}));
  g.add_output(b.create(Op::avg_pool2d, {x}, {three, two, one, true, false}));
  g.add_output(b.create(Op::avg_pool2d, {x}, {three, two, one, true, true}));
  for (DType t : {DType::i32, DType::u8, DType::f16}) {
    Value* p = b.constant(data({3, 6, 6}, t, 5));
    g.add_output(b.create(Op::max_pool2d, {p}, {three, two, one, one, true}));
    g.add_output(b.create(Op::avg_pool2d, {p}, {three, two, one, false, false}));
  }
  check_mlir_runs(g);
}

TEST_CASE("mlir run: gather, index_select and matmul", "[ir][mlir][run]") {
  Graph g("index_run");
  Builder b(g);
  Value* x = b.constant(data({5, 4}, DType::f32, 1));
  auto idx = [&](std::vector<double> v, Shape s, DType t) {
    return b.constant(kiln::tensor(v, s).to(t));
  };
  g.add_output(
      b.create(Op::gather, {x, idx({4, 0, 1, 3, 2, 2, 0, 4}, {2, 4}, DType::i64)}, {int64_t{0}}));
  g.add_output(b.create(Op::gather, {x, idx({3, 0, 1, 1, 2, 3, 0, 0, 3, 2}, {5, 2}, DType::i32)},
                        {int64_t{-1}}));
  g.add_output(b.create(Op::index_select, {x, idx({3, 0, 3}, {3}, DType::i64)}, {int64_t{1}}));
  g.add_output(b.create(Op::index_select, {x, idx({4}, {}, DType::i32)}, {int64_t{0}}));
  Value* a3 = b.constant(data({5, 2, 3}, DType::f32, 2));
  Value* b3 = b.constant(data({5, 3, 4}, DType::f32, 3));
  Value* b1 = b.constant(data({1, 3, 4}, DType::f32, 4));
  Value* a4 = b.constant(data({2, 1, 2, 3}, DType::f32, 5));
  g.add_output(b.create(Op::matmul, {a3, b3}));
  g.add_output(b.create(Op::matmul, {a3, b1}));
  g.add_output(b.create(Op::matmul, {a4, b3}));
  g.add_output(b.create(Op::matmul, {b.constant(data({3, 5}, DType::f16, 6)),
                                     b.constant(data({5, 2}, DType::f16, 7))}));
  g.add_output(b.create(Op::matmul, {b.constant(data({2, 1, 2, 3}, DType::i32, 8)),
                                     b.constant(data({3, 3, 2}, DType::i32, 9))}));
  check_mlir_runs(g);
}
