// The loop IR's verifier: the invariants a kernel must satisfy before code generation.
#pragma once

#include <string_view>

#include "ir/kernel/kernel.h"
#include "ir/kernel/parser.h"
#include "runtime/error.h"

namespace kiln::ir::kernel {

/// What a verifier error is about: an instruction id, a loop index or a buffer index (-1 when
/// not; all -1 for an error about the whole kernel).
struct VerifyFailure {
  int instr = -1;
  int loop = -1;
  int buffer = -1;
};

/// Checks the rules of docs/ir.md ("The loop IR", verifier):
/// - the domain: extents >= 0 whose product fits int64; buffers named once, extents >= 0;
/// - structure: every item is one instruction or one loop, every instruction sits in exactly
///   one item or loop body, every loop in exactly one item;
/// - values: every operand is an instruction defined earlier in program order and not a
///   store; a value defined in a loop is used only in that loop, except a reduce result,
///   which is used only after its loop;
/// - indices: variables < num_vars, divisors > 0, no inner variable at outer level, the
///   operand of every / and % >= 0, and the index's range over the variables' ranges
///   (computed conservatively, in int64 without overflow) inside the buffer's [0, extent);
/// - kinds: operand counts per kind and op arity; `op` only for the pointwise ops code
///   generation lowers; reduce (sum, prod, amax, amin, argmax, argmin) only in reduce loops,
///   `along` an inner variable exactly for argmax/argmin; stores only to `out` buffers, and
///   every `out` buffer stored;
/// - dtypes: load/store dtype = buffer dtype = stored value's; reduce dtype = operand's (i64
///   for argmax/argmin); comparisons and logical ops give bool; transcendental ops, div and
///   pow are floating; other ops read their own dtype (an f16/bf16 op may read f32);
///   constants fit their dtype.
/// The first violation is returned; its message names the kernel and the instruction as the
/// printer numbers it ("kernel k0: %3 = load: ..."); `failed` receives what it is about.
Expected<void> verify(const Kernel& k, VerifyFailure* failed = nullptr);

/// verify() of a parsed kernel, the message prefixed with "FILE:LINE:COL: error: " of the
/// instruction, loop or buffer it is about (else of the `kernel` keyword).
Expected<void> verify(const ParsedKernel& k, std::string_view file_name);

} // namespace kiln::ir::kernel
