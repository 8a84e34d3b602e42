// `kiln bench`: the workloads of docs/performance.md, eager and compiled in each requested mode,
// timed interleaved in one run beside reference figures measured in the same run (a STREAM
// triad for bandwidth; the GEMM-bound MLP's matmuls alone on oneDNN). Prints a table, writes
// JSON (schema kiln.bench/1, read by bench/compare).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cache.h"
#include "frontend/compile.h"
#include "frontend/version.h"
#include "models/train.h"
#include "models/zoo.h"
#include "runtime/allocator.h"
#include "runtime/cuda/device.h"
#include "runtime/grad_mode.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/container.h"
#include "runtime/nn/linear.h"
#include "runtime/ops.h"
#include "runtime/parallel.h"
#include "runtime/serialize/json.h"
#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kUsage =
    "usage: kiln bench [WORKLOAD|MODEL ...] [--modes M,M,...] [--reps N] [--warmup N]\n"
    "                  [--json FILE] [--list] [--plugin LIB.so] [--chain N,N,...]\n"
    "  Runs the benchmark workloads eagerly and compiled in each mode, interleaved (each\n"
    "  repetition starts one call further along, so none always follows the same), and prints\n"
    "  the median time with its spread (min..max), the speedup over eager, and against the\n"
    "  reference measured in the same run: bandwidth as a share of a STREAM triad for the\n"
    "  bandwidth-bound workloads; for mlp-gelu and attention, their two matmuls alone on\n"
    "  oneDNN (attention's over every key: the causal mask lets kiln skip some; timed\n"
    "  interleaved with them, as the row onednn-alone). With no\n"
    "  workload, runs them all. A MODEL (see `kiln zoo`) runs on its default input. The\n"
    "  models' rows also give the peak CPU memory of one call (beyond what was live before,\n"
    "  right after a call of the same mode) and the memory static plans hold between calls.\n"
    "  --modes M,...     compiled modes: default, reduce_overhead, max_autotune (default:\n"
    "                    default); eager always runs, as the baseline\n"
    "  --reps N          timed repetitions per mode (default 10)\n"
    "  --warmup N        untimed calls per mode first (default 2; compiled calls trace then)\n"
    "  --json FILE       also write the results as JSON (schema kiln.bench/1)\n"
    "  --list            list the workloads\n"
    "  --device D        run the workloads on D (cuda, cuda:N): each call ends with a\n"
    "                    synchronize, bandwidth is a share of a device-to-device copy measured\n"
    "                    in the same run, and `compile` is not run (default: cpu)\n"
    "  --chain N,...     the chain lengths `compile` measures (default 100,200,400,800,1600,3200)\n"
    "  Compiles use a fresh kernel cache directory of their own (the user's is left alone).\n"
    "  `compile` measures the gpt's cold and warm first call (default mode; then max_autotune\n"
    "  once with an empty autotune database, once with it filled), and the compile time of the\n"
    "  chain: x = tanh(x), x = softmax(x, -1) alternately, N ops on 64x64 f32, each N compiled\n"
    "  once with an empty kernel cache; it prints the curve and its least-squares slope\n"
    "  (the marginal compile time per captured op; a softmax is captured as several ops).\n";

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Timing {
  double median = 0, min = 0, max = 0;
  size_t count = 0;
};

Timing summarize(std::vector<double> t) {
  Timing s;
  s.count = t.size();
  std::sort(t.begin(), t.end());
  if (t.empty()) return s;
  s.min = t.front();
  s.max = t.back();
  size_t n = t.size();
  s.median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  return s;
}

/// One runnable workload: the eager call, and a factory of compiled calls per options.
struct Instance {
  std::function<void()> eager;
  struct Compiled {
    std::function<void()> call;
    std::function<CompileStats()> stats;
  };
  std::function<Compiled(const CompileOptions&)> compile;
  std::shared_ptr<nn::Module> module; // kept alive with the calls
  /// The reference timed beside the workload (mlp-gelu, attention: their two matmuls alone),
  /// if any.
  std::function<void()> reference;
};

/// fn(args...) eagerly, and compiled with the tensors as its arguments.
template <typename F, typename... T> Instance instance_of(F fn, T... args) {
  Instance in;
  in.eager = [fn, args...] { (void)fn(args...); };
  in.compile = [fn, args...](const CompileOptions& o) {
    auto c = std::make_shared<kiln::Compiled<F>>(fn, o);
    return Instance::Compiled{[c, args...] { (void)(*c)(args...); }, [c] { return c->stats(); }};
  };
  return in;
}

/// A module's forward (a registered model's, with `spec`) on an input, compiled with the
/// module's guards.
Instance module_instance(std::shared_ptr<nn::Module> m, Tensor x, Device device,
                         const ModelSpec* spec = nullptr) {
  m->to(device);
  x = x.to(device);
  Instance in;
  nn::Module* mp = m.get();
  in.module = m;
  auto forward = [spec, mp](const Tensor& t) {
    return spec ? run_model(*spec, *mp, t) : mp->forward(t);
  };
  in.eager = [forward, x] { (void)forward(x); };
  in.compile = [forward, mp, x](const CompileOptions& o) {
    auto c = std::make_shared<kiln::Compiled<decltype(forward)>>(forward, o, mp);
    return Instance::Compiled{[c, x] { (void)(*c)(x); }, [c] { return c->stats(); }};
  };
  return in;
}

