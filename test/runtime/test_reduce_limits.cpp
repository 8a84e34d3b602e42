// Reductions at absurd sizes: a bounded piece list in the parallel tree, and a kiln::Error
// (naming the op and the shape) instead of std::bad_alloc or a run of years.
#include <catch2/catch.hpp>
#include <cstdint>

#include <kiln/kiln.h>

#include "runtime/kernels/reduce_loops.h"

using namespace kiln;

namespace {

/// Restores the thread count a test changed.
struct ThreadCount {
  int saved = get_num_threads();
  ~ThreadCount() { set_num_threads(saved); }
};

} // namespace

TEST_CASE("a sum over 2^62 broadcast elements is a kiln::Error naming the op and the shape",
          "[reduce]") {
  Tensor x = randn({1}).expand({int64_t{1} << 62});
  CHECK_THROWS_WITH(x.sum(),
                    Catch::Contains("sum: reducing an input of shape [4611686018427387904]") &&
                        Catch::Contains("limit of 2^40"));
  CHECK_THROWS_AS(x.max(), Error);
  CHECK_THROWS_AS(x.argmax(0), Error);
  // A dtype-changing sum must refuse before it converts (which would allocate 2^62 elements).
  Tensor i = ones({1}, DType::i32).expand({int64_t{1} << 62});
  CHECK_THROWS_WITH(i.sum(), Catch::Contains("sum: reducing an input of shape"));
  // Over several dims, and over one dim with the rest kept.
  Tensor m = randn({1, 1}).expand({int64_t{1} << 31, int64_t{1} << 31});
  CHECK_THROWS_WITH(m.sum({1}), Catch::Contains("[2147483648, 2147483648]"));
}

TEST_CASE("reductions up to the limit still run over broadcast views", "[reduce]") {
  // 2^26 elements of a stride-0 view: large enough for the parallel tree, cheap to run.
  Tensor x = full({1}, 1.0, DType::f32).expand({int64_t{1} << 26});
  CHECK(x.sum().item<double>() == static_cast<double>(int64_t{1} << 26));
}

TEST_CASE("the parallel reduction tree hands out a bounded number of pieces, each a subtree",
          "[reduce]") {
  ThreadCount restore;
  // A non-commutative, non-associative combine: any change in the tree's shape changes the
  // result, so equality with the serial tree shows the pieces are its subtrees.
  auto leaf = [](int64_t b, int64_t e) -> uint64_t {
    return static_cast<uint64_t>(b) * 1000003u + static_cast<uint64_t>(e);
  };
  auto combine = [](uint64_t a, uint64_t b) { return a * 31u + b * 7u + 1u; };
  for (int threads : {1, 2, 3, 8, 64})
    for (int64_t n : {int64_t{3} * kParallelGrain, int64_t{1} << 22, (int64_t{1} << 24) + 77}) {
      set_num_threads(threads);
      INFO(threads << " threads, n = " << n);
      CHECK(kernels::tree_reduce_parallel<uint64_t>(n, leaf, combine) ==
            kernels::tree_reduce<uint64_t>(0, n, leaf, combine));
    }
}
