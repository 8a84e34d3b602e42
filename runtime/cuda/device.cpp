// CUDA devices through the driver API, opened with dlopen at first use.
#include "runtime/cuda/device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/error.h"
#include "runtime/tensor.h"
#include "runtime/tensor_impl.h"

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
  decltype(&::cuMemcpyDtoDAsync_v2) memcpy_dtod = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed = nullptr;
  decltype(&::cuMemHostAlloc) host_alloc = nullptr;
  decltype(&::cuMemFreeHost) host_free = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpy_dtoh_async = nullptr;
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
      emulated = true; // KILN_CUDA_EMULATE=N: N devices (1 for any other value)
      devices = std::clamp(std::atoi(e), 1, 8);
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
        !find(memcpy_dtod, "cuMemcpyDtoDAsync_v2") || !find(get_error_name, "cuGetErrorName") ||
        !find(device_get_name, "cuDeviceGetName") || !find(module_load_data, "cuModuleLoadData") ||
        !find(module_unload, "cuModuleUnload") ||
        !find(module_get_function, "cuModuleGetFunction") ||
        !find(launch_kernel, "cuLaunchKernel") || !find(stream_create, "cuStreamCreate") ||
        !find(stream_destroy, "cuStreamDestroy_v2") ||
        !find(stream_synchronize, "cuStreamSynchronize") || !find(event_create, "cuEventCreate") ||
        !find(event_destroy, "cuEventDestroy_v2") || !find(event_record, "cuEventRecord") ||
        !find(event_synchronize, "cuEventSynchronize") || !find(event_query, "cuEventQuery") ||
        !find(event_elapsed, "cuEventElapsedTime_v2") || !find(host_alloc, "cuMemHostAlloc") ||
        !find(host_free, "cuMemFreeHost") || !find(memcpy_htod_async, "cuMemcpyHtoDAsync_v2") ||
        !find(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2"))
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
  uintptr_t record_event(uintptr_t stream) override {
    Driver& d = driver();
    d.use(index_);
    CUevent e = nullptr;
    d.check(d.event_create(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate (record_stream)");
    d.check(d.event_record(e, reinterpret_cast<CUstream>(stream)), "cuEventRecord (record_stream)");
    return reinterpret_cast<uintptr_t>(e);
  }
  bool event_done(uintptr_t event) override {
    Driver& d = driver();
    d.use(index_);
    const CUresult r = d.event_query(reinterpret_cast<CUevent>(event));
    if (r == CUDA_ERROR_NOT_READY) return false;
    d.check(r, "cuEventQuery (record_stream)");
    (void)d.event_destroy(reinterpret_cast<CUevent>(event));
    return true;
  }

private:
  int index_;
};

/// The runtime's Allocator for CUDA: a caching allocator per device, each behind an Allocator
/// of its own (on(index)).
class CudaAllocator final : public Allocator {
public:
  class OnDevice final : public Allocator {
  public:
    OnDevice(CudaAllocator& all, int index) : all_(all), index_(index) {}
    void* allocate(size_t nbytes) override {
      return all_.allocate_on(index_, nbytes,
                              reinterpret_cast<uintptr_t>(current_stream(index_).handle()));
    }
    void deallocate(void* ptr, size_t) override { all_.pool(index_).deallocate(ptr); }
    Device device() const override { return Device::cuda(index_); }

  private:
    CudaAllocator& all_;
    int index_;
  };

  void* allocate(size_t nbytes) override { return on(0).allocate(nbytes); }
  void deallocate(void* ptr, size_t) override { pool(0).deallocate(ptr); }
  Device device() const override { return Device::cuda(0); }
  Allocator& on(int index) override {
    (void)pool(index); // checks the index
    std::lock_guard lock(mu_);
    return *on_[static_cast<size_t>(index)];
  }

  void* allocate_on(int index, size_t nbytes, uintptr_t stream) {
    void* p = pool(index).allocate(nbytes, stream);
    if (p == nullptr)
      throw Error::without_location("CUDA out of memory: " + std::to_string(nbytes) +
                                    " bytes on cuda:" + std::to_string(index) + "\n" +
                                    pool(index).summary("cuda:" + std::to_string(index)));
    return p;
  }
  CachingAllocator& pool(int index) {
    std::lock_guard lock(mu_);
    KILN_CHECK(index >= 0 && index < driver().devices, "cuda:", index, " does not exist (",
               driver().devices, " CUDA devices)");
    if (pools_.size() <= static_cast<size_t>(index)) {
      raws_.resize(static_cast<size_t>(index) + 1);
      pools_.resize(static_cast<size_t>(index) + 1);
      on_.resize(static_cast<size_t>(index) + 1);
    }
    auto& p = pools_[static_cast<size_t>(index)];
    if (!p) {
      if (driver().emulated)
        raws_[static_cast<size_t>(index)] = std::make_unique<HostSegments>();
      else
        raws_[static_cast<size_t>(index)] = std::make_unique<DriverMemory>(index);
      p = std::make_unique<CachingAllocator>(*raws_[static_cast<size_t>(index)]);
      on_[static_cast<size_t>(index)] = std::make_unique<OnDevice>(*this, index);
    }
    return *p;
  }

private:
  std::mutex mu_;
  std::vector<std::unique_ptr<RawMemory>> raws_;
  std::vector<std::unique_ptr<CachingAllocator>> pools_;
  std::vector<std::unique_ptr<OnDevice>> on_;
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
    std::vector<void*> params;
    params.reserve(buffers.size() + 1);
    for (char* const& b : buffers)
      params.push_back(const_cast<char**>(&b));
    long long points = n;
    params.push_back(&points);
    queue(kernel, params.data(), blocks, threads, n);
  }
  void launch_with(size_t kernel, const void* args, unsigned blocks,
                   unsigned threads) const override {
    void* params[] = {const_cast<void*>(args)}; // the driver copies the struct's bytes
    queue(kernel, params, blocks, threads, -1);
  }

private:
  /// cuLaunchKernel on the current stream; a failure names the kernel and its geometry (and
  /// its points, when n >= 0). The message is built only then: launches are a hot path.
  void queue(size_t kernel, void** params, unsigned blocks, unsigned threads, int64_t n) const {
    Driver& d = driver();
    d.use(index_);
    const CUresult r =
        d.launch_kernel(functions_.at(kernel), blocks, 1, 1, threads, 1, 1, 0,
                        static_cast<CUstream>(current_stream(index_).handle()), params, nullptr);
    if (r != CUDA_SUCCESS)
      d.check(r, "launching CUDA kernel " + names_.at(kernel) + " (" + std::to_string(blocks) +
                     " x " + std::to_string(threads) + " threads" +
                     (n >= 0 ? ", " + std::to_string(n) + " points" : std::string()) + ")");
  }

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
      void* f = dlsym(handle_, (name + "_host").c_str());
      KILN_CHECK(f != nullptr, "emulated CUDA device: kernel ", name, " is not in its module");
      entries_.push_back(f);
    }
  }
  ~EmulatedModule() override { dlclose(handle_); }
  void launch(size_t kernel, std::span<char* const> buffers, int64_t n, unsigned blocks,
              unsigned) const override {
    reinterpret_cast<Entry>(entries_.at(kernel))(buffers.data(), n, std::min(blocks, kMaxBlocks));
  }
  void launch_with(size_t kernel, const void* args, unsigned blocks, unsigned) const override {
    reinterpret_cast<EntryWith>(entries_.at(kernel))(args, std::min(blocks, kMaxBlocks));
  }