/// One training step of a zoo model on its task's first batch (models/train.h): zero_grad,
/// forward, loss, backward, AdamW's step; compiled as one function. The eager and compiled
/// calls train the same model and optimizer in turn (each call is a full step either way).
Instance train_instance(const std::string& model, Device device, bool compile_module = false) {
  struct State {
    const zoo::TrainTask* task;
    std::shared_ptr<nn::Module> net;
    std::unique_ptr<optim::Optimizer> opt;
    Tensor x, y;
  };
  auto s = std::make_shared<State>();
  s->task = &zoo::train_task(model);
  s->net = s->task->make(0, DType::f32);
  s->net->to(device);
  s->opt = zoo::make_optimizer("adamw", s->net->parameters(), s->task->lr);
  auto [x, y] = s->task->batch(0, DType::f32);
  s->x = x.to(device);
  s->y = y.to(device);
  Instance in;
  in.module = s->net;
  // kiln bench runs under NoGradGuard; a training step records its backward.
  in.eager = [s] {
    const AutoGradMode grad(true);
    (void)zoo::train_step(*s->net, *s->opt, *s->task, s->x, s->y);
  };
  if (compile_module) {
    // The module compiled (forward and compiled backward); loss, backward() and the optimizer
    // eager around it.
    in.compile = [s](const CompileOptions& o) {
      auto fwd = std::make_shared<decltype(kiln::compile(*s->net, o))>(kiln::compile(*s->net, o));
      return Instance::Compiled{[fwd, s] {
                                  const AutoGradMode grad(true);
                                  s->opt->zero_grad();
                                  Tensor loss = s->task->loss((*fwd)(s->x), s->y);
                                  loss.backward();
                                  s->opt->step();
                                },
                                [fwd] { return fwd->stats(); }};
    };
    return in;
  }
  in.compile = [s](const CompileOptions& o) {
    auto step = [s](const Tensor& a, const Tensor& b) {
      return zoo::train_step(*s->net, *s->opt, *s->task, a, b);
    };
    auto c = std::make_shared<kiln::Compiled<decltype(step)>>(step, o);
    return Instance::Compiled{[c, s] {
                                const AutoGradMode grad(true);
                                (void)(*c)(s->x, s->y);
                              },
                              [c] { return c->stats(); }};
  };
  return in;
}

enum class Bound { bandwidth, gemm, mixed, overhead };

struct Workload {
  std::string id;
  std::string what;
  Bound bound = Bound::mixed;
  double bytes = 0; // the least memory traffic of one call (bandwidth-bound workloads)
  /// The workload's instance with its tensors and module on `device`.
  std::function<Instance(Device)> make;
};

zoo::GptConfig bench_gpt() { return {4096, 256, 4, 12, 768}; }

/// The bench gpt (weights from seed 0) and its input: 4 x 256 token ids.
struct GptRun {
  std::shared_ptr<nn::Module> model;
  Tensor tokens;
};
GptRun bench_gpt_run() {
  zoo::GptConfig cfg = bench_gpt();
  GptRun r{zoo::make_gpt(cfg, 0), {}};
  manual_seed(1);
  r.tokens = randint(0, cfg.vocab, {4, 256}, DType::i64);
  return r;
}

