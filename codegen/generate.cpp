// Lowering, scheduling, the on-disk cache and loading, for one graph.
#include "codegen/generate.h"

#include <cstdio>

#include "codegen/cache.h"
#include "codegen/cpu/jit.h"
#include "runtime/error.h"
#include "runtime/logs.h"

namespace kiln::codegen {

GeneratedCode generate(const passes::FusionResult& fusion, bool use_cache) {
  GeneratedCode out;
  const cpu::HostTarget& target = cpu::host_target();
  std::vector<ir::kernel::Kernel> kernels;
  std::vector<Schedule> schedules;
  // The cache key: everything the object depends on, in full.
  std::string key = "kiln object v1\nkiln ";
  key += KILN_VERSION_STRING;
  key += "\nllvm ";
  key += cpu::llvm_version();
  key += "\ntarget " + target.triple + " " + target.cpu + " " + target.features + "\n";
  for (size_t g = 0; g < fusion.groups.size(); ++g) {
    GeneratedKernel gk;
    gk.kernel = passes::lower_group(fusion.groups[g], "kiln_k" + std::to_string(g), gk.buffers);
    gk.schedule = choose_schedule(gk.kernel, target.vector_bytes);
    gk.rows = gk.schedule.rows(gk.kernel);
    key += "schedule " + gk.schedule.str() + "\n" + gk.kernel.str();
    kernels.push_back(gk.kernel);
    schedules.push_back(gk.schedule);
    out.kernels.push_back(std::move(gk));
  }
  if (kernels.empty()) return out;
  const DiskCache& cache = DiskCache::global();
  std::optional<std::string> object;
  if (use_cache) object = cache.load(key);
  out.cache_hit = object.has_value();
  if (!object) {
    object = cpu::compile_kernels(kernels, schedules, "kiln_graph");
    if (use_cache) cache.store(key, *object);
  }
  out.library = cpu::load_object(*object, "kiln_graph");
  for (GeneratedKernel& gk : out.kernels)
    gk.entry = reinterpret_cast<cpu::KernelEntry>(out.library->lookup(gk.kernel.name));
  return out;
}

} // namespace kiln::codegen
