// explain(): the report, its JSON form read back, logs and dump files.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "frontend_testing.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/serialize/json.h"

using namespace kiln;

namespace {
Tensor branchy(const Tensor& x) {
  Tensor h = x.exp();
  if (h.sum() > 1) h = h * 2;    // KB003
  Tensor idx = nonzero(h > 1.5); // KB006
  return h + static_cast<float>(idx.size(0));
}

/// Captures what kiln writes to std::cerr inside its scope.
struct CaptureStderr {
  std::ostringstream text;
  std::streambuf* saved = std::cerr.rdbuf(text.rdbuf());
  ~CaptureStderr() { std::cerr.rdbuf(saved); }
};
} // namespace

TEST_CASE("explain: graphs, ops, breaks and guards, as text and JSON") {
  Tensor x = arange(0, 6).to(DType::f32) / 6;
  ExplainReport rep = explain(branchy, x);
  REQUIRE(rep.graph_count() == 3);
  REQUIRE(rep.break_count() == 2);
  CHECK(rep.breaks[0].code == "KB003");
  CHECK(rep.breaks[1].code == "KB006");
  CHECK(rep.graphs[0].ops >= 3);
  CHECK_THAT(rep.graphs[0].ir, Catch::Contains("exp(") && Catch::Contains("graph @graph0"));
  std::string text = rep.str();
  CHECK_THAT(text, Catch::Contains("3 graphs, 2 graph breaks") && Catch::Contains("KB003 at ") &&
                       Catch::Contains("test_explain.cpp:") && Catch::Contains("hint: "));

  std::string js = rep.to_json();
  json::Value root = json::parse(js, "test"); // valid JSON
  REQUIRE(root.type == json::Value::Type::object);
  ExplainReport back = ExplainReport::from_json(js);
  REQUIRE(back.graph_count() == rep.graph_count());
  REQUIRE(back.break_count() == rep.break_count());
  for (size_t i = 0; i < rep.breaks.size(); ++i) {
    CHECK(back.breaks[i].code == rep.breaks[i].code);
    CHECK(back.breaks[i].reason == rep.breaks[i].reason);
    CHECK(back.breaks[i].location == rep.breaks[i].location);
    CHECK(back.breaks[i].hint == rep.breaks[i].hint);
    CHECK(back.breaks[i].graph == rep.breaks[i].graph);
  }
  for (size_t i = 0; i < rep.graphs.size(); ++i) {
    CHECK(back.graphs[i].ops == rep.graphs[i].ops);
    CHECK(back.graphs[i].ir == rep.graphs[i].ir);
  }
  CHECK(back.guards == rep.guards);
  CHECK(back.to_json() == js);
  REQUIRE_THROWS_WITH(ExplainReport::from_json("{\"schema\": \"other\"}"),
                      Catch::Contains("unknown schema"));
  REQUIRE_THROWS_WITH(ExplainReport::from_json("[1"), Catch::Contains("explain report"));
}

TEST_CASE("explain: a function without breaks, and its traced IR parses") {
  nn::Linear lin(4, 2);
  ExplainReport rep = explain(lin, ones({3, 4}));
  CHECK(rep.graph_count() == 1);
  CHECK(rep.break_count() == 0);
  CHECK_THAT(rep.graphs[0].ir, Catch::Contains("matmul(") && Catch::Contains("weight"));
  CHECK_THAT(rep.str(), Catch::Contains("1 graph, 0 graph breaks") &&
                            Catch::Contains(std::to_string(rep.guards.size()) + " guards:"));
  // The text is .kir: it parses back into a graph that verifies.
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(rep.graphs[0].ir);
  REQUIRE(static_cast<bool>(g));
  CHECK(static_cast<bool>(ir::verify(**g)));
  CHECK((*g)->num_nodes() == static_cast<size_t>(rep.graphs[0].ops));
}

TEST_CASE("logs: graph_breaks, recompiles, guards and graph go to stderr") {
  CompileOptions o;
  o.logs = "graph_breaks,recompiles,guards,graph";
  auto f = compile(branchy, o);
  CaptureStderr err;
  f(ones({3}));
  f(ones({4}));
  std::string t = err.text.str();
  CHECK_THAT(t, Catch::Contains("[kiln graph_breaks] KB003 at ") &&
                    Catch::Contains("test_explain.cpp:"));
  CHECK_THAT(t, Catch::Contains("[kiln guards] entry 0") &&
                    Catch::Contains("tensor argument 0: f32 sizes [3]"));
  CHECK_THAT(t, Catch::Contains("[kiln recompiles] tensor argument 0: sizes [3] became [4]"));
  CHECK_THAT(t, Catch::Contains("[kiln graph] traced graph") && Catch::Contains("// at "));
}

TEST_CASE("dumps: every compile writes its traced and simplified stages") {
  auto dir = std::filesystem::temp_directory_path() / "kiln_dump_test";
  std::filesystem::remove_all(dir);
  CompileOptions o;
  o.dump_dir = dir.string();
  auto f = compile([](const Tensor& x) { return (x * 1).exp() + 0; }, o);
  f(ones({2}));
  int traced = 0, simplified = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    std::ifstream in(e.path());
    std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (name.ends_with("-traced.kir")) {
      ++traced;
      CHECK_THAT(body, Catch::Contains("mul(") && Catch::Contains("exp("));
    }
    if (name.ends_with("-simplified.kir")) {
      ++simplified;
      CHECK_THAT(body, !Catch::Contains("mul(") && Catch::Contains("exp("));
    }
  }
  CHECK(traced == 1);
  CHECK(simplified == 1);
  std::filesystem::remove_all(dir);
}