std::shared_ptr<nn::Module> mlp_gelu() {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(1024, 4096));
  seq->push_back(std::make_shared<nn::GELU>());
  seq->push_back(std::make_shared<nn::Linear>(4096, 1024));
  seq->eval();
  return seq;
}

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  const int64_t n = 16 << 20;
  w.push_back({"pw-chain", "relu(x*2+y).sigmoid()*y, 16M f32", Bound::bandwidth, 3.0 * 4 * n,
               [n](Device d) {
                 manual_seed(0);
                 Tensor x = randn({n}).to(d), y = randn({n}).to(d);
                 return instance_of([](const Tensor& a,
                                       const Tensor& b) { return (relu(a * 2 + b)).sigmoid() * b; },
                                    x, y);
               }});
  w.push_back({"softmax", "softmax over rows of 4096x4096 f32", Bound::bandwidth,
               2.0 * 4 * 4096 * 4096, [](Device d) {
                 manual_seed(0);
                 Tensor x = randn({4096, 4096}).to(d);
                 return instance_of([](const Tensor& a) { return softmax(a, -1); }, x);
               }});
  w.push_back(
      {"layernorm", "layer_norm over rows of 4096x4096 f32, with weight and bias", Bound::bandwidth,
       2.0 * 4 * 4096 * 4096, [](Device d) {
         manual_seed(0);
         Tensor x = randn({4096, 4096}).to(d), g = randn({4096}).to(d), b = randn({4096}).to(d);
         return instance_of([](const Tensor& a, const Tensor& w_,
                               const Tensor& b_) { return layer_norm(a, {4096}, w_, b_); },
                            x, g, b);
       }});
  w.push_back({"mlp-gelu", "Linear 1024->4096, GELU, Linear 4096->1024, batch 512", Bound::gemm, 0,
               [](Device d) {
                 manual_seed(0);
                 auto m = mlp_gelu();
                 Tensor x = randn({512, 1024});
                 Instance in = module_instance(m, x, d);
                 if (!d.is_cpu()) return in; // the reference is oneDNN's, a CPU library
                 // oneDNN's matmul primitive (kiln::matmul) on the two weights, nothing else.
                 Tensor w1 = m->named_parameters().at(0).second;
                 Tensor w2 = m->named_parameters().at(2).second;
                 in.reference = [x = x.to(d), w1, w2] { (void)matmul(matmul(x, w1.t()), w2.t()); };
                 return in;
               }});
  w.push_back({"attention",
               "causal scaled_dot_product_attention, 4x12 heads of 256 tokens, head 64 (gpt's)",
               Bound::gemm, 0, [](Device d) {
                 manual_seed(0);
                 Tensor q = randn({4, 12, 256, 64}).to(d), k = randn({4, 12, 256, 64}).to(d),
                        v = randn({4, 12, 256, 64}).to(d);
                 Instance in = instance_of(
                     [](const Tensor& q_, const Tensor& k_, const Tensor& v_) {
                       return scaled_dot_product_attention(q_, k_, v_, {}, 0.0, true);
                     },
                     q, k, v);
                 // Its two products alone on oneDNN, over every key (no mask, no softmax).
                 if (!d.is_cpu()) return in;
                 in.reference = [q, k, v] { (void)matmul(matmul(q, k.transpose(-2, -1)), v); };
                 return in;
               }});
  w.push_back({"gpt-block", "one GPT-2 decoder block, d 768, 12 heads, 4x256 tokens", Bound::mixed,
               0, [](Device d) {
                 manual_seed(1);
                 zoo::GptConfig cfg = bench_gpt();
                 return module_instance(zoo::make_gpt_block(cfg, 0), randn({4, 256, cfg.embed}), d);
               }});
  w.push_back({"gpt", "GPT-2-style decoder, 4 blocks, d 768, 12 heads, vocab 4096, 4x256 tokens",
               Bound::mixed, 0, [](Device d) {
                 GptRun g = bench_gpt_run();
                 return module_instance(g.model, g.tokens, d);
               }});
  w.push_back({"cnn", "the zoo's ResNet (conv-bn-relu, residual adds), 16x3x64x64", Bound::mixed, 0,
               [](Device d) {
                 ModelRegistry reg = zoo::registry();
                 const ModelSpec& spec = reg.get("cnn");
                 auto m = spec.make(0);
                 return module_instance(m, spec.make_input({16, 3, 64, 64}, DType::f32, 1), d);
               }});
  w.push_back({"latency-b1", "the zoo's mlp at batch 1: time per call is overhead", Bound::overhead,
               0, [](Device d) {
                 ModelRegistry reg = zoo::registry();
                 const ModelSpec& spec = reg.get("mlp");
                 auto m = spec.make(0);
                 return module_instance(m, spec.make_input({1, 784}, DType::f32, 1), d);
               }});
  w.push_back({"train-mlp",
               "one AdamW training step of the zoo's mlp, batch 64 (kiln train mlp's task)",
               Bound::mixed, 0, [](Device d) { return train_instance("mlp", d); }});
  w.push_back({"train-gpt",
               "one AdamW training step of the zoo's gpt, 16 sequences of 15 tokens (kiln train "
               "gpt's sorting task)",
               Bound::mixed, 0, [](Device d) { return train_instance("gpt", d); }});
  w.push_back({"train-gpt-m",
               "train-gpt with only the module compiled (forward and compiled backward); "
               "loss, backward() and AdamW eager",
               Bound::mixed, 0, [](Device d) { return train_instance("gpt", d, true); }});
  return w;
}

// ---- references ----

/// STREAM triad a = b + s c over three arrays of 128 MB, 2x the runtime's threads as OpenMP
/// sees them: the best of `reps` passes, in GB/s (24 bytes moved per element).
double stream_triad_gbs(int reps) {
  const int64_t n = (128 << 20) / 8;
  std::unique_ptr<double[]> a(new double[static_cast<size_t>(n)]);
  std::unique_ptr<double[]> b(new double[static_cast<size_t>(n)]);
  std::unique_ptr<double[]> c(new double[static_cast<size_t>(n)]);
  double* pa = a.get();
  double* pb = b.get();
  double* pc = c.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    pa[i] = 0;
    pb[i] = 1;
    pc[i] = 2;
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    const double s = 3.0;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      pa[i] = pb[i] + s * pc[i];
    best = std::min(best, ms_since(t));
  }
  return 24.0 * double(n) / (best * 1e6);
}

/// A device-to-device copy of 256 MiB on `device`: the best of `reps`, in GB/s (each byte read
/// once and written once).
double device_copy_gbs(Device device, int reps) {
  const int64_t n = (256 << 20) / 4;
  Tensor src = full({n}, 1.0, TensorOptions().device(device));
  Tensor dst = empty({n}, TensorOptions().device(device));
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    cuda::synchronize(device.index);
    auto t = Clock::now();
    cuda::detail::copy_on_device(dst.raw_data(), src.raw_data(), 4 * size_t(n), device);
    cuda::synchronize(device.index);
    if (r > 0) best = std::min(best, ms_since(t)); // the first copy warms up
  }
  return 2.0 * 4 * double(n) / (best * 1e6);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

struct Row {
  std::string workload, mode;
  Timing t;
  double bytes = 0;
  CompileStats stats;
  double first_call_ms = 0;
  size_t peak_bytes = 0; // CPU memory a call needs beyond what was live before it
  /// Static-plan modes: where a replay's time goes, per call (from a second, profiled
  /// instance, so that the timed one carries no clock reads).
  CompileStats::Profile profile;
};

class Progress {
public:
  explicit Progress(int64_t total) : total_(total), tty_(::isatty(2) != 0) {}
  void step(const std::string& what) {
    ++done_;
    if (!tty_) return;
    int width = 30;
    // The total is an estimate (a workload's reference row is only known once it is made).
    int filled =
        static_cast<int>(std::min<int64_t>(width, width * done_ / std::max<int64_t>(total_, 1)));
    std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
              << std::string(static_cast<size_t>(width - filled), ' ') << "] " << std::setw(28)
              << std::left << what.substr(0, 28) << std::right << std::flush;
  }
  void done() {
    if (tty_) std::cerr << "\r" << std::string(64, ' ') << "\r" << std::flush;
  }

private:
  int64_t total_, done_ = 0;
  bool tty_;
};

