// CUDA devices: whether one can be used, their memory, and the kernels loaded on them. The
// driver (libcuda.so.1) is opened with dlopen at first use, so kiln builds, links and runs on
// machines without a GPU driver, where is_available() is false and using a CUDA tensor is an
// error that says why.
//
// The emulated device: with $KILN_CUDA_EMULATE=1 (read at first use), cuda:0 is kiln's own
// stand-in instead of the driver's. Its memory is host memory, its kernels are the generated
// CUDA source built as host C++ (codegen/cuda/cuda_source.h), run block after block with each
// thread a fiber. It runs everything above the driver (the device plan, launch geometry, the
// cross-thread reductions, copies) on machines without a GPU; the tests of the `cuda.emulated`
// label run on it. It is no model of the device's speed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/device.h"

namespace kiln::cuda {

/// Whether a CUDA device can be used: the driver loads, initialises and has a device.
bool is_available();
/// CUDA devices the driver sees (0 without a driver).
int device_count();
/// Why is_available() is false ("libcuda.so.1 can't be loaded: ..."); empty when it is true.
std::string unavailable_reason();
/// Waits for the work queued on device `index`.
void synchronize(int index = 0);
/// Whether the CUDA devices are the emulated one ($KILN_CUDA_EMULATE).
bool emulated();
/// The device's name ("NVIDIA H200", "kiln emulated device").
std::string device_name(int index = 0);

/// What a module is loaded from: a cubin for the device's architecture, its PTX (the driver
/// compiles it when the cubin does not load), and, for the emulated device, the same kernels
/// as a host shared object (their NAME_host entries).
struct ModuleImage {
  std::string_view cubin, ptx, host;
};

/// Kernels loaded on one device. A kernel takes its buffers' device pointers and the count
/// of outer points (codegen/cuda/cuda_source.h).
class Module {
public:
  virtual ~Module() = default;
  /// Queues kernel `kernel` (an index into the names given at load) on the device: `blocks`
  /// blocks of `threads` threads over `buffers` and n points. The error names the kernel and
  /// the CUDA error.
  virtual void launch(size_t kernel, std::span<char* const> buffers, int64_t n, unsigned blocks,
                      unsigned threads) const = 0;
};

/// Loads `image` on device `index` and finds each of `kernels` in it. The error says which
/// kernel is missing, or why neither the cubin nor the PTX loads.
std::shared_ptr<const Module> load_module(const ModuleImage& image,
                                          std::span<const std::string> kernels, int index = 0);

/// The caching allocator's counters for device `index` (all zero before its first use).
DeviceMemoryStats memory_stats(int index = 0);
/// Frees the device's cached, unused memory.
void empty_cache(int index = 0);
/// The allocator's table for device `index`, as torch.cuda.memory_summary() prints it.
std::string memory_summary(int index = 0);

namespace detail {
/// Registers the CUDA allocator (runtime/allocator.h) when a device is available; otherwise a
/// kiln::Error saying why none is. Called by allocator_for() at the first CUDA allocation.
void ensure_backend();
/// Copies between host and device memory (either side a device pointer of `device`).
void copy_to_device(void* dst, const void* src, size_t bytes, Device device);
void copy_to_host(void* dst, const void* src, size_t bytes, Device device);
/// Copies between two places in the memory of `device`, queued after its earlier work.
void copy_on_device(void* dst, const void* src, size_t bytes, Device device);
} // namespace detail

} // namespace kiln::cuda
