// The data object of an ahead-of-time compiled library (`kiln aot`): what the library's entry
// point (runtime/aot/entry.cpp) reads besides the kernels' code. Its symbols, all hidden:
//
//   kiln_aot_kernels        { const char* name; KernelEntry entry; }[kiln_aot_num_kernels]
//   kiln_aot_num_kernels    uint64_t
//   kiln_aot_plan           the plan's bytes (runtime/plan_io.h), kiln_aot_plan_size of them
//   kiln_aot_manifest       the library's JSON (runtime/aot/model.h), NUL-terminated
//   kiln_aot_weights        embedded safetensors bytes, kiln_aot_weights_size of them (0: none)
//   ENTRY_ALIAS             exported: kiln_aot_entry under the model's own name, which calls the
//                           hidden kiln_aot_api_table (so it binds within its own library)
//
// The kernel table refers to the kernels by symbol; the kernels' objects define them.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "codegen/cpu/jit.h"

namespace kiln::codegen::cpu {

struct AotData {
  std::span<const std::string> kernel_names;
  std::string_view plan;
  std::string_view manifest;
  std::string_view weights; // empty: not embedded
  std::string entry_alias;  // "mlp_aot_entry"
};

/// An ELF object for `target` (position-independent) that defines the symbols above.
std::string aot_data_object(const HostTarget& target, const AotData& data);

} // namespace kiln::codegen::cpu
