// The CUDA code generator without a GPU: every kernel the zoo models generate, as CUDA C++
// (codegen/cuda/cuda_source.h) compiled by NVRTC for sm_90: no NVRTC error, one kernel per
// loop-IR kernel, and ptxas's report under the limits below. (The diff suite runs
// under KILN_CHECK_CUDA=sm_90 too: test/CMakeLists.txt, `cuda.nvrtc.diff`.) Launching them
// needs the device runtime, which is not built yet.
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/kernel_codegen.h"
#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/cuda_target.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/lower.h"
#include "frontend_testing.h"
#include "ir/kernel/parser.h"
#include "ir/parser.h"
#include "models/zoo.h"
#include "runtime/half.h"
#include "temp_dir.h"

using namespace kiln;

namespace {

/// ptxas limits for the one-thread-per-point kernels: no spills and no stack, and registers
/// for 256-thread blocks at two blocks per multiprocessor (65536 / 512 = 128).
constexpr int kMaxRegisters = 128;

/// The CUDA source of a graph's kernels, and the kernels' loop IR text (each kernel after its
/// `// schedule` line).
struct Lowered {
  std::string source, kernels;
};

Lowered lower_for_cuda(const ir::Graph& g) {
  Lowered out;
  codegen::LowerOptions lo;
  lo.target = &codegen::cuda::cuda_target();
  lo.stop_after = codegen::Stage::source;
  lo.print_stages = {codegen::Stage::kernels, codegen::Stage::source};
  lo.print = [&](codegen::Stage stage, const std::string& text) {
    (stage == codegen::Stage::source ? out.source : out.kernels) = text;
  };
  REQUIRE(codegen::lower(g.clone(), lo));
  return out;
}

/// Every graph of one call of every zoo model, named "MODEL graph K".
std::vector<std::pair<std::string, std::unique_ptr<ir::Graph>>> zoo_graphs() {
  std::vector<std::pair<std::string, std::unique_ptr<ir::Graph>>> out;
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models()) {
    std::shared_ptr<nn::Module> m = spec.make(0);
    NoGradGuard no_grad;
    auto f = compile([&spec, mp = m.get()](const Tensor& x) { return run_model(spec, *mp, x); });
    const ExplainReport rep = f.explain(spec.make_input(spec.input_shape, spec.input_dtype, 0));
    for (size_t k = 0; k < rep.graphs.size(); ++k) {
      Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(rep.graphs[k].ir);
      REQUIRE(g);
      out.emplace_back(spec.name + " graph " + std::to_string(k), std::move(*g));
    }
  }
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("cuda: every zoo model's kernels compile with NVRTC for sm_90, within ptxas limits") {
  if (!codegen::cuda::built_with_cuda()) {
    WARN("kiln was built without CUDA: the NVRTC checks are skipped");
    return;
  }
  for (const auto& [name, g] : zoo_graphs()) {
    INFO(name);
    const Lowered l = lower_for_cuda(*g);
    const size_t kernels = count(l.source, "__global__ void");
    CHECK(kernels == count(l.kernels, "// schedule"));
    if (kernels == 0) continue;
    Expected<codegen::cuda::NvrtcOutput> out =
        codegen::cuda::nvrtc_compile(l.source, "zoo.cu", "sm_90");
    INFO((out ? std::string() : out.error().message()) << "\n" << l.source);
    REQUIRE(out);
    CHECK(!out->cubin.empty());
    CHECK(out->ptx.find(".target sm_90") != std::string::npos);
    const std::vector<codegen::cuda::PtxasReport> reports = codegen::cuda::ptxas_reports(out->log);
    CHECK(reports.size() == kernels);
    for (const codegen::cuda::PtxasReport& r : reports) {
      INFO(r.kernel << ": " << r.registers << " registers, " << r.spill_stores
                    << " bytes spill stores, " << r.stack_bytes << " bytes stack");
      CHECK(r.registers > 0);
      CHECK(r.registers <= kMaxRegisters);
      CHECK(r.spill_stores == 0);
      CHECK(r.spill_loads == 0);
    }
  }
}

TEST_CASE(
    "cuda: the CUDA target compiles into the kernel cache's blobs and says it cannot launch") {
  if (!codegen::cuda::built_with_cuda()) {
    WARN("kiln was built without CUDA: the NVRTC checks are skipped");
    return;
  }
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(R"(graph @g {
    %x : f16[4,33] = input "x"
    %y : bf16[33] = input "y"
    %i : i32[4,33] = input "i"
    %a : f16[4,33] = mul(%x, %y)
    %b : f16[4,33] = relu(%a)
    %s : f32[4] = sum(%b) {dims = [1], keepdim = false, dtype = f32}
    %m : i64[4] = argmax(%i) {dim = 1, keepdim = false}
    %n : i32[4,33] = neg(%i)
    return %s, %m, %n
  })");
  REQUIRE(g);
  // The source reads f16 and bf16 through their conversions and wraps integer negation.
  const std::string source = lower_for_cuda(**g).source;
  CHECK_THAT(source, Catch::Contains("kiln_f16_to_f32(b0[") &&
                         Catch::Contains("kiln_bf16_to_f32(b1[") &&
                         Catch::Contains("((int)((unsigned)0 - (unsigned)"));
  codegen::LowerOptions lo;
  lo.target = &codegen::cuda::cuda_target();
  Expected<codegen::CompiledGraph> cg = codegen::lower(std::move(*g), lo);
  REQUIRE(cg);
  // Compiled (or found in the cache), then refused at load: the graph runs on the interpreter.
  CHECK_THAT(cg->fallback, Catch::Contains("cannot launch CUDA kernels yet"));
  CHECK(cg->plan.kernels().empty());
  Expected<codegen::cuda::CudaBlob> bad = codegen::cuda::split_cuda_blob("KILNCUDA\x01");
  CHECK_FALSE(bad);
  CHECK_FALSE(codegen::cuda::cuda_target().check("not a blob"));
}

