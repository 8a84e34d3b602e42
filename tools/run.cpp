// `kiln run`: builds a model (or reads a .kir graph), runs it eagerly or compiled a few times,
// prints the output's shape, a checksum, timings and (compiled) the frontend's counters, and
// checks the compiled output against eager: bit for bit, or else by the f64 reference rule.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda/eager.h"
#include "frontend/compile.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/accuracy.h"
#include "runtime/cuda/device.h"
#include "runtime/grad_mode.h"
#include "runtime/plan.h"
#include "runtime/serialize/safetensors.h"
#include "tools/commands.h"
#include "tools/fuzz_check.h"
#include "tools/fuzz_graph.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kRunUsage =
    "usage: kiln run MODEL [--mode eager|default|reduce_overhead|max_autotune] [--input SPEC]\n"
    "                [--seed N] [--weights F.safetensors] [--save-weights F.safetensors]\n"
    "                [--iters N] [--device D] [--save-input F] [--check-output F]\n"
    "                [--plugin LIB.so --model NAME]\n"
    "  Builds MODEL with weights drawn from the seed, makes its input and runs it N times,\n"
    "  eagerly or through kiln::compile. Prints the output's shape and dtype, its sum and\n"
    "  mean, the first call's time (which includes tracing and compiling) and the median of\n"
    "  the others; compiled runs also print the compile counters and compare the output with\n"
    "  an eager run on the same input: bit for bit, or else against an f64 reference (exit 1\n"
    "  when the compiled error is over 2x eager's, 3x for f16/bf16, plus a small floor).\n"
    "  --mode M           eager, default (the default), reduce_overhead or max_autotune\n"
    "  --iters N          calls to make (default 3)\n"
    "  --device D         where to run: cpu (the default), or cuda:N. The eager reference (and\n"
    "                     the f64 one) still runs on the CPU; then the model and its input\n"
    "                     move to the device, where it runs eagerly or compiled, and its\n"
    "                     output comes back to be checked against the CPU's\n"
    "  --weights F        load a safetensors file into the model (non-strict: missing and\n"
    "                     unexpected keys are warnings, a shape mismatch is an error)\n"
    "  --save-weights F   save the model's weights (after --weights) to a safetensors file\n"
    "  --save-input F     write the input's raw bytes (contiguous) to F\n"
    "  --check-output F   also check an output computed elsewhere (F: its raw bytes, contiguous,\n"
    "                     of the output's dtype and shape; e.g. a `kiln aot` library's, run by\n"
    "                     examples/aot_c) against eager, by the same rule (exit 1 if not)\n"
    "\n"
    "usage: kiln run FILE.kir [--seed N] [--specials] [--mode M]\n"
    "  Runs the first graph of FILE node by node on the eager kernels, on inputs drawn from\n"
    "  the seed (each input's type; --specials puts NaN, +-Inf and +-0.0 among floating\n"
    "  values), then the same through kiln::compile twice, and checks the compiled outputs\n"
    "  and the inputs it writes against eager by the f64 reference rule (exit 1 if not).\n"
    "  This is how the repros `kiln fuzz` writes are run (their `// ARGS:` line).\n";