private:
  using Entry = void (*)(char* const*, long long, unsigned);
  using EntryWith = void (*)(const void*, unsigned);
  void* handle_ = nullptr;
  std::vector<void*> entries_; // NAME_host, of the kernel's form
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

void record_stream(const Tensor& t, const Stream& s) {
  KILN_CHECK(t.device().is_cuda() && t.device().index == s.device(), "record_stream: a tensor on ",
             t.device(), " and a stream of cuda:", s.device());
  const std::shared_ptr<Storage>& storage = t.impl().storage;
  if (storage == nullptr || storage->data() == nullptr) return; // nothing allocated
#if KILN_HAVE_CUDA
  CachingAllocator& pool = cuda_allocator().pool(s.device());
  KILN_CHECK(storage->allocator() == &cuda_allocator().on(s.device()),
             "record_stream: the tensor's memory is not kiln's CUDA allocator's (borrowed?)");
  pool.record_stream(storage->data(), reinterpret_cast<uintptr_t>(s.handle()));
#endif
}

// ---- streams and events ----

namespace {
/// Per thread, the current stream of each device that has one other than its default.
thread_local std::vector<std::pair<int, Stream>> t_streams;
} // namespace

Stream Stream::create(int index) {
  Driver& d = driver();
  KILN_CHECK(is_available(), "cuda::Stream::create: ", d.reason);
  d.use(index);
#if KILN_HAVE_CUDA
  if (d.emulated) { // work on the emulated device is done when queued: any handle will do
    auto token = std::make_shared<char>(0);
    return Stream(token, token.get(), index);
  }
  CUstream s = nullptr;
  d.check(d.stream_create(&s, CU_STREAM_NON_BLOCKING),
          "cuStreamCreate(cuda:" + std::to_string(index) + ")");
  std::shared_ptr<void> owned(s, [index](void* h) {
    try {
      driver().use(index);
      (void)driver().stream_destroy(static_cast<CUstream>(h));
    } catch (const Error&) { // the context is gone (at exit): so is the stream
    }
  });
  return Stream(std::move(owned), s, index);
#else
  return Stream(nullptr, nullptr, index);
#endif
}

