// The caching allocator of device memory (the CUDA allocator's pool logic, device-free so that
// it is tested on any machine): freed blocks are kept and reused instead of going back to the
// driver, whose allocations are slow and synchronise the device.
//
// As PyTorch's: sizes round up to 512 bytes. Requests of at most 1 MiB come from the small
// pool, carved out of 2 MiB segments; larger ones from the large pool, out of 20 MiB segments
// for requests under 10 MiB, else a segment of the request rounded up to 2 MiB. A request takes
// the smallest free block of its pool and stream that fits (best fit), split when the rest is
// worth keeping (over 512 bytes in the small pool, over 1 MiB in the large); a freed block
// merges with its free neighbours in its segment. Blocks belong to the stream they were
// allocated on and are reused only on it. A block also used on other streams
// (record_stream) is held at free until the work those streams had queued by then is done
// (an event recorded on each, queried at the next allocation), as PyTorch's. empty_cache()
// returns every wholly free segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cuda {

/// Where segments come from: the driver (cuMemAlloc) or, in tests, the host; and the events
/// that tell when a stream's queued work is done.
class RawMemory {
public:
  virtual ~RawMemory() = default;
  /// A new segment of `bytes`, or null when the device is out of memory.
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  /// An event marking the work queued on `stream` so far (0: none is needed, it is done; the
  /// default, for memory whose streams run synchronously).
  virtual uintptr_t record_event(uintptr_t stream) {
    (void)stream;
    return 0;
  }
  /// Whether the work before the event is done; then the event is destroyed.
  virtual bool event_done(uintptr_t event) {
    (void)event;
    return true;
  }
};

struct DeviceMemoryStats {
  size_t allocated = 0, peak_allocated = 0; // bytes in live blocks (rounded sizes)
  size_t reserved = 0, peak_reserved = 0;   // bytes in segments from RawMemory
  size_t requested = 0;                     // bytes callers asked for, live
  uint64_t allocations = 0, frees = 0;      // allocate / deallocate calls
  uint64_t segments = 0;                    // live segments
  uint64_t raw_allocations = 0;             // segments ever requested
  uint64_t retries = 0;  // allocations that failed, freed the cache and tried again
  uint64_t failures = 0; // allocations that failed after that
};

class CachingAllocator {
public:
  explicit CachingAllocator(RawMemory& raw) : raw_(raw) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least `bytes` for `stream`; null when the device is out of memory even
  /// after the cache was emptied. A zero-byte request takes 512 bytes.
  void* allocate(size_t bytes, uintptr_t stream = 0);
  /// Returns a block allocate() gave; a pointer it did not give is a kiln::Error.
  void deallocate(void* ptr);
  /// Marks the live block at `ptr` as used on `stream` too: when it is freed, it is reused
  /// only after the work queued on `stream` by then is done (PyTorch's record_stream).
  void record_stream(void* ptr, uintptr_t stream);
  /// Blocks freed but waiting for another stream's work.
  size_t pending_frees() const;
  /// Frees every segment with no live block.
  void empty_cache();
  DeviceMemoryStats stats() const;
  void reset_peaks();
  /// A table of the stats, as torch.cuda.memory_summary() prints them.
  std::string summary(const std::string& device_name) const;

  static size_t round_size(size_t bytes);
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallRequest = size_t{1} << 20;   // 1 MiB
  static constexpr size_t kSmallSegment = size_t{2} << 20;   // 2 MiB
  static constexpr size_t kLargeSegment = size_t{20} << 20;  // 20 MiB
  static constexpr size_t kMediumRequest = size_t{10} << 20; // 10 MiB
  static constexpr size_t kRoundLarge = size_t{2} << 20;     // 2 MiB

private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;
    uintptr_t stream = 0;
    bool small = false;
    bool free = true;
    Block* prev = nullptr; // neighbours within the segment
    Block* next = nullptr;
    char* segment = nullptr;
    std::set<uintptr_t> uses; // other streams it was used on (record_stream)
  };
  /// A freed block waiting for the events of its other streams.
  struct Pending {
    Block* block;
    std::vector<uintptr_t> events;
  };
  struct ByStreamSize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, ByStreamSize>;

  Block* take(Pool& pool, size_t size, uintptr_t stream);
  /// Puts a freed block back in its pool, merged with its free neighbours.
  void insert_free(Block* b);
  /// Returns the pending blocks whose events are done to their pools.
  void process_pending();
  Block* new_segment(size_t size, bool small, uintptr_t stream);
  void release_free_segments();
  Pool& pool_of(bool small) { return small ? small_ : large_; }

  RawMemory& raw_;
  mutable std::mutex mu_;
  Pool small_, large_;
  std::unordered_map<char*, Block*> live_; // by pointer
  std::map<char*, size_t> segments_;       // segment base -> bytes
  std::vector<Pending> pending_;
  DeviceMemoryStats stats_;
};

} // namespace kiln::cuda