struct BenchOptions {
  std::vector<std::string> names;
  std::vector<Mode> modes{Mode::default_};
  int reps = 10;
  int warmup = 2;
  std::string json;
  bool list = false;
  std::vector<std::string> plugins;
  std::vector<int> chain{100, 200, 400, 800, 1600, 3200};
  Device device = Device::cpu();
};

/// Times eager and every mode of one workload, interleaved: each repetition calls each in turn.
std::vector<Row> run_workload(const Workload& w, const BenchOptions& o, Progress& progress) {
  Instance in = w.make(o.device);
  // On a device a call ends when its work does: each is followed by a synchronize.
  const Device device = o.device;
  auto synced = [device](std::function<void()> f) -> std::function<void()> {
    if (device.is_cpu()) return f;
    return [f = std::move(f), device] {
      f();
      cuda::synchronize(device.index);
    };
  };
  in.eager = synced(in.eager);
  NoGradGuard no_grad;
  std::vector<std::string> names{"eager"};
  std::vector<std::function<void()>> calls{in.eager};
  if (in.reference) {
    names.emplace_back("onednn-alone");
    calls.push_back(in.reference);
  }
  const size_t first_mode = calls.size();
  std::vector<Instance::Compiled> compiled;
  std::vector<double> first(first_mode + o.modes.size(), 0.0);
  for (Mode m : o.modes) {
    CompileOptions co;
    co.mode = m;
    compiled.push_back(in.compile(co));
    compiled.back().call = synced(compiled.back().call);
    names.emplace_back(mode_name(m));
    calls.push_back(compiled.back().call);
  }
  for (size_t k = 0; k < calls.size(); ++k)
    for (int i = 0; i < std::max(o.warmup, 1); ++i) {
      auto b = Clock::now();
      calls[k]();
      if (i == 0) first[k] = ms_since(b);
    }
  // Peak memory of one call each (after warm-up: plans and caches already built), right
  // after a call of its own: what is live before it is then its own state (the gradients a
  // training step replaces are its own, not another mode's).
  std::vector<size_t> peak(calls.size(), 0);
  for (size_t k = 0; k < calls.size() && device.is_cpu(); ++k) {
    calls[k]();
    const size_t live = cpu_memory_stats().allocated;
    reset_cpu_peak_memory();
    calls[k]();
    peak[k] = cpu_memory_stats().peak_allocated - live;
  }
  // Each repetition calls each in turn, starting one further along: no call always runs
  // right after the same other one (after eager, a call pays to write back the dirty lines
  // eager's intermediates left in the caches; measured for layernorm: 3.5 ms alone, 5.9 ms
  // right after eager).
  std::vector<std::vector<double>> t(calls.size());
  for (int r = 0; r < o.reps; ++r)
    for (size_t i = 0; i < calls.size(); ++i) {
      const size_t k = (i + static_cast<size_t>(r)) % calls.size();
      auto b = Clock::now();
      calls[k]();
      t[k].push_back(ms_since(b));
      progress.step(w.id + " " + names[k]);
    }
  // The split of a static plan's replay: a profiled instance of each such mode, after the
  // timed runs.
  std::vector<CompileStats::Profile> profiles(o.modes.size());
  for (size_t m = 0; m < o.modes.size(); ++m) {
    if (o.modes[m] == Mode::default_) continue;
    CompileOptions co;
    co.mode = o.modes[m];
    co.profile = true;
    if (!device.is_cpu()) continue; // static plans (and their profiles) are CPU plans
    Instance::Compiled c = in.compile(co);
    for (int i = 0; i < std::max(o.warmup, 2); ++i)
      c.call();
    const CompileStats::Profile before = c.stats().profile;
    for (int r = 0; r < o.reps; ++r)
      c.call();
    CompileStats::Profile p = c.stats().profile;
    p.calls -= before.calls;
    p.guards_ns -= before.guards_ns;
    p.setup_ns -= before.setup_ns;
    p.kernels_ns -= before.kernels_ns;
    p.generated_ns -= before.generated_ns;
    p.library_ns -= before.library_ns;
    p.eager_ns -= before.eager_ns;
    profiles[m] = p;
  }
  std::vector<Row> rows;
  for (size_t k = 0; k < calls.size(); ++k) {
    Row row;
    row.workload = w.id;
    row.mode = names[k];
    row.t = summarize(t[k]);
    row.bytes = w.bytes;
    row.first_call_ms = first[k];
    row.peak_bytes = peak[k];
    if (k >= first_mode) {
      row.stats = compiled[k - first_mode].stats();
      row.profile = profiles[k - first_mode];
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Cold (empty cache) and warm (cache hit) first calls of the bench gpt, compiled.
struct CompileTimes {
  Timing cold, warm;
  double compile_ms_cold = 0, compile_ms_warm = 0;
  bool warm_hit = true;
  /// max_autotune, once each: with an empty cache (so an empty autotune database), then warm.
  double autotune_cold_ms = 0, autotune_warm_ms = 0;
  CompileStats autotune_cold, autotune_warm;
};
CompileTimes compile_times(int reps, Progress& progress) {
  const GptRun g = bench_gpt_run();
  const Tensor& tokens = g.tokens;
  nn::Module* mp = g.model.get();
  NoGradGuard no_grad;
  std::vector<double> cold, warm;
  CompileTimes ct;
  for (int r = 0; r < reps; ++r) {
    codegen::DiskCache::global().clear();
    auto fn = [mp](const Tensor& t) { return mp->forward(t); };
    kiln::Compiled<decltype(fn)> c1(fn, {}, mp);
    auto b = Clock::now();
    (void)c1(tokens);
    cold.push_back(ms_since(b));
    ct.compile_ms_cold = c1.stats().compile_ms;
    kiln::Compiled<decltype(fn)> c2(fn, {}, mp);
    b = Clock::now();
    (void)c2(tokens);
    warm.push_back(ms_since(b));
    ct.compile_ms_warm = c2.stats().compile_ms;
    ct.warm_hit = ct.warm_hit && c2.stats().disk_cache_hits > 0;
    progress.step("compile gpt");
  }
  ct.cold = summarize(cold);
  ct.warm = summarize(warm);
  CompileOptions at;
  at.mode = Mode::max_autotune;
  codegen::DiskCache::global().clear();
  for (int pass = 0; pass < 2; ++pass) {
    auto fn = [mp](const Tensor& t) { return mp->forward(t); };
    kiln::Compiled<decltype(fn)> c(fn, at, mp);
    auto b = Clock::now();
    (void)c(tokens);
    (pass == 0 ? ct.autotune_cold_ms : ct.autotune_warm_ms) = ms_since(b);
    (pass == 0 ? ct.autotune_cold : ct.autotune_warm) = c.stats();
    progress.step("compile gpt max_autotune");
  }
  return ct;
}

/// The compile-time chain: n ops on a 64x64 f32 tensor, tanh and softmax over the last dim
/// alternately (tanh first). The whole chain is captured as one graph of n ops.
Tensor chain(const Tensor& x, int n) {
  Tensor y = x;
  for (int i = 0; i < n; ++i)
    y = i % 2 == 0 ? tanh(y) : softmax(y, -1);
  return y;
}

/// One point of the chain's compile-time curve: its first call with an empty kernel cache.
struct ChainPoint {
  int n = 0;
  int64_t ops = 0, kernels = 0, generated = 0;
  double compile_ms = 0, first_call_ms = 0, call_ms = 0;
};
struct ChainCurve {
  std::vector<ChainPoint> points;
  double slope_ms = 0, intercept_ms = 0; // least squares of compile_ms on captured ops
};

ChainCurve chain_curve(const std::vector<int>& sizes, Progress& progress) {
  manual_seed(0);
  const Tensor x = randn({64, 64});
  NoGradGuard no_grad;
  ChainCurve c;
  for (int n : sizes) {
    codegen::DiskCache::global().clear();
    auto fn = [n](const Tensor& t) { return chain(t, n); };
    kiln::Compiled<decltype(fn)> compiled(fn, {});
    ChainPoint p;
    p.n = n;
    auto b = Clock::now();
    (void)compiled(x);
    p.first_call_ms = ms_since(b);
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      b = Clock::now();
      (void)compiled(x);
      t.push_back(ms_since(b));
    }
    p.call_ms = summarize(t).median;
    CompileStats s = compiled.stats();
    p.ops = s.ops;
    p.kernels = s.kernels;
    p.generated = s.generated_kernels;
    p.compile_ms = s.compile_ms;
    c.points.push_back(p);
    progress.step("compile chain " + std::to_string(n));
  }
  // Least squares of compile_ms on the captured ops (a softmax is traced as several).
  const double m = static_cast<double>(c.points.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const ChainPoint& p : c.points) {
    const double x = static_cast<double>(p.ops);
    sx += x;
    sy += p.compile_ms;
    sxx += x * x;
    sxy += x * p.compile_ms;
  }
  if (c.points.size() >= 2 && m * sxx - sx * sx > 0) {
    c.slope_ms = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    c.intercept_ms = (sy - c.slope_ms * sx) / m;
  }
  return c;
}

std::optional<CommandError> parse(std::span<const std::string_view> args, BenchOptions& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    auto value = [&](std::string_view flag) -> std::optional<std::string> {
      if (a.rfind(std::string(flag) + "=", 0) == 0) return std::string(a.substr(flag.size() + 1));
      if (a == flag && i + 1 < args.size()) return std::string(args[++i]);
      return std::nullopt;
    };
    auto count = [&](const std::string& v, int& out) -> std::optional<CommandError> {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != 0 || n < 1 || n > 100000)
        return CommandError{"expected a positive count, got '" + v + "'", 2};
      out = static_cast<int>(n);
      return std::nullopt;
    };
    if (a.rfind("--device", 0) == 0) {
      auto v = value("--device");
      if (!v) return CommandError{"--device needs a device (cpu, cuda, cuda:N)", 2};
      try {
        o.device = Device::parse(*v);
      } catch (const Error& e) {
        return CommandError{e.message(), 2};
      }
    } else if (a == "--list") {
      o.list = true;
    } else if (a.rfind("--modes", 0) == 0) {
      auto v = value("--modes");
      if (!v) return CommandError{"--modes needs a value", 2};
      o.modes.clear();
      std::stringstream ss(*v);
      std::string m;
      while (std::getline(ss, m, ',')) {
        if (m == "eager") continue; // always run
        try {
          o.modes.push_back(parse_mode(m));
        } catch (const Error&) {
          return CommandError{
              "unknown mode '" + m + "' (eager, default, reduce_overhead, max_autotune)", 2};
        }
      }
    } else if (a.rfind("--reps", 0) == 0) {
      auto v = value("--reps");
      if (!v) return CommandError{"--reps needs a value", 2};
      if (auto e = count(*v, o.reps)) return e;
    } else if (a.rfind("--warmup", 0) == 0) {
      auto v = value("--warmup");
      if (!v) return CommandError{"--warmup needs a value", 2};
      if (auto e = count(*v, o.warmup)) return e;
    } else if (a.rfind("--json", 0) == 0) {
      auto v = value("--json");
      if (!v || v->empty()) return CommandError{"--json needs a file name", 2};
      o.json = *v;
    } else if (a.rfind("--chain", 0) == 0) {
      auto v = value("--chain");
      if (!v) return CommandError{"--chain needs a list of lengths", 2};
      o.chain.clear();
      std::stringstream ss(*v);
      std::string n;
      while (std::getline(ss, n, ',')) {
        int len = 0;
        if (auto e = count(n, len)) return e;
        o.chain.push_back(len);
      }
    } else if (a.rfind("--plugin", 0) == 0) {
      auto v = value("--plugin");
      if (!v) return CommandError{"--plugin needs a library", 2};
      o.plugins.push_back(*v);
    } else if (!a.empty() && a[0] == '-') {
      return CommandError{"unknown option '" + std::string(a) + "'", 2};
    } else {
      o.names.emplace_back(a);
    }
  }
  return std::nullopt;
}