Stream Stream::default_stream(int index) { return Stream(nullptr, nullptr, index); }

void Stream::synchronize() const {
  Driver& d = driver();
  KILN_CHECK(is_available(), "cuda::Stream::synchronize: ", d.reason);
  d.use(device_);
#if KILN_HAVE_CUDA
  if (d.emulated) return;
  d.check(d.stream_synchronize(static_cast<CUstream>(handle_)),
          "cuStreamSynchronize(cuda:" + std::to_string(device_) + ")");
#endif
}

Stream current_stream(int index) {
  for (const auto& [device, s] : t_streams)
    if (device == index) return s;
  return Stream::default_stream(index);
}

StreamGuard::StreamGuard(const Stream& s) : previous_(current_stream(s.device())) {
  for (auto& [device, current] : t_streams)
    if (device == s.device()) {
      current = s;
      return;
    }
  t_streams.emplace_back(s.device(), s);
}

StreamGuard::~StreamGuard() {
  for (auto& [device, current] : t_streams)
    if (device == previous_.device()) current = previous_;
}

Event::Event(int index) : device_(index) {
  Driver& d = driver();
  KILN_CHECK(is_available(), "cuda::Event: ", d.reason);
  d.use(index);
#if KILN_HAVE_CUDA
  if (d.emulated) return;
  CUevent e = nullptr;
  d.check(d.event_create(&e, CU_EVENT_DEFAULT),
          "cuEventCreate(cuda:" + std::to_string(index) + ")");
  event_ = e;
#endif
}

Event::~Event() {
#if KILN_HAVE_CUDA
  if (event_ == nullptr) return;
  try {
    driver().use(device_);
    (void)driver().event_destroy(static_cast<CUevent>(event_));
  } catch (const Error&) {
  }
#endif
}

void Event::record(const Stream& s) {
  KILN_CHECK(s.device() == device_, "cuda::Event of cuda:", device_,
             " recorded on a stream of cuda:", s.device());
  Driver& d = driver();
  d.use(device_);
  if (event_ == nullptr) { // the emulated device: its work is done when queued
    host_ms_ = std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count();
    return;
  }
#if KILN_HAVE_CUDA
  d.check(d.event_record(static_cast<CUevent>(event_), static_cast<CUstream>(s.handle())),
          "cuEventRecord");
#endif
}

void Event::synchronize() const {
#if KILN_HAVE_CUDA
  if (event_ == nullptr) return;
  driver().use(device_);
  driver().check(driver().event_synchronize(static_cast<CUevent>(event_)), "cuEventSynchronize");
#endif
}

bool Event::query() const {
#if KILN_HAVE_CUDA
  if (event_ == nullptr) return true;
  driver().use(device_);
  const CUresult r = driver().event_query(static_cast<CUevent>(event_));
  if (r == CUDA_ERROR_NOT_READY) return false;
  driver().check(r, "cuEventQuery");
#endif
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  if (event_ == nullptr || end.event_ == nullptr) {
    KILN_CHECK(host_ms_ >= 0 && end.host_ms_ >= 0,
               "cuda::Event::elapsed_ms: an event not recorded");
    return static_cast<float>(end.host_ms_ - host_ms_);
  }
  float ms = 0;
#if KILN_HAVE_CUDA
  driver().use(device_);
  driver().check(
      driver().event_elapsed(&ms, static_cast<CUevent>(event_), static_cast<CUevent>(end.event_)),
      "cuEventElapsedTime");
#endif
  return ms;
}