// ---- the CUDA kernels' results, on the host ----

namespace {

/// A buffer's bytes, filled for an input (deterministic values of its dtype) or zeroed.
std::vector<char> buffer_bytes(const ir::kernel::Buffer& b, uint64_t salt) {
  const auto n = static_cast<size_t>(std::max<int64_t>(b.extent, 1));
  std::vector<char> bytes(n * static_cast<size_t>(itemsize(b.dtype)), 0);
  if (b.output) return bytes;
  uint64_t x = 0x9e3779b97f4a7c15ULL ^ salt;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(x >> 11) * 0x1p-53; // [0, 1)
    const double v = 4 * u - 2;                              // [-2, 2)
    char* at = bytes.data() + i * static_cast<size_t>(itemsize(b.dtype));
    auto put = [&](auto value) { std::memcpy(at, &value, sizeof value); };
    switch (b.dtype) {
    case DType::f32: put(static_cast<float>(v)); break;
    case DType::f64: put(v); break;
    case DType::f16: put(float_to_half_bits(static_cast<float>(v))); break;
    case DType::bf16: put(float_to_bf16_bits(static_cast<float>(v))); break;
    case DType::i8: put(static_cast<int8_t>(std::lround(v * 3))); break;
    case DType::u8: put(static_cast<uint8_t>(u * 12)); break;
    case DType::i32: put(static_cast<int32_t>(std::lround(v * 3))); break;
    case DType::i64: put(static_cast<int64_t>(std::lround(v * 3))); break;
    case DType::bool_: put(static_cast<uint8_t>(u < 0.5)); break;
    }
  }
  return bytes;
}

double element(const std::vector<char>& bytes, DType t, size_t i) {
  const char* at = bytes.data() + i * static_cast<size_t>(itemsize(t));
  auto get = [&](auto zero) {
    std::memcpy(&zero, at, sizeof zero);
    return zero;
  };
  switch (t) {
  case DType::f32: return get(0.0f);
  case DType::f64: return get(0.0);
  case DType::f16: return half_bits_to_float(get(uint16_t{0}));
  case DType::bf16: return bf16_bits_to_float(get(uint16_t{0}));
  case DType::i8: return get(int8_t{0});
  case DType::u8: return get(uint8_t{0});
  case DType::i32: return get(int32_t{0});
  case DType::i64: return static_cast<double>(get(int64_t{0}));
  case DType::bool_: return get(uint8_t{0});
  }
  return 0;
}

/// The relative tolerance between the CUDA kernel (libm's math, a plain multiply-add) and the
/// CPU's (kiln's polynomials, fused multiply-adds), both scalar and in the same order.
double tolerance(DType t) {
  switch (t) {
  case DType::f64: return 1e-9;
  case DType::f32: return 2e-5;
  case DType::f16: return 4e-3;
  case DType::bf16: return 3e-2;
  default: return 0;
  }
}

