// The child-process side of `kiln fuzz` (hidden flags of the same command): a worker that
// generates and checks a range of programs, a check of one program file, and the writing of
// a program's traced graph as a .kir repro.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/compile.h"
#include "tools/fuzz_program.h"

namespace kiln::tools {

enum class FindingKind : uint8_t { none, invalid, mismatch, compiled_error, crash, hang };
/// "ok", "invalid", "mismatch", "compiled-error", "crash", "hang".
std::string_view finding_kind_name(FindingKind k);
/// The exit status of `kiln fuzz --check` for a finding, and back (a crash is a signal).
int finding_exit_code(FindingKind k);
FindingKind finding_from_exit_code(int code);

/// What checking a program found: the kind, the mode it showed in, the first difference.
struct Finding {
  FindingKind kind = FindingKind::none;
  std::string mode;
  std::string message;
};

/// Checks the program compiled in each mode against eager (fuzz_check.h), up to the first
/// finding. Runs in a child process: a crash ends it.
Finding check_program(const Program& p, std::span<const Mode> modes);

struct WorkerArgs {
  uint64_t seed = 0;
  uint64_t first = 0, count = 0;
  std::vector<std::string> ops;
  std::vector<Mode> modes;
  /// Where each program is written before it runs.
  std::string current_path;
};

/// `kiln fuzz --worker`: programs first .. first+count-1 of the seed, each written to
/// current_path, then checked; prints `start I` and `done I KIND STEPS MODE MESSAGE` lines.
/// A failing program is also written to current_path + ".I".
int worker_main(const WorkerArgs& a);
/// `kiln fuzz --check FILE`: checks one program file; exits finding_exit_code.
int check_main(const std::string& path, std::span<const Mode> modes);
/// `kiln fuzz --emit-kir FILE -o OUT`: writes `header` and the program's traced graph.
int emit_kir_main(const std::string& path, const std::string& out, const std::string& header);

} // namespace kiln::tools
