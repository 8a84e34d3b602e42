// The kiln command line: one table of subcommands. More arrive with their issues (aot).
#include <iomanip>
#include <iostream>
#include <string_view>
#include <vector>

#include <kiln/kiln.h>

#include "tools/commands.h"

namespace {

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string_view> args);
};

int version_main(std::span<const std::string_view> args) {
  for (std::string_view a : args) {
    if (a == "-h" || a == "--help") {
      std::cout << "usage: kiln version\n\nPrints kiln's version.\n";
      return 0;
    }
    std::cerr << "kiln version: unknown argument '" << a << "' (usage: kiln version)\n";
    return 2;
  }
  std::cout << "kiln " << kiln::version() << "\n";
  return 0;
}

constexpr Subcommand kSubcommands[] = {
    {"zoo", "list the models known by name (built-in and --plugin)", kiln::tools::zoo_main},
    {"run", "run a model eagerly or compiled; check compiled against eager", kiln::tools::run_main},
    {"breaks", "graph-break analyzer: graphs, breaks with code and file:line, guards",
     kiln::tools::breaks_main},
    {"dump", "print a model's (or a .kir file's) graphs as kir, dot or mlir",
     kiln::tools::dump_main},
    {"opt", "parse a .kir file, verify it, run passes, print it", kiln::tools::opt_main},
    {"bench", "benchmarks: eager vs compiled, beside STREAM and oneDNN measured alongside",
     kiln::tools::bench_main},
    {"fuzz", "random programs, eager vs compiled in every mode; findings shrunk to .kir repros",
     kiln::tools::fuzz_main},
    {"aot", "compile a model ahead of time into a shared library with a C ABI",
     kiln::tools::aot_main},
    {"train", "train a zoo model on its synthetic task, eagerly or as one compiled step",
     kiln::tools::train_main},
    {"cache", "the on-disk kernel cache: stats, or clear it", kiln::tools::cache_main},
    {"version", "print the version", version_main},
};

int usage(std::ostream& os) {
  os << "usage: kiln COMMAND [ARGS...]\n\ncommands:\n";
  for (const Subcommand& s : kSubcommands)
    os << "  " << std::left << std::setw(9) << s.name << s.summary << "\n";
  os << "\n`kiln COMMAND --help` describes a command.\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) return usage(std::cerr);
  std::string_view cmd = args.front();
  if (cmd == "--version") cmd = "version";
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage(std::cout);
    return 0;
  }
  for (const Subcommand& s : kSubcommands)
    if (s.name == cmd) return s.run(std::span<const std::string_view>(args).subspan(1));
  std::cerr << "kiln: unknown command '" << cmd << "'\n";
  return usage(std::cerr);
}
