// CUDA devices through the driver opened at run time (runtime/cuda/device.h). Without a
// device (these machines) every use of one is a kiln::Error that says why; with one (the
// `[cuda]` cases, which skip visibly otherwise) tensors go to the device and back bit for bit,
// and the caching allocator serves them.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

#include "runtime/cuda/device.h"

using namespace kiln;

TEST_CASE("cuda: without a device, using one is an error that says why") {
  if (cuda::is_available()) {
    WARN("a CUDA device is present: the no-device checks are skipped");
    return;
  }
  CHECK(cuda::device_count() == 0);
  const std::string why = cuda::unavailable_reason();
  CHECK_THAT(why, Catch::Contains("libcuda.so.1") || Catch::Contains("no CUDA device") ||
                      Catch::Contains("built without CUDA"));
  CHECK_THROWS_WITH(zeros({2, 3}).to(Device::cuda(0)), Catch::Contains(why));
  CHECK_THROWS_WITH(cuda::synchronize(), Catch::Contains(why));
  CHECK_THAT(cuda::memory_summary(), Catch::Contains("no CUDA memory on cuda:0"));
  CHECK(cuda::memory_stats().allocated == 0);
  cuda::empty_cache(); // nothing to do, and no error
}

TEST_CASE("cuda: tensors go to the device and back, from the caching allocator", "[cuda]") {
  if (!cuda::is_available()) {
    WARN("no CUDA device (" << cuda::unavailable_reason() << "): [cuda] test skipped");
    return;
  }
  manual_seed(1);
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::i64, DType::bool_}) {
    INFO(dtype_name(t));
    Tensor x = randn({37, 5}).to(t);
    Tensor d = x.to(Device::cuda(0));
    CHECK(d.device() == Device::cuda(0));
    Tensor back = d.to(Device::cpu());
    CHECK(back.to_vector<double>() == x.to_vector<double>());
  }
  // A strided CPU tensor is made contiguous on the way.
  Tensor w = randn({4, 6}).t();
  CHECK(w.to(Device::cuda(0)).to_vector<float>() == w.contiguous().to_vector<float>());
  CHECK(cuda::memory_stats().allocations > 0);
  CHECK_THAT(cuda::memory_summary(), Catch::Contains("kiln CUDA memory summary, device cuda:0"));
  // The eager kernels come with the code generator, which runtime_tests does not link
  // (frontend_tests' [cuda] cases run them).
  Tensor d = ones({3}).to(Device::cuda(0));
  CHECK_THROWS_WITH(d + d, Catch::Contains("add: operands on cuda:0") &&
                               Catch::Contains("no CUDA kernels are registered"));
  cuda::synchronize();
}
