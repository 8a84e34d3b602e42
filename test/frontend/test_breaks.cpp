// Graph breaks: each cause is detected, located at the user's line, and cut correctly.
#include <fstream>
#include <set>
#include <sstream>

#include "frontend_testing.h"

using namespace kiln;

namespace {

std::string here(int line) { return "test_breaks.cpp:" + std::to_string(line); }

// Runs f compiled and eagerly on x; requires equal results and exactly one break with `code`
// at `line`.
template <typename F> void expect_one_break(F fn, const char* code, int line) {
  manual_seed(7);
  Tensor x = randn({4, 3});
  auto f = compile(fn);
  for (int call = 0; call < 2; ++call) { // a function with breaks is traced on every call
    KILN_REQUIRE_CLOSE(f(x), fn, x);
  }
  ExplainReport rep = explain(f, x);
  REQUIRE(rep.break_count() == 1);
  CHECK(rep.breaks[0].code == code);
  CHECK_THAT(rep.breaks[0].location, Catch::EndsWith(here(line)));
  CHECK_FALSE(rep.breaks[0].hint.empty());
  CompileStats st = f.stats();
  CHECK(st.breaks == 1);
  CHECK(st.traces == 2);
  CHECK(st.replays == 0);
  CHECK(st.recompiles == 0);
  CHECK(st.cache_hits >= 1); // the second trace found its graphs by structure
  for (const BreakCode& c : break_codes())
    if (c.code == code) CHECK(rep.breaks[0].reason.find(std::string(c.reason)) == 0);
}

} // namespace

TEST_CASE("breaks: item()") {
  int line = __LINE__ + 3;
  expect_one_break(
      [](const Tensor& x) {
        float m = x.mean().item<float>();
        return m > 0 ? x * 2 : x - 1;
      },
      "KB001", line);
}

TEST_CASE("breaks: to_vector()") {
  int line = __LINE__ + 3;
  expect_one_break(
      [](const Tensor& x) {
        std::vector<float> v = x.exp().to_vector<float>();
        return x + static_cast<float>(v.size());
      },
      "KB002", line);
}

TEST_CASE("breaks: a tensor as a condition") {
  int line = __LINE__ + 3;
  expect_one_break(
      [](const Tensor& x) {
        if (x.sum() > 0) return x.relu();
        return x.abs();
      },
      "KB003", line);
}

TEST_CASE("breaks: printing") {
  int line = __LINE__ + 4;
  expect_one_break(
      [](const Tensor& x) {
        std::ostringstream os;
        os << x * 3;
        return x + static_cast<float>(os.str().size() > 0);
      },
      "KB004", line);
}

TEST_CASE("breaks: data_ptr") {
  int line = __LINE__ + 7;
  expect_one_break(
      [](const Tensor& x) {
        Tensor y = (x * 2).contiguous();
        // to(f32) is the tensor itself in f32; the f64 reference run reads an f32 copy, kept
        // alive while p points into it.
        const Tensor y32 = y.to(DType::f32);
        const float* p = y32.data_ptr<float>();
        return y + p[0];
      },
      "KB005", line);
}

TEST_CASE("breaks: nonzero") {
  int line = __LINE__ + 3;
  expect_one_break(
      [](const Tensor& x) {
        Tensor idx = nonzero(x.sum({1}) > 0);
        return index_select(x, 0, idx.view({-1})).sum({0}) + x.sum({0});
      },
      "KB006", line);
}

TEST_CASE("breaks: masked_select") {
  int line = __LINE__ + 1;
  auto fn = [](const Tensor& x) { return masked_select(x * 2, x > 0).sum() + x.sum(); };
  expect_one_break(fn, "KB007", line);
}

TEST_CASE("breaks: graph_break()") {
  int line = __LINE__ + 4;
  expect_one_break(
      [](const Tensor& x) {
        Tensor y = x * 2;
        graph_break();
        return y + 1;
      },
      "KB008", line);
}

TEST_CASE("breaks: eager_region") {
  int line = __LINE__ + 4;
  expect_one_break(
      [](const Tensor& x) {
        Tensor y = x * 2;
        Tensor z = eager_region([&] { return y.exp(); });
        return z + y;
      },
      "KB009", line);
}

TEST_CASE("breaks: the pending graph is cut with every live value, and tracing resumes") {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor a = x.matmul(w);
    Tensor b = a.relu();
    Tensor v = b.t(); // a live view
    Tensor acc = zeros({3});
    acc.add_(b.sum({0}));                      // a live intermediate with a pending write
    float s = b.sum().item<float>();           // break 1: a, b, v, acc become concrete
    Tensor c = (v * s).sum({1}) + acc;         // graph 2 starts from them
    bool pos = static_cast<bool>(c.max() > 0); // break 2
    return pos ? c - a.sum() : c + 1;
  };
  manual_seed(8);
  Tensor x = randn({5, 4}), w = randn({4, 3});
  Tensor want = fn(x, w);
  auto f = compile(fn);
  KILN_REQUIRE_BITWISE(f(x, w), want);
  KILN_REQUIRE_BITWISE(f(x, w), want);
  CompileStats st = f.stats();
  CHECK(st.breaks == 2);
  CHECK(st.graphs == 3);
  CHECK(st.compiles == 3);
  CHECK(st.cache_hits == 3);
  ExplainReport rep = explain(f, x, w);
  REQUIRE(rep.break_count() == 2);
  CHECK(rep.breaks[0].graph == 0);
  CHECK(rep.breaks[1].graph == 1);
  CHECK(rep.graphs[0].outputs >= 4); // a, b, v, acc
}

TEST_CASE("breaks: a write to a captured tensor is visible to a host read after the break") {
  Tensor counter = zeros({1});
  auto f = compile([&](const Tensor& x) {
    counter.add_(x.sum());
    float c = counter.item<float>(); // reads pending data: a break first
    return x * c;
  });
  Tensor x = ones({2});
  KILN_REQUIRE_BITWISE(f(x), full({2}, 2.0f));
  KILN_REQUIRE_BITWISE(f(x), full({2}, 4.0f));
  KILN_REQUIRE_BITWISE(counter, full({1}, 4.0f));
  CHECK(f.stats().breaks == 1);
}

TEST_CASE("breaks: fullgraph turns the first break into an error with its report") {
  CompileOptions o;
  o.fullgraph = true;
  auto f = compile(
      [](const Tensor& x) {
        if (x.sum() > 0) return x;
        return -x;
      },
      o);
  int line = __LINE__ - 4;
  try {
    f(ones({2}));
    FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("fullgraph") && Catch::Contains("KB003") &&
                      Catch::Contains(here(line)) && Catch::Contains("kiln::where"));
  }
  // Without breaks, fullgraph compiles as usual.
  auto g = compile([](const Tensor& x) { return kiln::where(x.sum() > 0, x, -x); }, o);
  KILN_REQUIRE_BITWISE(g(ones({2})), ones({2}));
}

TEST_CASE("breaks: the break code table is complete and documented") {
  std::set<std::string> codes;
  for (const BreakCode& c : break_codes()) {
    CHECK_FALSE(c.reason.empty());
    CHECK_FALSE(c.hint.empty());
    codes.insert(std::string(c.code));
  }
  CHECK(codes.size() == break_codes().size());
  std::ifstream doc(std::string(KILN_SOURCE_DIR) + "/docs/graph-breaks.md");
  REQUIRE(doc.good());
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  for (const BreakCode& c : break_codes()) {
    INFO(c.code);
    CHECK(text.find("## " + std::string(c.code)) != std::string::npos);
  }
}
