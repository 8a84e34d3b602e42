// Structural hash and equality of graphs: what keys compile caches.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace kiln::ir {

/// A hash over the graph's structure: input kinds and types, constant data, ops,
/// attributes, result types, wiring, outputs and writes. Value names, input names, graph
/// names and source locations do not take part. Structurally equal graphs hash equal.
uint64_t structural_hash(const Graph& g);
/// Equality over the same structure; a cache hit is decided by this, never by the hash.
bool structurally_equal(const Graph& a, const Graph& b);
/// The canonical byte encoding both are computed from: two graphs are structurally equal
/// exactly when their keys are equal, and structural_hash(g) == key_hash(structural_key(g)).
/// A cache that keeps keys encodes each looked-up graph once.
std::string structural_key(const Graph& g);
uint64_t key_hash(std::string_view key);

} // namespace kiln::ir
