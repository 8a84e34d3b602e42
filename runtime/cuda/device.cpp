// CUDA devices through the driver API, opened with dlopen at first use.
#include "runtime/cuda/device.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/error.h"

#if KILN_HAVE_CUDA
#include <cuda.h>
#endif

namespace kiln::cuda {
namespace {

#if KILN_HAVE_CUDA

/// The driver's entry points kiln uses, looked up by their versioned names.
struct Driver {
  void* handle = nullptr;
  std::string reason; // why there is no usable driver (empty: there is)
  int devices = 0;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&::cuMemFree_v2) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD_v2) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH_v2) memcpy_dtoh = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  std::vector<CUcontext> contexts; // primary context per device, retained at first use

  template <typename F> bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    if (f == nullptr) reason = std::string("libcuda.so.1 has no ") + name;
    return f != nullptr;
  }

  Driver() {
    handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      reason = std::string("no CUDA driver: libcuda.so.1 can't be loaded (") +
               (why ? why : "not found") + ")";
      return;
    }
    if (!find(init, "cuInit") || !find(device_get_count, "cuDeviceGetCount") ||
        !find(device_get, "cuDeviceGet") || !find(primary_ctx_retain, "cuDevicePrimaryCtxRetain") ||
        !find(ctx_set_current, "cuCtxSetCurrent") || !find(ctx_synchronize, "cuCtxSynchronize") ||
        !find(mem_alloc, "cuMemAlloc_v2") || !find(mem_free, "cuMemFree_v2") ||
        !find(memcpy_htod, "cuMemcpyHtoD_v2") || !find(memcpy_dtoh, "cuMemcpyDtoH_v2") ||
        !find(get_error_name, "cuGetErrorName"))
      return;
    if (CUresult r = init(0); r != CUDA_SUCCESS) {
      reason = "the CUDA driver does not initialise (" + name(r) + ")";
      return;
    }
    if (CUresult r = device_get_count(&devices); r != CUDA_SUCCESS || devices == 0) {
      reason = "no CUDA device (the driver sees none)";
      devices = 0;
      return;
    }
    contexts.assign(static_cast<size_t>(devices), nullptr);
  }

  std::string name(CUresult r) const {
    const char* s = nullptr;
    if (get_error_name != nullptr && get_error_name(r, &s) == CUDA_SUCCESS && s != nullptr)
      return s;
    return "CUDA error " + std::to_string(static_cast<int>(r));
  }
  void check(CUresult r, const std::string& what) const {
    if (r != CUDA_SUCCESS) throw Error::without_location(what + ": " + name(r));
  }
  /// Makes device i's primary context current on this thread.
  void use(int i) {
    KILN_CHECK(i >= 0 && i < devices, "cuda:", i, " does not exist (", devices, " CUDA devices)");
    static std::mutex mu;
    std::lock_guard lock(mu);
    CUcontext& ctx = contexts[static_cast<size_t>(i)];
    if (ctx == nullptr) {
      CUdevice dev = 0;
      check(device_get(&dev, i), "cuDeviceGet(" + std::to_string(i) + ")");
      check(primary_ctx_retain(&ctx, dev),
            "cuDevicePrimaryCtxRetain(cuda:" + std::to_string(i) + ")");
    }
    check(ctx_set_current(ctx), "cuCtxSetCurrent(cuda:" + std::to_string(i) + ")");
  }
};

#else

struct Driver {
  std::string reason = "kiln was built without CUDA (the toolkit was not found)";
  int devices = 0;
  void use(int) { throw Error::without_location(reason); }
};

#endif

Driver& driver() {
  static Driver* d = new Driver(); // never destroyed: device memory may be freed at exit
  return *d;
}

