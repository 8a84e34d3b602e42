// The kiln subcommands: each is a function over its own arguments returning an exit code.
#pragma once

#include <span>
#include <string_view>

namespace kiln::tools {

/// `kiln opt FILE.kir|- [--passes=a,b] [-o OUT] [--verify-each] [--print-after-all]
/// [--no-verify] [--format kir|dot|mlir]`: parse, verify, run passes, print.
int opt_main(std::span<const std::string_view> args);

} // namespace kiln::tools
