// `kiln aot`: compiles a model (or a .kir graph) ahead of time into a shared library with the C
// ABI of include/kiln/kiln_aot.h. The model is traced whole (a graph break is an error listing
// each), lowered by the JIT's pipeline for the chosen CPU with position-independent code, and
// its kernels' objects, a data object (the plan's bytes, the manifest, the kernel table,
// embedded weights: codegen/cpu/aot_object.h) and libkiln_runtime_aot.a are linked by the
// system's C++ driver into DIR/libN.so. DIR also gets N.h, kiln_aot.h and N.safetensors.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cpu/aot_object.h"
#include "codegen/cpu/jit_target.h"
#include "codegen/cpu/object_check.h"
#include "codegen/lower.h"
#include "frontend/trace.h"
#include "frontend/version.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/aot/load.h"
#include "runtime/aot/model.h"
#include "runtime/grad_mode.h"
#include "runtime/plan_io.h"
#include "runtime/serialize/safetensors.h"
#include "tools/commands.h"
#include "tools/fuzz_graph.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAotUsage =
    "usage: kiln aot MODEL|FILE.kir -o DIR [--input SPEC] [--seed N] [--weights F.safetensors]\n"
    "                [--embed-weights] [--cpu native|x86-64-v3|x86-64-v4|CPU] [--name N]\n"
    "                [--plugin LIB.so --model NAME]\n"
    "  Compiles the model's forward (or the first graph of FILE.kir) for one input shape into\n"
    "  DIR/libN.so, a shared library with the C ABI of kiln_aot.h that needs neither kiln nor\n"
    "  LLVM (libdnnl when the model has library calls), and writes DIR/N.h, DIR/kiln_aot.h and,\n"
    "  unless --embed-weights, DIR/N.safetensors. The whole forward must be one graph: each\n"
    "  graph break is listed, with its code and location, and nothing is written.\n"
    "  -o DIR             the output directory (created)\n"
    "  --weights F        load a safetensors file into the model first (every key must match)\n"
    "  --embed-weights    put the weights in the library instead of N.safetensors\n"
    "  --cpu C            the CPU the kernels are compiled for: x86-64-v3 (AVX2, the default,\n"
    "                     runs on AVX2 and AVX-512 machines), x86-64-v4 (AVX-512), native\n"
    "                     (this host) or any CPU LLVM knows; this host must run its code\n"
    "  --name N           the library's name (default: the model's, or the file's stem)\n"
    "  --bench N          then, in this process: load the library and create its model (timed),\n"
    "                     and time N runs of it against N runs of the model compiled by the JIT\n"
    "                     (kiln::compile, default mode), alternating, on the same input\n"
    "  $KILN_AOT_CXX      the C++ driver that links the library (default: the one kiln was\n"
    "                     built with, else c++)\n";

