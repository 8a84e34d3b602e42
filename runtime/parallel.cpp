// parallel_for on OpenMP, and the thread-count setting shared with oneDNN.
#include "runtime/parallel.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "runtime/error.h"
#include "runtime/ops.h"

namespace kiln {

bool in_parallel_region() { return omp_in_parallel() != 0; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn, int max_threads) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int threads = max_threads > 0 ? max_threads : omp_get_max_threads();
  if (n <= grain || threads <= 1 || in_parallel_region()) {
    fn(begin, end);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  std::exception_ptr error;
  std::mutex error_mutex;
  bool worker_error = false;
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = begin + n * c / chunks;
    int64_t e = begin + n * (c + 1) / chunks;
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) {
        error = std::current_exception();
        worker_error = omp_get_thread_num() != 0;
      }
    }
  }
  if (!error) return;
  if (worker_error) {
    // A worker's stack holds no user frame: rebuild the error here so that its location
    // names the user's call, as an error on the calling thread would.
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      throw Error(e.message());
    }
  }
  std::rethrow_exception(error);
}

void set_num_threads(int n) {
  KILN_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

} // namespace kiln
