// The caching allocator of device memory (runtime/cuda/caching_allocator.h), on host memory
// standing in for the device: rounding, the two pools, best fit, splitting, merging, per-stream
// reuse, the retry after out of memory, empty_cache and the statistics.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/error.h"

using kiln::cuda::CachingAllocator;

namespace {

/// Host memory with a budget: allocations past it fail as the device would.
class HostMemory final : public kiln::cuda::RawMemory {
public:
  explicit HostMemory(size_t budget) : budget_(budget) {}
  void* allocate(size_t bytes) override {
    if (used_ + bytes > budget_) return nullptr;
    used_ += bytes;
    ++calls;
    void* p = std::malloc(bytes);
    sizes_[p] = bytes;
    return p;
  }
  void free(void* p) override {
    used_ -= sizes_.at(p);
    sizes_.erase(p);
    std::free(p);
  }
  size_t used() const { return used_; }
  int calls = 0;

private:
  size_t budget_, used_ = 0;
  std::map<void*, size_t> sizes_;
};

constexpr size_t MiB = size_t{1} << 20;

} // namespace

TEST_CASE("cuda allocator: sizes round to 512 bytes, small requests share 2 MiB segments") {
  CHECK(CachingAllocator::round_size(0) == 512);
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  HostMemory mem(1024 * MiB);
  CachingAllocator a(mem);
  void* p = a.allocate(100);
  void* q = a.allocate(1000);
  REQUIRE(p != nullptr);
  REQUIRE(q != nullptr);
  // Both carved from one small segment, one after the other.
  CHECK(mem.calls == 1);
  CHECK(static_cast<char*>(q) - static_cast<char*>(p) == 512);
  kiln::cuda::DeviceMemoryStats s = a.stats();
  CHECK(s.allocated == 512 + 1024);
  CHECK(s.requested == 1100);
  CHECK(s.reserved == 2 * MiB);
  CHECK(s.segments == 1);
  // A large request takes a 20 MiB segment of its own pool, and the next one fits in its rest;
  // one too big for that gets a segment of its own size rounded to 2 MiB.
  void* big = a.allocate(3 * MiB);
  void* mid = a.allocate(11 * MiB + 1);
  CHECK(mem.calls == 2);
  CHECK(static_cast<char*>(mid) - static_cast<char*>(big) == static_cast<ptrdiff_t>(3 * MiB));
  void* huge = a.allocate(30 * MiB + 1);
  CHECK(mem.calls == 3);
  CHECK(a.stats().reserved == 2 * MiB + 20 * MiB + 32 * MiB);
  for (void* x : {p, q, big, mid, huge})
    a.deallocate(x);
  CHECK(a.stats().allocated == 0);
  CHECK(a.stats().reserved == 54 * MiB);
}

TEST_CASE("cuda allocator: freed blocks are reused, split and merged back") {
  HostMemory mem(1024 * MiB);
  CachingAllocator a(mem);
  void* x = a.allocate(4 * MiB);
  void* y = a.allocate(4 * MiB); // the rest of x's 20 MiB segment
  CHECK(mem.calls == 1);
  CHECK(static_cast<char*>(y) - static_cast<char*>(x) == static_cast<ptrdiff_t>(4 * MiB));
  a.deallocate(x);
  // Best fit: the freed 4 MiB block, not the 12 MiB rest.
  void* z = a.allocate(3 * MiB);
  CHECK(z == x);
  a.deallocate(z);
  a.deallocate(y);
  // Everything merged back into one free 20 MiB block: a 20 MiB request takes it whole.
  void* w = a.allocate(20 * MiB - 512);
  CHECK(w == x);
  CHECK(mem.calls == 1);
  a.deallocate(w);
  // Small blocks merge too.
  void* s1 = a.allocate(512);
  void* s2 = a.allocate(512);
  a.deallocate(s1);
  a.deallocate(s2);
  void* s3 = a.allocate(2 * 512);
  CHECK(s3 == s1);
  a.deallocate(s3);
}

