// libFuzzer target: parses arbitrary bytes as loop IR (ir::kernel::parse_kernels); on success
// checks print -> parse -> print and that the verifier, which `kiln opt` runs on every parsed
// kernel, neither crashes nor judges the two parses differently.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ir/kernel/parser.h"
#include "ir/kernel/verifier.h"

namespace {

std::string print_kernels(const std::vector<kiln::ir::kernel::ParsedKernel>& m) {
  std::string text;
  for (const auto& pk : m) {
    if (pk.schedule) text += "// schedule " + *pk.schedule + "\n";
    text += pk.kernel.str();
  }
  return text;
}

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "kernel_parser_fuzzer: %s\n%s\n", what, detail.c_str());
  std::abort();
}

/// The verifier's verdict on k: "" when it verifies, else the message.
std::string verdict(const kiln::ir::kernel::Kernel& k) {
  auto r = kiln::ir::kernel::verify(k);
  return r ? std::string() : r.error().message();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto first = kiln::ir::kernel::parse_kernels(text, "fuzz.kir");
  if (!first) return 0; // rejected input: fine, as long as nothing crashed
  const std::string printed = print_kernels(*first);
  auto second = kiln::ir::kernel::parse_kernels(printed, "printed.kir");
  if (!second)
    fail("reparse of the printed text failed",
         second.error().message() + "\n--- printed ---\n" + printed);
  const std::string reprinted = print_kernels(*second);
  if (reprinted != printed)
    fail("print -> parse -> print differs",
         "--- first ---\n" + printed + "--- second ---\n" + reprinted);
  if (first->size() != second->size()) fail("kernel count differs", printed);
  for (size_t i = 0; i < first->size(); ++i) {
    const std::string va = verdict((*first)[i].kernel), vb = verdict((*second)[i].kernel);
    if (va != vb) fail("the verifier judges the two parses differently", va + "\n" + vb);
  }
  return 0;
}
