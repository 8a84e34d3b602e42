// libFuzzer target: reads arbitrary bytes as a kernel-cache entry (parse_cache_entry), and the
// payload of every entry as an object (check_object). The checksum is repaired first when only
// it is wrong, so that mutations reach the object checker. With KILN_FUZZ_LINK set (the
// default in run_fuzzer.sh), every object check_object accepts is also linked by the JIT and
// its kernel looked up: a crash there is a hole in check_object.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "codegen/cache.h"
#include "codegen/cpu/jit.h"
#include "codegen/cpu/object_check.h"

namespace {

constexpr size_t kHeaderSize = 40;
constexpr size_t kChecksumAt = 32;

[[noreturn]] void fail(const char* what, const char* detail) {
  std::fprintf(stderr, "cache_fuzzer: %s\n%s\n", what, detail);
  std::abort();
}

const bool g_link = std::getenv("KILN_FUZZ_LINK") != nullptr;

void check_payload(std::string_view object) {
  if (!kiln::codegen::cpu::check_object(object) || !g_link) return;
  try {
    auto lib = kiln::codegen::cpu::load_object(object, "fuzz");
    (void)lib->lookup("kiln_k0");
  } catch (const kiln::Error&) {
    // refused by the JIT with a clear error: fine
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::string why;
    auto entry = kiln::codegen::parse_cache_entry(bytes, &why);
    if (!entry && why == "payload checksum mismatch") {
      // The lengths matched the size, so the payload is everything after the key.
      uint64_t key_len = 0;
      std::memcpy(&key_len, bytes.data() + 16, sizeof key_len);
      uint64_t sum = kiln::codegen::fnv1a(std::string_view(bytes).substr(kHeaderSize + key_len));
      std::memcpy(bytes.data() + kChecksumAt, &sum, sizeof sum);
      entry = kiln::codegen::parse_cache_entry(bytes, &why);
      if (!entry) fail("a repaired checksum still fails", why.c_str());
    }
    if (!entry) {
      if (why.empty()) fail("a rejected entry gives no reason", "");
      return 0;
    }
    if (entry->key.size() + entry->payload.size() + kHeaderSize != bytes.size())
      fail("the key and the payload do not cover the entry", "");
    check_payload(entry->payload);
  } catch (const std::exception& e) {
    fail("an exception escaped the entry reader or the object checker", e.what());
  }
  return 0;
}