struct RunOptions {
  std::string mode = "default";
  bool specials = false;
  uint64_t iters = 3;
  std::string weights;
  std::string save_weights;
  std::string device;
  std::string save_input;   // raw bytes of the input
  std::string check_output; // raw bytes of an output computed elsewhere, checked against eager
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string fmt_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string fmt_ms(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", v);
  return buf;
}

/// The output's shape and dtype, sum and mean (in f64).
std::string describe_output(const Tensor& out) {
  std::vector<double> v = out.to_vector<double>();
  double sum = 0;
  for (double x : v)
    sum += x;
  double mean = v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  return input_spec_str(out.sizes(), out.dtype()) + "  sum " + fmt_g(sum) + "  mean " + fmt_g(mean);
}

/// Empty when `got` equals `want` bit for bit, else why not.
std::string compare_bits(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype())
    return "output is " + input_spec_str(got.sizes(), got.dtype()) + ", eager gives " +
           input_spec_str(want.sizes(), want.dtype());
  Tensor a = got.to(Device::cpu()).contiguous();
  Tensor b = want.to(Device::cpu()).contiguous();
  const size_t bytes = static_cast<size_t>(a.numel() * a.itemsize());
  if (bytes == 0 || std::memcmp(a.raw_data(), b.raw_data(), bytes) == 0) return "";
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double max_diff = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    if (std::isnan(x[k]) && std::isnan(y[k])) continue;
    double d = std::abs(x[k] - y[k]);
    if (std::isnan(d) || d > max_diff) max_diff = d;
    if (std::isnan(d)) break;
  }
  std::string s = "max abs diff " + fmt_g(max_diff);
  if (max_diff == 0) s += " (the bits differ: signed zeros or NaN payloads)";
  return s;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (const std::string& k : keys)
    s += (s.empty() ? "" : ", ") + k;
  return s;
}

/// Loads a safetensors file into the module, non-strict; missing and unexpected keys are
/// warnings.
void load_weights(nn::Module& module, const std::string& path) {
  nn::StateDict state = load(path);
  nn::LoadReport r = module.load_state_dict(state, /*strict=*/false);
  std::cout << "weights  " << state.size() - r.unexpected_keys.size() << " of " << state.size()
            << " tensors loaded from " << path << "\n";
  if (!r.missing_keys.empty())
    std::cerr << "kiln run: warning: " << r.missing_keys.size()
              << " missing key(s), left as drawn from the seed: " << join_keys(r.missing_keys)
              << "\n";
  if (!r.unexpected_keys.empty())
    std::cerr << "kiln run: warning: " << r.unexpected_keys.size() << " unexpected key(s) in "
              << path << ", ignored: " << join_keys(r.unexpected_keys) << "\n";
}

/// First-call and steady-state (median of the rest) times.
std::string timing_line(const std::vector<double>& times, bool compiled) {
  std::string s = "first call " + fmt_ms(times.front());
  if (compiled) s += " (incl. trace and compile)";
  if (times.size() < 2) return s + ", no steady state (1 call)";
  std::vector<double> rest(times.begin() + 1, times.end());
  std::sort(rest.begin(), rest.end());
  size_t n = rest.size();
  double median = n % 2 ? rest[n / 2] : (rest[n / 2 - 1] + rest[n / 2]) / 2;
  return s + ", steady median " + fmt_ms(median) + " (" + std::to_string(n) +
         (n == 1 ? " call)" : " calls)");
}

std::string stats_line(const CompileStats& s, const std::string& mode) {
  std::ostringstream os;
  os << "traces " << s.traces << ", replays " << s.replays << ", graphs " << s.graphs << ", breaks "
     << s.breaks << ", ops " << s.ops << ", kernels " << s.kernels << ", compiles " << s.compiles
     << ", cache hits " << s.cache_hits << ", generated kernels " << s.generated_kernels
     << ", disk cache hits " << s.disk_cache_hits;
  if (mode == "reduce_overhead" || mode == "max_autotune")
    os << ", static plans " << s.static_plans;
  if (mode == "max_autotune")
    os << "\nautotune " << s.autotune_timings << " candidates timed, " << s.autotune_database_hits
       << " kernels from the database, " << s.autotune_changed
       << " kernels given another schedule than the heuristic's, " << s.autotune_gemms_generated
       << " matmuls given a generated kernel, " << s.autotune_splits << " reductions split";
  return os.str();
}

