// The CUDA code generator without a GPU: every kernel the zoo models generate, as CUDA C++
// (codegen/cuda/cuda_source.h) compiled by NVRTC for sm_90: no NVRTC error, one kernel per
// loop-IR kernel, and ptxas's report under the limits below (the diff suite runs under
// KILN_CHECK_CUDA=sm_90 too: test/CMakeLists.txt, `cuda.nvrtc.diff`); and each kernel's source
// built as host C++ and run under every GPU schedule against the CPU's kernels. Launches on a
// device: test_cuda_device.cpp.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/kernel_codegen.h"
#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/cuda_target.h"
#include "codegen/cuda/library.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/lower.h"
#include "frontend_testing.h"
#include "ir/kernel/parser.h"
#include "ir/parser.h"
#include "models/zoo.h"
#include "runtime/cuda/device.h"
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

TEST_CASE("cuda: the library kernels compile with NVRTC for sm_90, within ptxas limits") {
  if (!codegen::cuda::built_with_cuda()) {
    WARN("kiln was built without CUDA: the NVRTC checks are skipped");
    return;
  }
  const std::string source = codegen::cuda::library_source();
  Expected<codegen::cuda::NvrtcOutput> out =
      codegen::cuda::nvrtc_compile(source, "kiln_library.cu", "sm_90", {"--fmad=false"});
  INFO((out ? std::string() : out.error().message()));
  REQUIRE(out);
  const std::vector<std::string> names = codegen::cuda::library_kernel_names();
  const std::vector<codegen::cuda::PtxasReport> reports = codegen::cuda::ptxas_reports(out->log);
  REQUIRE(reports.size() == names.size());
  for (const codegen::cuda::PtxasReport& r : reports) {
    INFO(r.kernel << ": " << r.registers << " registers, " << r.spill_stores
                  << " bytes spill stores, " << r.stack_bytes << " bytes stack");
    CHECK(std::find(names.begin(), names.end(), r.kernel) != names.end());
    CHECK(r.registers <= kMaxRegisters);
    CHECK(r.spill_stores == 0);
    CHECK(r.spill_loads == 0);
  }
  // --fmad=false: no fused multiply-add in arange's start + i * step (the CPU rounds twice).
  const size_t arange = out->ptx.find(".entry kiln_arange_float_f64");
  REQUIRE(arange != std::string::npos);
  const std::string body = out->ptx.substr(arange, out->ptx.find(".entry", arange + 1) - arange);
  CHECK(body.find("fma.rn.f64") == std::string::npos);
  CHECK(body.find("mul.rn.f64") != std::string::npos);
}

