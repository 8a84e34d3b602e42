// The .kir text parser: the whole format of docs/ir.md, with line:column errors.
#pragma once

#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "runtime/error.h"

namespace kiln::ir {

/// The graphs of one .kir text, and where each node was written (for verifier messages that
/// point at the offending line). `lines` is for lookups only.
struct ParsedModule {
  std::vector<std::unique_ptr<Graph>> graphs;
  std::unordered_map<const Node*, int> lines;
};

/// Parses every graph in `text`. Errors read "FILE:LINE:COL: error: expected ..., got ...".
/// Parsing checks syntax, names (defined once, before use) and attribute kinds against each
/// op's schema; result types are taken as written (the verifier checks them).
Expected<ParsedModule> parse_module(std::string_view text, std::string_view filename = "<input>");
/// Parses a text holding exactly one graph.
Expected<std::unique_ptr<Graph>> parse_graph(std::string_view text,
                                             std::string_view filename = "<input>");

} // namespace kiln::ir
