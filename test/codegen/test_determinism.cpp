// Determinism is a property of one configuration (docs/correctness.md): the same inputs and
// schedule give the same bits call after call, compile after compile and process after
// process; across vector widths and thread counts only the order of floating additions may
// change, never integers, NaN positions or argmax.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace {

using namespace kiln;

/// Reductions over cancelling data, a softmax and a layer norm, a product with an epilogue,
/// argmax and an integer sum: everything a width or a thread count could reorder.
std::vector<Tensor> workload(const Tensor& x, const Tensor& w, const Tensor& k) {
  Tensor s = softmax(x * 3, -1);
  Tensor n = layer_norm(x, {x.size(-1)});
  Tensor sums = (x * 1000).sum({1}) + x.t().sum({1}).sum();
  Tensor mm = gelu(matmul(x, w) + 1, "tanh");
  Tensor am = argmax(x + s, 1);
  Tensor isum = (k * 3 - 7).sum({0});
  return {s, n, sums, mm, am, isum, (x > 0.5).sum({1})};
}

struct Inputs {
  Tensor x, w, k;
};

Inputs inputs() {
  manual_seed(77);
  Inputs in;
  in.x = randn({67, 389});
  // A NaN and an infinity: their positions are part of every configuration's result.
  in.x.select(0, 5).select(0, 7).fill_(std::numeric_limits<float>::quiet_NaN());
  in.x.select(0, 9).select(0, 100).fill_(std::numeric_limits<float>::infinity());
  in.w = randn({389, 31});
  in.k = randint(-100, 100, {67, 389}, DType::i32);
  return in;
}

/// FNV-1a over the bytes of every result (contiguous copies).
uint64_t fingerprint(const std::vector<Tensor>& results) {
  uint64_t h = 1469598103934665603ULL;
  for (const Tensor& t : results) {
    Tensor c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.raw_data());
    for (int64_t i = 0; i < c.numel() * c.itemsize(); ++i)
      h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

std::vector<Tensor> run_compiled(const std::string& schedule, const Inputs& in) {
  CompileOptions o;
  o.schedule = schedule;
  auto f = compile(workload, o);
  return f(in.x, in.w, in.k);
}

const std::vector<std::string>& configurations() {
  static const std::vector<std::string> c = {"",
                                             "lanes=4,threads=1",
                                             "lanes=8,threads=1",
                                             "lanes=16,threads=1",
                                             "lanes=8,threads=2,grain=1",
                                             "lanes=16,threads=3,grain=1"};
  return c;
}

} // namespace

TEST_CASE("determinism: one configuration gives the same bits call after call and compile "
          "after compile",
          "[determinism]") {
  const Inputs in = inputs();
  for (const std::string& cfg : configurations()) {
    INFO("schedule '" << cfg << "'");
    CompileOptions o;
    o.schedule = cfg;
    auto f = compile(workload, o);
    const uint64_t first = fingerprint(f(in.x, in.w, in.k));
    CHECK(fingerprint(f(in.x, in.w, in.k)) == first); // the replay
    // A second compile (its object from the disk cache, or compiled again) and a copy of
    // the inputs in fresh memory.
    auto g = compile(workload, o);
    CHECK(fingerprint(g(in.x.clone(), in.w.clone(), in.k.clone())) == first);
  }
}

TEST_CASE("determinism: across widths and threads integers, NaN positions and argmax never "
          "change and floats stay within the f64 reference rule",
          "[determinism]") {
  const Inputs in = inputs();
  const std::vector<Tensor> eager = workload(in.x, in.w, in.k);
  const std::vector<Tensor> ref = workload(in.x.to(DType::f64), in.w.to(DType::f64), in.k);
  const std::vector<Tensor> magnitude =
      workload(in.x.to(DType::f64).abs(), in.w.to(DType::f64).abs(), in.k);
  std::vector<std::vector<Tensor>> all;
  for (const std::string& cfg : configurations()) {
    INFO("schedule '" << cfg << "'");
    std::vector<Tensor> got = run_compiled(cfg, in);
    REQUIRE(got.size() == eager.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("result " << i);
      AccuracyOptions o;
      o.magnitude = magnitude[i];
      std::optional<std::string> m = check_accuracy(got[i], eager[i], ref[i], o);
      INFO(m.value_or(""));
      CHECK(!m);
    }
    all.push_back(std::move(got));
  }
  for (size_t c = 1; c < all.size(); ++c) {
    INFO("schedule '" << configurations()[c] << "' against the first");
    for (size_t i : {size_t{4}, size_t{5}, size_t{6}}) // argmax, the integer sums, the count
      CHECK(!check_bitwise(all[c][i], all[0][i]));
    for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{3}}) {
      std::vector<double> a = all[c][i].to_vector<double>(), b = all[0][i].to_vector<double>();
      size_t moved = 0; // elements whose NaN or Inf status differs
      for (size_t e = 0; e < a.size(); ++e)
        moved += std::isnan(a[e]) != std::isnan(b[e]) || std::isinf(a[e]) != std::isinf(b[e]);
      CHECK(moved == 0);
    }
  }
}

// The child side of the next test: prints the fingerprint of one configuration's results.
TEST_CASE("determinism child: fingerprint of KILN_DETERMINISM_SCHEDULE", "[.determinism_child]") {
  const char* out = std::getenv("KILN_DETERMINISM_OUT");
  const char* cfg = std::getenv("KILN_DETERMINISM_SCHEDULE");
  REQUIRE(out != nullptr);
  std::ofstream(out) << fingerprint(run_compiled(cfg != nullptr ? cfg : "", inputs())) << "\n";
}

TEST_CASE("determinism: another process computes the same bits", "[determinism]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  for (const std::string& cfg :
       {std::string("lanes=8,threads=1"), std::string("threads=2,grain=1")}) {
    INFO("schedule '" << cfg << "'");
    const std::filesystem::path out =
        dir / ("kiln-determinism-" + std::to_string(::getpid()) + ".txt");
    const std::string cmd =
        "KILN_DETERMINISM_OUT='" + out.string() + "' KILN_DETERMINISM_SCHEDULE='" + cfg +
        "' /proc/" + std::to_string(::getpid()) + "/exe '[.determinism_child]' >/dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    uint64_t theirs = 0;
    std::ifstream(out) >> theirs;
    std::filesystem::remove(out);
    CHECK(theirs == fingerprint(run_compiled(cfg, inputs())));
  }
}