/// The body of `kiln run` once the arguments are known; throws kiln::Error on failures.
int run_model_command(const RunOptions& o, ModelInstance& inst, const ModelArgs& margs) {
  const ModelSpec& spec = *inst.spec;
  nn::Module& module = *inst.module;
  if (!o.weights.empty()) load_weights(module, o.weights);
  if (!o.save_weights.empty()) {
    nn::StateDict state = module.state_dict();
    save(state, o.save_weights);
    std::cout << "saved    " << state.size() << " tensors to " << o.save_weights << "\n";
  }
  const bool eager = o.mode == "eager";
  std::cout << "model    " << spec.name << ": " << spec.summary << "\n";
  std::cout << "input    " << input_spec_str(inst.input_shape, inst.input_dtype) << " (seed "
            << margs.input_seed_or_seed() << ")\n";
  std::cout << "mode     " << o.mode << "\n";

  // Inference: no autograd graph, eager and compiled alike.
  NoGradGuard no_grad;
  const Tensor& x = inst.input;
  std::vector<double> times;
  std::vector<Tensor> outs;
  if (!o.save_input.empty()) {
    const Tensor c = x.contiguous();
    std::ofstream f(o.save_input, std::ios::binary);
    f.write(static_cast<const char*>(c.raw_data()),
            static_cast<std::streamsize>(c.numel() * c.itemsize()));
    f.close();
    if (!f) throw Error::without_location("can't write " + o.save_input);
    std::cout << "saved    the input to " << o.save_input << "\n";
  }
  const Device device = o.device.empty() ? Device::cpu() : Device::parse(o.device);
  if (eager && o.check_output.empty() && device.is_cpu()) {
    for (uint64_t k = 0; k < o.iters; ++k) {
      auto start = Clock::now();
      outs.push_back(run_model(spec, module, x));
      times.push_back(ms_since(start));
    }
    std::cout << "output   " << describe_output(outs.back()) << "\n";
    std::cout << "time     " << timing_line(times, false) << "\n";
    return 0;
  }

  Tensor reference = run_model(spec, module, x);
  // Fused kernels reorder sums and use their own math functions, so the bits may differ:
  // the f64 reference rule (runtime/accuracy.h) decides, against the model run in f64.
  Tensor ref64;
  auto f64_reference = [&]() -> const Tensor& {
    if (!ref64.defined() && is_floating(reference.dtype())) {
      module.to(DType::f64);
      ref64 = run_model(spec, module, is_floating(x.dtype()) ? x.to(DType::f64) : x);
      module.to(reference.dtype());
    }
    return ref64;
  };
  /// Empty when every one of `got` matches eager, else why not; `how` says by which rule.
  auto check = [&](const std::vector<Tensor>& got, std::string& how) -> std::optional<std::string> {
    bool bitwise = true;
    for (const Tensor& out : got)
      bitwise = bitwise && compare_bits(out, reference).empty();
    if (bitwise) {
      how = "bit for bit";
      return std::nullopt;
    }
    std::optional<std::string> problem;
    for (size_t k = 0; k < got.size() && !problem; ++k)
      problem = check_accuracy(got[k], reference, f64_reference());
    how = compare_bits(got.back(), reference) + "; within the f64 reference rule";
    return problem;
  };
  // On a device: the references first, on the CPU; then the model and its input move.
  Tensor xd = x;
  if (!device.is_cpu()) {
    (void)f64_reference();
    module.to(device);
    xd = x.to(device);
    const codegen::cuda::EagerCounters before = codegen::cuda::eager_counters();
    std::cout << "device   " << device << " (" << cuda::device_name(device.index) << ")\n";
    if (eager) {
      for (uint64_t k = 0; k < o.iters; ++k) {
        auto start = Clock::now();
        outs.push_back(run_model(spec, module, xd));
        cuda::synchronize(device.index);
        times.push_back(ms_since(start));
      }
      for (Tensor& out : outs)
        out = out.to(Device::cpu());
      const codegen::cuda::EagerCounters after = codegen::cuda::eager_counters();
      std::cout << "output   " << describe_output(outs.back()) << "\n";
      std::cout << "time     " << timing_line(times, false) << "\n";
      std::cout << "kernels  " << after.compiled - before.compiled
                << " single-op graphs compiled for CUDA, " << after.library - before.library
                << " library kernel calls, " << after.host_fallbacks - before.host_fallbacks
                << " ops run on the host\n";
      std::string how;
      if (std::optional<std::string> problem = check(outs, how)) {
        std::cout << "matches CPU eager: no: " << *problem << "\n";
        return 1;
      }
      std::cout << "matches CPU eager: yes (" << how << ")\n";
      return 0;
    }
  }
  int status = 0;
  if (!o.check_output.empty()) {
    std::string bytes, why;
    if (!read_text(o.check_output, bytes, why))
      throw Error::without_location("can't read " + o.check_output + ": " + why);
    const size_t want = static_cast<size_t>(reference.numel() * reference.itemsize());
    if (bytes.size() != want)
      throw Error::without_location(
          o.check_output + " holds " + std::to_string(bytes.size()) + " bytes; the output " +
          input_spec_str(reference.sizes(), reference.dtype()) + " has " + std::to_string(want));
    Tensor got = empty_with_layout(reference.sizes(), {}, reference.dtype());
    std::memcpy(got.raw_data(), bytes.data(), want);
    std::string how;
    std::optional<std::string> problem = check({got}, how);
    std::cout << "output   " << describe_output(got) << " (" << o.check_output << ")\n";
    std::cout << "file matches eager: " << (problem ? "no: " + *problem : "yes (" + how + ")")
              << "\n";
    if (problem) status = 1;
    if (eager) return status;
  }
  CompileOptions options;
  options.mode = parse_mode(o.mode);
  auto compiled = compile_model(inst, options);
  for (uint64_t k = 0; k < o.iters; ++k) {
    auto start = Clock::now();
    outs.push_back(compiled(xd));
    if (!device.is_cpu()) cuda::synchronize(device.index);
    times.push_back(ms_since(start));
  }
  for (Tensor& out : outs)
    out = out.to(Device::cpu());
  std::cout << "output   " << describe_output(outs.back()) << "\n";
  std::cout << "time     " << timing_line(times, true) << "\n";
  std::cout << "stats    " << stats_line(compiled.stats(), o.mode) << "\n";
  const std::string eager_name = device.is_cpu() ? "eager" : "CPU eager";
  std::string how;
  if (std::optional<std::string> problem = check(outs, how)) {
    std::cout << "matches " << eager_name << ": no: " << *problem << "\n";
    return 1;
  }
  std::cout << "matches " << eager_name << ": yes (" << how << ")\n";
  return status;
}