TEST_CASE("cuda allocator: blocks are reused only on their stream") {
  HostMemory mem(1024 * MiB);
  CachingAllocator a(mem);
  void* p = a.allocate(MiB / 2, /*stream=*/1);
  a.deallocate(p);
  void* q = a.allocate(MiB / 2, /*stream=*/2);
  CHECK(q != p);
  CHECK(mem.calls == 2);
  void* r = a.allocate(MiB / 2, /*stream=*/1);
  CHECK(r == p);
  a.deallocate(q);
  a.deallocate(r);
}

TEST_CASE("cuda allocator: out of memory frees the cache and retries, then fails cleanly") {
  HostMemory mem(40 * MiB);
  CachingAllocator a(mem);
  void* p = a.allocate(15 * MiB); // a 20 MiB segment
  a.deallocate(p);
  void* q = a.allocate(30 * MiB); // 30 MiB: fits only after the cached 20 MiB go back
  REQUIRE(q != nullptr);
  CHECK(a.stats().retries == 1);
  CHECK(a.stats().reserved == 30 * MiB);
  CHECK(a.allocate(30 * MiB) == nullptr);
  CHECK(a.stats().failures == 1);
  a.deallocate(q);
  a.empty_cache();
  CHECK(a.stats().reserved == 0);
  CHECK(mem.used() == 0);
  CHECK_THROWS_AS(a.deallocate(q), kiln::Error);
}

TEST_CASE("cuda allocator: peaks and the summary") {
  HostMemory mem(1024 * MiB);
  CachingAllocator a(mem);
  void* p = a.allocate(5 * MiB);
  a.deallocate(p);
  CHECK(a.stats().peak_allocated == 5 * MiB);
  a.reset_peaks();
  CHECK(a.stats().peak_allocated == 0);
  CHECK(a.stats().peak_reserved == 20 * MiB);
  const std::string s = a.summary("cuda:0");
  CHECK_THAT(s, Catch::Contains("kiln CUDA memory summary, device cuda:0"));
  CHECK_THAT(s, Catch::Contains("Reserved memory"));
  CHECK_THAT(s, Catch::Contains("20.00 MiB"));
  CHECK_THAT(s, Catch::Contains("1 / 1"));
}

TEST_CASE("cuda allocator: a block used on another stream is reused only after its events") {
  // Events the test completes by hand.
  class EventMemory final : public kiln::cuda::RawMemory {
  public:
    void* allocate(size_t bytes) override { return host.allocate(bytes); }
    void free(void* p) override { host.free(p); }
    uintptr_t record_event(uintptr_t stream) override {
      recorded.push_back(stream);
      return recorded.size(); // events 1, 2, ...
    }
    bool event_done(uintptr_t event) override { return done.count(event) != 0; }
    HostMemory host{1024 * MiB};
    std::vector<uintptr_t> recorded;
    std::set<uintptr_t> done;
  } mem;
  CachingAllocator a(mem);
  void* p = a.allocate(4096, /*stream=*/1);
  a.record_stream(p, 1); // its own stream: nothing to wait for
  a.record_stream(p, 2);
  a.record_stream(p, 3);
  a.deallocate(p);
  CHECK(mem.recorded == std::vector<uintptr_t>{2, 3}); // an event on each other stream
  CHECK(a.pending_frees() == 1);
  CHECK(a.stats().allocated == 0);
  void* q = a.allocate(4096, 1);
  CHECK(q != p); // stream 2's and 3's work may still read p
  mem.done.insert(1);
  void* r = a.allocate(4096, 1);
  CHECK(r != p); // stream 3's still may
  mem.done.insert(2);
  a.deallocate(r);
  void* s = a.allocate(4096, 1);
  CHECK(s == p); // both done: p is free again, merged into its segment
  CHECK(a.pending_frees() == 0);
  // A block with no other stream is free at once; record_stream of a freed pointer is an
  // error.
  a.deallocate(q);
  CHECK(a.pending_frees() == 0);
  CHECK_THROWS_WITH(a.record_stream(q, 2), Catch::Contains("not a live block"));
  a.deallocate(s);
}
