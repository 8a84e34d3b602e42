// libFuzzer target: parses arbitrary bytes as .kir; on success checks print -> parse -> print.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"

namespace {

std::string print_module(const kiln::ir::ParsedModule& m) {
  std::string text;
  for (size_t i = 0; i < m.graphs.size(); ++i) {
    if (i) text += '\n';
    text += kiln::ir::print(*m.graphs[i]);
  }
  return text;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto first = kiln::ir::parse_module(text, "fuzz.kir");
  if (!first) return 0; // rejected input: fine, as long as nothing crashed
  std::string printed = print_module(*first);
  auto second = kiln::ir::parse_module(printed, "printed.kir");
  if (!second) {
    std::fprintf(stderr, "reparse of printed text failed: %s\n--- printed ---\n%s",
                 second.error().message().c_str(), printed.c_str());
    std::abort();
  }
  std::string reprinted = print_module(*second);
  if (reprinted != printed) {
    std::fprintf(stderr, "print -> parse -> print differs\n--- first ---\n%s--- second ---\n%s",
                 printed.c_str(), reprinted.c_str());
    std::abort();
  }
  return 0;
}
