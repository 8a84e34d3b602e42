// The CUDA target.
#include "codegen/cuda/cuda_target.h"

#include <cstdlib>
#include <cstring>

#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/nvrtc.h"

namespace kiln::codegen::cuda {
namespace {

constexpr std::string_view kMagic = "KILNCUDA";

void put(std::string& out, std::string_view part) {
  const uint64_t n = part.size();
  for (int b = 0; b < 8; ++b)
    out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
  out.append(part);
}

} // namespace

CudaTarget::CudaTarget(std::string arch) : arch_(std::move(arch)) {}

std::string CudaTarget::identity() const {
  return "nvrtc " + nvrtc_version() + "\narch " + arch_ + "\n";
}

std::string CudaTarget::source(std::span<const ir::kernel::Kernel> kernels,
                               std::span<const Schedule> schedules) const {
  (void)schedules; // the GPU schedule is gpu_launch()'s, from the kernel
  return cuda_source(kernels);
}

Expected<std::string> CudaTarget::compile(std::span<const ir::kernel::Kernel> kernels,
                                          std::span<const Schedule> schedules) const {
  std::string src;
  try {
    src = cuda_source(kernels);
  } catch (const Error& e) {
    return Error::without_location(e.message());
  }
  Expected<NvrtcOutput> out = nvrtc_compile(src, "kiln_graph.cu", arch_);
  if (!out) return out.error();
  std::string blob(kMagic);
  put(blob, out->cubin);
  put(blob, out->ptx);
  put(blob, out->log);
  return blob;
}

Expected<CudaBlob> split_cuda_blob(std::string_view blob) {
  if (!blob.starts_with(kMagic)) return Error::without_location("not a CUDA blob (bad magic)");
  size_t at = kMagic.size();
  std::string_view parts[3];
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
  return CudaBlob{parts[0], parts[1], parts[2]};
}

bool CudaTarget::check(std::string_view blob) const {
  Expected<CudaBlob> b = split_cuda_blob(blob);
  return b && !b->cubin.empty();
}

Expected<LoadedCode> CudaTarget::load(std::string_view blob,
                                      std::span<const ir::kernel::Kernel> kernels) const {
  (void)kernels;
  if (Expected<CudaBlob> b = split_cuda_blob(blob); !b) return b.error();
  return Error::without_location(
      "the kernels compiled for " + arch_ +
      ", but kiln cannot launch CUDA kernels yet (the device runtime, runtime/cuda, is not "
      "built)");
}

const CudaTarget& cuda_target() {
  static const CudaTarget target = [] {
    const char* env = std::getenv("KILN_CUDA_ARCH");
    return CudaTarget(env != nullptr && *env != '\0' ? env : "sm_90");
  }();
  return target;
}

} // namespace kiln::codegen::cuda
