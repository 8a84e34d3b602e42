// DiskCache: hits, every kind of bad entry as a miss, clear/stats, and processes racing.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cache.h"
#include "temp_dir.h"

using kiln::codegen::DiskCache;
namespace fs = std::filesystem;

namespace {

/// A fresh directory path for one test (not created: the cache creates it).
struct TempDir : kiln::testing::TempDir {
  TempDir() : kiln::testing::TempDir("kiln_cache", false) {}
};

/// Bytes that look like an object file: every byte value, in an order that depends on `seed`.
std::string object_bytes(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
void put_u64(std::string& s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

/// Waits for every child and checks each exited 0; children report a failure by exit code.
void expect_children_ok(const std::vector<pid_t>& children) {
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("child " << pid << " status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

const std::string kKey = "kernel fused_add_relu\nschedule tile=64 vec=8\ntarget x86_64 avx2\n";
constexpr size_t kHeaderSize = 40;

} // namespace

TEST_CASE("cache: store then load gives the bytes back", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  REQUIRE(cache.enabled());
  const std::string obj = object_bytes(5000, 1);
  cache.store(kKey, obj);
  std::optional<std::string> got = cache.load(kKey);
  REQUIRE(got.has_value());
  CHECK(*got == obj);

  // Overwriting replaces the bytes; an empty payload is a valid entry too.
  const std::string obj2 = object_bytes(77, 2);
  cache.store(kKey, obj2);
  CHECK(cache.load(kKey) == obj2);
  cache.store("empty", "");
  CHECK(cache.load("empty") == std::string());

  // Another DiskCache on the same directory (another process, later) sees the entries.
  DiskCache again(t.dir);
  CHECK(again.load(kKey) == obj2);
  CHECK(again.stats().entries == 2);
}

TEST_CASE("cache: an absent key is a miss", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  cache.store(kKey, "bytes");
  std::string why;
  CHECK_FALSE(cache.load(kKey + "x", &why).has_value());
  CHECK(why == "no entry");
  CHECK_FALSE(cache.load("", &why).has_value());
  CHECK(cache.load(kKey) == std::string("bytes"));
}

TEST_CASE("cache: the entry holds the key and the payload after a header", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  cache.store(kKey, "payload");
  const fs::path p = cache.entry_path(kKey);
  CHECK(p.parent_path() == t.dir);
  CHECK(p.filename().string().size() == 16 + 5);
  CHECK(p.extension() == ".kobj");
  const std::string file = read_file(p);
  REQUIRE(file.size() == kHeaderSize + kKey.size() + 7);
  CHECK(file.substr(0, 8) == "KILNOBJ1");
  CHECK(file.substr(kHeaderSize, kKey.size()) == kKey);
  CHECK(file.substr(kHeaderSize + kKey.size()) == "payload");
  // 0600 (less only under a strange umask): never readable by others.
  const fs::perms perms = fs::status(p).permissions();
  CHECK((perms & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK((perms & fs::perms::owner_exec) == fs::perms::none);
  // No temp file left behind.
  CHECK(std::distance(fs::directory_iterator(t.dir), fs::directory_iterator()) == 1);
}

TEST_CASE("cache: a flipped payload byte is a miss", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  const std::string obj = object_bytes(4096, 3);
  cache.store(kKey, obj);
  const fs::path p = cache.entry_path(kKey);
  const std::string good = read_file(p);
  for (size_t at : {kHeaderSize + kKey.size(), good.size() / 2 + 20, good.size() - 1}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    write_file(p, bad);
    std::string why;
    INFO("flipped byte " << at);
    CHECK_FALSE(cache.load(kKey, &why).has_value());
    CHECK(why == "payload checksum mismatch");
  }
  write_file(p, good);
  CHECK(cache.load(kKey) == obj);
}

TEST_CASE("cache: a bad magic or version is a miss", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  cache.store(kKey, "payload");
  const fs::path p = cache.entry_path(kKey);
  const std::string good = read_file(p);
  std::string why;
  std::string bad = good;
  bad[3] = 'X';
  write_file(p, bad);
  CHECK_FALSE(cache.load(kKey, &why).has_value());
  CHECK(why == "bad magic");
  bad = good;
  bad[8] = 2; // version 2
  write_file(p, bad);
  CHECK_FALSE(cache.load(kKey, &why).has_value());
  CHECK(why == "format version 2, expected 1");
}

TEST_CASE("cache: a truncated entry is a miss at every length", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  const std::string obj = object_bytes(300, 4);
  cache.store(kKey, obj);
  const fs::path p = cache.entry_path(kKey);
  const std::string good = read_file(p);
  // Inside the header, at its end, inside the key, at its end, inside the payload, one short.
  for (size_t len : {size_t{0}, size_t{7}, size_t{20}, kHeaderSize, kHeaderSize + 5,
                     kHeaderSize + kKey.size(), kHeaderSize + kKey.size() + 150, good.size() - 1}) {
    write_file(p, good.substr(0, len));
    INFO("cut at " << len << " of " << good.size());
    std::string why;
    CHECK_FALSE(cache.load(kKey, &why).has_value());
    if (len < kHeaderSize)
      CHECK_THAT(why, Catch::StartsWith("truncated: "));
    else
      CHECK_THAT(why, Catch::StartsWith("lengths (key "));
  }
  // Trailing garbage is as wrong as a missing tail.
  write_file(p, good + "x");
  CHECK_FALSE(cache.load(kKey).has_value());
}

TEST_CASE("cache: another key's entry under this key's name is a miss", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  const std::string other = "kernel other";
  const std::string same_length = std::string(kKey.size() - 1, 'k') + "!";
  cache.store(kKey, "bytes of kKey");
  // As if the two keys' hashes collided: kKey's entry sits where `other`'s would.
  fs::rename(cache.entry_path(kKey), cache.entry_path(other));
  std::string why;
  CHECK_FALSE(cache.load(other, &why).has_value());
  CHECK_THAT(why, Catch::StartsWith("key mismatch"));
  CHECK_FALSE(cache.load(kKey).has_value());
  // A key of the same length: only the full comparison can tell them apart.
  fs::rename(cache.entry_path(other), cache.entry_path(same_length));
  CHECK_FALSE(cache.load(same_length, &why).has_value());
  CHECK(why == "key mismatch: another key with the same hash");
}

TEST_CASE("cache: a symlink or a non-regular file as the entry is a miss", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  cache.store("other", "the other entry's bytes");
  // A symlink to a valid entry with the right key would be a hit if followed.
  cache.store(kKey, "the real bytes");
  const fs::path real = t.dir / "real.kobj";
  fs::rename(cache.entry_path(kKey), real);
  fs::create_symlink(real, cache.entry_path(kKey));
  std::string why;
  CHECK_FALSE(cache.load(kKey, &why).has_value());
  CHECK(why == "the entry is a symlink");

  fs::remove(cache.entry_path(kKey));
  fs::create_directory(cache.entry_path(kKey));
  CHECK_FALSE(cache.load(kKey, &why).has_value());
  CHECK(why == "the entry is not a regular file");
  fs::remove(cache.entry_path(kKey));
  // A FIFO: opening it must not block.
  REQUIRE(::mkfifo(cache.entry_path(kKey).c_str(), 0600) == 0);
  CHECK_FALSE(cache.load(kKey, &why).has_value());
  CHECK(why == "the entry is not a regular file");
  CHECK(cache.load("other") == std::string("the other entry's bytes"));
}

TEST_CASE("cache: an entry owned by another user is a miss", "[cache]") {
  if (::geteuid() != 0) {
    WARN("skipped: only root can give a file to another user");
    return;
  }
  TempDir t;
  DiskCache cache(t.dir);
  cache.store(kKey, "bytes");
  REQUIRE(::chown(cache.entry_path(kKey).c_str(), 12345, 12345) == 0);
  std::string why;
  CHECK_FALSE(cache.load(kKey, &why).has_value());
  CHECK_THAT(why, Catch::StartsWith("the entry is owned by uid 12345"));
}

TEST_CASE("cache: a huge declared length is a miss without a huge allocation", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  cache.store(kKey, object_bytes(100, 5));
  const fs::path p = cache.entry_path(kKey);
  const std::string good = read_file(p);
  const uint64_t body = good.size() - kHeaderSize;
  struct Lengths {
    uint64_t key, payload;
  };
  for (Lengths l : {Lengths{kKey.size(), uint64_t{1} << 32}, // payload 4 GiB
                    Lengths{kKey.size(), ~uint64_t{0}},      // payload 2^64-1
                    Lengths{uint64_t{1} << 40, 100},         // key 1 TiB
                    Lengths{~uint64_t{0} - 9, body + 10},    // sum wraps to fit
                    Lengths{kKey.size() + (uint64_t{1} << 31), body - kKey.size()}}) {
    std::string bad = good;
    put_u64(bad, 16, l.key);
    put_u64(bad, 24, l.payload);
    write_file(p, bad);
    // In a child under a 256 MiB address-space limit beyond what it maps now: allocating what
    // the header claims throws (escaping load) or fails the child.
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
#if !defined(__SANITIZE_ADDRESS__)
      long pages = 0;
      if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
        std::fclose(f);
      }
      if (pages > 0) {
        rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                       (rlim_t{256} << 20);
        rlimit r{limit, limit};
        ::setrlimit(RLIMIT_AS, &r);
      }
#endif
      try {
        std::string why;
        bool missed = !cache.load(kKey, &why).has_value();
        ::_exit(missed && why.starts_with("lengths (key ") ? 0 : 1);
      } catch (...) {
        ::_exit(2);
      }
    }
    INFO("key length " << l.key << ", payload length " << l.payload);
    expect_children_ok({pid});
  }
  write_file(p, good);
  CHECK(cache.load(kKey).has_value());
}

TEST_CASE("cache: clear removes the entries and stats counts them", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  CHECK(cache.stats().entries == 0);
  CHECK(cache.stats().bytes == 0);
  cache.store("a", "1234");
  cache.store("bb", "12345678");
  cache.store("a", "123"); // replaces, not a third entry
  DiskCache::Stats s = cache.stats();
  CHECK(s.entries == 2);
  CHECK(s.bytes == static_cast<int64_t>(2 * kHeaderSize + 1 + 3 + 2 + 8));
  // A temp file left by a store that died, and a file that is not the cache's.
  const fs::path stale = t.dir / (cache.entry_path("a").filename().string() + ".tmp.99.1.2");
  write_file(stale, "half an entry");
  write_file(t.dir / "autotune.json", "{}");
  CHECK(cache.stats().entries == 2);

  CHECK(cache.clear() == 2);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(t.dir / "autotune.json"));
  CHECK(cache.stats().entries == 0);
  CHECK_FALSE(cache.load("a").has_value());
  CHECK(cache.clear() == 0);
  cache.store("a", "again");
  CHECK(cache.load("a") == std::string("again"));
}

TEST_CASE("cache: the directory is created owner-only", "[cache]") {
  TempDir t;
  const fs::path nested = t.dir / "deeper" / "kiln";
  DiskCache cache(nested);
  REQUIRE(cache.enabled());
  struct stat st {};
  REQUIRE(::lstat(nested.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  // Even under a umask that would take the owner's bits off.
  const mode_t saved = ::umask(0277);
  DiskCache strict(t.dir / "strict");
  ::umask(saved);
  REQUIRE(::lstat((t.dir / "strict").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  strict.store(kKey, "bytes");
  CHECK(strict.load(kKey) == std::string("bytes"));
  // A trailing slash names the same directory.
  DiskCache slash(nested.string() + "/");
  CHECK(slash.enabled());
  CHECK(slash.dir() == nested);
}

TEST_CASE("cache: a symlinked or foreign directory disables the cache", "[cache]") {
  TempDir t;
  const fs::path real = t.dir / "real";
  DiskCache(real).store(kKey, "bytes");
  const fs::path link = t.dir / "link";
  fs::create_directory_symlink(real, link);
  for (const fs::path& dir : {link, fs::path(link.string() + "/")}) {
    DiskCache cache(dir);
    CHECK_FALSE(cache.enabled());
    CHECK(cache.disabled_reason() == "it is a symlink");
    std::string why;
    CHECK_FALSE(cache.load(kKey, &why).has_value());
    CHECK(why == "the cache is disabled: it is a symlink");
    cache.store("new", "bytes");
    CHECK(cache.stats().entries == 0);
    CHECK(cache.clear() == 0);
  }
  CHECK_FALSE(fs::exists(DiskCache(real).entry_path("new")));
  CHECK(DiskCache(real).load(kKey).has_value());

  write_file(t.dir / "file", "x");
  DiskCache on_file(t.dir / "file");
  CHECK_FALSE(on_file.enabled());
  CHECK(on_file.disabled_reason() == "it is not a directory");

  if (::geteuid() == 0) {
    REQUIRE(::chown(real.c_str(), 12345, 12345) == 0);
    DiskCache foreign(real);
    CHECK_FALSE(foreign.enabled());
    CHECK_THAT(foreign.disabled_reason(), Catch::StartsWith("it is owned by uid 12345"));
    CHECK_FALSE(foreign.load(kKey).has_value());
  }
}

TEST_CASE("cache: processes storing and loading at once all see whole entries", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  constexpr int kChildren = 4, kRounds = 60;
  // Every child stores its own version of the shared key: a load must give one of them whole.
  // Big enough that a non-atomic write could be seen half done.
  std::vector<std::string> shared;
  for (int c = 0; c < kChildren; ++c)
    shared.push_back(object_bytes(size_t{64} << 10, static_cast<unsigned>(c)));
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        const DiskCache mine(t.dir);
        const std::string own_key = "own " + std::to_string(c);
        const std::string own = object_bytes(3000 + static_cast<size_t>(c), 100 + c);
        for (int r = 0; r < kRounds && code == 0; ++r) {
          mine.store("shared", shared[static_cast<size_t>(c)]);
          std::optional<std::string> got = mine.load("shared");
          if (!got)
            code = 3;
          else if (std::find(shared.begin(), shared.end(), *got) == shared.end())
            code = 4;
          mine.store(own_key, own);
          if (mine.load(own_key) != own) code = 5;
        }
      } catch (...) {
        code = 6;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  expect_children_ok(children);
  std::optional<std::string> got = cache.load("shared");
  REQUIRE(got.has_value());
  CHECK(std::find(shared.begin(), shared.end(), *got) != shared.end());
  for (int c = 0; c < kChildren; ++c)
    CHECK(cache.load("own " + std::to_string(c)) ==
          object_bytes(3000 + static_cast<size_t>(c), 100 + c));
  CHECK(cache.stats().entries == kChildren + 1);
  // No temp file left behind.
  CHECK(std::distance(fs::directory_iterator(t.dir), fs::directory_iterator()) == kChildren + 1);
}

TEST_CASE("cache: loads racing with clear miss or give whole entries", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  const std::string obj = object_bytes(size_t{32} << 10, 9);
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        const DiskCache mine(t.dir);
        for (int r = 0; r < 80 && code == 0; ++r) {
          if (c == 0) {
            mine.clear();
            continue;
          }
          mine.store("k", obj);
          std::optional<std::string> got = mine.load("k");
          if (got && *got != obj) code = 4; // a miss is fine, wrong bytes never
        }
      } catch (...) {
        code = 6;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  expect_children_ok(children);
  cache.store("k", obj);
  CHECK(cache.load("k") == obj);
}

namespace {

/// Runs fn with stderr (fd 2) sent to a file; returns what was written there.
template <typename Fn> std::string capture_stderr(const fs::path& file, const Fn& fn) {
  std::fflush(stderr);
  std::cerr.flush();
  const int saved = ::dup(2);
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  ::dup2(::fileno(f), 2);
  fn();
  std::cerr.flush();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(f);
  return read_file(file);
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("cache: a directory others can write to is refused, with one warning", "[cache]") {
  TempDir t;
  fs::create_directories(t.dir);
  const fs::path shared = t.dir / "shared";
  DiskCache(shared).store(kKey, "bytes"); // an entry from when it was private
  REQUIRE(::chmod(shared.c_str(), 0777) == 0);
  std::string err = capture_stderr(t.dir / "stderr.txt", [&] {
    for (int i = 0; i < 3; ++i) {
      DiskCache cache(shared);
      CHECK_FALSE(cache.enabled());
      CHECK_THAT(cache.disabled_reason(),
                 Catch::StartsWith("it is writable by its group or by others (mode 0777)"));
      std::string why;
      CHECK_FALSE(cache.load(kKey, &why).has_value());
      CHECK_THAT(why, Catch::Contains("the cache is disabled: it is writable"));
      cache.store("other", "bytes");
    }
  });
  CHECK(count_of(err, "kiln: warning: the kernel cache " + shared.string() + " is not used") == 1);
  CHECK(count_of(err, "chmod 700") == 1);
  // Group-writable is refused too; read and search bits for others are fine.
  REQUIRE(::chmod(shared.c_str(), 0770) == 0);
  CHECK_THAT(DiskCache(shared).disabled_reason(), Catch::Contains("(mode 0770)"));
  REQUIRE(::chmod(shared.c_str(), 0755) == 0);
  DiskCache readable(shared);
  CHECK(readable.enabled());
  CHECK(readable.load(kKey) == std::string("bytes"));
  CHECK_FALSE(fs::exists(readable.entry_path("other")));
}

TEST_CASE("cache: parse_cache_entry reads what store wrote and rejects damage", "[cache]") {
  TempDir t;
  DiskCache cache(t.dir);
  const std::string payload = object_bytes(300, 9);
  cache.store(kKey, payload);
  const std::string bytes = read_file(cache.entry_path(kKey));
  std::string why;
  auto entry = kiln::codegen::parse_cache_entry(bytes, &why);
  REQUIRE(entry);
  CHECK(entry->key == kKey);
  CHECK(entry->payload == payload);
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_FALSE(kiln::codegen::parse_cache_entry(std::string_view(bytes).substr(0, n), &why));
    CHECK_FALSE(why.empty());
  }
  std::string flipped = bytes;
  flipped[bytes.size() - 1] ^= 1;
  CHECK_FALSE(kiln::codegen::parse_cache_entry(flipped, &why));
  CHECK(why == "payload checksum mismatch");
  std::string huge = bytes;
  put_u64(huge, 24, ~uint64_t{0});
  CHECK_FALSE(kiln::codegen::parse_cache_entry(huge, &why));
  CHECK_THAT(why, Catch::StartsWith("lengths (key "));
}
