// libFuzzer target: parses arbitrary bytes as .kir; on success checks print -> parse -> print,
// that the reparsed graphs are structurally equal, and that the verifier (which `kiln opt`
// runs on every parsed input) neither crashes nor judges the two parses differently.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace {

std::string print_module(const kiln::ir::ParsedModule& m) {
  std::string text;
  for (size_t i = 0; i < m.graphs.size(); ++i) {
    if (i) text += '\n';
    text += kiln::ir::print(*m.graphs[i]);
  }
  return text;
}

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "parser_fuzzer: %s\n%s\n", what, detail.c_str());
  std::abort();
}

/// The verifier's verdict on g: "" when it verifies, else the message.
std::string verdict(const kiln::ir::Graph& g) {
  auto r = kiln::ir::verify(g);
  return r ? std::string() : r.error().message();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto first = kiln::ir::parse_module(text, "fuzz.kir");
  if (!first) return 0; // rejected input: fine, as long as nothing crashed
  std::string printed = print_module(*first);
  auto second = kiln::ir::parse_module(printed, "printed.kir");
  if (!second)
    fail("reparse of the printed text failed",
         second.error().message() + "\n--- printed ---\n" + printed);
  std::string reprinted = print_module(*second);
  if (reprinted != printed)
    fail("print -> parse -> print differs",
         "--- first ---\n" + printed + "--- second ---\n" + reprinted);
  if (first->graphs.size() != second->graphs.size()) fail("graph count differs", printed);
  for (size_t i = 0; i < first->graphs.size(); ++i) {
    const kiln::ir::Graph& a = *first->graphs[i];
    const kiln::ir::Graph& b = *second->graphs[i];
    if (!kiln::ir::structurally_equal(a, b) ||
        kiln::ir::structural_hash(a) != kiln::ir::structural_hash(b))
      fail("the reparsed graph is not structurally equal (or hashes differently)", printed);
    std::string va = verdict(a), vb = verdict(b);
    if (va != vb) fail("the verifier judges the two parses differently", va + "\n" + vb);
  }
  return 0;
}
