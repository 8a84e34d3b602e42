// The kiln subcommands: each is a function over its own arguments returning an exit code.
#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::tools {

/// Reads a whole file, or standard input for "-"; false when it can't be opened or read (a
/// directory, a missing file, no permission), with the reason in `why`. Never throws.
bool read_text(const std::string& path, std::string& text, std::string& why);

/// `kiln opt FILE.kir|- [--passes=a,b] [-o OUT] [--verify-each] [--print-after-all]
/// [--no-verify] [--format kir|dot|mlir] [--kernel] [--run] [--input NAME=v,v,...]...`: parse,
/// verify, run passes, print; on loop IR (ir::kernel::is_kernel_text, or --kernel) parse,
/// verify and print the kernels, or with --run execute them (opt_kernels).
int opt_main(std::span<const std::string_view> args);

/// What `kiln opt` does with loop IR.
struct KernelOptOptions {
  bool verify = true; // --no-verify turns it off, except under --run
  bool run = false;
  /// "NAME=v,v,..." (--input): the initial contents of every kernel buffer named NAME.
  std::vector<std::string> inputs;
};

/// The loop-IR half of `kiln opt`: parses every kernel of `text` (with its schedule line),
/// verifies it and prints it as Kernel::str() does, after a "// schedule ..." line where the
/// kernel had one. With `run`, compiles the kernels with the CPU JIT under their schedules
/// (the heuristic's where none is given) and runs each over all its rows on the calling
/// thread: input buffers hold their --input values, else element i holds i (bools: i odd);
/// output buffers start as zeros. Prints "// kernel NAME" and then "OUT = [v, ...]" per output
/// buffer (%.9g for f32/f16/bf16, %.17g for f64). Errors go to stderr; returns the exit code.
int opt_kernels(const std::string& text, const std::string& file, const KernelOptOptions& o,
                std::ostream& out);

/// `kiln zoo [--plugin LIB.so]...`: lists every model known by name (the zoo and each
/// plugin's) with its default input and summary.
int zoo_main(std::span<const std::string_view> args);

/// `kiln run MODEL [--mode M] [--input SPEC] [--seed N] [--weights F] [--save-weights F]
/// [--iters N]`: runs a model eagerly or compiled; prints output checksum, timings, compile
/// counters, and (compiled) whether the output matches eager (bit for bit, or else by the
/// f64-reference rule; exit 1 if not). `kiln run FILE.kir [--seed N] [--specials] [--mode M]`
/// does the same for a graph, interpreted node by node, on inputs drawn from the seed.
int run_main(std::span<const std::string_view> args);

/// `kiln breaks MODEL [--json] [--fail-on-break] [--input SPEC] [--seed N]`: the graph-break
/// analyzer (kiln::explain on the model's forward).
int breaks_main(std::span<const std::string_view> args);

/// `kiln dump MODEL|FILE.kir|- [--stage traced|simplified|all|fused|kernels|llvm|plan]
/// [--format kir|dot|mlir] [-o OUT]`:
/// the IR of a model's forward or of a .kir file at a stage of compilation.
int dump_main(std::span<const std::string_view> args);

/// `kiln bench [WORKLOAD|MODEL...] [--modes M,...] [--reps N] [--warmup N] [--json FILE]`:
/// the benchmark workloads, eager and compiled, beside references measured in the same run.
int bench_main(std::span<const std::string_view> args);

/// `kiln fuzz [--seed S] [--time SEC] [--ops LIST] [--modes LIST] [--out DIR]`: random valid
/// programs, eager vs compiled in every mode, in child processes; findings shrunk to .kir
/// repros. Ends with `N programs, M mismatches, K crashes`; exit 1 when M + K > 0.
int fuzz_main(std::span<const std::string_view> args);

/// `kiln aot MODEL|FILE.kir -o DIR [--weights F] [--embed-weights] [--cpu C] [--name N]`: the
/// model compiled ahead of time into DIR/libN.so with the C ABI of kiln_aot.h (tools/aot.cpp).
int aot_main(std::span<const std::string_view> args);

/// `kiln train MODEL [--steps N] [--compile] [--mode M] [--optimizer adamw|sgd] [--lr X]
/// [--seed N]`: trains a zoo model on its synthetic task (models/train.h), eagerly or compiled,
/// printing loss and step time; exit 1 when the loss did not reach the task's target.
int train_main(std::span<const std::string_view> args);

/// `kiln cache stats|clear`: the on-disk kernel cache ($KILN_CACHE_DIR or ~/.cache/kiln): its
/// directory, entry count and bytes, or remove every entry.
int cache_main(std::span<const std::string_view> args);

} // namespace kiln::tools
