// The CUDA target: kernels as CUDA C++ (codegen/cuda/cuda_source.h) compiled by NVRTC to a
// cubin for one architecture, with its PTX kept beside it (codegen/cuda/nvrtc.h). Its blobs
// go into the kernel cache like the CPU's objects, keyed by the architecture and the NVRTC
// version. load() loads them on the device (runtime/cuda/device.h) and gives each kernel its
// launch, with the GPU schedule its source was generated under (gpu_launch). For the
// emulated device the blob also holds the kernels' host build. Without a device, load() says
// so, and the pipeline then runs the graph on the interpreter.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "codegen/target.h"

namespace kiln::codegen::cuda {

class CudaTarget final : public Target {
public:
  /// Code for `arch` ("sm_90": the H100 and H200).
  explicit CudaTarget(std::string arch = "sm_90", Device device = Device::cuda(0));
  std::string_view name() const override { return "cuda"; }
  /// One lane: a thread computes one outer point (the GPU schedule is to come).
  int vector_bytes() const override { return 4; }
  std::string identity() const override;
  std::string source(std::span<const ir::kernel::Kernel> kernels,
                     std::span<const Schedule> schedules) const override;
  Expected<std::string> compile(std::span<const ir::kernel::Kernel> kernels,
                                std::span<const Schedule> schedules) const override;
  bool check(std::string_view blob) const override;
  Expected<LoadedCode> load(std::string_view blob,
                            std::span<const ir::kernel::Kernel> kernels) const override;
  const std::string& arch() const { return arch_; }

  Device device() const override { return device_; }

private:
  std::string arch_;
  Device device_;
};

/// What a CUDA blob holds: "KILNCUDA", then the cubin, the PTX, NVRTC's log and the host
/// build (empty but for the emulated device), each a little-endian u64 length and its bytes.
struct CudaBlob {
  std::string_view cubin, ptx, log, host;
};
Expected<CudaBlob> split_cuda_blob(std::string_view blob);

/// A CUDA blob of `source` (named `name` in messages) for `arch`: NVRTC's cubin, PTX and log,
/// and for the emulated device the source's host build (by $KILN_CUDA_HOST_CXX, default c++).
Expected<std::string> compile_cuda_blob(const std::string& source, const std::string& name,
                                        const std::string& arch,
                                        const std::vector<std::string>& nvrtc_options = {});

/// The target of device `index` for $KILN_CUDA_ARCH, else sm_90.
const CudaTarget& cuda_target(int index = 0);

} // namespace kiln::codegen::cuda
