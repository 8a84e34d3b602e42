// The differential-test harness (diff_testing.h): comparison, the case runner, bundles and
// the deterministic input builders.
#include "diff/diff_testing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "runtime/accuracy.h"

namespace kiln::diff {

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

namespace {

// ---- the compiled side: one kiln::compile per case, of the right arity ----

class CompiledCase {
public:
  virtual ~CompiledCase() = default;
  virtual Outputs call(const Inputs& in) = 0;
  virtual CompileStats stats() const = 0;
};

template <size_t> using TensorArg = const Tensor&;

template <typename C, size_t... I> class CompiledOfArity final : public CompiledCase {
public:
  explicit CompiledOfArity(C c) : c_(std::move(c)) {}
  Outputs call(const Inputs& in) override {
    (void)in; // unused for arity 0
    return c_(in[I]...);
  }
  CompileStats stats() const override { return c_.stats(); }

private:
  C c_;
};

/// Default options (backend "kiln"); KILN_DIFF_BACKEND=interpreter|eager overrides the
/// backend, to tell a code-generation bug from one in the passes or the frontend;
/// KILN_DIFF_MODE=reduce_overhead|max_autotune the mode.
CompileOptions compile_options() {
  CompileOptions o;
  if (const char* b = std::getenv("KILN_DIFF_BACKEND"); b != nullptr && *b != 0) o.backend = b;
  if (const char* m = std::getenv("KILN_DIFF_MODE"); m != nullptr && *m != 0)
    o.mode = parse_mode(m);
  return o;
}

/// Compiled calls per case: traced, then replayed; in the static modes a third call runs the
/// static plan the first replay built.
int compiled_calls() { return compile_options().mode == Mode::default_ ? 2 : 3; }

template <size_t... I>
std::unique_ptr<CompiledCase> compile_of_arity(const Fn& fn, std::index_sequence<I...>) {
  auto body = [fn](TensorArg<I>... ts) -> Outputs { return fn(Inputs{ts...}); };
  using C = decltype(kiln::compile(body));
  return std::make_unique<CompiledOfArity<C, I...>>(kiln::compile(body, compile_options()));
}

std::unique_ptr<CompiledCase> compile_case(const Fn& fn, size_t arity) {
  switch (arity) {
  case 0: return compile_of_arity(fn, std::make_index_sequence<0>{});
  case 1: return compile_of_arity(fn, std::make_index_sequence<1>{});
  case 2: return compile_of_arity(fn, std::make_index_sequence<2>{});
  case 3: return compile_of_arity(fn, std::make_index_sequence<3>{});
  case 4: return compile_of_arity(fn, std::make_index_sequence<4>{});
  case 5: return compile_of_arity(fn, std::make_index_sequence<5>{});
  case 6: return compile_of_arity(fn, std::make_index_sequence<6>{});
  case 7: return compile_of_arity(fn, std::make_index_sequence<7>{});
  case 8: return compile_of_arity(fn, std::make_index_sequence<8>{});
  default: break;
  }
  throw std::runtime_error("diff harness: at most 8 tensor inputs per case");
}

const char* call_name(int call) {
  return call == 1 ? "call 1 (traced)" : call == 2 ? "call 2 (replayed)" : "call 3 (static plan)";
}

std::string output_label(const Case& c, size_t k, size_t n) {
  std::string s = "output " + std::to_string(k);
  if (k < c.output_names.size()) s += " (" + c.output_names[k] + ")";
  if (n > 1) s += " of " + std::to_string(n);
  return s;
}

Result fail(const Case& c, const std::string& what) {
  return {Outcome::failed, c.name() + ": " + what};
}

/// What a case's outputs (and, for in-place cases, its inputs' final values) are judged
/// against: the eager run, the f64 reference run and the magnitude run of the same values.
struct Judged {
  std::vector<Tensor> eager, reference, magnitude;
};

/// The eager run's values followed by the final values of the inputs an in-place case writes.
std::vector<Tensor> judged(const Outputs& out, const Inputs& in, bool in_place) {
  std::vector<Tensor> v = out;
  if (in_place) v.insert(v.end(), in.begin(), in.end());
  return v;
}

/// Runs the case's eager side on `in` (converted copies of its inputs) for a reference. A
/// run that throws fails the case (a case with no meaningful f64 run says so with
/// CompareOptions::no_f64_because); one whose results do not line up with eager's is a
/// broken case.
std::optional<std::vector<Tensor>> reference_run(const Case& c, Inputs in, bool in_place,
                                                 size_t count, std::string& error) {
  if (c.seed) manual_seed(*c.seed);
  Outputs out;
  try {
    out = (c.reference ? c.reference : c.fn)(in);
  } catch (const Error& e) {
    error = e.message();
    return std::nullopt;
  }
  std::vector<Tensor> v = judged(out, in, in_place);
  KILN_ASSERT(v.size() == count, "the f64 run of ", c.name(), " gave ", v.size(), " values, eager ",
              count);
  return v;
}

std::optional<std::string> judge(const Case& c, const Tensor& got, const Judged& want, size_t k) {
  if (!c.compare.exact_because.empty()) return check_bitwise(got, want.eager[k]);
  AccuracyOptions options;
  options.zero_sign = c.compare.zero_sign;
  if (!want.magnitude.empty()) options.magnitude = want.magnitude[k];
  return check_accuracy(got, want.eager[k], want.reference[k], options);
}

/// The case without the expected-failure table.
Result run_plain(const Case& c) {
  auto fresh = [&] { return c.make_inputs ? c.make_inputs() : c.inputs; };
  const bool in_place = static_cast<bool>(c.make_inputs);

  Inputs eager_in = fresh();
  std::vector<Tensor> snapshots;
  if (!in_place)
    for (const Tensor& t : eager_in)
      snapshots.push_back(t.defined() ? t.clone() : t);

  Outputs eager_out;
  if (c.seed) manual_seed(*c.seed);
  try {
    eager_out = (c.reference ? c.reference : c.fn)(eager_in);
  } catch (const Error& e) {
    if (c.may_refuse) return {Outcome::refused, c.name() + ": refused eagerly: " + e.what()};
    return fail(c, std::string("the eager run threw: ") + e.what());
  } catch (const std::exception& e) {
    return fail(c, std::string("the eager run threw a non-kiln exception: ") + e.what());
  }
  const uint64_t want_offset = default_generator().offset();
  if (!in_place)
    for (size_t k = 0; k < eager_in.size(); ++k)
      if (eager_in[k].defined())
        if (auto m = check_bitwise(eager_in[k], snapshots[k]))
          return fail(c, "the eager run mutated input " + std::to_string(k) +
                             " (a case that writes its inputs needs make_inputs): " + *m);
  Judged want;
  want.eager = judged(eager_out, eager_in, in_place);
  if (!c.compare.no_f64_because.empty()) {
    want.reference = want.eager;
  } else if (c.compare.exact_because.empty()) {
    Inputs originals = fresh();
    std::string error;
    auto ref = reference_run(c, to_f64(originals), in_place, want.eager.size(), error);
    if (!ref)
      return fail(c, "the f64 reference run threw (make the case take its tensors as inputs, "
                     "or give it no_f64_because): " +
                         error);
    want.reference = std::move(*ref);
    if (c.compare.magnitude_of_abs_inputs) {
      auto mag = reference_run(c, to_f64_abs(originals), in_place, want.eager.size(), error);
      if (!mag) return fail(c, "the f64 run on |inputs| threw: " + error);
      want.magnitude = std::move(*mag);
    }
  }

  std::unique_ptr<CompiledCase> compiled;
  try {
    compiled = compile_case(c.fn, eager_in.size());
  } catch (const std::exception& e) {
    return fail(c, std::string("kiln::compile threw: ") + e.what());
  }
  ++counters().compiled;

  const int calls = compiled_calls();
  for (int call = 1; call <= calls; ++call) {
    Inputs in = in_place ? fresh() : c.inputs;
    if (c.seed) manual_seed(*c.seed);
    Outputs got;
    try {
      got = compiled->call(in);
    } catch (const std::exception& e) {
      return fail(c, std::string("compiled ") + call_name(call) + " threw: " + e.what());
    }
    if (c.seed && default_generator().offset() != want_offset)
      return fail(c, std::string("compiled ") + call_name(call) + " left the random offset at " +
                         std::to_string(default_generator().offset()) + ", eager at " +
                         std::to_string(want_offset));
    if (got.size() != eager_out.size())
      return fail(c, std::string("compiled ") + call_name(call) + " returned " +
                         std::to_string(got.size()) + " outputs, eager " +
                         std::to_string(eager_out.size()));
    for (size_t k = 0; k < got.size(); ++k)
      if (auto m = judge(c, got[k], want, k))
        return fail(c, output_label(c, k, got.size()) + " of compiled " + call_name(call) +
                           " differs from eager: " + *m);
    for (size_t k = 0; k < in.size(); ++k) {
      if (!in[k].defined()) continue;
      if (in_place) {
        if (auto m = judge(c, in[k], want, got.size() + k))
          return fail(c, "input " + std::to_string(k) + " after compiled " + call_name(call) +
                             " differs from the eager run's: " + *m);
      } else if (auto m = check_bitwise(in[k], snapshots[k])) {
        return fail(c, std::string("compiled ") + call_name(call) + " mutated input " +
                           std::to_string(k) + ": " + *m);
      }
    }
  }
  if (c.expect_replay) {
    CompileStats st = compiled->stats();
    if (st.traces != 1 || st.replays != calls - 1)
      return fail(c, "a later compiled call was not a replay (traces " + std::to_string(st.traces) +
                         ", replays " + std::to_string(st.replays) + ", graph breaks " +
                         std::to_string(st.breaks) + ")");
  }
  return {Outcome::passed, ""};
}

} // namespace

Result run_case(const Case& c, std::span<const ExpectedFailure> table) {
  ++counters().cases;
  Result r = run_plain(c);
  if (r.outcome == Outcome::refused) ++counters().refused;
  const std::string name = c.name();
  auto it = std::find_if(table.begin(), table.end(),
                         [&](const ExpectedFailure& e) { return e.name == name; });
  if (it == table.end()) return r;
  const std::string reason(it->reason);
  if (r.outcome == Outcome::failed) {
    if (table.data() == expected_failures().data()) ++counters().expected_fails;
    return {Outcome::expected_failure, "expected failure (" + reason + "): " + r.message};
  }
  std::string how = r.outcome == Outcome::refused ? "was refused eagerly" : "passed";
  return {Outcome::unexpected_pass, name + " " + how + " but is listed in the expected failures (" +
                                        reason + "): remove it from the table"};
}

namespace {
/// KILN_DIFF_SKIP: '|'-separated substrings of case names not to run (to get past a case
/// that crashes the process while triaging). Each skipped case is reported.
bool skipped(const std::string& name) {
  const char* env = std::getenv("KILN_DIFF_SKIP");
  if (env == nullptr) return false;
  std::string list = env;
  for (size_t start = 0; start <= list.size();) {
    size_t end = std::min(list.find('|', start), list.size());
    if (end > start && name.find(list.substr(start, end - start)) != std::string::npos) return true;
    start = end + 1;
  }
  return false;
}
} // namespace

Outcome check(const Case& c) {
  const std::string name = c.name();
  if (skipped(name)) {
    ++counters().skipped;
    WARN("skipped by KILN_DIFF_SKIP: " << name);
    return Outcome::refused;
  }
  // Named in Catch2's report if the case crashes the process (a failed KILN_ASSERT aborts).
  INFO("diff case: " << name);
  if (std::getenv("KILN_DIFF_VERBOSE") != nullptr)
    std::fprintf(stderr, "diff case: %s\n", name.c_str());
  // The table lists failures of the default backend; another backend is judged without it.
  const bool default_backend = compile_options().backend == CompileOptions{}.backend;
  Result r =
      run_case(c, default_backend ? expected_failures() : std::span<const ExpectedFailure>{});
  switch (r.outcome) {
  case Outcome::failed:
  case Outcome::unexpected_pass: FAIL_CHECK(r.message); break;
  case Outcome::expected_failure:
    if (std::getenv("KILN_DIFF_VERBOSE") != nullptr) WARN(r.message);
    SUCCEED(c.name());
    break;
  case Outcome::refused:
    if (std::getenv("KILN_DIFF_VERBOSE") != nullptr) WARN(r.message);
    SUCCEED(c.name());
    break;
  case Outcome::passed: SUCCEED(c.name()); break;
  }
  return r.outcome;
}

std::optional<Case> bundle(std::string op, std::string variant, Inputs inputs,
                           std::vector<Item> items) {
  std::vector<Item> kept;
  for (Item& item : items) {
    bool runs = true;
    try {
      (void)item.fn(inputs);
    } catch (const Error& e) {
      runs = false;
      if (std::getenv("KILN_DIFF_VERBOSE") != nullptr)
        std::fprintf(stderr, "diff bundle item refused eagerly: %s [%s] %s: %s\n", op.c_str(),
                     variant.c_str(), item.name.c_str(), e.message().c_str());
    }
    if (runs || item.must_run)
      kept.push_back(std::move(item));
    else
      ++counters().dropped_items;
  }
  if (kept.empty()) return std::nullopt;
  Case c;
  c.op = std::move(op);
  c.variant = std::move(variant);
  c.inputs = std::move(inputs);
  std::vector<ItemFn> fns;
  for (Item& item : kept) {
    c.output_names.push_back(item.name);
    fns.push_back(std::move(item.fn));
  }
  c.fn = [fns = std::move(fns)](const Inputs& in) {
    Outputs out;
    for (const ItemFn& f : fns)
      out.push_back(f(in));
    return out;
  };
  return c;
}

bool check_bundle(std::string op, std::string variant, Inputs inputs, std::vector<Item> items) {
  std::optional<Case> c =
      bundle(std::move(op), std::move(variant), std::move(inputs), std::move(items));
  if (!c) return false;
  check(*c);
  return true;
}

namespace {
struct CountersAtExit {
  Counters c;
  ~CountersAtExit() {
    if (std::getenv("KILN_DIFF_STATS") == nullptr) return;
    std::fprintf(stderr,
                 "diff: %lld cases, %lld compiled functions, %lld refused eagerly, %lld bundle "
                 "items refused eagerly, %lld expected failures, %lld skipped\n",
                 static_cast<long long>(c.cases), static_cast<long long>(c.compiled),
                 static_cast<long long>(c.refused), static_cast<long long>(c.dropped_items),
                 static_cast<long long>(c.expected_fails), static_cast<long long>(c.skipped));
  }
};
} // namespace

Counters& counters() {
  static CountersAtExit counters;
  return counters.c;
}

// ---- inputs ----

namespace {

/// splitmix64: a small, well-mixed, portable generator.
class Rng {
public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; } // [0, 1)
  double normal() {
    double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  int64_t integer(int64_t lo, int64_t hi) { // [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

private:
  uint64_t s_;
};

/// Values a float dtype can hold that stress kernels: NaN, infinities, both zeros, values
/// near the dtype's overflow and underflow, and halves (rounding ties).
std::vector<double> float_specials(DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  const double large = t == DType::f64 ? 1e300 : t == DType::f16 ? 6.0e4 : 3.0e38;
  const double big = t == DType::f64 ? 1e20 : t == DType::f16 ? 1000.0 : 1e10;
  const double tiny = t == DType::f64 ? 1e-310 : t == DType::f16 ? 1e-7 : 1e-40;
  return {std::nan(""), inf, -inf, -0.0, 0.0, large, -large, big,  -big, tiny,
          -tiny,        0.5, -0.5, 1.5,  2.5, -2.5,  1.0,    -1.0, 3.0,  -0.0};
}

std::pair<int64_t, int64_t> int_range(DType t) {
  switch (t) {
  case DType::i8: return {-128, 127};
  case DType::u8: return {0, 255};
  case DType::i32:
    return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

std::vector<int64_t> int_specials(DType t, bool nonzero) {
  auto [lo, hi] = int_range(t);
  std::vector<int64_t> v =
      nonzero ? std::vector<int64_t>{-1, 1, hi, lo, 7, -7, 2, -2, lo + 1}
              : std::vector<int64_t>{0, -1, 1, hi, lo, hi - 1, lo + 1, 100, -100, 1000};
  for (int64_t& x : v)
    x = std::clamp(x, lo, hi);
  if (nonzero) std::erase(v, 0);
  return v;
}

template <typename T> Tensor from_host(const std::vector<T>& v) {
  return tensor(v, {static_cast<int64_t>(v.size())});
}

/// A 1-d tensor of n values of dtype t.
Tensor host_values(int64_t n, DType t, Values vs, uint64_t seed) {
  Rng rng(seed);
  const auto count = static_cast<size_t>(n);
  const uint64_t phase = seed % 3;
  if (is_floating(t)) {
    std::vector<double> v(count);
    std::vector<double> specials = float_specials(t);
    for (size_t i = 0; i < count; ++i) {
      switch (vs) {
      case Values::normal: v[i] = 2 * rng.normal(); break;
      case Values::special:
        v[i] = i % 3 == phase ? specials[(i / 3 + seed) % specials.size()] : 2 * rng.normal();
        break;
      case Values::positive: v[i] = 0.1 + 5.9 * (1.0 - rng.uniform()); break;
      case Values::nonzero: {
        double x = 2 * rng.normal();
        v[i] = x == 0 ? 1.0 : x;
        break;
      }
      case Values::small: v[i] = 4 * rng.uniform() - 2; break;
      case Values::exact: v[i] = static_cast<double>(rng.integer(-32, 32)) / 4; break;
      case Values::exact_special: {
        const double sparse[] = {std::nan(""), std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity(), -0.0};
        v[i] = (i + seed) % 41 == 0 ? sparse[(i / 41 + seed) % 4]
                                    : static_cast<double>(rng.integer(-32, 32)) / 4;
        break;
      }
      case Values::pow2: {
        const double p2[] = {0.5, -0.5, 1.0, -1.0, 2.0, -2.0};
        v[i] = p2[rng.next() % 6];
        break;
      }
      }
    }
    switch (t) {
    case DType::f64: return from_host(v);
    case DType::f32: {
      std::vector<float> f(v.begin(), v.end());
      return from_host(f);
    }
    case DType::f16: {
      std::vector<Half> h;
      for (double x : v)
        h.emplace_back(static_cast<float>(x));
      return from_host(h);
    }
    default: {
      std::vector<BFloat16> b;
      for (double x : v)
        b.emplace_back(static_cast<float>(x));
      return from_host(b);
    }
    }
  }
  if (t == DType::bool_) {
    std::vector<bool> b(count);
    for (size_t i = 0; i < count; ++i) {
      switch (vs) {
      case Values::positive:
      case Values::nonzero: b[i] = true; break;
      case Values::special: b[i] = (i + seed) % 3 != 0; break;
      default: b[i] = (rng.next() & 1) != 0; break;
      }
    }
    return from_host(b);
  }
  auto [lo, hi] = int_range(t);
  std::vector<int64_t> v(count);
  const std::vector<int64_t> specials = int_specials(t, vs == Values::nonzero);
  for (size_t i = 0; i < count; ++i) {
    int64_t x = 0;
    switch (vs) {
    case Values::normal: x = rng.integer(-20, 20); break;
    case Values::special:
      x = i % 3 == phase ? specials[(i / 3 + seed) % specials.size()] : rng.integer(-20, 20);
      break;
    case Values::positive: x = rng.integer(1, 20); break;
    case Values::nonzero:
      if (i % 3 == phase) {
        x = specials[(i / 3 + seed) % specials.size()];
      } else {
        x = rng.integer(-9, 8);
        if (x >= 0) ++x; // [-9, 9] without 0
      }
      break;
    case Values::small: x = rng.integer(-4, 4); break;
    case Values::exact:
    case Values::exact_special: x = rng.integer(-8, 8); break;
    case Values::pow2: {
      const int64_t p2[] = {1, -1, 2, -2, 1, -1};
      x = p2[rng.next() % 6];
      break;
    }
    }
    v[i] = std::clamp(x, lo, hi);
  }
  switch (t) {
  case DType::i64: return from_host(v);
  case DType::i32: {
    std::vector<int32_t> w(v.begin(), v.end());
    return from_host(w);
  }
  case DType::i8: {
    std::vector<int8_t> w(v.begin(), v.end());
    return from_host(w);
  }
  default: {
    std::vector<uint8_t> w(v.begin(), v.end());
    return from_host(w);
  }
  }
}

Tensor stored(const Shape& shape, DType t, Values v, uint64_t seed) {
  return host_values(numel_of(shape), t, v, seed).view(shape);
}

} // namespace

Tensor make_input(Shape shape, DType t, Values v, uint64_t seed, Layout layout, Shape base) {
  const auto rank = static_cast<int64_t>(shape.size());
  switch (layout) {
  case Layout::contiguous: return stored(shape, t, v, seed);
  case Layout::transposed: {
    KILN_ASSERT(rank >= 2, "a transposed input needs 2 dims");
    Shape s = shape;
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    return stored(s, t, v, seed).transpose(-1, -2);
  }
  case Layout::sliced: {
    KILN_ASSERT(rank >= 1, "a sliced input needs a dim");
    Shape s = shape;
    s.back() *= 2;
    return stored(s, t, v, seed).slice(-1, 0, s.back(), 2);
  }
  case Layout::expanded:
    KILN_ASSERT(base.size() == shape.size(), "an expanded input needs a base of the same rank");
    return stored(base, t, v, seed).expand(shape);
  case Layout::permuted: {
    Shape s(shape.rbegin(), shape.rend());
    Shape perm(shape.size());
    std::iota(perm.rbegin(), perm.rend(), int64_t{0});
    return stored(s, t, v, seed).permute(perm);
  }
  }
  return {};
}

std::vector<ShapeCase> pointwise_shapes() {
  return {
      {"0-d", {}},
      {"empty 0", {0}},
      {"empty 4x0", {4, 0}},
      {"one element", {1}},
      {"7", {7}},
      {"33", {33}},
      {"1023", {1023}},
      {"7x33", {7, 33}},
      {"2x3x5x7", {2, 3, 5, 7}},
      {"5x1x7", {5, 1, 7}},
      {"7x33 transposed", {7, 33}, Layout::transposed},
      {"7x33 step-2 slice", {7, 33}, Layout::sliced},
      {"7x33 expanded from 7x1", {7, 33}, Layout::expanded, {7, 1}},
      {"3x5x7 expanded from 1x5x1", {3, 5, 7}, Layout::expanded, {1, 5, 1}},
      {"2x3x5x7 permuted", {2, 3, 5, 7}, Layout::permuted},
  };
}

std::vector<ShapeCase> pointwise_shapes_short() {
  std::vector<ShapeCase> all = pointwise_shapes(), out;
  for (const char* label : {"0-d", "empty 4x0", "33", "1023", "7x33 transposed",
                            "7x33 step-2 slice", "3x5x7 expanded from 1x5x1"})
    for (const ShapeCase& s : all)
      if (s.label == label) out.push_back(s);
  return out;
}

std::vector<DType> sweep_dtypes() {
  return {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::bool_};
}

std::vector<DType> all_dtypes() {
  return {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
          DType::u8,  DType::i32, DType::i64, DType::bool_};
}

} // namespace kiln::diff
