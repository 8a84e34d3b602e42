// The caching CPU allocator: large freed blocks are kept and reused by size class, the
// statistics count live, peak and kept bytes, and empty_cpu_cache gives them back.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

using namespace kiln;

/// Under AddressSanitizer (a KILN_SANITIZE build), an allocation the system refuses returns
/// null, as it does without it, instead of aborting the process: the out-of-memory test below
/// needs the refusal. Unused in other builds.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace {

/// Whether the allocator keeps freed blocks of `bytes` (not in sanitizer builds, where every
/// free goes back to the system, nor with KILN_CPU_CACHE_BYTES below it); says so when not.
bool keeps_blocks_of(size_t bytes) {
  const size_t limit = cpu_memory_stats().cache_limit;
  if (limit >= bytes) return true;
  WARN("the CPU allocator keeps at most " << limit
                                          << " bytes (a sanitizer build or "
                                             "KILN_CPU_CACHE_BYTES), not a block of "
                                          << bytes << ": the block-cache checks are skipped");
  return false;
}

} // namespace

TEST_CASE("a freed large block is reused by the next allocation of its size class", "[allocator]") {
  if (!keeps_blocks_of(size_t{3} << 20)) return;
  empty_cpu_cache();
  const MemoryStats before = cpu_memory_stats();
  void* first = nullptr;
  {
    Tensor a = empty({(3 << 20) / 4}, DType::f32); // 3 MiB
    first = a.raw_data();
    CHECK(cpu_memory_stats().allocated >= before.allocated + (3 << 20));
  }
  const MemoryStats freed = cpu_memory_stats();
  CHECK(freed.cached >= size_t{3} << 20);
  // A slightly smaller request of the same class (eighths of 2 MiB..4 MiB) gets the block.
  Tensor b = empty({(3 << 20) / 4 - 1000}, DType::f32);
  CHECK(b.raw_data() == first);
  const MemoryStats after = cpu_memory_stats();
  CHECK(after.cache_hits == freed.cache_hits + 1);
  CHECK(after.cached == freed.cached - (size_t{3} << 20));
  // The data of a reused block is whatever it held: factories that promise values write them.
  Tensor z = zeros({(3 << 20) / 4}, DType::f32);
  CHECK(z.sum().item<float>() == 0.0f);
}

TEST_CASE("small blocks are not kept and the peak follows live bytes", "[allocator]") {
  empty_cpu_cache();
  reset_cpu_peak_memory();
  const MemoryStats start = cpu_memory_stats();
  CHECK(start.peak_allocated == start.allocated);
  {
    Tensor small = empty({1000}, DType::f32);
    Tensor big = empty({8 << 20}, DType::u8);
    CHECK(cpu_memory_stats().peak_allocated >= start.allocated + (8 << 20));
  }
  const MemoryStats end = cpu_memory_stats();
  CHECK(end.allocated == start.allocated);
  if (keeps_blocks_of(size_t{8} << 20))
    CHECK(end.cached == size_t{8} << 20); // the small one went back to the system
  else
    CHECK(end.cached == 0);
  CHECK(end.peak_allocated >= start.allocated + (8 << 20));
  empty_cpu_cache();
  CHECK(cpu_memory_stats().cached == 0);
}

TEST_CASE("an allocation the system refuses is a kiln Error, after the kept blocks go back",
          "[allocator]") {
  { Tensor kept = empty({4 << 20}, DType::u8); }
  if (keeps_blocks_of(size_t{4} << 20)) REQUIRE(cpu_memory_stats().cached > 0);
  CHECK_THROWS_WITH(empty({int64_t{1} << 55}, DType::u8), Catch::Contains("out of memory"));
  CHECK(cpu_memory_stats().cached == 0);
}