struct AotOptions {
  std::string out_dir, name, weights, cpu = "x86-64-v3";
  bool embed = false;
  uint64_t bench = 0; // runs to time the library against the JIT-compiled model
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// What one trace of the model gave: the compiled graph, how its inputs bind, its
/// arguments and results.
struct Captured {
  std::string name;
  std::vector<Tensor> args;
  std::vector<Tensor> results;
  std::shared_ptr<const codegen::CompiledGraph> compiled;
  std::shared_ptr<frontend::TraceSession::Replay> replay;
};

/// Traces `body` on `args` into one graph lowered for `target`; a graph break (each listed) or a
/// result the plan does not compute is a kiln::Error.
Captured capture(const codegen::Target& target, std::vector<Tensor> args,
                 const CompiledFunction::Body& body, nn::Module* module) {
  Captured c;
  frontend::TraceSession::Options so;
  so.freeze = true;
  frontend::TraceSession session(
      so,
      [&](const ir::Graph& traced) {
        codegen::LowerOptions lo;
        lo.target = &target;
        lo.keep_object = true;
        auto compiled = std::make_shared<const codegen::CompiledGraph>(
            std::move(codegen::lower(traced.clone(), lo).value()));
        c.compiled = compiled;
        return compiled;
      },
      module);
  NoGradGuard no_grad;
  c.results = session.trace_call(args, body);
  c.args = std::move(args);
  if (session.num_breaks() > 0) {
    std::string s = "the forward has " + std::to_string(session.num_breaks()) +
                    " graph break(s); a library holds one graph:";
    for (const GraphBreak& b : session.breaks())
      s += "\n  " + b.str();
    throw Error::without_location(s);
  }
  c.replay = session.replay();
  if (!c.replay || !c.replay->compiled)
    throw Error::without_location("the forward computes nothing (no graph to compile)");
  c.compiled = c.replay->compiled;
  if (!c.compiled->fallback.empty())
    throw Error::without_location("the CPU code generator failed: " + c.compiled->fallback);
  for (size_t k = 0; k < c.replay->result_outputs.size(); ++k)
    if (c.replay->result_outputs[k] < 0)
      throw Error::without_location("result " + std::to_string(k) +
                                    " is not computed by the graph (an input, a view of one, or "
                                    "a fixed tensor): a library returns computed outputs only");
  return c;
}

std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// The manifest, and the weights by name (the captured tensors the graph reads).
aot::Manifest make_manifest(const Captured& c, const AotOptions& o,
                            const codegen::cpu::HostTarget& target,
                            std::map<std::string, Tensor>& weights) {
  const frontend::TraceSession::Replay& r = *c.replay;
  aot::Manifest m;
  m.name = o.name;
  m.kiln_version = version();
  m.graph_hash = hex(ir::structural_hash(*c.compiled->graph));
  m.cpu = o.cpu == "native" ? target.cpu : o.cpu;
  m.cpu_features = codegen::cpu::cpu_features(target);
  for (const Tensor& t : c.args) {
    // The caller passes contiguous data; the kernels index it with the traced strides.
    if (!t.is_contiguous())
      throw Error::without_location(
          "input " + std::to_string(m.inputs.size()) +
          " was traced with strides of its own: a library's inputs are contiguous");
    m.inputs.push_back({"", t.dtype(), t.sizes()});
  }
  for (const Tensor& t : c.results)
    m.outputs.push_back({"", t.dtype(), t.sizes()});
  for (const aot::TensorSpec& t : m.inputs)
    if (t.sizes.size() > 8)
      throw Error::without_location("an input of rank > 8 (KILN_AOT_MAX_RANK)");
  for (const aot::TensorSpec& t : m.outputs)
    if (t.sizes.size() > 8)
      throw Error::without_location("an output of rank > 8 (KILN_AOT_MAX_RANK)");
  std::map<std::string, size_t> parameter_of;
  for (size_t k = 0; k < r.bindings.size(); ++k) {
    const frontend::InputBinding& b = r.bindings[k];
    aot::Manifest::PlanInput p;
    if (b.kind == frontend::InputBinding::Kind::argument) {
      p = {aot::Manifest::PlanInput::Kind::input, b.argument};
    } else if (b.kind == frontend::InputBinding::Kind::grad) {
      throw Error::without_location("the forward reads a gradient (Tensor::grad()); a library "
                                    "is an inference forward");
    } else if (b.kind == frontend::InputBinding::Kind::captured) {
      std::string name = b.name.empty() ? "kiln.captured." + std::to_string(k) : b.name;
      auto [it, fresh] = parameter_of.try_emplace(name, m.parameters.size());
      if (fresh) {
        Tensor t(b.captured);
        // The kernels index it with the strides it was traced with; a weights file holds it
        // contiguous.
        if (!t.is_contiguous())
          throw Error::without_location("the forward reads " + name +
                                        ", which is not contiguous: a library's weights are "
                                        "(make it contiguous in the model)");
        m.parameters.push_back({name, t.dtype(), t.sizes()});
        weights.emplace(name, t);
      }
      p = {aot::Manifest::PlanInput::Kind::parameter, it->second};
    }
    m.plan_inputs.push_back(p);
  }
  // The caller's inputs are read-only: a graph that writes one in place has no library form.
  const Plan& plan = c.compiled->plan;
  for (const Plan::Write& w : plan.writes())
    for (const auto& [slot, index] : plan.inputs())
      if (slot == w.target && index < m.plan_inputs.size() &&
          m.plan_inputs[index].kind == aot::Manifest::PlanInput::Kind::input)
        throw Error::without_location("the forward writes its input " +
                                      std::to_string(m.plan_inputs[index].index) +
                                      " in place; a library's inputs are read-only");
  for (int64_t out : r.result_outputs)
    m.results.push_back(static_cast<size_t>(out));
  m.weights = m.parameters.empty() ? "none" : o.embed ? "embedded" : "file";
  return m;
}

/// A C identifier from the library's name ("gpt-block" -> "gpt_block").
std::string c_identifier(const std::string& name) {
  std::string s;
  for (char ch : name)
    s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "m_" + s;
  return s;
}

std::string header_text(const aot::Manifest& m, const std::string& id) {
  std::ostringstream h;
  std::string guard = id;
  for (char& ch : guard)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  h << "/* " << m.name << ".h: the model `" << m.name << "`, compiled by kiln " << m.kiln_version
    << " (`kiln aot`) for " << m.cpu << ", graph " << m.graph_hash << ".\n"
    << " *\n * Load lib" << m.name
    << ".so with dlopen and call kiln_aot_entry, or link it and call\n"
    << " * " << id << "_aot_entry (the same table under a name of its own, so that several models\n"
    << " * link into one program). Inputs:\n";
  for (size_t k = 0; k < m.inputs.size(); ++k)
    h << " *   " << k << ": " << m.inputs[k].str() << "\n";
  h << " * Outputs:\n";
  for (size_t k = 0; k < m.outputs.size(); ++k)
    h << " *   " << k << ": " << m.outputs[k].str() << "\n";
  h << " */\n#ifndef " << guard << "_KILN_AOT_H\n#define " << guard << "_KILN_AOT_H\n\n"
    << "#include \"kiln_aot.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    << "#define " << guard << "_NUM_INPUTS " << m.inputs.size() << "u\n"
    << "#define " << guard << "_NUM_OUTPUTS " << m.outputs.size() << "u\n\n"
    << "const kiln_aot_api* " << id << "_aot_entry(void);\n\n"
    << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return h.str();
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw Error::without_location("can't write " + path.string());
}

/// A word for /bin/sh.
std::string sh_word(const std::string& s) {
  std::string q = "'";
  for (char ch : s)
    q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

/// The directory of the kiln executable.
fs::path exe_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

/// libkiln_runtime_aot.a: beside the build tree's libraries, or in the install tree's.
fs::path runtime_archive() {
  const fs::path dir = exe_dir();
  for (const fs::path& p : {dir / ".." / "lib" / "libkiln_runtime_aot.a",
                            dir / ".." / KILN_INSTALL_LIBDIR / "libkiln_runtime_aot.a"})
    if (fs::exists(p)) return fs::weakly_canonical(p);
  throw Error::without_location(
      "libkiln_runtime_aot.a is neither in " + (dir / ".." / "lib").string() + " nor in " +
      (dir / ".." / KILN_INSTALL_LIBDIR).string() + " (build or install kiln with it)");
}

/// kiln_aot.h: the install tree's, or the source tree's for a build tree.
fs::path aot_header() {
  const fs::path installed = exe_dir() / ".." / KILN_INSTALL_INCLUDEDIR / "kiln" / "kiln_aot.h";
  if (fs::exists(installed)) return installed;
  return fs::path(KILN_SOURCE_DIR) / "include" / "kiln" / "kiln_aot.h";
}

std::string cxx_driver() {
  if (const char* env = std::getenv("KILN_AOT_CXX"); env != nullptr && *env != '\0') return env;
  if (fs::exists(KILN_AOT_BUILD_CXX)) return KILN_AOT_BUILD_CXX;
  return "c++";
}

/// Links the objects into `library`; the driver's output is the error on failure.
void link(const std::vector<fs::path>& objects, const fs::path& version_script,
          const fs::path& library) {
  std::string cmd = sh_word(cxx_driver()) + " -shared -o " + sh_word(library.string());
  for (const fs::path& o : objects)
    cmd += " " + sh_word(o.string());
  cmd += " -Wl,-u,kiln_aot_entry " + sh_word(runtime_archive().string());
  std::istringstream libs(KILN_AOT_LINK_LIBRARIES);
  for (std::string lib; libs >> lib;)
    cmd += " " + sh_word(lib);
  cmd += " -Wl,--version-script=" + sh_word(version_script.string()) +
         " -Wl,--no-undefined -Wl,--gc-sections -Wl,-Bsymbolic -Wl,-z,noexecstack"
         " -Wl,-soname," +
         sh_word(library.filename().string()) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw Error::without_location("can't run the linker: " + cmd);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0 || !fs::exists(library))
    throw Error::without_location("linking " + library.string() + " failed:\n" + cmd + "\n" + out);
}

/// Which CPU to compile for, position-independent; an error when this host can't run it.
codegen::cpu::HostTarget aot_cpu(const std::string& cpu) {
  codegen::cpu::HostTarget t =
      cpu == "native" ? codegen::cpu::host_target() : codegen::cpu::cpu_target(cpu);
  t.pic = true;
  if (!codegen::cpu::host_runs(t))
    throw Error::without_location(
        "this host can't run code for " + cpu +
        ": the pipeline runs the kernels while it compiles (the trace's outputs, attention's "
        "timed choice); compile on a host of that CPU or a later one");
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// --bench: the library against the JIT in this process, on the model's input.
void bench(const fs::path& library, const ModelInstance& inst, uint64_t runs) {
  auto start = std::chrono::steady_clock::now();
  aot::LoadedModel lib = aot::load(library.string());
  const double load_ms = ms_since(start);
  auto jit = compile_model(inst);
  NoGradGuard no_grad;
  start = std::chrono::steady_clock::now();
  (void)jit(inst.input);
  const double jit_first_ms = ms_since(start);
  (void)lib(inst.input);
  std::vector<double> a, j;
  // Alternating, each first in every other pair: neither gains from the other's cache state.
  auto time_lib = [&] {
    const auto t = std::chrono::steady_clock::now();
    (void)lib(inst.input);
    a.push_back(ms_since(t));
  };
  auto time_jit = [&] {
    const auto t = std::chrono::steady_clock::now();
    (void)jit(inst.input);
    j.push_back(ms_since(t));
  };
  for (uint64_t k = 0; k < runs; ++k) {
    if (k % 2 == 0) {
      time_lib();
      time_jit();
    } else {
      time_jit();
      time_lib();
    }
  }
  char line[256];
  std::snprintf(
      line, sizeof line,
      "bench    load + create %.2f ms (the JIT's first call, trace and compile: %.2f ms)\n"
      "bench    run: library %.4f ms, JIT %.4f ms (median of %llu each): %.3fx the JIT's "
      "time\n",
      load_ms, jit_first_ms, median(a), median(j), static_cast<unsigned long long>(runs),
      median(a) / median(j));
  std::cout << line;
}

int aot(const AotOptions& o, const ModelArgs& margs) {
  const auto start = std::chrono::steady_clock::now();
  const codegen::cpu::JitTarget target(aot_cpu(o.cpu));
  AotOptions opts = o;
  Captured c;
  LoadedRegistry reg; // holds the model's spec (and plugin code) for --bench
  ModelInstance inst;
  const std::string& positional = margs.positional;
  if (positional.size() > 4 && positional.ends_with(".kir")) {
    std::string text;
    if (std::string why; !read_text(positional, text, why))
      return report("aot", runtime_error("cannot read '" + positional + "': " + why));
    Expected<ir::ParsedModule> parsed = ir::parse_module(text, positional);
    if (!parsed) return report("aot", runtime_error(parsed.error().message()));
    const ir::Graph& g = *parsed->graphs.front();
    if (auto v = ir::verify(g); !v) return report("aot", runtime_error(v.error().message()));
    if (opts.name.empty()) opts.name = fs::path(positional).stem().string();
    auto body = [&g](std::span<const Tensor> x) { return run_graph(g, x); };
    c = capture(target, make_graph_inputs(g, margs.seed, false), body, nullptr);
  } else {
    if (auto err = LoadedRegistry::load(margs.plugins, reg)) return report("aot", *err);
    if (auto err = instantiate(margs, reg, inst)) return report("aot", *err);
    if (!o.weights.empty()) {
      nn::LoadReport r = inst.module->load_state_dict(load(o.weights), /*strict=*/true);
      (void)r;
    }
    if (opts.name.empty()) opts.name = inst.spec->name;
    const ModelSpec* spec = inst.spec;
    nn::Module* module = inst.module.get();
    auto body = [spec, module](std::span<const Tensor> x) {
      return std::vector<Tensor>{run_model(*spec, *module, x[0])};
    };
    c = capture(target, {inst.input}, body, module);
  }
  const double capture_ms = ms_since(start);

  std::map<std::string, Tensor> weights;
  const aot::Manifest m = make_manifest(c, opts, target.cpu(), weights);
  const std::string manifest = m.json();
  const std::string plan = save_plan(c.compiled->plan);
  // The kernels the plan names (its kernel calls and the attention steps' narrowed kernels):
  // loading the plan with a recording resolver lists them, and checks the bytes once more.
  std::set<std::string> names;
  load_plan(plan, [&](std::string_view name) {
    names.emplace(name);
    return reinterpret_cast<KernelEntry>(1);
  });
  // The manifest must read back, and bind the plan, exactly as the library will.
  (void)aot::Manifest::parse(manifest);

  const fs::path dir(o.out_dir);
  fs::create_directories(dir);
  const fs::path work = dir / (".kiln-aot-" + std::to_string(::getpid()));
  fs::create_directories(work);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{work};

  std::string weights_bytes;
  std::map<std::string, std::string> metadata = {{aot::kGraphHashKey, m.graph_hash},
                                                 {"kiln.model", m.name}};
  // Written into the work directory first: DIR gets the weights only with a library.
  const fs::path weights_file = work / "weights.safetensors";
  if (!weights.empty()) {
    save(weights, weights_file.string(), metadata);
    if (std::string why; o.embed && !read_text(weights_file.string(), weights_bytes, why))
      throw Error::without_location("can't read " + weights_file.string() + ": " + why);
  }

  std::vector<fs::path> objects;
  if (!c.compiled->object.empty()) {
    Expected<std::vector<std::string_view>> parts = codegen::cpu::split_objects(c.compiled->object);
    if (!parts) throw Error::without_location("the kernels' object: " + parts.error().message());
    for (size_t k = 0; k < parts->size(); ++k) {
      objects.push_back(work / ("kernels." + std::to_string(k) + ".o"));
      write_file(objects.back(), (*parts)[k]);
    }
  }
  const std::string id = c_identifier(m.name);
  const std::vector<std::string> kernel_names(names.begin(), names.end());
  codegen::cpu::AotData data;
  data.kernel_names = kernel_names;
  data.plan = plan;
  data.manifest = manifest;
  data.weights = weights_bytes;
  data.entry_alias = id + "_aot_entry";
  objects.push_back(work / "data.o");
  write_file(objects.back(), codegen::cpu::aot_data_object(target.cpu(), data));
  const fs::path script = work / "exports.map";
  write_file(script, "{ global: kiln_aot_entry; " + data.entry_alias + "; local: *; };\n");
  const fs::path library = dir / ("lib" + m.name + ".so");
  link(objects, script, library);
  if (!weights.empty() && !o.embed) fs::rename(weights_file, dir / (m.name + ".safetensors"));
  write_file(dir / (m.name + ".h"), header_text(m, id));
  fs::copy_file(aot_header(), dir / "kiln_aot.h", fs::copy_options::overwrite_existing);

  std::cout << "model    " << m.name << " (graph " << m.graph_hash << ", "
            << c.compiled->plan.steps().size() << " steps, " << kernel_names.size()
            << " kernels)\n";
  for (size_t k = 0; k < m.inputs.size(); ++k)
    std::cout << "input    " << k << ": " << m.inputs[k].str() << "\n";
  for (size_t k = 0; k < m.outputs.size(); ++k)
    std::cout << "output   " << k << ": " << m.outputs[k].str() << "\n";
  std::cout << "cpu      " << m.cpu << "\n";
  std::cout << "library  " << library.string() << " (" << fs::file_size(library) << " bytes)\n";
  if (!weights.empty())
    std::cout << "weights  " << weights.size() << " tensors "
              << (o.embed ? "embedded" : "in " + (dir / (m.name + ".safetensors")).string())
              << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "time     %.0f ms (trace and lower %.0f ms, link %.0f ms)\n",
                ms_since(start), capture_ms, ms_since(start) - capture_ms);
  std::cout << line;
  if (o.bench > 0) {
    if (inst.spec == nullptr) return report("aot", usage_error("--bench needs a MODEL"));
    bench(library, inst, o.bench);
  }
  return 0;
}

} // namespace

