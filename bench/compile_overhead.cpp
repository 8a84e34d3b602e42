// The frontend's own costs on a zoo model (default mlp, batch 1), measured in one run:
// - eager: one forward on the eager kernels;
// - replay: a compiled call answered from the cache (guards + the interpreter plan);
// - retrace: a compiled call whose function ends in a graph break, so the C++ runs under
//   tracing every call and its graph is found by structural hash + equality;
// - trace + compile: a first call after reset() (trace, passes, plan).
// Tracing cost per op = (retrace - replay) / ops: recording, the structural hash and the
// equality check, without the kernels (both sides run the same ones).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "models/zoo.h"

namespace {

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Median microseconds of each function, timed in turn within every repetition, so that a
/// machine that speeds up or slows down during the run affects all of them alike.
std::vector<double> interleaved_us(const std::vector<std::function<void()>>& fns, int reps) {
  std::vector<std::vector<double>> t(fns.size());
  for (int w = 0; w < 5; ++w)
    for (const auto& f : fns)
      f();
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < fns.size(); ++k) {
      auto b = std::chrono::steady_clock::now();
      fns[k]();
      t[k].push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - b).count());
    }
  std::vector<double> out;
  for (auto& v : t)
    out.push_back(median(v));
  return out;
}

template <typename F> double median_us(F&& f, int reps) {
  return interleaved_us({std::function<void()>(std::forward<F>(f))}, reps)[0];
}

} // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  std::string name = argc > 1 ? argv[1] : "mlp";
  int64_t batch = argc > 2 ? std::atoll(argv[2]) : 1;
  int reps = argc > 3 ? std::atoi(argv[3]) : 200;
  ModelRegistry zoo = zoo::registry();
  const ModelSpec& spec = zoo.get(name);
  std::shared_ptr<nn::Module> m = spec.make(0);
  Shape shape = spec.input_shape;
  shape[0] = batch;
  Tensor x = spec.make_input(shape, spec.input_dtype, 1);
  nn::Module* mp = m.get();

  auto replayed = compile([&](const Tensor& in) { return run_model(spec, *mp, in); });
  auto retraced = compile([&](const Tensor& in) {
    Tensor y = run_model(spec, *mp, in);
    graph_break(); // the function breaks: traced on every call
    return y;
  });
  auto fresh = compile([&](const Tensor& in) { return run_model(spec, *mp, in); });

  std::vector<double> t = interleaved_us(
      {[&] { run_model(spec, *mp, x); }, [&] { replayed(x); }, [&] { retraced(x); }}, reps);
  double eager = t[0], replay = t[1], retrace = t[2];
  double first = median_us(
      [&] {
        fresh.reset();
        fresh(x);
      },
      std::max(reps / 10, 10));
  CompileStats st = replayed.stats();
  double per_op_ns = (retrace - replay) * 1000.0 / static_cast<double>(st.ops);
  std::printf("model %s, input %s, %d threads, median of %d calls\n", name.c_str(),
              shape_str(shape).c_str(), get_num_threads(), reps);
  std::printf("  ops captured          %lld (kernels per call %lld)\n",
              static_cast<long long>(st.ops), static_cast<long long>(st.kernels));
  std::printf("  eager forward         %9.1f us\n", eager);
  std::printf("  compiled, replayed    %9.1f us   overhead vs eager %+7.1f us (x%.2f)\n", replay,
              replay - eager, replay / eager);
  std::printf("  compiled, re-traced   %9.1f us   tracing cost %.0f ns per op\n", retrace,
              per_op_ns);
  std::printf("  first call (trace + compile) %6.1f us (compile %.3f ms total over %lld "
              "compiles)\n",
              first, fresh.stats().compile_ms, static_cast<long long>(fresh.stats().compiles));

  // The same split on a chain of 200 tiny pointwise ops, where kernels cost little.
  constexpr int kChain = 200;
  auto chain = [](const Tensor& in) {
    Tensor y = in;
    for (int k = 0; k < kChain; ++k)
      y = y * 1.0001f + 0.5f;
    return y;
  };
  auto chain_replayed = compile(chain);
  auto chain_retraced = compile([&](const Tensor& in) {
    Tensor y = chain(in);
    graph_break();
    return y;
  });
  Tensor s = ones({4});
  std::vector<double> c = interleaved_us(
      {[&] { chain(s); }, [&] { chain_replayed(s); }, [&] { chain_retraced(s); }}, reps);
  double c_eager = c[0], c_replay = c[1], c_retrace = c[2];
  int64_t c_ops = chain_replayed.stats().ops;
  std::printf("chain of %lld ops on f32[4]\n", static_cast<long long>(c_ops));
  std::printf("  eager %9.1f us, replayed %9.1f us (%.0f ns per op), re-traced %9.1f us "
              "(tracing %.0f ns per op)\n",
              c_eager, c_replay, c_replay * 1000.0 / static_cast<double>(c_ops), c_retrace,
              (c_retrace - c_replay) * 1000.0 / static_cast<double>(c_ops));
  return 0;
}
