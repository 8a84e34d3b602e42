// The caching allocator of device memory.
#include "runtime/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

#include "runtime/error.h"
#include "runtime/plan.h"

namespace kiln::cuda {

bool CachingAllocator::ByStreamSize::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes == 0) return kMinBlock;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

CachingAllocator::~CachingAllocator() {
  for (Pool* pool : {&small_, &large_})
    for (Block* b : *pool)
      delete b;
  for (auto& [ptr, b] : live_)
    delete b;
  for (Pending& p : pending_)
    delete p.block;
  for (auto& [base, bytes] : segments_)
    raw_.free(base);
}

CachingAllocator::Block* CachingAllocator::take(Pool& pool, size_t size, uintptr_t stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t size, bool small, uintptr_t stream) {
  void* p = raw_.allocate(size);
  if (p == nullptr) return nullptr;
  auto* b = new Block;
  b->ptr = static_cast<char*>(p);
  b->segment = b->ptr;
  b->size = size;
  b->stream = stream;
  b->small = small;
  segments_[b->ptr] = size;
  ++stats_.segments;
  ++stats_.raw_allocations;
  stats_.reserved += size;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  return b;
}

void CachingAllocator::release_free_segments() {
  for (Pool* pool : {&small_, &large_})
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {
        ++it;
        continue;
      }
      it = pool->erase(it);
      raw_.free(b->ptr);
      stats_.reserved -= b->size;
      --stats_.segments;
      segments_.erase(b->ptr);
      delete b;
    }
}

void* CachingAllocator::allocate(size_t bytes, uintptr_t stream) {
  std::lock_guard lock(mu_);
  process_pending();
  const size_t size = round_size(bytes);
  const bool small = size <= kSmallRequest;
  Pool& pool = pool_of(small);
  Block* b = take(pool, size, stream);
  if (b == nullptr) {
    const size_t segment = small ? kSmallSegment
                           : size < kMediumRequest
                               ? kLargeSegment
                               : (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    b = new_segment(segment, small, stream);
    if (b == nullptr) {
      // Out of memory: give the cached segments back and try once more.
      ++stats_.retries;
      release_free_segments();
      b = new_segment(segment, small, stream);
    }
    if (b == nullptr) {
      ++stats_.failures;
      return nullptr;
    }
  }
  // Split off the rest when it is worth keeping.
  const size_t rest = b->size - size;
  if (small ? rest >= kMinBlock : rest > kSmallRequest) {
    auto* r = new Block;
    r->ptr = b->ptr + size;
    r->size = rest;
    r->stream = stream;
    r->small = small;
    r->segment = b->segment;
    r->prev = b;
    r->next = b->next;
    if (b->next != nullptr) b->next->prev = r;
    b->next = r;
    b->size = size;
    pool.insert(r);
  }
  b->free = false;
  b->requested = bytes;
  live_[b->ptr] = b;
  ++stats_.allocations;
  stats_.allocated += b->size;
  stats_.requested += bytes;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return b->ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  std::lock_guard lock(mu_);
  auto it = live_.find(static_cast<char*>(ptr));
  KILN_CHECK(it != live_.end(), "CUDA allocator: free of ", ptr,
             ", which it did not allocate (or freed already)");
  Block* b = it->second;
  live_.erase(it);
  ++stats_.frees;
  stats_.allocated -= b->size;
  stats_.requested -= b->requested;
  if (!b->uses.empty()) {
    // Used on other streams: reusable once their work queued so far is done.
    Pending p{b, {}};
    for (uintptr_t s : b->uses)
      if (const uintptr_t e = raw_.record_event(s); e != 0) p.events.push_back(e);
    b->uses.clear();
    if (!p.events.empty()) {
      pending_.push_back(std::move(p));
      return;
    }
  }
  insert_free(b);
}

void CachingAllocator::insert_free(Block* b) {
  b->free = true;
  Pool& pool = pool_of(b->small);
  // Merge with free neighbours of the segment.
  if (Block* p = b->prev; p != nullptr && p->free) {
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next != nullptr) b->next->prev = p;
    delete b;
    b = p;
  }
  if (Block* n = b->next; n != nullptr && n->free) {
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocator::process_pending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::vector<uintptr_t>& events = it->events;
    events.erase(std::remove_if(events.begin(), events.end(),
                                [&](uintptr_t e) { return raw_.event_done(e); }),
                 events.end());
    if (!events.empty()) {
      ++it;
      continue;
    }
    insert_free(it->block);
    it = pending_.erase(it);
  }
}

void CachingAllocator::record_stream(void* ptr, uintptr_t stream) {
  std::lock_guard lock(mu_);
  auto it = live_.find(static_cast<char*>(ptr));
  KILN_CHECK(it != live_.end(), "CUDA allocator: record_stream of ", ptr,
             ", which is not a live block");
  if (stream != it->second->stream) it->second->uses.insert(stream);
}

size_t CachingAllocator::pending_frees() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  process_pending();
  release_free_segments();
}

DeviceMemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peaks() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

std::string CachingAllocator::summary(const std::string& device_name) const {
  const DeviceMemoryStats s = stats();
  std::string out;
  char line[128];
  const std::string rule(75, '=');
  out += "|" + rule + "|\n";
  std::snprintf(line, sizeof line, "| %-73s |\n",
                ("kiln CUDA memory summary, device " + device_name).c_str());
  out += line;
  out += "|" + std::string(75, '-') + "|\n";
  std::snprintf(line, sizeof line, "| %-28s | %-20s | %-19s |\n", "Metric", "Cur Usage",
                "Peak Usage");
  out += line;
  out += "|" + std::string(75, '-') + "|\n";
  auto row = [&](const char* name, const std::string& cur, const std::string& peak) {
    std::snprintf(line, sizeof line, "| %-28s | %-20s | %-19s |\n", name, cur.c_str(),
                  peak.c_str());
    out += line;
  };
  row("Allocated memory", mib_str(s.allocated), mib_str(s.peak_allocated));
  row("Reserved memory", mib_str(s.reserved), mib_str(s.peak_reserved));
  row("Requested memory", mib_str(s.requested), "");
  row("Allocations / frees", std::to_string(s.allocations) + " / " + std::to_string(s.frees), "");
  row("Segments (raw allocations)",
      std::to_string(s.segments) + " (" + std::to_string(s.raw_allocations) + ")", "");
  row("Retries / failures", std::to_string(s.retries) + " / " + std::to_string(s.failures), "");
  out += "|" + rule + "|\n";
  return out;
}

} // namespace kiln::cuda
