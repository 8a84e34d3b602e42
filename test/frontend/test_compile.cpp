// kiln::compile on functions: capture, replay, in-place writes, results.
#include "frontend_testing.h"

using namespace kiln;

TEST_CASE("compile: a pointwise function equals eager and replays") {
  auto fn = [](const Tensor& a, const Tensor& b) { return (a * 2 + b).relu() * b; };
  auto f = compile(fn);
  manual_seed(1);
  Tensor a = randn({4, 5}), b = randn({4, 5});
  KILN_REQUIRE_BITWISE(f(a, b), fn(a, b));
  KILN_REQUIRE_BITWISE(f(a, b), fn(a, b));
  CompileStats st = f.stats();
  CHECK(st.calls == 2);
  CHECK(st.traces == 1);
  CHECK(st.replays == 1);
  CHECK(st.compiles == 1);
  CHECK(st.graphs == 1);
  CHECK(st.breaks == 0);
  CHECK(st.recompiles == 0);
  CHECK(st.ops >= 4);
  // New data, same metadata: replayed on the new values.
  Tensor c = randn({4, 5});
  KILN_REQUIRE_BITWISE(f(c, b), fn(c, b));
  CHECK(f.stats().replays == 2);
}
