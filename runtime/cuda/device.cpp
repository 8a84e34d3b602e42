// CUDA devices through the driver API, opened with dlopen at first use.
#include "runtime/cuda/device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
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
  decltype(&::cuMemcpyDtoDAsync_v2) memcpy_dtod = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  bool emulated = false;           // $KILN_CUDA_EMULATE: cuda:0 is the emulated device
  std::vector<CUcontext> contexts; // primary context per device, retained at first use

  template <typename F> bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    if (f == nullptr) reason = std::string("libcuda.so.1 has no ") + name;
    return f != nullptr;
  }

  Driver() {
    if (const char* e = std::getenv("KILN_CUDA_EMULATE");
        e != nullptr && *e != '\0' && std::string_view(e) != "0") {
      emulated = true;
      devices = 1;
      return;
    }
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
        !find(memcpy_dtod, "cuMemcpyDtoDAsync_v2") || !find(get_error_name, "cuGetErrorName") ||
        !find(device_get_name, "cuDeviceGetName") || !find(module_load_data, "cuModuleLoadData") ||
        !find(module_unload, "cuModuleUnload") ||
        !find(module_get_function, "cuModuleGetFunction") || !find(launch_kernel, "cuLaunchKernel"))
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
    if (emulated) return;
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
/// The emulated device's segments: host memory.
class HostSegments final : public RawMemory {
public:
  void* allocate(size_t bytes) override { return std::malloc(bytes); }
  void free(void* ptr) override { std::free(ptr); }
};

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
      if (driver().emulated)
        raws_[static_cast<size_t>(index)] = std::make_unique<HostSegments>();
      else
        raws_[static_cast<size_t>(index)] = std::make_unique<DriverMemory>(index);
      p = std::make_unique<CachingAllocator>(*raws_[static_cast<size_t>(index)]);
    }
    return *p;
  }

private:
  std::mutex mu_;
  std::vector<std::unique_ptr<RawMemory>> raws_;
  std::vector<std::unique_ptr<CachingAllocator>> pools_;
};

CudaAllocator& cuda_allocator() {
  static CudaAllocator* a = new CudaAllocator();
  return *a;
}
#endif

#if KILN_HAVE_CUDA
/// A module loaded through the driver.
class DriverModule final : public Module {
public:
  DriverModule(const ModuleImage& image, std::span<const std::string> kernels, int index)
      : index_(index) {
    Driver& d = driver();
    d.use(index);
    CUresult r = image.cubin.empty() ? CUDA_ERROR_INVALID_IMAGE
                                     : d.module_load_data(&module_, image.cubin.data());
    if (r != CUDA_SUCCESS && !image.ptx.empty()) {
      const std::string ptx(image.ptx); // NUL-terminated
      const CUresult from_ptx = d.module_load_data(&module_, ptx.c_str());
      if (from_ptx != CUDA_SUCCESS)
        throw Error::without_location("CUDA kernels do not load on cuda:" + std::to_string(index) +
                                      ": the cubin (" + d.name(r) + "), the PTX (" +
                                      d.name(from_ptx) + ")");
      r = from_ptx;
    }
    d.check(r, "loading CUDA kernels on cuda:" + std::to_string(index));
    for (const std::string& name : kernels) {
      CUfunction f = nullptr;
      d.check(d.module_get_function(&f, module_, name.c_str()),
              "CUDA kernel " + name + " is not in its module");
      functions_.push_back(f);
      names_.push_back(name);
    }
  }
  ~DriverModule() override {
    try {
      driver().use(index_);
      (void)driver().module_unload(module_); // nothing to do about a failure at unload
    } catch (const Error&) {                 // the context is gone (at exit): so is the module
    }
  }
  void launch(size_t kernel, std::span<char* const> buffers, int64_t n, unsigned blocks,
              unsigned threads) const override {
    Driver& d = driver();
    d.use(index_);
    std::vector<void*> params;
    params.reserve(buffers.size() + 1);
    for (char* const& b : buffers)
      params.push_back(const_cast<char**>(&b));
    long long points = n;
    params.push_back(&points);
    d.check(d.launch_kernel(functions_.at(kernel), blocks, 1, 1, threads, 1, 1, 0, nullptr,
                            params.data(), nullptr),
            "launching CUDA kernel " + names_.at(kernel) + " (" + std::to_string(blocks) + " x " +
                std::to_string(threads) + " threads, " + std::to_string(n) + " points)");
  }

private:
  int index_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
  std::vector<std::string> names_;
};

