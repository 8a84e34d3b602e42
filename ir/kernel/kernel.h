// Kernel: the loop IR of one fused group (docs/ir.md, "The loop IR").
//
// A kernel iterates an outer domain (the parallel one) and, for reductions, an inner domain.
// Loop variables 0..outer-1 are the outer indices, outer..outer+inner-1 the inner ones. The
// body is a sequence of items at outer level: instructions, evaluated once per outer index,
// and inner loops, each running its instructions over the whole inner domain. A `reduce`
// loop folds values into accumulators whose results are outer-level values after the loop;
// a `map` loop stores. Values are SSA: instruction k defines value k.
//
// Each value has the dtype of the graph value it computes. f16/bf16 values are carried at
// f32 precision but are always rounded to their dtype (as the eager kernels store them), so
// a fused chain gives the eager result bit for bit. Operand conversions are explicit `cast`s,
// except that an f16/bf16 op may read an f32 value (PyTorch's precise scalar operand).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/kernel/index.h"
#include "runtime/dtype.h"
#include "runtime/ops/op.h"

namespace kiln::ir::kernel {

/// A buffer the kernel reads or writes: a contiguous or strided tensor's data, addressed by
/// element index (strides are folded into the index expressions).
struct Buffer {
  std::string name;
  DType dtype = DType::f32;
  bool output = false;
  /// Largest element index + 1 the kernel may touch (for the 32-bit index question).
  int64_t extent = 0;
};

struct Instr {
  enum class Kind : uint8_t {
    load,     // buffer[index]
    constant, // value (in dtype)
    op,       // pointwise op of the op table over args
    cast,     // args[0] converted to dtype (the eager conversion rules)
    reduce,   // fold args[0] with op (sum, prod, amax, amin, argmax, argmin); in a reduce loop
    store,    // buffer[index] = args[0]
  };
  Kind kind = Kind::op;
  Op op = Op::add;
  DType dtype = DType::f32;
  std::vector<int> args;
  int buffer = -1;
  Index index;
  double value = 0; // constant (integers up to 2^53 exactly)
  int64_t ivalue = 0;
  /// For argmax/argmin: the inner variable the index is taken along.
  int arg_var = -1;
};

struct Loop {
  enum class Kind : uint8_t { reduce, map };
  Kind kind = Kind::map;
  std::vector<int> body; // instruction ids, in order
};

/// An outer-level step: one instruction, or one inner loop.
struct Item {
  int instr = -1; // >= 0: an instruction
  int loop = -1;  // >= 0: a loop
};

struct Part;

struct Kernel {
  std::string name;
  std::vector<Buffer> buffers;
  std::vector<int64_t> outer;
  std::vector<int64_t> inner;
  std::vector<Instr> instrs;
  std::vector<Loop> loops;
  std::vector<Item> items;
  /// A foreach kernel (horizontal fusion, docs/ir.md "Foreach kernels"): independent
  /// pointwise kernels of one body run as one, each on its own buffers. Then the kernel has
  /// no instructions of its own; `outer` is one dim of all parts' points, `buffers` all the
  /// parts' buffers (inputs, then outputs), and each part is a plain one-dimensional kernel
  /// over its own buffers, which name the kernel's (Part::buffers).
  std::vector<Part> parts;

  int num_vars() const { return static_cast<int>(outer.size() + inner.size()); }
  std::vector<int64_t> extents() const;
  int64_t outer_numel() const;
  /// Whether output buffer `out` may share memory with input buffer `in` (an in-place
  /// kernel, when the input dies here): both of one dtype and extent, each store to out
  /// writes every element once at one index, and every load of `in` reads the element the
  /// stores write, before the first store. Then no element of `in` is read after it is
  /// overwritten, on any thread. Of a foreach kernel: within a part, for an input no other
  /// part reads.
  bool may_write_over(int out, int in) const;
  /// The full text form: the on-disk cache keys on it, so it names everything the generated
  /// code depends on.
  std::string str() const;
};

/// One kernel of a foreach kernel: its body over its own buffers, and for each of them the
/// foreach kernel's buffer it is.
struct Part {
  Kernel kernel;
  std::vector<int> buffers;
};

} // namespace kiln::ir::kernel
