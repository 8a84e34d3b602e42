// The compile modes: reduce_overhead's static plans (no allocation on a replay beyond its
// outputs, re-planning on a guard failure, packed weights following in-place updates, static
// outputs) and the results of every mode against eager.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "frontend_testing.h"
#include "runtime/allocator.h"
#include "runtime/epilogue.h"

using namespace kiln;
using kiln::testing::f64_copy;

// Every operator new of this test binary is counted while `g_counting` is set: kiln's own
// allocations, and separately those made inside a library's execution (oneDNN's primitive
// execute allocates its argument map on every call).
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_news{0}, g_library_news{0};

void count() {
  if (g_counting.load(std::memory_order_relaxed))
    (in_library_call() ? g_library_news : g_news).fetch_add(1, std::memory_order_relaxed);
}

void* counted(size_t n) {
  count();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void* counted_aligned(size_t n, std::align_val_t a) {
  count();
  const size_t align = std::max(static_cast<size_t>(a), sizeof(void*));
  if (void* p = std::aligned_alloc(align, (std::max<size_t>(n, 1) + align - 1) / align * align))
    return p;
  throw std::bad_alloc();
}
} // namespace

// Every form of new and delete, so that whatever allocates through one frees through the
// other (a sanitizer checks that malloc'ed memory is not given to its own operator delete).
void* operator new(size_t n) { return counted(n); }
void* operator new[](size_t n) { return counted(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  count();
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  count();
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new(size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted_aligned(n, a);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

struct Counts {
  int64_t news = 0, library_news = 0;
  uint64_t cpu_allocations = 0; // kiln's CPU allocator
};

/// The allocations `calls` runs of fn make.
template <typename Fn> Counts count_allocations(int calls, Fn&& fn) {
  g_news = 0;
  g_library_news = 0;
  const uint64_t cpu_before = cpu_memory_stats().allocations;
  g_counting = true;
  for (int i = 0; i < calls; ++i)
    fn();
  g_counting = false;
  return {g_news.load(), g_library_news.load(), cpu_memory_stats().allocations - cpu_before};
}

Tensor kernels_and_views(const Tensor& x, const Tensor& y) {
  // Generated kernels (a pointwise chain, a softmax, a layer norm) and view steps.
  Tensor a = softmax((x.t() * 2 + y).relu(), -1);
  return layer_norm(a + x.t(), {a.size(-1)}).reshape({-1});
}

} // namespace

TEST_CASE("modes: a reduce_overhead replay allocates nothing beyond its outputs", "[llvm]") {
  NoGradGuard no_grad;
  manual_seed(1);
  Tensor x = randn({24, 16}), y = randn({16, 24});
  const Tensor want = kernels_and_views(x, y);
  for (bool static_outputs : {false, true}) {
    INFO("static_outputs " << static_outputs);
    CompileOptions o;
    o.mode = Mode::reduce_overhead;
    o.static_outputs = static_outputs;
    auto f = compile(kernels_and_views, o);
    for (int i = 0; i < 3; ++i) // trace, replay (builds the static plan), static plan
      KILN_REQUIRE_ACCURATE(f(x, y), want, kernels_and_views(f64_copy(x), f64_copy(y)));
    REQUIRE(f.stats().static_plans == 1);
    REQUIRE(f.stats().generated_kernels >= 2);
    Tensor last;
    Counts c = count_allocations(1000, [&] { last = f(x, y); });
    KILN_REQUIRE_BITWISE(last, f(x, y));
    REQUIRE(f.stats().replays == 1002 + 1);
    REQUIRE(c.library_news == 0);
    // Beyond the two result vectors: with static outputs, nothing (the output is a view of
    // the entry's buffer); else the one output, a view (impl, sizes, strides) of a fresh
    // buffer (impl, sizes, strides, storage; its bytes from the CPU allocator) per call.
    if (static_outputs) {
      CHECK(c.cpu_allocations == 0);
      CHECK(c.news <= 2 * 1000);
    } else {
      CHECK(c.cpu_allocations == 1000);
      CHECK(c.news <= (2 + 3 + 4) * 1000);
    }
    // The default mode allocates per step (arena, slots, argument vectors): the count above
    // is the static plan's doing.
    CompileOptions d;
    auto g = compile(kernels_and_views, d);
    for (int i = 0; i < 3; ++i)
      (void)g(x, y);
    Counts dc = count_allocations(100, [&] { (void)g(x, y); });
    CHECK(dc.news > c.news / 10);
  }
}

TEST_CASE("modes: library calls are prepared once, and only the library allocates inside them",
          "[llvm][onednn]") {
  NoGradGuard no_grad;
  manual_seed(2);
  nn::Sequential mlp;
  auto l1 = std::make_shared<nn::Linear>(64, 48);
  auto l2 = std::make_shared<nn::Linear>(48, 8);
  mlp.push_back(l1);
  mlp.push_back(std::make_shared<nn::ReLU>());
  mlp.push_back(l2);
  mlp.eval();
  Tensor x = randn({4, 64});
  CompileOptions o;
  o.mode = Mode::reduce_overhead;
  auto f = compile(mlp, o);
  for (int i = 0; i < 3; ++i)
    KILN_REQUIRE_BITWISE(f(x), f(x)); // warm: trace, static plan, runs
  Counts c = count_allocations(1000, [&] { (void)f(x); });
  // kiln: the result vectors and the one fresh output (impl, sizes, strides, storage).
  CHECK(c.news <= (2 + 4) * 1000);
  CHECK(c.cpu_allocations == 1000);
  // The library's allocations are the same on every call (none accumulate).
  Counts c2 = count_allocations(1000, [&] { (void)f(x); });
  CHECK(c2.library_news == c.library_news);
  CHECK(c2.news == c.news);
}

TEST_CASE("modes: a parameter updated in place is packed again, a replaced one re-plans") {
  NoGradGuard no_grad;
  manual_seed(3);
  nn::Linear lin(32, 16);
  lin.eval();
  Tensor x = randn({8, 32});
  CompileOptions o;
  o.mode = Mode::reduce_overhead;
  auto f = compile(lin, o);
  auto reference = [&] {
    Tensor w = lin.named_parameters().at(0).second, b = lin.named_parameters().at(1).second;
    return std::pair{linear(x, w, b), linear(f64_copy(x), f64_copy(w), f64_copy(b))};
  };
  for (int i = 0; i < 3; ++i) {
    auto [want, want64] = reference();
    KILN_REQUIRE_ACCURATE(f(x), want, want64);
  }
  // An optimizer-style in-place update: the packed copy of the weights must follow it.
  Tensor w = lin.named_parameters().at(0).second;
  w.mul_(-0.5).add_(0.25);
  for (int i = 0; i < 2; ++i) {
    auto [want, want64] = reference();
    KILN_REQUIRE_ACCURATE(f(x), want, want64);
  }
  REQUIRE(f.stats().recompiles == 0);
  // A new parameter tensor: the identity guard fails, the entry is re-traced and re-planned.
  Tensor fresh = randn({16, 32});
  lin.weight = fresh; // the registry holds the member: the module now has a new tensor
  for (int i = 0; i < 3; ++i) {
    auto [want, want64] = reference();
    KILN_REQUIRE_ACCURATE(f(x), want, want64);
  }
  REQUIRE(f.stats().recompiles == 1);
  REQUIRE(f.stats().static_plans == 2);
}

TEST_CASE("modes: a guard failure under reduce_overhead re-plans and stays correct") {
  NoGradGuard no_grad;
  auto fn = [](const Tensor& a, const Tensor& b) {
    return (a.exp() * b).sum({-1}) + a.t().mean({0});
  };
  CompileOptions o;
  o.mode = Mode::reduce_overhead;
  auto f = compile(fn, o);
  manual_seed(4);
  Tensor a1 = randn({8, 8}), b1 = randn({8, 8});
  Tensor a2 = randn({12, 12}), b2 = randn({12, 12});
  Tensor a3 = randn({12, 12}).t(); // other strides: a third entry
  for (int round = 0; round < 2; ++round)
    for (const auto& [a, b] : {std::pair{a1, b1}, std::pair{a2, b2}, std::pair{a3, b2}})
      for (int i = 0; i < 3; ++i)
        KILN_REQUIRE_ACCURATE(f(a, b), fn(a, b), fn(f64_copy(a), f64_copy(b)));
  CompileStats st = f.stats();
  REQUIRE(st.traces == 3);
  REQUIRE(st.recompiles == 2);
  REQUIRE(st.static_plans == 3);
  REQUIRE(st.replays == 18 - 3);
}

TEST_CASE("modes: static outputs are overwritten by the next call of their entry", "[llvm]") {
  NoGradGuard no_grad;
  auto fn = [](const Tensor& a) { return (a * 3).tanh(); };
  manual_seed(5);
  Tensor a = randn({64}), b = randn({64});
  for (bool static_outputs : {false, true}) {
    CompileOptions o;
    o.mode = Mode::reduce_overhead;
    o.static_outputs = static_outputs;
    auto f = compile(fn, o);
    (void)f(a);
    (void)f(a); // builds the static plan
    Tensor first = f(a);
    Tensor kept = first.clone();
    Tensor second = f(b);
    KILN_REQUIRE_ACCURATE(second, fn(b), fn(f64_copy(b)));
    if (static_outputs) {
      // Documented: the same buffer, now holding the second call's values.
      REQUIRE(first.raw_data() == second.raw_data());
      KILN_REQUIRE_BITWISE(first, second);
    } else {
      REQUIRE(first.raw_data() != second.raw_data());
      KILN_REQUIRE_BITWISE(first, kept);
    }
  }
}

TEST_CASE("modes: the profile splits a replay into guards, setup and kernels") {
  NoGradGuard no_grad;
  manual_seed(6);
  Tensor x = randn({24, 16}), y = randn({16, 24});
  CompileOptions o;
  o.mode = Mode::reduce_overhead;
  o.profile = true;
  auto f = compile(kernels_and_views, o);
  for (int i = 0; i < 12; ++i)
    (void)f(x, y);
  CompileStats::Profile p = f.stats().profile;
  REQUIRE(p.calls == 10); // every replay after the one that built the plan
  REQUIRE(p.kernels_ns > 0);
  REQUIRE(p.setup_ns > 0);
  REQUIRE(p.guards_ns > 0);
  CompileOptions quiet;
  quiet.mode = Mode::reduce_overhead;
  auto g = compile(kernels_and_views, quiet);
  for (int i = 0; i < 4; ++i)
    (void)g(x, y);
  REQUIRE(g.stats().profile.calls == 0);
}

TEST_CASE("modes: max_autotune tunes, plans statically, and a 1 ms budget still gives a valid plan",
          "[llvm]") {
  NoGradGuard no_grad;
  manual_seed(7);
  Tensor x = randn({24, 16}), y = randn({16, 24});
  const Tensor want = kernels_and_views(x, y);
  const Tensor want64 = kernels_and_views(f64_copy(x), f64_copy(y));
  for (double budget : {60000.0, 1.0, 0.0}) {
    INFO("budget " << budget << " ms");
    CompileOptions o;
    o.mode = Mode::max_autotune;
    o.autotune_budget_ms = budget;
    auto f = compile(kernels_and_views, o);
    for (int i = 0; i < 3; ++i)
      KILN_REQUIRE_ACCURATE(f(x, y), want, want64);
    CompileStats st = f.stats();
    REQUIRE(st.static_plans == 1); // max_autotune includes reduce_overhead
    // No time: nothing is timed (what the database already holds still applies).
    if (budget == 0) REQUIRE(st.autotune_timings == 0);
    // With time to tune, every kernel is tuned now or found in the database.
    if (budget == 60000.0) REQUIRE(st.autotune_timings + st.autotune_database_hits > 0);
  }
  CompileOptions bad;
  bad.mode = Mode::max_autotune;
  bad.autotune_budget_ms = -1;
  REQUIRE_THROWS_WITH(compile(kernels_and_views, bad),
                      Catch::Contains("autotune_budget_ms must be >= 0"));
}
