// NVRTC: CUDA C++ to a cubin and PTX for one GPU architecture, in process. Needs no GPU, so
// every machine with the toolkit compile-tests the generated CUDA. Built only with CUDA
// (KILN_WITH_CUDA); without it every call is an error saying so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace kiln::codegen::cuda {

struct NvrtcOutput {
  std::string cubin; // for the architecture
  std::string ptx;   // the same kernels as PTX (the fallback a newer driver can JIT)
  std::string log;   // NVRTC's log, with ptxas's per-kernel report (registers, spills)
};

/// Compiles `source` (named `name` in messages) for `arch` ("sm_90"), with NVRTC's `options`
/// added to kiln's ("--fmad=false"). A failure (a syntax error, an unknown architecture) is an
/// error holding NVRTC's log.
Expected<NvrtcOutput> nvrtc_compile(const std::string& source, const std::string& name,
                                    const std::string& arch,
                                    const std::vector<std::string>& options = {});

/// NVRTC's version ("13.0"); empty without CUDA.
std::string nvrtc_version();

/// Whether kiln was built with CUDA (NVRTC linked).
bool built_with_cuda();

/// What ptxas reported for one kernel (NvrtcOutput::log, `--ptxas-options=-v`).
struct PtxasReport {
  std::string kernel;
  int registers = 0;
  int64_t spill_stores = 0, spill_loads = 0, stack_bytes = 0;
};
/// Every kernel's report in `log`, in the log's order.
std::vector<PtxasReport> ptxas_reports(const std::string& log);

} // namespace kiln::codegen::cuda