TEST_CASE("cuda: the CUDA target compiles into the kernel cache's blobs, and loads them only on "
          "a device") {
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
  // Compiled (or found in the cache); without a device, refused at load, so the graph runs
  // on the interpreter (its eager calls on the CUDA eager kernels); with one, its kernels.
  CHECK(cg->plan.device() == Device::cuda(0));
  if (cuda::is_available()) {
    CHECK(cg->fallback.empty());
    CHECK(cg->plan.kernels().size() == 3);
  } else {
    CHECK_THAT(cg->fallback, Catch::Contains("no CUDA device to run them"));
    CHECK(cg->plan.kernels().empty());
  }
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

/// The kernel computing in f64 wherever k computes in a floating dtype: the reference of the
/// f64 rule (runtime/accuracy.h), run on the CPU.
ir::kernel::Kernel as_f64(ir::kernel::Kernel k) {
  for (ir::kernel::Buffer& b : k.buffers)
    if (is_floating(b.dtype)) b.dtype = DType::f64;
  for (ir::kernel::Instr& in : k.instrs)
    if (is_floating(in.dtype)) in.dtype = DType::f64;
  k.name += "_f64";
  return k;
}

/// Buffer b of `from` (bytes of dtype `was`) as f64 values, or their magnitudes.
std::vector<char> f64_bytes(const std::vector<char>& from, DType was, bool magnitude) {
  const size_t n = from.size() / static_cast<size_t>(itemsize(was));
  std::vector<char> out(n * sizeof(double));
  for (size_t i = 0; i < n; ++i) {
    const double v = element(from, was, i);
    const double m = magnitude ? std::abs(v) : v;
    std::memcpy(out.data() + i * sizeof(double), &m, sizeof m);
  }
  return out;
}

/// A one-dimensional tensor of the bytes.
Tensor tensor_of(const std::vector<char>& bytes, DType t) {
  Tensor x = empty({static_cast<int64_t>(bytes.size()) / itemsize(t)}, TensorOptions().dtype(t));
  if (!bytes.empty()) std::memcpy(x.raw_data(), bytes.data(), bytes.size());
  return x;
}

/// A host C++ build of CUDA source: its NAME_host entries.
class HostCuda {
public:
  HostCuda(const std::string& source, const std::string& what) : tmp_("kiln_cuda_host") {
    {
      std::ofstream f(tmp_.file("kernels.cpp"));
      f << source;
    }
    const std::string cmd =
        "c++ -std=c++17 -O1 -fno-strict-aliasing -ffp-contract=off -shared -fPIC -o " +
        tmp_.file("kernels.so") + " " + tmp_.file("kernels.cpp") + " > " + tmp_.file("cc.log") +
        " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(tmp_.file("cc.log"));
      FAIL(what << ": the host build of the CUDA source fails\n"
                << std::string(std::istreambuf_iterator<char>(log), {}));
    }
    lib_ = dlopen(tmp_.file("kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib_ != nullptr);
  }
  ~HostCuda() {
    if (lib_ != nullptr) dlclose(lib_);
  }
  using Entry = void (*)(char* const*, long long, unsigned);
  Entry entry(const std::string& kernel) const {
    auto e = reinterpret_cast<Entry>(dlsym(lib_, (kernel + "_host").c_str()));
    REQUIRE(e != nullptr);
    return e;
  }

private:
  testing::TempDir tmp_;
  void* lib_ = nullptr;
};

/// The GPU schedules a kernel is run under: a thread per point, for kernels with inner loops
/// a warp and a block per point too, and for vectorizable ones kVector points per thread.
std::vector<codegen::cuda::GpuLaunch> launch_forms(const ir::kernel::Kernel& k) {
  std::vector<codegen::cuda::GpuLaunch> forms{{256, 1}};
  if (!k.loops.empty()) forms.insert(forms.end(), {{256, 32}, {128, 128}, {64, 1}});
  if (codegen::cuda::gpu_vectorizable(k))
    forms.insert(forms.end(), {{256, 1, codegen::cuda::kVector}, {64, 1, codegen::cuda::kVector}});
  return forms;
}

/// Runs every kernel of `text` (loop IR with schedule lines) as CUDA C++ on the host, under
/// every form of launch_forms, and checks each output against the CPU's scalar kernel by the
/// f64 rule: the same kernel in f64 is the reference, on |inputs| the magnitude. The grid is
/// cut to at most 7 blocks, so the groups also stride over the points.
void check_host_cuda(const std::string& text, const std::string& what) {
  INFO(what);
  Expected<std::vector<ir::kernel::ParsedKernel>> parsed = ir::kernel::parse_kernels(text);
  REQUIRE(parsed);
  if (parsed->empty()) return;
  std::vector<ir::kernel::Kernel> kernels, cpu_kernels;
  std::vector<codegen::Schedule> scalar;
  codegen::ScheduleOverride one;
  one.lanes = 1;
  one.threads = 1;
  for (const ir::kernel::ParsedKernel& pk : *parsed) {
    kernels.push_back(pk.kernel);
    cpu_kernels.push_back(pk.kernel);
    cpu_kernels.push_back(as_f64(pk.kernel));
  }
  for (const ir::kernel::Kernel& k : cpu_kernels)
    scalar.push_back(codegen::choose_schedule(k, 4, one));
  const std::string object = codegen::cpu::compile_kernels(cpu_kernels, scalar, "reference");
  std::shared_ptr<codegen::cpu::JitLibrary> jit = codegen::cpu::load_object(object, "reference");
  // Each launch form's source, built once for all kernels (a kernel with fewer forms repeats
  // its first).
  size_t forms = 0;
  for (const ir::kernel::Kernel& k : kernels)
    forms = std::max(forms, launch_forms(k).size());
  std::vector<std::unique_ptr<HostCuda>> builds;
  std::vector<std::vector<codegen::cuda::GpuLaunch>> launches(forms);
  for (size_t f = 0; f < forms; ++f) {
    for (const ir::kernel::Kernel& k : kernels) {
      const std::vector<codegen::cuda::GpuLaunch> all = launch_forms(k);
      launches[f].push_back(f < all.size() ? all[f] : all[0]);
    }
    builds.push_back(
        std::make_unique<HostCuda>(codegen::cuda::cuda_source(kernels, launches[f]), what));
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    const ir::kernel::Kernel& kernel = kernels[k];
    INFO("kernel " << kernel.name << "\n" << kernel.str());
    std::vector<std::vector<char>> eager, ref, mag;
    for (size_t b = 0; b < kernel.buffers.size(); ++b) {
      const ir::kernel::Buffer& buf = kernel.buffers[b];
      eager.push_back(buffer_bytes(buf, b));
      const bool fl = is_floating(buf.dtype);
      ref.push_back(fl ? f64_bytes(eager.back(), buf.dtype, false) : eager.back());
      mag.push_back(fl ? f64_bytes(eager.back(), buf.dtype, true) : eager.back());
    }
    auto run_cpu = [&](const ir::kernel::Kernel& ck, size_t s, std::vector<std::vector<char>>& b) {
      std::vector<char*> ptrs;
      for (std::vector<char>& bytes : b)
        ptrs.push_back(bytes.data());
      reinterpret_cast<KernelEntry>(jit->lookup(ck.name))(ptrs.data(), 0, scalar[s].rows(ck));
    };
    run_cpu(cpu_kernels[2 * k], 2 * k, eager);
    run_cpu(cpu_kernels[2 * k + 1], 2 * k + 1, ref);
    run_cpu(cpu_kernels[2 * k + 1], 2 * k + 1, mag);
    for (size_t f = 0; f < forms; ++f) {
      const codegen::cuda::GpuLaunch& launch = launches[f][k];
      // A vectorized kernel also runs on buffers one element off their vectors' alignment
      // (its scalar path).
      for (int64_t shift = 0; shift <= (launch.vector > 1 ? 1 : 0); ++shift) {
        INFO("GPU schedule " << launch.str() << (shift ? ", buffers misaligned" : ""));
        std::vector<std::vector<char>> gpu;
        std::vector<char*> ptrs;
        for (size_t b = 0; b < kernel.buffers.size(); ++b) {
          const ir::kernel::Buffer& buf = kernel.buffers[b];
          const std::vector<char> bytes = buf.output ? buffer_bytes(buf, b) : eager[b];
          gpu.emplace_back(static_cast<size_t>(shift * itemsize(buf.dtype)), '\0');
          gpu.back().insert(gpu.back().end(), bytes.begin(), bytes.end());
        }
        for (size_t b = 0; b < gpu.size(); ++b)
          ptrs.push_back(gpu[b].data() + shift * itemsize(kernel.buffers[b].dtype));
        const long long n = kernel.outer_numel();
        builds[f]->entry(kernel.name)(
            ptrs.data(), n, static_cast<unsigned>(std::min<int64_t>(launch.blocks(n), 7)));
        for (size_t b = 0; b < kernel.buffers.size(); ++b) {
          if (!kernel.buffers[b].output) continue;
          const DType t = kernel.buffers[b].dtype;
          const std::vector<char> out(gpu[b].begin() + shift * itemsize(t), gpu[b].end());
          AccuracyOptions opts;
          if (is_floating(t)) opts.magnitude = tensor_of(mag[b], DType::f64);
          const std::optional<std::string> bad =
              check_accuracy(tensor_of(out, t), tensor_of(eager[b], t),
                             is_floating(t) ? tensor_of(ref[b], DType::f64) : Tensor(), opts);
          INFO("buffer " << kernel.buffers[b].name << " (" << dtype_name(t)
                         << "): " << bad.value_or(""));
          CHECK_FALSE(bad);
        }
      }
    }
  }
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
    %big : f32[3,2500] = input "big"
    %r3 : f32[4,5,70] = input "r3"
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
    %bs : f32[3] = sum(%big) {dims = [1], keepdim = false, dtype = f32}
    %bm : i64[3] = argmin(%big) {dim = 1, keepdim = false}
    %rm : f32[5] = amax(%r3) {dims = [0, 2], keepdim = false}
    %mx3 : f32[4,5,1] = amax(%r3) {dims = [2], keepdim = true}
    %d3 : f32[4,5,70] = sub(%r3, %mx3)
    %e3 : f32[4,5,70] = exp(%d3)
    %s3 : f32[4,5,1] = sum(%e3) {dims = [2], keepdim = true, dtype = f32}
    %sm : f32[4,5,70] = div(%e3, %s3)
    return %s, %am, %an, %m, %jj, %uu, %z, %q, %di, %bs, %bm, %rm, %sm
  })");
  REQUIRE(g);
  check_host_cuda(lower_for_cuda(**g).kernels, "dtypes");
}

