// The 64-byte aligned CPU allocator, the allocator registry, and Storage.
#include "runtime/allocator.h"

#include <cstdlib>
#include <new>

#include "runtime/error.h"

namespace kiln {
namespace {

class CpuAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    KILN_CHECK(p != nullptr, "out of memory: could not allocate ", nbytes, " bytes on cpu");
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
};

Allocator*& slot(DeviceType t) {
  static Allocator* slots[2] = {nullptr, nullptr};
  return slots[static_cast<int>(t)];
}

} // namespace

Allocator& allocator_for(Device d) {
  static CpuAllocator cpu;
  if (d.is_cpu()) return slot(DeviceType::cpu) ? *slot(DeviceType::cpu) : cpu;
  Allocator* a = slot(d.type);
  KILN_CHECK(a != nullptr, "device ", d,
             " is not available: kiln was built or run without its backend");
  return *a;
}

void register_allocator(DeviceType type, Allocator* alloc) { slot(type) = alloc; }

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(nbytes);
}

Storage::Storage(void* external, size_t nbytes, Device device)
    : data_(external), nbytes_(nbytes), device_(device) {}

Storage::~Storage() {
  if (allocator_ != nullptr && data_ != nullptr) allocator_->deallocate(data_, nbytes_);
}

} // namespace kiln