/// "f32[4,5], i64[3]": the types of the inputs a graph is run on.
std::string inputs_line(const std::vector<Tensor>& inputs) {
  std::string s;
  for (const Tensor& t : inputs)
    s += (s.empty() ? "" : ", ") + input_spec_str(t.sizes(), t.dtype());
  return s.empty() ? "none" : s;
}

/// `kiln run FILE.kir`: the first graph of the file, interpreted, eager vs compiled.
int run_kir_command(const RunOptions& o, const std::string& path, uint64_t seed) {
  std::string text;
  if (std::string why; !read_text(path, text, why))
    return report("run", runtime_error("cannot read '" + path + "': " + why));
  Expected<ir::ParsedModule> parsed = ir::parse_module(text, path);
  if (!parsed) return report("run", runtime_error(parsed.error().message()));
  const ir::Graph& g = *parsed->graphs.front();
  if (auto v = ir::verify(g); !v) return report("run", runtime_error(v.error().message()));
  NoGradGuard no_grad;
  TestFunction fn = [&g](std::span<const Tensor> x) { return run_graph(g, x); };
  InputMaker make = [&] { return make_graph_inputs(g, seed, o.specials); };
  std::vector<Tensor> inputs = make();
  std::cout << "graph    " << path << ": @" << g.name() << ", " << g.num_nodes() << " ops\n";
  std::cout << "input    " << inputs_line(inputs) << " (seed " << seed
            << (o.specials ? ", specials" : "") << ")\n";
  std::cout << "mode     " << o.mode << "\n";
  if (o.mode == "eager") {
    for (const Tensor& out : fn(inputs))
      std::cout << "output   " << describe_output(out) << "\n";
    return 0;
  }
  CheckOptions co;
  co.mode = parse_mode(o.mode);
  co.magnitude = graph_has_reordered_sums(g);
  co.magnitude_scale = magnitude_scale_for(graph_longest_sum(g));
  co.reference_fn = [&g](std::span<const Tensor> x) { return run_graph(g, x, RunMode::reference); };
  co.magnitude_fn = [&g](std::span<const Tensor> x) { return run_graph(g, x, RunMode::magnitude); };
  CheckReport r = check_compiled(fn, make, co);
  if (r.invalid) return report("run", runtime_error("the graph fails eagerly: " + *r.invalid));
  if (r.compiled_error) {
    std::cout << "matches eager: no: the compiled call fails: " << *r.compiled_error << "\n";
    return 1;
  }
  for (const Tensor& out : r.compiled)
    std::cout << "output   " << describe_output(out) << "\n";
  std::cout << "time     first call " << fmt_ms(r.first_call_ms)
            << " (incl. trace and compile), second call " << fmt_ms(r.second_call_ms) << "\n";
  std::cout << "stats    " << stats_line(r.stats, o.mode) << "\n";
  if (!r.mismatches.empty()) {
    std::cout << "matches eager: no: " << r.mismatches.front() << "\n";
    for (size_t k = 1; k < r.mismatches.size(); ++k)
      std::cout << "               " << r.mismatches[k] << "\n";
    return 1;
  }
  std::cout << "matches eager: yes ("
            << (r.bitwise ? "bit for bit" : "within the f64 reference rule") << ")\n";
  return 0;
}

} // namespace

