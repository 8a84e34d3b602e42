// The on-disk kernel cache through kiln::compile, and 64-bit indexing past 2^31 elements.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <kiln/kiln.h>

#include "codegen/cache.h"
#include "frontend/frontend_testing.h"

using namespace kiln;

namespace {

/// These tests clear and corrupt the cache: each process gets its own directory (under the
/// one the test run names), set before anything opens the process-wide cache.
const bool g_private_cache = [] {
  const char* base = std::getenv("KILN_CACHE_DIR");
  std::filesystem::path dir = base && *base ? base : std::filesystem::temp_directory_path();
  dir /= "compiled-cache-test-" + std::to_string(::getpid());
  return ::setenv("KILN_CACHE_DIR", dir.c_str(), 1) == 0;
}();

Tensor chain(const Tensor& x) { return (x * 2 + 1).relu().sum({1}); }

std::vector<std::filesystem::path> entries() {
  std::vector<std::filesystem::path> r;
  for (const auto& e : std::filesystem::directory_iterator(codegen::DiskCache::global().dir()))
    if (e.path().extension() == ".kobj") r.push_back(e.path());
  return r;
}

int64_t compile_and_check(const Tensor& x) {
  auto f = compile(chain);
  Tensor got = f(x);
  std::optional<std::string> m = kiln::testing::close_to_eager(got, chain, x);
  INFO(m.value_or(""));
  CHECK(!m);
  CHECK(f.stats().generated_kernels == 1);
  return f.stats().disk_cache_hits;
}

} // namespace

TEST_CASE("a second compile of the same graph loads its kernels from disk", "[cache][llvm]") {
  REQUIRE(g_private_cache);
  codegen::DiskCache::global().clear();
  manual_seed(11);
  Tensor x = randn({5, 7});
  CHECK(compile_and_check(x) == 0);
  CHECK(entries().size() == 1);
  CHECK(compile_and_check(x) == 1);
}

TEST_CASE("cache keys name the code generator's build", "[cache][llvm]") {
  // Without it, a rebuilt code generator would load the objects of the previous build.
  const std::string& id = codegen::build_id();
  CHECK(id.size() >= 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  codegen::DiskCache::global().clear();
  manual_seed(13);
  compile_and_check(randn({3, 4}));
  REQUIRE(entries().size() == 1);
  std::ifstream in(entries()[0], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("\nbuild " + id + "\n") != std::string::npos);
}

TEST_CASE("a corrupt or truncated cache entry is recompiled", "[cache][llvm]") {
  codegen::DiskCache::global().clear();
  manual_seed(12);
  Tensor x = randn({5, 7});
  CHECK(compile_and_check(x) == 0);
  REQUIRE(entries().size() == 1);
  const std::filesystem::path entry = entries().front();
  {
    // Flip a byte near the end (inside the object code).
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-16, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-16, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  CHECK(compile_and_check(x) == 0); // a miss: compiled again, and right
  CHECK(compile_and_check(x) == 1); // the entry was rewritten
  std::filesystem::resize_file(entry, std::filesystem::file_size(entry) / 2);
  CHECK(compile_and_check(x) == 0);
  CHECK(compile_and_check(x) == 1);
}

TEST_CASE("two processes compiling the same model at once both work", "[cache][llvm]") {
  codegen::DiskCache::global().clear();
  std::vector<pid_t> children;
  for (int k = 0; k < 3; ++k) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        manual_seed(13);
        Tensor x = randn({9, 33});
        for (int round = 0; round < 3; ++round) {
          auto f = compile(chain);
          if (kiln::testing::close_to_eager(f(x), chain, x)) rc = 1;
        }
      } catch (...) {
        rc = 2;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  manual_seed(13);
  Tensor x = randn({9, 33});
  CHECK(compile_and_check(x) == 1);
}

TEST_CASE("kernels index tensors of more than 2^31 elements", "[big][llvm]") {
  // u8 and bool keep this at about 4 GiB. A 32-bit index would wrap and read element 5.
  const int64_t n = (int64_t{1} << 31) + 17;
  const int64_t probe = (int64_t{1} << 31) + 5;
  Tensor x = full({n}, 1, DType::u8);
  x.slice(0, probe, probe + 1).fill_(7);
  auto f = compile([](const Tensor& a) { return (a + 3) > 5; });
  Tensor y = f(x);
  REQUIRE(y.dtype() == DType::bool_);
  REQUIRE(y.numel() == n);
  CHECK(f.stats().generated_kernels == 1);
  std::vector<uint8_t> tail = y.slice(0, probe - 1, n).to(DType::u8).to_vector<uint8_t>();
  CHECK(tail[0] == 0);
  CHECK(tail[1] == 1); // 7 + 3 > 5
  CHECK(tail[2] == 0);
  CHECK(tail.back() == 0);
  CHECK(y.slice(0, 0, 8).to(DType::u8).to_vector<uint8_t>() == std::vector<uint8_t>(8, 0));
}
