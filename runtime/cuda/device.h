// CUDA devices: whether one can be used, and their memory. The driver (libcuda.so.1) is opened
// with dlopen at first use, so kiln builds, links and runs on machines without a GPU driver,
// where is_available() is false and using a CUDA tensor is an error that says why.
#pragma once

#include <string>

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
} // namespace detail

} // namespace kiln::cuda
