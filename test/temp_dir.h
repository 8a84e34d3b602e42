// TempDir: a fresh directory path under the system temp dir for one test, removed with
// everything in it at the end.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::testing {

struct TempDir {
  std::filesystem::path dir;
  /// `prefix` names the test ("kiln_cache"); with `create`, the directory exists at once,
  /// otherwise only its path is reserved (nothing is there).
  explicit TempDir(const std::string& prefix, bool create = true) {
    static int counter = 0;
    dir = std::filesystem::temp_directory_path() /
          (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(dir);
    if (create) std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

} // namespace kiln::testing
