// The CUDA target.
#include "codegen/cuda/cuda_target.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/nvrtc.h"
#include "runtime/cuda/device.h"

namespace kiln::codegen::cuda {
namespace {

constexpr std::string_view kMagic = "KILNCUDA";

void put(std::string& out, std::string_view part) {
  const uint64_t n = part.size();
  for (int b = 0; b < 8; ++b)
    out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
  out.append(part);
}

/// The source built as a host shared object for the emulated device, by $KILN_CUDA_HOST_CXX
/// (default c++); its bytes, or the compiler's output as the error.
Expected<std::string> host_build(const std::string& source) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "kiln_cuda_host_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr)
    return Error::without_location("emulated CUDA device: cannot create " + dir);
  const fs::path src = fs::path(dir) / "kernels.cpp", so = fs::path(dir) / "kernels.so";
  std::ofstream(src) << source;
  const char* env = std::getenv("KILN_CUDA_HOST_CXX");
  const std::string cmd =
      std::string(env != nullptr && *env != '\0' ? env : "c++") +
      " -std=c++17 -O1 -fno-strict-aliasing -ffp-contract=off -shared -fPIC -o '" + so.string() +
      "' '" + src.string() + "' 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
      out.append(buf, n);
    if (::pclose(p) != 0)
      out += "\n(failed: " + cmd + ")";
    else
      out.clear();
  } else {
    out = "cannot run " + cmd;
  }
  std::string bytes;
  if (out.empty()) {
    std::ifstream f(so, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!out.empty() || bytes.empty())
    return Error::without_location("emulated CUDA device: the host build of the kernels fails\n" +
                                   out);
  return bytes;
}

/// A CPU entry for a kernel that runs on a device: the plan launches it instead
/// (Plan::KernelCall::launch); reaching this is a kiln bug.
void device_kernel_on_host(char* const*, int64_t, int64_t) {
  KILN_UNREACHABLE("a CUDA kernel was called as a CPU kernel");
}

} // namespace

CudaTarget::CudaTarget(std::string arch, Device device) : arch_(std::move(arch)), device_(device) {}

std::string CudaTarget::identity() const {
  return "nvrtc " + nvrtc_version() + "\narch " + arch_ + "\n" +
         (kiln::cuda::emulated() ? "emulated\n" : "");
}

std::string CudaTarget::source(std::span<const ir::kernel::Kernel> kernels,
                               std::span<const Schedule> schedules) const {
  (void)schedules; // the GPU schedule is gpu_launch()'s, from the kernel
  return cuda_source(kernels);
}

Expected<std::string> compile_cuda_blob(const std::string& source, const std::string& name,
                                        const std::string& arch,
                                        const std::vector<std::string>& nvrtc_options) {
  Expected<NvrtcOutput> out = nvrtc_compile(source, name, arch, nvrtc_options);
  if (!out) return out.error();
  std::string host;
  if (kiln::cuda::emulated()) {
    Expected<std::string> built = host_build(source);
    if (!built) return built.error();
    host = std::move(*built);
  }
  std::string blob(kMagic);
  put(blob, out->cubin);
  put(blob, out->ptx);
  put(blob, out->log);
  put(blob, host);
  return blob;
}

Expected<std::string> CudaTarget::compile(std::span<const ir::kernel::Kernel> kernels,
                                          std::span<const Schedule> schedules) const {
  (void)schedules; // the GPU schedule is gpu_launch()'s, from the kernel
  std::string src;
  try {
    src = cuda_source(kernels);
  } catch (const Error& e) {
    return Error::without_location(e.message());
  }
  return compile_cuda_blob(src, "kiln_graph.cu", arch_);
}

Expected<CudaBlob> split_cuda_blob(std::string_view blob) {
  if (!blob.starts_with(kMagic)) return Error::without_location("not a CUDA blob (bad magic)");
  size_t at = kMagic.size();
  std::string_view parts[4];
  for (std::string_view& part : parts) {
    if (blob.size() - at < 8) return Error::without_location("CUDA blob cut short");
    uint64_t n = 0;
    for (int b = 0; b < 8; ++b)
      n |= static_cast<uint64_t>(static_cast<unsigned char>(blob[at + static_cast<size_t>(b)]))
           << (8 * b);
    at += 8;
    if (n > blob.size() - at) return Error::without_location("CUDA blob cut short");
    part = blob.substr(at, n);
    at += n;
  }
  if (at != blob.size()) return Error::without_location("bytes after the CUDA blob");
  return CudaBlob{parts[0], parts[1], parts[2], parts[3]};
}

bool CudaTarget::check(std::string_view blob) const {
  Expected<CudaBlob> b = split_cuda_blob(blob);
  return b && !b->cubin.empty();
}

Expected<LoadedCode> CudaTarget::load(std::string_view blob,
                                      std::span<const ir::kernel::Kernel> kernels) const {
  Expected<CudaBlob> b = split_cuda_blob(blob);
  if (!b) return b.error();
  if (!kiln::cuda::is_available())
    return Error::without_location(
        "the kernels compiled for " + arch_ +
        ", but there is no CUDA device to run them: " + kiln::cuda::unavailable_reason());
  std::vector<std::string> names;
  for (const ir::kernel::Kernel& k : kernels)
    names.push_back(k.name);
  std::shared_ptr<const kiln::cuda::Module> module;
  try {
    module = kiln::cuda::load_module({b->cubin, b->ptx, b->host}, names, device_.index);
  } catch (const Error& e) {
    return Error::without_location(e.message());
  }
  LoadedCode code;
  code.library = module;
  code.device = device_;
  for (const ir::kernel::Kernel& k : kernels) {
    code.entries.push_back(&device_kernel_on_host);
    // The kernel's launch: its GPU schedule (as cuda_source chose it) over its outer points.
    const GpuLaunch launch = gpu_launch(k);
    const int64_t n = k.outer_numel();
    const size_t index = code.launches.size();
    const size_t num_buffers = k.buffers.size();
    code.launches.push_back([module, index, launch, n, num_buffers](char* const* buffers) {
      module->launch(index, std::span<char* const>(buffers, num_buffers), n,
                     static_cast<unsigned>(launch.blocks(n)),
                     static_cast<unsigned>(launch.threads));
    });
  }
  return code;
}

const CudaTarget& cuda_target(int index) {
  KILN_CHECK(index >= 0 && index < 64, "cuda_target: no device cuda:", index);
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CudaTarget>>* targets =
      new std::map<int, std::unique_ptr<CudaTarget>>(); // never destroyed: plans point at them
  std::lock_guard lock(mu);
  std::unique_ptr<CudaTarget>& t = (*targets)[index];
  if (!t) {
    const char* env = std::getenv("KILN_CUDA_ARCH");
    t = std::make_unique<CudaTarget>(env != nullptr && *env != '\0' ? env : "sm_90",
                                     Device::cuda(index));
  }
  return *t;
}

} // namespace kiln::codegen::cuda