#if KILN_HAVE_CUDA
/// Segments from cuMemAlloc on one device.
class DriverMemory final : public RawMemory {
public:
  explicit DriverMemory(int index) : index_(index) {}
  void* allocate(size_t bytes) override {
    Driver& d = driver();
    d.use(index_);
    CUdeviceptr p = 0;
    const CUresult r = d.mem_alloc(&p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
    d.check(r, "cuMemAlloc(" + std::to_string(bytes) + " bytes on cuda:" + std::to_string(index_) +
                   ")");
    return reinterpret_cast<void*>(p);
  }
  void free(void* ptr) override {
    Driver& d = driver();
    d.use(index_);
    d.check(d.mem_free(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree");
  }

private:
  int index_;
};

/// The runtime's Allocator for CUDA: a caching allocator per device.
class CudaAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override { return allocate_on(0, nbytes); }
  void deallocate(void* ptr, size_t) override { pools_.at(0)->deallocate(ptr); }
  Device device() const override { return Device::cuda(0); }

  void* allocate_on(int index, size_t nbytes) {
    void* p = pool(index).allocate(nbytes);
    if (p == nullptr)
      throw Error::without_location("CUDA out of memory: " + std::to_string(nbytes) +
                                    " bytes on cuda:" + std::to_string(index) + "\n" +
                                    pool(index).summary("cuda:" + std::to_string(index)));
    return p;
  }
  CachingAllocator& pool(int index) {
    std::lock_guard lock(mu_);
    KILN_CHECK(index >= 0 && index < driver().devices, "cuda:", index, " does not exist");
    if (pools_.size() <= static_cast<size_t>(index)) {
      raws_.resize(static_cast<size_t>(index) + 1);
      pools_.resize(static_cast<size_t>(index) + 1);
    }
    auto& p = pools_[static_cast<size_t>(index)];
    if (!p) {
      raws_[static_cast<size_t>(index)] = std::make_unique<DriverMemory>(index);
      p = std::make_unique<CachingAllocator>(*raws_[static_cast<size_t>(index)]);
    }
    return *p;
  }

private:
  std::mutex mu_;
  std::vector<std::unique_ptr<DriverMemory>> raws_;
  std::vector<std::unique_ptr<CachingAllocator>> pools_;
};

CudaAllocator& cuda_allocator() {
  static CudaAllocator* a = new CudaAllocator();
  return *a;
}
#endif

} // namespace

bool is_available() { return driver().devices > 0; }
int device_count() { return driver().devices; }
std::string unavailable_reason() { return is_available() ? std::string() : driver().reason; }

void synchronize(int index) {
  Driver& d = driver();
  KILN_CHECK(is_available(), "cuda::synchronize: ", d.reason);
#if KILN_HAVE_CUDA
  d.use(index);
  d.check(d.ctx_synchronize(), "cuCtxSynchronize(cuda:" + std::to_string(index) + ")");
#else
  (void)index;
#endif
}

DeviceMemoryStats memory_stats(int index) {
#if KILN_HAVE_CUDA
  if (is_available()) return cuda_allocator().pool(index).stats();
#endif
  (void)index;
  return {};
}

void empty_cache(int index) {
#if KILN_HAVE_CUDA
  if (is_available()) cuda_allocator().pool(index).empty_cache();
#endif
  (void)index;
}

std::string memory_summary(int index) {
  const std::string name = "cuda:" + std::to_string(index);
#if KILN_HAVE_CUDA
  if (is_available()) return cuda_allocator().pool(index).summary(name);
#endif
  return "no CUDA memory on " + name + ": " + unavailable_reason() + "\n";
}

namespace detail {

void ensure_backend() {
  KILN_CHECK(is_available(), "CUDA device requested: ", driver().reason);
#if KILN_HAVE_CUDA
  static std::once_flag once;
  std::call_once(once, [] { register_allocator(DeviceType::cuda, &cuda_allocator()); });
#endif
}

void copy_to_device(void* dst, const void* src, size_t bytes, Device device) {
  ensure_backend();
#if KILN_HAVE_CUDA
  Driver& d = driver();
  d.use(device.index);
  d.check(d.memcpy_htod(reinterpret_cast<CUdeviceptr>(dst), src, bytes),
          "copy of " + std::to_string(bytes) + " bytes to " + device.str());
#else
  (void)dst, (void)src, (void)bytes, (void)device;
#endif
}

void copy_to_host(void* dst, const void* src, size_t bytes, Device device) {
  ensure_backend();
#if KILN_HAVE_CUDA
  Driver& d = driver();
  d.use(device.index);
  d.check(d.memcpy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
          "copy of " + std::to_string(bytes) + " bytes from " + device.str());
#else
  (void)dst, (void)src, (void)bytes, (void)device;
#endif
}

} // namespace detail

} // namespace kiln::cuda
