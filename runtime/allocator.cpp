// The 64-byte aligned, caching CPU allocator, the allocator registry, and Storage.
#include "runtime/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/device.h"
#include "runtime/error.h"

namespace kiln {
namespace {

/// Size classes: below kCpuCachedMin, multiples of the alignment; from it, the size rounded
/// up to a multiple of an eighth of its power of two (at most 12.5% more).
size_t size_class(size_t nbytes) {
  size_t aligned = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  if (aligned < kCpuCachedMin) return aligned;
  size_t step = (size_t{1} << (63 - __builtin_clzll(aligned))) / 8;
  return (aligned + step - 1) / step * step;
}

size_t cache_limit() {
#if defined(__SANITIZE_ADDRESS__)
  return 0; // every free goes back to the system, where the sanitizer sees it
#endif
  const char* env = std::getenv("KILN_CPU_CACHE_BYTES");
  if (env == nullptr || *env == 0) return size_t{2} << 30;
  char* end = nullptr;
  unsigned long long v = std::strtoull(env, &end, 10);
  return end != nullptr && *end == 0 ? static_cast<size_t>(v) : size_t{2} << 30;
}

class CpuAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t cls = size_class(nbytes);
    void* p = nullptr;
    if (cls >= kCpuCachedMin) {
      std::lock_guard lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        stats_.cached -= cls;
        ++stats_.cache_hits;
      }
    }
    if (p == nullptr) p = std::aligned_alloc(kCpuAlignment, cls);
    if (p == nullptr && stats().cached > 0) {
      empty(); // the kept blocks go back to the system first
      p = std::aligned_alloc(kCpuAlignment, cls);
    }
    KILN_CHECK(p != nullptr, "out of memory: could not allocate ", nbytes, " bytes on cpu");
    std::lock_guard lock(mu_);
    stats_.allocated += cls;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    ++stats_.allocations;
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    const size_t cls = size_class(nbytes);
    {
      std::lock_guard lock(mu_);
      stats_.allocated -= cls;
      if (cls >= kCpuCachedMin && stats_.cached + cls <= limit_) {
        free_[cls].push_back(ptr);
        stats_.cached += cls;
        return;
      }
    }
    std::free(ptr);
  }
  Device device() const override { return Device::cpu(); }

  MemoryStats stats() {
    std::lock_guard lock(mu_);
    MemoryStats s = stats_;
    s.cache_limit = limit_;
    return s;
  }
  void reset_peak() {
    std::lock_guard lock(mu_);
    stats_.peak_allocated = stats_.allocated;
  }
  void empty() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard lock(mu_);
      blocks.swap(free_);
      stats_.cached = 0;
    }
    for (auto& [cls, list] : blocks)
      for (void* p : list)
        std::free(p);
  }

private:
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_; // size class -> kept blocks
  MemoryStats stats_;
  size_t limit_ = cache_limit();
};

CpuAllocator& cpu_allocator() {
  // Never destroyed: tensors in static storage may be freed after main returns.
  static CpuAllocator* cpu = new CpuAllocator();
  return *cpu;
}

Allocator*& slot(DeviceType t) {
  static Allocator* slots[2] = {nullptr, nullptr};
  return slots[static_cast<int>(t)];
}

} // namespace

MemoryStats cpu_memory_stats() { return cpu_allocator().stats(); }
void reset_cpu_peak_memory() { cpu_allocator().reset_peak(); }
void empty_cpu_cache() { cpu_allocator().empty(); }

Allocator& allocator_for(Device d) {
  if (d.is_cpu()) return slot(DeviceType::cpu) ? *slot(DeviceType::cpu) : cpu_allocator();
  if (d.is_cuda() && slot(d.type) == nullptr) cuda::detail::ensure_backend();
  Allocator* a = slot(d.type);
  KILN_CHECK(a != nullptr, "device ", d,
             " is not available: kiln was built or run without its backend");
  return a->on(d.index);
}

void register_allocator(DeviceType type, Allocator* alloc) { slot(type) = alloc; }

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(nbytes);
}

Storage::Storage(size_t nbytes, Allocator& allocator)
    : nbytes_(nbytes), device_(allocator.device()), allocator_(&allocator) {
  data_ = allocator_->allocate(nbytes);
}

Storage::Storage(void* external, size_t nbytes, Device device)
    : data_(external), nbytes_(nbytes), device_(device) {}

Storage::~Storage() {
  if (allocator_ != nullptr && data_ != nullptr) allocator_->deallocate(data_, nbytes_);
}

} // namespace kiln
