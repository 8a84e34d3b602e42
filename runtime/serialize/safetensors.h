// safetensors: save and load named tensors in the Hugging Face safetensors format.
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]}, ...}, then the data buffer the offsets index (row-major
// little-endian elements). Dtype names: F64 F32 F16 BF16 I64 I32 I8 U8 BOOL.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "runtime/tensor.h"

namespace kiln {

/// Writes the tensors (any layout, dtype and device; copied to the host contiguously) with keys
/// in sorted order and the header padded with spaces to a multiple of 8 bytes. The file is
/// written to a temporary name in the same directory, flushed and renamed over `path`, so a
/// reader never sees a partial file. Names, metadata keys and values must be valid UTF-8 (the
/// format's header is UTF-8 JSON): anything else is refused before the file is touched. Throws
/// kiln::Error naming the path (and the bad key) on failure.
void save(const std::map<std::string, Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of a safetensors file into new CPU tensors. The file is validated before
/// any data is read: header size and JSON syntax, each entry's dtype, shape and offsets, and
/// that the offsets tile the data buffer exactly. Every problem is a kiln::Error naming the
/// file and what is wrong.
std::map<std::string, Tensor> load(const std::string& path);

/// load() on a safetensors file held in memory (a network buffer, a fuzzer's input); `name`
/// stands for the path in messages.
std::map<std::string, Tensor> load_bytes(std::string_view bytes, const std::string& name);

/// The "__metadata__" string map of a safetensors file (empty when absent); validates the
/// whole header as load does but reads no tensor data.
std::map<std::string, std::string> load_metadata(const std::string& path);

} // namespace kiln
