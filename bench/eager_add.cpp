// Eager `add` of two 16M-element f32 tensors into a preallocated output, as GB/s, beside a
// plain OpenMP C loop doing the same work in the same run (3 x 64 MB moved per call).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/ops/dispatch.h"

namespace {

template <typename F> double median_seconds(F&& f, int reps) {
  std::vector<double> t;
  f(); // warm-up: first touch of pages, thread pool start
  for (int r = 0; r < reps; ++r) {
    auto b = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - b).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

} // namespace

int main() {
  using namespace kiln;
  constexpr int64_t n = 16 << 20;
  constexpr double bytes = 3.0 * n * sizeof(float);
  const int reps = 20;
  manual_seed(0);
  Tensor a = rand({n}), b = rand({n}), out = empty({n});

  double t_kiln = median_seconds(
      [&] {
        Tensor dst[1] = {out};
        Tensor in[2] = {a, b};
        dispatch(Op::add, in, {}, dst);
      },
      reps);

  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* pc = out.data_ptr<float>();
  double t_loop = median_seconds(
      [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i)
          pc[i] = pa[i] + pb[i];
      },
      reps);

  std::printf("eager add, 16M f32, preallocated output, %d threads, median of %d\n",
              get_num_threads(), reps);
  std::printf("  kiln eager add : %7.2f ms  %6.1f GB/s\n", t_kiln * 1e3, bytes / t_kiln / 1e9);
  std::printf("  plain C loop   : %7.2f ms  %6.1f GB/s\n", t_loop * 1e3, bytes / t_loop / 1e9);
  std::printf("  ratio kiln / C loop: %.2f\n", t_loop / t_kiln);
  return 0;
}