int aot_main(std::span<const std::string_view> args) {
  AotOptions o;
  ModelArgs margs;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kAotUsage << kModelArgsHelp;
      return 0;
    }
    std::optional<CommandError> err;
    std::string runs;
    if (a == "--embed-weights") {
      o.embed = true;
    } else if (flag_value(args, i, "-o", o.out_dir, err) ||
               flag_value(args, i, "--out", o.out_dir, err) ||
               flag_value(args, i, "--weights", o.weights, err) ||
               flag_value(args, i, "--cpu", o.cpu, err) ||
               flag_value(args, i, "--name", o.name, err) ||
               flag_value(args, i, "--bench", runs, err) || margs.take(args, i, err)) {
      if (err) return report("aot", *err);
      if (!runs.empty() && (!parse_uint(runs, o.bench) || o.bench == 0))
        return report("aot",
                      usage_error("bad --bench '" + runs + "': expected a positive integer"));
    } else {
      return report("aot", usage_error("unknown argument '" + std::string(a) + "'"));
    }
  }
  if (o.out_dir.empty()) return report("aot", usage_error("-o DIR is required"));
  if (margs.positional.empty() && margs.model_flag.empty())
    return report("aot", usage_error("a MODEL or FILE.kir is required"));
  if (margs.positional.empty()) margs.positional = margs.model_flag;
  try {
    return aot(o, margs);
  } catch (const Error& e) {
    return report("aot", runtime_error(e.what()));
  } catch (const std::exception& e) { // the file system's (an unwritable DIR)
    return report("aot", runtime_error(e.what()));
  }
}

} // namespace kiln::tools