std::string bound_name(Bound b) {
  switch (b) {
  case Bound::bandwidth: return "bandwidth";
  case Bound::gemm: return "gemm";
  case Bound::mixed: return "mixed";
  case Bound::overhead: return "overhead";
  }
  return "mixed";
}

} // namespace

int bench_main(std::span<const std::string_view> args) {
  for (std::string_view a : args)
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
  BenchOptions o;
  if (auto e = parse(args, o)) return report("bench", *e);
  std::vector<Workload> all = workloads();
  if (o.list) {
    for (const Workload& w : all)
      std::cout << std::left << std::setw(12) << w.id << w.what << "\n";
    std::cout << std::left << std::setw(12) << "compile"
              << "cold (empty cache) and warm (cache hit) first call of the bench gpt; compile\n"
              << std::setw(12) << ""
              << "time of the tanh/softmax chain (64x64 f32) at each --chain length\n";
    return 0;
  }
  LoadedRegistry reg;
  if (auto e = LoadedRegistry::load(o.plugins, reg)) return report("bench", *e);

  // What to run: named workloads, models by name, or everything.
  std::vector<Workload> chosen;
  bool with_compile = o.names.empty();
  for (const std::string& name : o.names) {
    if (name == "compile") {
      with_compile = true;
      continue;
    }
    auto it = std::find_if(all.begin(), all.end(), [&](const Workload& w) { return w.id == name; });
    if (it != all.end()) {
      chosen.push_back(*it);
      if (name == "gpt") with_compile = true;
      continue;
    }
    const ModelSpec* spec = nullptr;
    if (auto e = reg.find(name, spec))
      return report("bench", CommandError{"unknown workload or model '" + name +
                                              "' (`kiln bench --list`, `kiln zoo`)",
                                          2});
    Workload w;
    w.id = name;
    w.what = spec->summary + " (default input)";
    w.make = [spec](Device d) {
      return module_instance(spec->make(0),
                             spec->make_input(spec->input_shape, spec->input_dtype, 1), d, spec);
    };
    chosen.push_back(w);
  }
  if (o.names.empty()) chosen = all;

  // A kernel cache of the run's own: cold compiles are cold, and the user's cache stays.
  std::filesystem::path cache_dir =
      std::filesystem::temp_directory_path() / ("kiln-bench-" + std::to_string(::getpid()));
  ::setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);

  const int threads = get_num_threads();
  const bool on_device = !o.device.is_cpu();
  const std::string device_name = on_device ? cuda::device_name(o.device.index) : "";
  if (on_device) with_compile = false; // the compile curves are the CPU pipeline's
  std::cout << "kiln bench " << version() << ": " << cpu_model() << ", " << threads << " threads"
            << (on_device ? "; on " + o.device.str() + " (" + device_name + ")" : "")
            << "; median of " << o.reps << " interleaved runs (min..max)\n";
  bool any_bandwidth = std::any_of(chosen.begin(), chosen.end(),
                                   [](const Workload& w) { return w.bound == Bound::bandwidth; });
  // The bandwidth reference: a STREAM triad on the CPU, a device-to-device copy on a device.
  const std::string reference_name = on_device ? "device copy" : "STREAM";
  double stream = !any_bandwidth ? 0
                  : on_device    ? device_copy_gbs(o.device, 10)
                                 : stream_triad_gbs(10);
  if (any_bandwidth)
    std::cout << "reference: " << (on_device ? "device-to-device copy " : "STREAM triad ")
              << num(stream) << " GB/s\n";

  int64_t total = 0;
  for (size_t k = 0; k < chosen.size(); ++k)
    total += int64_t(o.reps) * int64_t(1 + o.modes.size());
  const int compile_reps = 3;
  if (with_compile) total += compile_reps + 2 + static_cast<int64_t>(o.chain.size());
  Progress progress(total);
  std::vector<Row> rows;
  std::vector<std::string> failures;
  for (const Workload& w : chosen) {
    try {
      std::vector<Row> r = run_workload(w, o, progress);
      rows.insert(rows.end(), r.begin(), r.end());
    } catch (const Error& e) {
      failures.push_back(w.id + ": " + e.what());
    }
  }
  std::optional<CompileTimes> ct;
  std::optional<ChainCurve> cc;
  if (with_compile) {
    ct = compile_times(compile_reps, progress);
    cc = chain_curve(o.chain, progress);
  }
  progress.done();

  // The table.
  std::cout << std::left << std::setw(12) << "workload" << std::setw(17) << "mode" << std::right
            << std::setw(11) << "median ms" << std::setw(22) << "min..max ms" << std::setw(10)
            << "vs eager"
            << "  reference\n";
  const Workload* current = nullptr;
  double eager_ms = 0, reference_ms = 0;
  for (const Row& r : rows) {
    auto w = std::find_if(chosen.begin(), chosen.end(),
                          [&](const Workload& x) { return x.id == r.workload; });
    current = &*w;
    if (r.mode == "eager") {
      eager_ms = r.t.median;
      reference_ms = 0;
      for (const Row& other : rows)
        if (other.workload == r.workload && other.mode == "onednn-alone")
          reference_ms = other.t.median;
    }
    std::ostringstream range;
    range << std::fixed << std::setprecision(3) << r.t.min << ".." << r.t.max;
    std::ostringstream ref;
    if (current->bound == Bound::bandwidth && r.t.median > 0) {
      double gbs = r.bytes / (r.t.median * 1e6);
      ref << std::fixed << std::setprecision(1) << gbs << " GB/s = " << std::setprecision(0)
          << 100 * gbs / stream << "% of " << reference_name;
    } else if (current->bound == Bound::gemm && reference_ms > 0 && r.mode != "onednn-alone") {
      ref << std::fixed << std::setprecision(0) << 100 * reference_ms / r.t.median
          << "% of oneDNN alone";
    } else if (current->bound == Bound::overhead) {
      ref << std::fixed << std::setprecision(1) << r.t.median * 1000 << " us per call";
    }
    if (current->bound == Bound::mixed) {
      ref << (ref.tellp() > 0 ? ", " : "") << "peak " << std::fixed << std::setprecision(1)
          << double(r.peak_bytes) / (1 << 20) << " MiB";
      if (r.stats.static_plan_bytes > 0) // held between calls, so not in the call's peak
        ref << " + " << double(r.stats.static_plan_bytes) / (1 << 20) << " MiB static plans";
      if (r.stats.backward_needed_bytes > 0) // a module compiled for training
        ref << ", backward keeps " << double(r.stats.backward_saved_bytes) / (1 << 20) << " of "
            << double(r.stats.backward_needed_bytes) / (1 << 20) << " MiB ("
            << r.stats.backward_recomputed_ops << " ops recomputed)";
    }
    if (r.mode != "eager" && r.mode != "onednn-alone")
      ref << (ref.tellp() > 0 ? ", " : "") << "kernels " << r.stats.kernels << " ("
          << r.stats.generated_kernels << " generated)";
    if (r.profile.calls > 0) {
      const double n = static_cast<double>(r.profile.calls) * 1000;
      ref << (ref.tellp() > 0 ? ", " : "") << std::fixed << std::setprecision(1)
          << "replay: guards " << r.profile.guards_ns / n << " + setup " << r.profile.setup_ns / n
          << " + kernels " << r.profile.kernels_ns / n << " us (generated "
          << r.profile.generated_ns / n << ", library " << r.profile.library_ns / n << ", eager "
          << r.profile.eager_ns / n << ")";
    }
    std::ostringstream ratio;
    ratio << std::fixed << std::setprecision(2) << "x" << eager_ms / r.t.median;
    std::cout << std::left << std::setw(12) << r.workload << std::setw(17) << r.mode << std::right
              << std::fixed << std::setprecision(3) << std::setw(11) << r.t.median << std::setw(22)
              << range.str() << std::setw(10) << (r.mode == "eager" ? "" : ratio.str()) << "  "
              << ref.str() << "\n";
  }
  if (ct)
    std::cout << std::left << std::setw(12) << "compile" << std::right
              << "gpt first call, cold (empty cache) " << std::fixed << std::setprecision(1)
              << ct->cold.median << " ms (compiling " << ct->compile_ms_cold << " ms), warm "
              << ct->warm.median << " ms (compiling " << ct->compile_ms_warm << " ms)"
              << (ct->warm_hit ? "" : "; the warm compile missed the cache") << "\n"
              << std::left << std::setw(12) << "compile" << std::right
              << "gpt first call under max_autotune, cold " << std::setprecision(1)
              << ct->autotune_cold_ms << " ms (" << ct->autotune_cold.autotune_timings
              << " candidates timed, " << ct->autotune_cold.autotune_changed << " kernels changed, "
              << ct->autotune_cold.autotune_gemms_generated << " matmuls generated), warm "
              << ct->autotune_warm_ms << " ms (" << ct->autotune_warm.autotune_timings << " timed, "
              << ct->autotune_warm.autotune_database_hits << " from the database)\n";
  if (cc) {
    std::cout << "compile chain (tanh/softmax alternately, 64x64 f32, empty kernel cache):\n"
              << std::right << std::setw(8) << "n" << std::setw(8) << "ops" << std::setw(10)
              << "kernels" << std::setw(13) << "compile ms" << std::setw(12) << "ms per op"
              << std::setw(11) << "call ms"
              << "\n";
    for (const ChainPoint& p : cc->points)
      std::cout << std::setw(8) << p.n << std::setw(8) << p.ops << std::setw(10) << p.generated
                << std::fixed << std::setprecision(1) << std::setw(13) << p.compile_ms
                << std::setprecision(3) << std::setw(12)
                << p.compile_ms / static_cast<double>(std::max<int64_t>(1, p.ops)) << std::setw(11)
                << p.call_ms << "\n";
    std::cout << "compile chain: marginal " << std::setprecision(3) << cc->slope_ms
              << " ms per captured op (least squares), intercept " << std::setprecision(1)
              << cc->intercept_ms << " ms\n";
  }
  for (const std::string& f : failures)
    std::cout << "failed: " << f << "\n";

  for (const std::string& name : o.names)
    if (name == "gpt") {
      // The demo: what the compiler captured of the model.
      const GptRun g = bench_gpt_run();
      nn::Module* mp = g.model.get();
      NoGradGuard no_grad;
      auto fn = [mp](const Tensor& t) { return mp->forward(t); };
      ExplainReport rep = kiln::Compiled<decltype(fn)>(fn, {}, mp).explain(g.tokens);
      int64_t ops = 0;
      for (const auto& g : rep.graphs)
        ops += g.ops;
      std::cout << "explain gpt: " << rep.graph_count() << " graph(s), " << ops << " ops, "
                << rep.break_count() << " break(s), " << rep.guards.size() << " guards\n";
    }

  if (!o.json.empty()) {
    std::ostringstream js;
    MemoryStats mem = cpu_memory_stats();
    js << "{\n  \"schema\": \"kiln.bench/1\",\n  \"runner\": \"kiln\",\n  \"version\": "
       << json::quote(version()) << ",\n  \"machine\": {\"cpu\": " << json::quote(cpu_model())
       << ", \"threads\": " << threads
       << (on_device ? ", \"device\": " + json::quote(device_name) : std::string())
       << "},\n  \"reference\": {"
       << (on_device ? "\"device_copy_gbs\": " : "\"stream_triad_gbs\": ")
       << (stream > 0 ? num(stream) : std::string("null"))
       << "},\n  \"peak_cpu_bytes\": " << mem.peak_allocated << ",\n  \"results\": [";
    for (size_t k = 0; k < rows.size(); ++k) {
      const Row& r = rows[k];
      auto w = std::find_if(chosen.begin(), chosen.end(),
                            [&](const Workload& x) { return x.id == r.workload; });
      js << (k ? "," : "") << "\n    {\"workload\": " << json::quote(r.workload)
         << ", \"mode\": " << json::quote(r.mode)
         << ", \"bound\": " << json::quote(bound_name(w->bound))
         << ", \"median_ms\": " << num(r.t.median) << ", \"min_ms\": " << num(r.t.min)
         << ", \"max_ms\": " << num(r.t.max) << ", \"reps\": " << r.t.count
         << ", \"first_call_ms\": " << num(r.first_call_ms) << ", \"bytes\": " << num(r.bytes)
         << ", \"peak_bytes\": " << r.peak_bytes
         << ", \"static_plan_bytes\": " << r.stats.static_plan_bytes
         << ", \"backward_saved_bytes\": " << r.stats.backward_saved_bytes
         << ", \"backward_needed_bytes\": " << r.stats.backward_needed_bytes
         << ", \"kernels\": " << r.stats.kernels;
      if (r.profile.calls > 0) {
        const double n = static_cast<double>(r.profile.calls) * 1000;
        js << ", \"replay_us\": {\"guards\": " << num(r.profile.guards_ns / n)
           << ", \"setup\": " << num(r.profile.setup_ns / n)
           << ", \"kernels\": " << num(r.profile.kernels_ns / n)
           << ", \"generated\": " << num(r.profile.generated_ns / n)
           << ", \"library\": " << num(r.profile.library_ns / n)
           << ", \"eager\": " << num(r.profile.eager_ns / n) << "}";
      }
      js << "}";
    }
    js << "\n  ]";
    if (ct)
      js << ",\n  \"compile\": {\"model\": \"gpt\", \"cold_ms\": " << num(ct->cold.median)
         << ", \"warm_ms\": " << num(ct->warm.median)
         << ", \"warm_hit\": " << (ct->warm_hit ? "true" : "false")
         << ", \"max_autotune_cold_ms\": " << num(ct->autotune_cold_ms)
         << ", \"max_autotune_warm_ms\": " << num(ct->autotune_warm_ms)
         << ", \"max_autotune_cold_timings\": " << ct->autotune_cold.autotune_timings
         << ", \"max_autotune_warm_timings\": " << ct->autotune_warm.autotune_timings << "}";
    if (cc) {
      js << ",\n  \"compile_chain\": {\"marginal_ms_per_op\": " << num(cc->slope_ms)
         << ", \"intercept_ms\": " << num(cc->intercept_ms) << ", \"points\": [";
      for (size_t k = 0; k < cc->points.size(); ++k) {
        const ChainPoint& p = cc->points[k];
        js << (k ? ", " : "") << "{\"n\": " << p.n << ", \"ops\": " << p.ops
           << ", \"generated_kernels\": " << p.generated
           << ", \"compile_ms\": " << num(p.compile_ms)
           << ", \"first_call_ms\": " << num(p.first_call_ms) << ", \"call_ms\": " << num(p.call_ms)
           << "}";
      }
      js << "]}";
    }
    js << "\n}\n";
    std::ofstream out(o.json);
    if (!out) return report("bench", CommandError{"cannot write " + o.json, 1});
    out << js.str();
    std::cout << "wrote " << o.json << "\n";
  }
  std::error_code ec;
  std::filesystem::remove_all(cache_dir, ec);
  return failures.empty() ? 0 : 1;
}

} // namespace kiln::tools
