// The kiln subcommands: each is a function over its own arguments returning an exit code.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kiln::tools {

/// Reads a whole file, or standard input for "-"; false when it can't be opened or read (a
/// directory, a missing file, no permission), with the reason in `why`. Never throws.
bool read_text(const std::string& path, std::string& text, std::string& why);

/// `kiln opt FILE.kir|- [--passes=a,b] [-o OUT] [--verify-each] [--print-after-all]
/// [--no-verify] [--format kir|dot|mlir]`: parse, verify, run passes, print.
int opt_main(std::span<const std::string_view> args);

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

/// `kiln cache stats|clear`: the on-disk kernel cache ($KILN_CACHE_DIR or ~/.cache/kiln): its
/// directory, entry count and bytes, or remove every entry.
int cache_main(std::span<const std::string_view> args);

} // namespace kiln::tools