int run_main(std::span<const std::string_view> args) {
  RunOptions o;
  ModelArgs margs;
  std::string iters;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kRunUsage << kModelArgsHelp;
      return 0;
    }
    if (a == "--specials") {
      o.specials = true;
      continue;
    }
    std::optional<CommandError> err;
    if (flag_value(args, i, "--mode", o.mode, err) || flag_value(args, i, "--iters", iters, err) ||
        flag_value(args, i, "--weights", o.weights, err) ||
        flag_value(args, i, "--save-weights", o.save_weights, err) ||
        flag_value(args, i, "--device", o.device, err) ||
        flag_value(args, i, "--save-input", o.save_input, err) ||
        flag_value(args, i, "--check-output", o.check_output, err) || margs.take(args, i, err)) {
      if (err) return report("run", *err);
      continue;
    }
    return report("run", usage_error("unknown option '" + std::string(a) + "'"));
  }
  if (o.mode != "eager") {
    try {
      (void)parse_mode(o.mode);
    } catch (const Error&) {
      return report("run", usage_error("unknown mode '" + o.mode +
                                       "'; expected eager, default, reduce_overhead or "
                                       "max_autotune"));
    }
  }
  if (!iters.empty() && (!parse_uint(iters, o.iters) || o.iters == 0))
    return report("run", usage_error("bad --iters '" + iters + "': expected a positive integer"));

  if (margs.positional.ends_with(".kir")) {
    try {
      return run_kir_command(o, margs.positional, margs.seed);
    } catch (const Error& e) {
      return report("run", runtime_error(e.message()));
    }
  }
  LoadedRegistry reg;
  if (auto err = LoadedRegistry::load(margs.plugins, reg)) return report("run", *err);
  ModelInstance inst;
  if (auto err = instantiate(margs, reg, inst)) return report("run", *err);
  try {
    if (!o.device.empty()) (void)Device::parse(o.device); // a bad name fails before any run
    return run_model_command(o, inst, margs);
  } catch (const Error& e) {
    return report("run", runtime_error(e.message()));
  } catch (const std::exception& e) {
    return report("run", runtime_error(e.what()));
  }
}

} // namespace kiln::tools
