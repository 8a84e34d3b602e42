// The thread pool kernels run on: OpenMP, the same pool oneDNN uses.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

/// Below this many elements a loop runs on the calling thread.
inline constexpr int64_t kParallelGrain = 32768;

/// Splits [begin, end) into contiguous chunks of at least `grain` and runs fn(b, e) on each,
/// on the OpenMP pool, on at most `max_threads` threads (0: the pool's count). Chunk
/// boundaries depend only on the range and the thread count. Exceptions thrown by fn are
/// rethrown on the calling thread.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn, int max_threads = 0);

/// True inside a parallel_for body (nested calls run serially).
bool in_parallel_region();

} // namespace kiln
