// Lowering, scheduling, the on-disk cache and loading, for one graph.
#include "codegen/generate.h"

#include <elf.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "codegen/cache.h"
#include "codegen/cpu/jit.h"
#include "codegen/cpu/object_check.h"
#include "runtime/error.h"
#include "runtime/logs.h"

namespace kiln::codegen {

// The kernel text does not show how the code generator compiles it: the build ID does.
const std::string& build_id() {
  static const std::string id = [] {
    struct Search {
      uintptr_t address;
      std::string hex;
    } search{reinterpret_cast<uintptr_t>(&build_id), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
          auto* s = static_cast<Search*>(data);
          bool mine = false;
          for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
            mine = ph.p_type == PT_LOAD && s->address >= begin && s->address < begin + ph.p_memsz;
          }
          if (!mine) return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              ElfW(Nhdr) note;
              std::memcpy(&note, p, sizeof note);
              const char* name = p + sizeof note;
              const char* desc = name + ((note.n_namesz + 3) & ~3u);
              if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
                  std::memcmp(name, "GNU", 4) == 0 && desc + note.n_descsz <= end) {
                static const char digits[] = "0123456789abcdef";
                for (uint32_t k = 0; k < note.n_descsz; ++k) {
                  auto byte = static_cast<unsigned char>(desc[k]);
                  s->hex += digits[byte >> 4];
                  s->hex += digits[byte & 15];
                }
                return 1;
              }
              p = desc + ((note.n_descsz + 3) & ~3u);
            }
          }
          return 1;
        },
        &search);
    return search.hex;
  }();
  return id;
}

const std::vector<std::string>& check_cpus() {
  static const std::vector<std::string> cpus = [] {
    std::vector<std::string> v;
    const char* env = std::getenv("KILN_CHECK_CPUS");
    std::string_view list = env != nullptr ? env : "";
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (std::string_view cpu = list.substr(0, comma); !cpu.empty()) v.emplace_back(cpu);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    return v;
  }();
  return cpus;
}

GeneratedCode generate(const passes::FusionResult& fusion, bool use_cache,
                       const ScheduleOverride& schedule) {
  GeneratedCode out;
  const cpu::HostTarget& target = cpu::host_target();
  std::vector<ir::kernel::Kernel> kernels;
  std::vector<Schedule> schedules;
  // The cache key: everything the object depends on, in full.
  std::string key = "kiln object v1\nkiln ";
  key += KILN_VERSION_STRING;
  key += "\nbuild ";
  key += build_id().empty() ? std::string(__DATE__ " " __TIME__) : build_id();
  key += "\nllvm ";
  key += cpu::llvm_version();
  key += "\ntarget " + target.triple + " " + target.cpu + " " + target.features + "\n";
  for (size_t g = 0; g < fusion.groups.size(); ++g) {
    GeneratedKernel gk;
    gk.kernel = passes::lower_group(fusion.groups[g], "kiln_k" + std::to_string(g), gk.buffers);
    gk.schedule = choose_schedule(gk.kernel, target.vector_bytes, schedule);
    gk.rows = gk.schedule.rows(gk.kernel);
    key += "schedule " + gk.schedule.str() + "\n" + gk.kernel.str();
    kernels.push_back(gk.kernel);
    schedules.push_back(gk.schedule);
    out.kernels.push_back(std::move(gk));
  }
  if (kernels.empty()) return out;
  // Code for the CPUs KILN_CHECK_CPUS names is generated, verified and emitted as well, and
  // dropped: widths and instruction sets this host cannot run are still compiled.
  for (const std::string& cpu : check_cpus())
    KILN_CHECK(
        !cpu::compile_kernels(kernels, schedules, "kiln_check", cpu::cpu_target(cpu)).empty(),
        "LLVM emitted an empty object for ", cpu);
  const DiskCache& cache = DiskCache::global();
  std::optional<std::string> object;
  if (use_cache) object = cache.load(key);
  if (object && !cpu::check_object(*object)) object.reset(); // a corrupt object is a miss
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
