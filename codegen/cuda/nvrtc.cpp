// NVRTC: CUDA C++ to cubin and PTX.
#include "codegen/cuda/nvrtc.h"

#include <regex>
#include <sstream>

#if KILN_HAVE_CUDA
#include <nvrtc.h>
#endif

namespace kiln::codegen::cuda {

#if KILN_HAVE_CUDA

namespace {

std::string log_of(nvrtcProgram p) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0) return "";
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return "";
  if (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

} // namespace

Expected<NvrtcOutput> nvrtc_compile(const std::string& source, const std::string& name,
                                    const std::string& arch,
                                    const std::vector<std::string>& options) {
  nvrtcProgram p = nullptr;
  if (nvrtcResult r = nvrtcCreateProgram(&p, source.c_str(), name.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return Error::without_location("NVRTC: can't create a program for " + name + ": " +
                                   nvrtcGetErrorString(r));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&p};
  const std::string arch_option = "--gpu-architecture=" + arch;
  std::vector<const char*> all = {arch_option.c_str(), "--std=c++17", "--ptxas-options=-v"};
  for (const std::string& o : options)
    all.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(all.size()), all.data());
  NvrtcOutput out;
  out.log = log_of(p);
  if (r != NVRTC_SUCCESS)
    return Error::without_location("NVRTC: compiling " + name + " for " + arch +
                                   " failed: " + nvrtcGetErrorString(r) + "\n" + out.log);
  size_t n = 0;
  if (nvrtcGetCUBINSize(p, &n) != NVRTC_SUCCESS || n == 0)
    return Error::without_location("NVRTC: no cubin for " + name + " (" + arch +
                                   " is not a real architecture?)");
  out.cubin.resize(n);
  nvrtcGetCUBIN(p, out.cubin.data());
  if (nvrtcGetPTXSize(p, &n) == NVRTC_SUCCESS && n > 0) {
    out.ptx.resize(n);
    nvrtcGetPTX(p, out.ptx.data());
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  return out;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

bool built_with_cuda() { return true; }

#else

Expected<NvrtcOutput> nvrtc_compile(const std::string&, const std::string& name, const std::string&,
                                    const std::vector<std::string>&) {
  return Error::without_location("can't compile " + name +
                                 ": kiln was built without CUDA (the toolkit was not found; "
                                 "configure with KILN_WITH_CUDA=ON and /usr/local/cuda)");
}

std::string nvrtc_version() { return ""; }

bool built_with_cuda() { return false; }

#endif

std::vector<PtxasReport> ptxas_reports(const std::string& log) {
  std::vector<PtxasReport> out;
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  std::istringstream is(log);
  for (std::string line; std::getline(is, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      out.push_back({m[1].str()});
    } else if (!out.empty() && std::regex_search(line, m, frame)) {
      out.back().stack_bytes = std::stoll(m[1].str());
      out.back().spill_stores = std::stoll(m[2].str());
      out.back().spill_loads = std::stoll(m[3].str());
    } else if (!out.empty() && std::regex_search(line, m, regs)) {
      out.back().registers = std::stoi(m[1].str());
    }
  }
  return out;
}

} // namespace kiln::codegen::cuda