/// Runs every kernel of `text` (loop IR with schedule lines) both ways on the same inputs and
/// checks the outputs agree.
void check_host_cuda(const std::string& text, const std::string& what) {
  INFO(what);
  Expected<std::vector<ir::kernel::ParsedKernel>> parsed = ir::kernel::parse_kernels(text);
  REQUIRE(parsed);
  if (parsed->empty()) return;
  std::vector<ir::kernel::Kernel> kernels;
  std::vector<codegen::Schedule> scalar;
  codegen::ScheduleOverride one;
  one.lanes = 1;
  one.threads = 1;
  for (const ir::kernel::ParsedKernel& pk : *parsed) {
    kernels.push_back(pk.kernel);
    scalar.push_back(codegen::choose_schedule(pk.kernel, 4, one));
  }
  // The CUDA source as host C++, built by the system's compiler.
  testing::TempDir tmp("kiln_cuda_host");
  {
    std::ofstream f(tmp.file("kernels.cpp"));
    f << codegen::cuda::cuda_source(kernels, scalar);
  }
  const std::string cmd = "c++ -std=c++17 -O1 -shared -fPIC -o " + tmp.file("kernels.so") + " " +
                          tmp.file("kernels.cpp") + " > " + tmp.file("cc.log") + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(tmp.file("cc.log"));
    FAIL(std::string(std::istreambuf_iterator<char>(log), {}));
  }
  void* lib = dlopen(tmp.file("kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  // The CPU kernels, scalar: the same order of operations.
  const std::string object = codegen::cpu::compile_kernels(kernels, scalar, "reference");
  std::shared_ptr<codegen::cpu::JitLibrary> jit = codegen::cpu::load_object(object, "reference");
  for (size_t k = 0; k < kernels.size(); ++k) {
    const ir::kernel::Kernel& kernel = kernels[k];
    INFO("kernel " << kernel.name << "\n" << kernel.str());
    std::vector<std::vector<char>> cpu, gpu;
    for (size_t b = 0; b < kernel.buffers.size(); ++b) {
      cpu.push_back(buffer_bytes(kernel.buffers[b], b));
      gpu.push_back(cpu.back());
    }
    std::vector<char*> cpu_ptrs, gpu_ptrs;
    for (size_t b = 0; b < cpu.size(); ++b) {
      cpu_ptrs.push_back(cpu[b].data());
      gpu_ptrs.push_back(gpu[b].data());
    }
    auto entry = reinterpret_cast<KernelEntry>(jit->lookup(kernel.name));
    entry(cpu_ptrs.data(), 0, scalar[k].rows(kernel));
    auto host = reinterpret_cast<void (*)(char* const*, long long)>(
        dlsym(lib, (kernel.name + "_host").c_str()));
    REQUIRE(host != nullptr);
    host(gpu_ptrs.data(), kernel.outer_numel());
    for (size_t b = 0; b < kernel.buffers.size(); ++b) {
      if (!kernel.buffers[b].output) continue;
      const DType t = kernel.buffers[b].dtype;
      const size_t n = cpu[b].size() / static_cast<size_t>(itemsize(t));
      size_t bad = 0;
      std::string first;
      for (size_t i = 0; i < n; ++i) {
        const double want = element(cpu[b], t, i), got = element(gpu[b], t, i);
        const bool same = (std::isnan(want) && std::isnan(got)) || want == got ||
                          std::abs(got - want) <= tolerance(t) * (1 + std::abs(want));
        if (!same && bad++ == 0)
          first = "element " + std::to_string(i) + ": CUDA " + std::to_string(got) + ", CPU " +
                  std::to_string(want);
      }
      INFO("buffer " << kernel.buffers[b].name << " (" << dtype_name(t) << "): " << bad << " of "
                     << n << " differ; " << first);
      CHECK(bad == 0);
    }
  }
  dlclose(lib);
}

} // namespace

TEST_CASE("cuda: the CUDA kernels compute what the CPU kernels do, run as host C++", "[llvm]") {
  for (const auto& [name, g] : zoo_graphs())
    check_host_cuda(lower_for_cuda(*g).kernels, name);
  // Every dtype, casts both ways, integer wrap-around, arg reductions, NaN-first maximum,
  // where, views into strided indices.
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(R"(graph @dtypes {
    %x : f16[6,33] = input "x"
    %y : bf16[33] = input "y"
    %i : i32[6,33] = input "i"
    %j : i8[6,33] = input "j"
    %u : u8[33] = input "u"
    %l : i64[6,33] = input "l"
    %d : f64[6,33] = input "d"
    %c : bool[6,33] = input "c"
    %a : f16[6,33] = mul(%x, %y)
    %b : f16[6,33] = relu(%a)
    %s : f32[6] = sum(%b) {dims = [1], keepdim = false, dtype = f32}
    %am : i64[6] = argmax(%i) {dim = 1, keepdim = false}
    %an : i64[6] = argmin(%d) {dim = 1, keepdim = false}
    %n : i32[6,33] = neg(%i)
    %m : i32[6,33] = mul(%n, %i)
    %jj : i8[6,33] = add(%j, %j)
    %uu : u8[6,33] = mul(%u, %u)
    %lf : f32[6,33] = cast(%l) {dtype = f32}
    %df : f32[6,33] = cast(%d) {dtype = f32}
    %mx : f32[6,33] = maximum(%lf, %df)
    %w : f32[6,33] = where(%c, %mx, %lf)
    %t : f32[6,33] = tanh(%w)
    %e : f64[6,33] = exp(%d)
    %q : f64[6] = amax(%e) {dims = [1], keepdim = false}
    %di : i32[6,33] = cast(%d) {dtype = i32}
    %tt : f32[33,6] = permute(%t) {dims = [1, 0]}
    %z : f32[33,6] = sigmoid(%tt)
    return %s, %am, %an, %m, %jj, %uu, %z, %q, %di
  })");
  REQUIRE(g);
  check_host_cuda(lower_for_cuda(**g).kernels, "dtypes");
}
