// Allocator: the per-device memory interface, and Storage, the refcounted buffer tensors view.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/device.h"

namespace kiln {

/// Allocates device memory. The CPU allocator returns 64-byte aligned blocks and keeps freed
/// large blocks for reuse (below); a CUDA allocator (loaded with the CUDA backend) registers
/// itself for DeviceType::cuda.
class Allocator {
public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual Device device() const = 0;
  /// The allocator of device `index` of this allocator's type (a type with several devices
  /// registers one allocator that hands out each device's).
  virtual Allocator& on(int index) {
    (void)index;
    return *this;
  }
};

inline constexpr size_t kCpuAlignment = 64;

/// The allocator of a device; throws kiln::Error when no backend for it is loaded.
Allocator& allocator_for(Device d);
/// Installs the allocator of a device type (the CUDA backend does this when it loads).
void register_allocator(DeviceType type, Allocator* alloc);

/// What the CPU allocator holds. Blocks of at least kCpuCachedMin bytes are rounded up to a
/// size class (an eighth of a power of two) and, when freed, kept for the next allocation of
/// their class instead of going back to the system: a fresh block's pages fault in on first
/// touch, which costs more than the pointwise pass that writes them. At most
/// `KILN_CPU_CACHE_BYTES` (default 2 GiB) are kept; beyond, freed blocks are released.
struct MemoryStats {
  size_t allocated = 0;      // bytes in live blocks (as rounded to their class)
  size_t peak_allocated = 0; // the most `allocated` has been since the last reset
  size_t cached = 0;         // bytes in freed blocks kept for reuse
  uint64_t allocations = 0;  // allocate calls that returned memory
  uint64_t cache_hits = 0;   // of them, served from a kept block
  /// The most bytes kept: KILN_CPU_CACHE_BYTES, or 0 when every freed block goes back to the
  /// system (under AddressSanitizer, so that it sees every use after free).
  size_t cache_limit = 0;
};
inline constexpr size_t kCpuCachedMin = size_t{1} << 20;

MemoryStats cpu_memory_stats();
/// Starts a new peak: peak_allocated becomes the current allocated.
void reset_cpu_peak_memory();
/// Returns every kept block to the system.
void empty_cpu_cache();

/// A buffer shared by a tensor and its views. The version counter is shared by all views
/// of the buffer and bumped by every in-place write (autograd and guards read it).
class Storage {
public:
  Storage(size_t nbytes, Device device);                 // allocates
  Storage(size_t nbytes, Allocator& allocator);          // allocates from `allocator`
  Storage(void* external, size_t nbytes, Device device); // borrows; never freed
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  /// Where its bytes come from (null when borrowed).
  const Allocator* allocator() const { return allocator_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr; // null when borrowed
  std::atomic<uint64_t> version_{0};
};

} // namespace kiln
