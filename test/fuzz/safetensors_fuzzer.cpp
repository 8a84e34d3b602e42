// libFuzzer target: reads arbitrary bytes as a safetensors file (kiln::load_bytes). A
// kiln::Error is a fine answer; any other exception, a crash or a sanitizer report is a bug.
// What loads must be consistent: every tensor on the CPU, contiguous, and (for BOOL) 0 or 1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "runtime/serialize/safetensors.h"

namespace {

[[noreturn]] void fail(const char* what, const char* detail) {
  std::fprintf(stderr, "safetensors_fuzzer: %s\n%s\n", what, detail);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    auto tensors = kiln::load_bytes(bytes, "fuzz.safetensors");
    for (const auto& [name, t] : tensors) {
      if (!t.is_contiguous()) fail("a loaded tensor is not contiguous", name.c_str());
      if (t.dtype() == kiln::DType::bool_) {
        const auto* p = static_cast<const unsigned char*>(t.raw_data());
        for (int64_t i = 0; i < t.numel(); ++i)
          if (p[i] > 1) fail("a loaded BOOL tensor holds a byte other than 0 and 1", name.c_str());
      }
    }
  } catch (const kiln::Error&) {
    // rejected input: fine, as long as nothing crashed
  } catch (const std::exception& e) {
    fail("an exception other than kiln::Error escaped load_bytes", e.what());
  }
  return 0;
}
