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
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "models/zoo.h"

namespace {

template <typename F> double median_us(F&& f, int reps) {
  std::vector<double> t;
  for (int w = 0; w < 5; ++w) f();
  for (int r = 0; r < reps; ++r) {
    auto b = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - b)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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

  double eager = median_us([&] { run_model(spec, *mp, x); }, reps);
  double replay = median_us([&] { replayed(x); }, reps);
  double retrace = median_us([&] { retraced(x); }, reps);
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
    for (int k = 0; k < kChain; ++k) y = y * 1.0001f + 0.5f;
    return y;
  };
  auto chain_replayed = compile(chain);
  auto chain_retraced = compile([&](const Tensor& in) {
    Tensor y = chain(in);
    graph_break();
    return y;
  });
  Tensor s = ones({4});
  double c_eager = median_us([&] { chain(s); }, reps);
  double c_replay = median_us([&] { chain_replayed(s); }, reps);
  double c_retrace = median_us([&] { chain_retraced(s); }, reps);
  int64_t c_ops = chain_replayed.stats().ops;
  std::printf("chain of %lld ops on f32[4]\n", static_cast<long long>(c_ops));
  std::printf("  eager %9.1f us, replayed %9.1f us (%.0f ns per op), re-traced %9.1f us "
              "(tracing %.0f ns per op)\n",
              c_eager, c_replay, c_replay * 1000.0 / static_cast<double>(c_ops), c_retrace,
              (c_retrace - c_replay) * 1000.0 / static_cast<double>(c_ops));
  return 0;
}