/// A module of the emulated device: the host build of the kernels, loaded with dlopen.
class EmulatedModule final : public Module {
public:
  /// Blocks an emulated launch runs at most: its threads stride over the rest, as on the
  /// device, and an emulated block costs a fiber per thread.
  static constexpr unsigned kMaxBlocks = 64;

  EmulatedModule(const ModuleImage& image, std::span<const std::string> kernels) {
    KILN_CHECK(!image.host.empty(), "the emulated CUDA device needs the kernels' host build "
                                    "(compiled without $KILN_CUDA_EMULATE?)");
    const char* dir = std::getenv("TMPDIR");
    std::string path =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kiln_emulated_XXXXXX";
    const int fd = mkstemp(path.data());
    KILN_CHECK(fd >= 0, "emulated CUDA device: cannot create ", path);
    const bool written = ::write(fd, image.host.data(), image.host.size()) ==
                         static_cast<ssize_t>(image.host.size());
    ::close(fd);
    handle_ = written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
    const char* why = handle_ == nullptr ? dlerror() : nullptr;
    ::unlink(path.c_str());
    KILN_CHECK(handle_ != nullptr, "emulated CUDA device: the kernels' host build does not load (",
               why != nullptr ? why : "write failed", ")");
    for (const std::string& name : kernels) {
      auto f = reinterpret_cast<Entry>(dlsym(handle_, (name + "_host").c_str()));
      KILN_CHECK(f != nullptr, "emulated CUDA device: kernel ", name, " is not in its module");
      entries_.push_back(f);
    }
  }
  ~EmulatedModule() override { dlclose(handle_); }
  void launch(size_t kernel, std::span<char* const> buffers, int64_t n, unsigned blocks,
              unsigned) const override {
    entries_.at(kernel)(buffers.data(), n, std::min(blocks, kMaxBlocks));
  }

private:
  using Entry = void (*)(char* const*, long long, unsigned);
  void* handle_ = nullptr;
  std::vector<Entry> entries_;
};
#endif

} // namespace

bool is_available() { return driver().devices > 0; }
bool emulated() {
#if KILN_HAVE_CUDA
  return driver().emulated;
#else
  return false;
#endif
}

std::string device_name(int index) {
  KILN_CHECK(is_available(), "cuda::device_name: ", driver().reason);
#if KILN_HAVE_CUDA
  Driver& d = driver();
  if (d.emulated) return "kiln emulated device";
  d.use(index);
  CUdevice dev = 0;
  d.check(d.device_get(&dev, index), "cuDeviceGet(" + std::to_string(index) + ")");
  char name[256] = {};
  d.check(d.device_get_name(name, sizeof name, dev), "cuDeviceGetName");
  return name;
#else
  (void)index;
  return {};
#endif
}

std::shared_ptr<const Module> load_module(const ModuleImage& image,
                                          std::span<const std::string> kernels, int index) {
  KILN_CHECK(is_available(), "loading CUDA kernels: ", driver().reason);
#if KILN_HAVE_CUDA
  if (driver().emulated) return std::make_shared<EmulatedModule>(image, kernels);
  return std::make_shared<DriverModule>(image, kernels, index);
#else
  (void)image, (void)kernels, (void)index;
  return nullptr;
#endif
}
int device_count() { return driver().devices; }
std::string unavailable_reason() { return is_available() ? std::string() : driver().reason; }

void synchronize(int index) {
  Driver& d = driver();
  KILN_CHECK(is_available(), "cuda::synchronize: ", d.reason);
#if KILN_HAVE_CUDA
  d.use(index);
  if (d.emulated) return; // its launches complete before they return
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
  if (d.emulated) {
    std::memcpy(dst, src, bytes);
    return;
  }
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
  if (d.emulated) {
    std::memcpy(dst, src, bytes);
    return;
  }
  d.check(d.memcpy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
          "copy of " + std::to_string(bytes) + " bytes from " + device.str());
#else
  (void)dst, (void)src, (void)bytes, (void)device;
#endif
}

void copy_on_device(void* dst, const void* src, size_t bytes, Device device) {
  ensure_backend();
#if KILN_HAVE_CUDA
  Driver& d = driver();
  d.use(device.index);
  if (d.emulated) {
    std::memmove(dst, src, bytes);
    return;
  }
  d.check(d.memcpy_dtod(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                        bytes, nullptr),
          "copy of " + std::to_string(bytes) + " bytes on " + device.str());
#else
  (void)dst, (void)src, (void)bytes, (void)device;
#endif
}

} // namespace detail

} // namespace kiln::cuda
