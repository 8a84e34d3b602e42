// The CUDA code generator without a GPU: every kernel the zoo models generate, as CUDA C++
// (codegen/cuda/cuda_source.h) compiled by NVRTC for sm_90: no NVRTC error, one kernel per
// kernel of the CPU plan, and ptxas's report under the limits below. (The diff suite runs
// under KILN_CHECK_CUDA=sm_90 too: test/CMakeLists.txt, `cuda.nvrtc.diff`.) Launching them
// needs the device runtime, which is not built yet.
#include <regex>

#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/cuda_target.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/lower.h"
#include "frontend_testing.h"
#include "ir/parser.h"
#include "models/zoo.h"

using namespace kiln;

namespace {

/// ptxas limits for the one-thread-per-point kernels: no spills and no stack, and registers
/// for 256-thread blocks at two blocks per multiprocessor (65536 / 512 = 128).
constexpr int kMaxRegisters = 128;

/// The CUDA source of a graph's kernels, and how many kernels its CPU plan generates.
struct Lowered {
  std::string source;
  size_t cpu_kernels = 0;
};

Lowered lower_both(const ir::Graph& g) {
  Lowered out;
  Expected<codegen::CompiledGraph> cpu = codegen::lower(g.clone(), {});
  REQUIRE(cpu);
  out.cpu_kernels = cpu->plan.kernels().size();
  codegen::LowerOptions lo;
  lo.target = &codegen::cuda::cuda_target();
  lo.stop_after = codegen::Stage::source;
  lo.print_stages = {codegen::Stage::source};
  lo.print = [&](codegen::Stage, const std::string& text) { out.source = text; };
  REQUIRE(codegen::lower(g.clone(), lo));
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
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models()) {
    std::shared_ptr<nn::Module> m = spec.make(0);
    NoGradGuard no_grad;
    auto f = compile([&spec, mp = m.get()](const Tensor& x) { return run_model(spec, *mp, x); });
    const ExplainReport rep = f.explain(spec.make_input(spec.input_shape, spec.input_dtype, 0));
    for (size_t k = 0; k < rep.graphs.size(); ++k) {
      INFO(spec.name << " graph " << k);
      Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(rep.graphs[k].ir);
      REQUIRE(g);
      const Lowered l = lower_both(**g);
      const size_t kernels = count(l.source, "__global__ void");
      CHECK(kernels == l.cpu_kernels);
      if (kernels == 0) continue;
      Expected<codegen::cuda::NvrtcOutput> out =
          codegen::cuda::nvrtc_compile(l.source, spec.name + ".cu", "sm_90");
      INFO((out ? std::string() : out.error().message()) << "\n" << l.source);
      REQUIRE(out);
      CHECK(!out->cubin.empty());
      CHECK(out->ptx.find(".target sm_90") != std::string::npos);
      const std::vector<codegen::cuda::PtxasReport> reports =
          codegen::cuda::ptxas_reports(out->log);
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
  // The source reads f16 and bf16 through their conversions and wraps integer negation.
  std::vector<ir::kernel::Kernel> none;
  CHECK(codegen::cuda::cuda_source(none, {}).find("kiln_f32_to_bf16") != std::string::npos);
}