// The vector form: f32, f16, f64, i64 and bool vectors, a row broadcast (a vector too), a
// column broadcast (the same element for a thread's points) and a transposed read (element
// by element).
const char* const kVectorGraph = R"(graph @vectors {
    %x : f32[16,64] = input "x"
    %y : f32[64] = input "y"
    %c : f32[16,1] = input "c"
    %h : f16[16,64] = input "h"
    %d : f64[16,64] = input "d"
    %l : i64[16,64] = input "l"
    %tr : f32[64,16] = input "tr"
    %a : f32[16,64] = mul(%x, %y)
    %b : f32[16,64] = add(%a, %c)
    %hf : f32[16,64] = cast(%h) {dtype = f32}
    %e : f32[16,64] = add(%b, %hf)
    %t : f32[16,64] = permute(%tr) {dims = [1, 0]}
    %f : f32[16,64] = maximum(%e, %t)
    %g : f16[16,64] = cast(%f) {dtype = f16}
    %dd : f64[16,64] = mul(%d, %d)
    %ll : i64[16,64] = add(%l, %l)
    %p : bool[16,64] = gt(%f, %x)
    return %f, %g, %dd, %ll, %p
  })";

TEST_CASE("cuda: pointwise kernels compute 4 points per thread through vector loads and stores",
          "[llvm]") {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(kVectorGraph);
  REQUIRE(g);
  const Lowered l = lower_for_cuda(**g);
  INFO(l.source);
  CHECK(l.source.find("kiln_vec4<float, 16>") != std::string::npos);
  CHECK(l.source.find("kiln_vec4<unsigned short, 8>") != std::string::npos);
  CHECK(l.source.find("kiln_vec4<double, 16>") != std::string::npos);
  check_host_cuda(l.kernels, "vectors");
  // Not for a row of 33: its points would straddle rows.
  Expected<std::unique_ptr<ir::Graph>> odd = ir::parse_graph(R"(graph @odd {
    %x : f32[6,33] = input "x"
    %y : f32[6,33] = relu(%x)
    return %y
  })");
  REQUIRE(odd);
  CHECK(lower_for_cuda(**odd).source.find("kiln_vec4<float") == std::string::npos);
  if (!codegen::cuda::built_with_cuda()) {
    WARN("kiln was built without CUDA: the NVRTC checks are skipped");
    return;
  }
  Expected<codegen::cuda::NvrtcOutput> out =
      codegen::cuda::nvrtc_compile(l.source, "vectors.cu", "sm_90");
  REQUIRE(out);
  CHECK(std::regex_search(out->ptx, std::regex(R"(ld\.global(\.nc)?\.v4\.f32)")));
  CHECK(out->ptx.find("st.global.v4.f32") != std::string::npos);
}
