// check_object: the structural validation of an ELF object before the JIT links it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/error.h"

namespace kiln::codegen::cpu {

/// Checks that `object` is a well-formed 64-bit little-endian relocatable ELF file for the host
/// machine, so that LLVM's JITLink (which trusts the file's structure) can read all of it
/// without leaving the buffer. Checked: the ELF header; the section header table and every
/// section's bytes inside the buffer (sizes and offsets without overflow, power-of-two
/// alignment up to 64 KiB, zero-fill sections up to 256 MiB); section names; string tables
/// (NUL first and last); one symbol table of whole entries linked to a string table, with an
/// all-zero null symbol, locals first, every name inside it, every section index in range,
/// every defined symbol inside its section and every undefined one named, with value 0;
/// relocation tables of whole entries linked to the symbol table, aimed at a section in range,
/// with every symbol index in range (the null symbol only for no-op relocations) and every
/// patched field inside the target section. The object is also held to what kiln's kernel
/// objects contain: sections of code, constants, data, relocations and tables only (no
/// .eh_frame, init arrays, groups, thread-local or compressed sections), plain symbols (no
/// common, thread-local or indirect ones) and plain data and branch relocations (no GOT, PLT
/// or TLS forms): nothing JITLink would register, run or build on the object's word.
/// Needs no LLVM (the cache fuzzer runs it). Fails with an error naming the first problem found.
/// `object` may also be a bundle of such objects (split_objects): each is checked.
Expected<void> check_object(std::string_view object);

/// The ELF objects in a code blob: the blob itself, or the objects of a bundle: "KILNOBJS", a
/// little-endian u32 count (2 to 256), then each object as a little-endian u64 length and its
/// bytes, nothing after the last. Kernels compiled on several threads come as a bundle; the
/// JIT links every object of it into one library. A malformed bundle is an error.
Expected<std::vector<std::string_view>> split_objects(std::string_view blob);

/// Bundles objects (at least two) as split_objects reads them.
std::string bundle_objects(std::span<const std::string> objects);

} // namespace kiln::codegen::cpu
