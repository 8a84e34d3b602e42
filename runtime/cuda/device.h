// CUDA devices: whether one can be used, their memory, and the kernels loaded on them. The
// driver (libcuda.so.1) is opened with dlopen at first use, so kiln builds, links and runs on
// machines without a GPU driver, where is_available() is false and using a CUDA tensor is an
// error that says why.
//
// The emulated device: with $KILN_CUDA_EMULATE=1 (read at first use; =N for N devices),
// cuda:0 is kiln's own stand-in instead of the driver's. Its memory is host memory, its kernels are
// the generated CUDA source built as host C++ (codegen/cuda/cuda_source.h), run block after block
// with each thread a fiber. It runs everything above the driver (the device plan, launch geometry,
// the cross-thread reductions, copies) on machines without a GPU; the tests of the `cuda.emulated`
// label run on it. It is no model of the device's speed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/device.h"

namespace kiln {
class Tensor;
}

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

/// A stream of device work: what is queued on one stream runs in order, and work on two
/// streams may overlap. Kiln queues its kernels, library calls and copies on the thread's
/// current stream (current_stream; the device's default stream unless a StreamGuard says
/// otherwise), and its caching allocator reuses a freed block only on the stream it was
/// allocated on. A tensor used on another stream than its own must outlive that work, or be
/// marked with record_stream.
class Stream {
public:
  /// A new stream on device `index` (non-blocking: it does not wait for the default stream).
  static Stream create(int index = 0);
  /// The device's default stream.
  static Stream default_stream(int index = 0);
  int device() const { return device_; }
  /// The driver's handle (CUstream; null for the default stream).
  void* handle() const { return handle_; }
  /// Waits until the work queued on it is done.
  void synchronize() const;
  friend bool operator==(const Stream& a, const Stream& b) {
    return a.handle_ == b.handle_ && a.device_ == b.device_;
  }

private:
  Stream(std::shared_ptr<void> owned, void* handle, int device)
      : owned_(std::move(owned)), handle_(handle), device_(device) {}
  std::shared_ptr<void> owned_; // destroys the stream with its last copy
  void* handle_ = nullptr;
  int device_ = 0;
};

/// Marks t's memory (of kiln's CUDA allocator) as used on stream `s` too: when t's storage is
/// freed, the allocator reuses it only after the work queued on `s` by then is done, so work
/// on another stream than the allocation's may outlive the tensor (PyTorch's record_stream).
void record_stream(const Tensor& t, const Stream& s);

/// The stream kiln queues work for device `index` on, on this thread.
Stream current_stream(int index = 0);

/// Makes `s` the current stream of its device on this thread for the guard's scope.
class StreamGuard {
public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

private:
  Stream previous_;
};

/// A marker in a stream's work: recorded, waited for, and timed against another.
class Event {
public:
  /// On device `index`, with timing.
  explicit Event(int index = 0);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Marks the point the stream's queued work has reached.
  void record(const Stream& s);
  void record() { record(current_stream(device_)); }
  /// Waits until the work before the mark is done.
  void synchronize() const;
  /// Whether it is.
  bool query() const;
  /// Milliseconds from this event to `end` (both recorded and done).
  float elapsed_ms(const Event& end) const;

private:
  int device_;
  void* event_ = nullptr; // CUevent
  double host_ms_ = -1;   // the emulated device's: the host clock at record()
};

/// A copy of CPU tensor t in pinned (page-locked) host memory: copies between it and a
/// device go by DMA without a staging copy. A tensor from the emulated device's host memory
/// is pinned in name only.
Tensor pin_memory(const Tensor& t);
/// Whether t's storage is pinned host memory.
bool is_pinned(const Tensor& t);

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
  /// Queues kernel `kernel` of the other form, one struct argument passed by value
  /// (codegen/cuda/library.h): `args` points at its bytes. The emulated device calls its
  /// NAME_host(const void* args, unsigned blocks).
  virtual void launch_with(size_t kernel, const void* args, unsigned blocks,
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