// ---- pinned host memory ----

namespace {
/// Page-locked host memory from the driver (plain host memory on the emulated device).
class PinnedAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override {
    Driver& d = driver();
    d.use(0);
#if KILN_HAVE_CUDA
    if (!d.emulated) {
      void* p = nullptr;
      d.check(d.host_alloc(&p, std::max<size_t>(nbytes, 1), CU_MEMHOSTALLOC_PORTABLE),
              "cuMemHostAlloc(" + std::to_string(nbytes) + " bytes)");
      return p;
    }
#endif
    return std::malloc(std::max<size_t>(nbytes, 1));
  }
  void deallocate(void* ptr, size_t) override {
#if KILN_HAVE_CUDA
    if (!driver().emulated) {
      try {
        driver().use(0);
        (void)driver().host_free(ptr);
      } catch (const Error&) {
      }
      return;
    }
#endif
    std::free(ptr);
  }
  Device device() const override { return Device::cpu(); }
};

PinnedAllocator& pinned_allocator() {
  static PinnedAllocator* a = new PinnedAllocator();
  return *a;
}
} // namespace

Tensor pin_memory(const Tensor& t) {
  KILN_CHECK(t.device().is_cpu(), "pin_memory: a ", t.device(), " tensor (only CPU tensors pin)");
  KILN_CHECK(is_available(), "pin_memory: ", driver().reason);
  const Tensor src = t.contiguous();
  const size_t bytes = static_cast<size_t>(src.numel() * src.itemsize());
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = src.sizes();
  impl->strides = contiguous_strides(src.sizes());
  impl->dtype = src.dtype();
  impl->device = Device::cpu();
  impl->storage = std::make_shared<Storage>(bytes, pinned_allocator());
  if (bytes > 0) std::memcpy(impl->storage->data(), src.raw_data(), bytes);
  return Tensor(std::move(impl));
}

bool is_pinned(const Tensor& t) {
  return t.defined() && t.impl().storage != nullptr &&
         t.impl().storage->allocator() == &pinned_allocator();
}

namespace detail {

void ensure_backend() {
  KILN_CHECK(is_available(), "CUDA device requested: ", driver().reason);
#if KILN_HAVE_CUDA
  static std::once_flag once;
  std::call_once(once, [] { register_allocator(DeviceType::cuda, &cuda_allocator()); });
#endif
}

namespace {

enum class Copy { to_device, to_host, on_device };

/// Queues a copy on the current stream of `device`. A copy between host and device is then
/// waited for: its host side may go as soon as it returns.
void copy_bytes(void* dst, const void* src, size_t bytes, Device device, Copy kind) {
  ensure_backend();
#if KILN_HAVE_CUDA
  Driver& d = driver();
  d.use(device.index);
  if (d.emulated) {
    std::memmove(dst, src, bytes);
    return;
  }
  CUstream s = static_cast<CUstream>(current_stream(device.index).handle());
  const char* where = kind == Copy::to_device ? " bytes to "
                      : kind == Copy::to_host ? " bytes from "
                                              : " bytes on ";
  const std::string what = "copy of " + std::to_string(bytes) + where + device.str();
  const auto to = reinterpret_cast<CUdeviceptr>(dst);
  const auto from = reinterpret_cast<CUdeviceptr>(src);
  switch (kind) {
  case Copy::to_device: d.check(d.memcpy_htod_async(to, src, bytes, s), what); break;
  case Copy::to_host: d.check(d.memcpy_dtoh_async(dst, from, bytes, s), what); break;
  case Copy::on_device: d.check(d.memcpy_dtod(to, from, bytes, s), what); return;
  }
  d.check(d.stream_synchronize(s), what);
#else
  (void)dst, (void)src, (void)bytes, (void)device, (void)kind;
#endif
}

} // namespace

void copy_to_device(void* dst, const void* src, size_t bytes, Device device) {
  copy_bytes(dst, src, bytes, device, Copy::to_device);
}

void copy_to_host(void* dst, const void* src, size_t bytes, Device device) {
  copy_bytes(dst, src, bytes, device, Copy::to_host);
}

void copy_on_device(void* dst, const void* src, size_t bytes, Device device) {
  copy_bytes(dst, src, bytes, device, Copy::on_device);
}

} // namespace detail

} // namespace kiln::cuda
