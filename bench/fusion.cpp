// The LLVM backend against eager code, measured side by side in one run (interleaved
// medians): bandwidth-bound workloads of docs/performance.md, the zoo models, the kernels per
// model before fusion (interpreter backend) and after (kiln backend), and cold and warm
// (on-disk cache) compile time of gpt.
//
//   bench_fusion [REPS]      (KILN_CACHE_DIR is set to a fresh temp dir for the run)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "codegen/cache.h"
#include "models/zoo.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Median milliseconds of each function, timed in turn within every repetition.
std::vector<double> interleaved_ms(const std::vector<std::function<void()>>& fns, int reps) {
  std::vector<std::vector<double>> t(fns.size());
  for (const auto& f : fns)
    f();
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < fns.size(); ++k) {
      auto b = Clock::now();
      fns[k]();
      t[k].push_back(ms_since(b));
    }
  std::vector<double> out;
  for (auto& v : t)
    out.push_back(median(v));
  return out;
}

template <typename F, typename... A>
void workload(const char* name, double bytes, int reps, F f, const A&... args) {
  auto c = compile(f);
  std::vector<double> t = interleaved_ms({[&] { f(args...); }, [&] { c(args...); }}, reps);
  std::printf("%-10s eager %8.2f ms   compiled %8.2f ms   speedup x%.2f", name, t[0], t[1],
              t[0] / t[1]);
  if (bytes > 0) std::printf("   compiled %6.1f GB/s", bytes / (t[1] * 1e6));
  std::printf("   kernels %lld\n", static_cast<long long>(c.stats().kernels));
}

} // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("kiln-bench-cache-" + std::to_string(::getpid()));
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  std::printf("kiln bench_fusion: %d threads, median of %d interleaved runs\n", get_num_threads(),
              reps);

  manual_seed(0);
  const int64_t n = 16 << 20;
  Tensor x = randn({n}), y = randn({n});
  workload(
      "pw-chain", 3.0 * 4 * n, reps,
      [](const Tensor& a, const Tensor& b) { return (relu(a * 2 + b)).sigmoid() * b; }, x, y);
  Tensor m = randn({4096, 4096});
  Tensor w = randn({4096}), bias = randn({4096});
  workload(
      "softmax", 2.0 * 4 * 4096 * 4096, reps, [](const Tensor& a) { return softmax(a, -1); }, m);
  workload(
      "layernorm", 2.0 * 4 * 4096 * 4096, reps,
      [](const Tensor& a, const Tensor& w_, const Tensor& b_) {
        return layer_norm(a, {4096}, w_, b_);
      },
      m, w, bias);
  workload(
      "gelu", 2.0 * 4 * n, reps, [](const Tensor& a) { return gelu(a); }, x);

  ModelRegistry zoo = zoo::registry();
  NoGradGuard no_grad;
  for (const char* name : {"mlp", "cnn", "gpt", "moe"}) {
    const ModelSpec& spec = zoo.get(name);
    std::shared_ptr<nn::Module> mod = spec.make(0);
    mod->eval();
    Tensor in = spec.make_input(spec.input_shape, spec.input_dtype, 1);
    nn::Module* mp = mod.get();
    auto fwd = [&](const Tensor& t) { return run_model(spec, *mp, t); };
    CompileOptions interp;
    interp.backend = "interpreter";
    auto before = compile(fwd, interp);
    auto after = compile(fwd);
    std::vector<double> t =
        interleaved_ms({[&] { fwd(in); }, [&] { before(in); }, [&] { after(in); }}, reps);
    std::printf("%-10s eager %8.3f ms   interpreter %8.3f ms   kiln %8.3f ms   kiln/eager x%.2f   "
                "kernels before fusion %lld, after %lld (%lld generated)\n",
                name, t[0], t[1], t[2], t[0] / t[2], static_cast<long long>(before.stats().kernels),
                static_cast<long long>(after.stats().kernels),
                static_cast<long long>(after.stats().generated_kernels));
  }

  // Compile time of gpt: cold (empty cache) and warm (object code from the cache).
  const ModelSpec& gpt = zoo.get("gpt");
  std::shared_ptr<nn::Module> g = gpt.make(0);
  g->eval();
  Tensor tokens = gpt.make_input(gpt.input_shape, gpt.input_dtype, 1);
  std::vector<double> cold, warm;
  for (int r = 0; r < 3; ++r) {
    codegen::DiskCache::global().clear();
    auto c1 = compile([&](const Tensor& t) { return run_model(gpt, *g, t); });
    auto b = Clock::now();
    c1(tokens);
    cold.push_back(ms_since(b));
    auto c2 = compile([&](const Tensor& t) { return run_model(gpt, *g, t); });
    b = Clock::now();
    c2(tokens);
    warm.push_back(ms_since(b));
    if (c2.stats().disk_cache_hits != 1)
      std::printf("warning: the warm compile missed the cache\n");
  }
  std::printf(
      "gpt compile (first call: trace + passes + codegen + one run): cold %.1f ms, warm %.1f ms\n",
      median(cold), median(warm));
  std::filesystem::remove_all(cache);
  return 0;
}
