// DiskCache: the entry format, atomic stores, and the checks that make every bad entry a miss.
#include "codegen/cache.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <new>
#include <set>
#include <vector>

#include "runtime/logs.h"

namespace kiln::codegen {
namespace fs = std::filesystem;

uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

namespace {

// The entry header: magic, then little-endian u32 version, u32 reserved (0), u64 key length,
// u64 payload length, u64 FNV-1a of the payload. The key and the payload follow.
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 40;
/// No object file comes near this; a bigger entry is refused rather than read into memory.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 30;
constexpr std::string_view kEntrySuffix = ".kobj";
/// A store's temp file: "<hash>.kobj.tmp.<pid>.<counter>.<time>".
constexpr std::string_view kTempInfix = ".kobj.tmp.";
constexpr size_t kHashDigits = 16;

std::string hex16(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(kHashDigits, '0');
  for (size_t i = 0; i < kHashDigits; ++i)
    s[kHashDigits - 1 - i] = kDigits[(v >> (4 * i)) & 0xf];
  return s;
}

bool starts_with_hash(std::string_view name) {
  if (name.size() < kHashDigits) return false;
  for (size_t i = 0; i < kHashDigits; ++i) {
    char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}
bool is_entry_name(std::string_view name) {
  return name.size() == kHashDigits + kEntrySuffix.size() && starts_with_hash(name) &&
         name.substr(kHashDigits) == kEntrySuffix;
}
bool is_temp_name(std::string_view name) {
  return name.size() > kHashDigits + kTempInfix.size() && starts_with_hash(name) &&
         name.substr(kHashDigits, kTempInfix.size()) == kTempInfix;
}

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

/// The lengths and checksum an entry's header declares.
struct EntryHeader {
  uint64_t key_len = 0;
  uint64_t payload_len = 0;
  uint64_t checksum = 0;
};

/// Reads the kHeaderSize bytes at `header` of an entry of `size` bytes; the reason it is bad,
/// or "" (with `out` filled). The lengths are checked against the real size (by subtraction,
/// which can't wrap) before anything is allocated: a corrupt length must not become a huge
/// allocation.
std::string read_entry_header(const char* header, uint64_t size, EntryHeader& out) {
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) return "bad magic";
  if (uint32_t version = get_u32(header + 8); version != kFormatVersion)
    return "format version " + std::to_string(version) + ", expected " +
           std::to_string(kFormatVersion);
  if (get_u32(header + 12) != 0) return "bad header: the reserved field is not zero";
  out.key_len = get_u64(header + 16);
  out.payload_len = get_u64(header + 24);
  out.checksum = get_u64(header + 32);
  const uint64_t body = size - kHeaderSize;
  if (out.key_len > body || out.payload_len != body - out.key_len)
    return "lengths (key " + std::to_string(out.key_len) + ", payload " +
           std::to_string(out.payload_len) + ") do not match the file size " + std::to_string(size);
  if (out.payload_len > kMaxPayloadBytes)
    return "the payload (" + std::to_string(out.payload_len) + " bytes) is over the limit";
  return "";
}

void log_line(const std::string& line) {
  // One string, one write: lines from several threads or processes don't interleave.
  if (log_enabled("cache")) std::cerr << ("[kiln cache] " + line + "\n");
}

std::string errno_text(int err) { return std::strerror(err); }

/// Closes a file descriptor at the end of its scope.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

/// Reads exactly n bytes at `offset`; false (with `err` set) on an error or a short read.
bool read_exact(int fd, char* out, size_t n, off_t offset, std::string& err) {
  while (n > 0) {
    ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      err = "read failed: " + errno_text(errno);
      return false;
    }
    if (got == 0) {
      err = "the entry got shorter while being read";
      return false;
    }
    out += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return true;
}

bool write_all(int fd, std::string_view bytes, std::string& err) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    ssize_t put = ::write(fd, p, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      err = "write failed: " + errno_text(errno);
      return false;
    }
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

/// The names in the directory open as `dir_fd` (read through a descriptor of its own, so
/// that concurrent listings don't share a position); empty when it can't be read.
std::vector<std::string> list_names(int dir_fd) {
  std::vector<std::string> names;
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return names;
  }
  while (const dirent* e = ::readdir(d))
    names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

/// How a disabled cache's reason begins when others can write to its directory: that one is
/// warned about on stderr, not only logged, since it is a security problem.
constexpr std::string_view kWritableByOthers = "it is writable by its group or by others";

/// Opens (creating when missing) the cache directory `dir` into `fd`; the reason it can't be
/// used otherwise.
std::string open_dir(const fs::path& dir, int& fd) {
  if (dir.empty()) return "no directory given";
  const char* path = dir.c_str();
  struct stat st {};
  bool created = false;
  if (::lstat(path, &st) != 0) {
    if (errno != ENOENT) return "cannot stat it: " + errno_text(errno);
    std::error_code ec;
    if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
    if (::mkdir(path, 0700) == 0)
      created = true;
    else if (errno != EEXIST) // EEXIST: another process made it first
      return "cannot create it: " + errno_text(errno);
    if (::lstat(path, &st) != 0) return "cannot stat it: " + errno_text(errno);
  }
  if (S_ISLNK(st.st_mode)) return "it is a symlink";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not " +
           std::to_string(::geteuid());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string(kWritableByOthers) + " (mode " + mode + "), so others could delete or " +
           "replace its entries; make it private with chmod 700";
  }
  int opened_fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (opened_fd < 0) return "cannot open it: " + errno_text(errno);
  struct stat opened {};
  if (::fstat(opened_fd, &opened) != 0 || opened.st_dev != st.st_dev ||
      opened.st_ino != st.st_ino) {
    ::close(opened_fd);
    return "it was replaced while being opened";
  }
  // The umask may have taken bits off 0700 (never added any); set them on what was opened.
  if (created) ::fchmod(opened_fd, 0700);
  fd = opened_fd;
  return "";
}

} // namespace

DiskCache::DiskCache(fs::path dir) : dir_(std::move(dir)) {
  // "cache/" would follow a symlink named cache: check the directory itself.
  while (dir_.has_relative_path() && !dir_.has_filename())
    dir_ = dir_.parent_path();
  if (std::string why = open_dir(dir_, dir_fd_); !why.empty()) disable(std::move(why));
}

DiskCache::DiskCache(fs::path dir, std::string disabled_reason, Disabled) : dir_(std::move(dir)) {
  disable(std::move(disabled_reason));
}

DiskCache::~DiskCache() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

void DiskCache::disable(std::string reason) {
  disabled_reason_ = std::move(reason);
  log_line("disabled (" + dir_.string() + "): " + disabled_reason_);
  if (disabled_reason_.starts_with(kWritableByOthers)) {
    // Once per directory and process: tests and tools may open the same cache many times.
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(mutex);
    if (warned.insert(dir_.string()).second)
      std::cerr << ("kiln: warning: the kernel cache " + dir_.string() + " is not used: " +
                    disabled_reason_ + "; kernels are compiled without a cache\n");
  }
}

DiskCache& DiskCache::global() {
  // Never destroyed: a compile on another thread may still use it while the process exits.
  static DiskCache& cache = *[] {
    const char* env = std::getenv("KILN_CACHE_DIR");
    if (env != nullptr && *env != '\0') return new DiskCache(fs::path(env));
    const char* home = std::getenv("HOME");
    if (home != nullptr && *home != '\0') return new DiskCache(fs::path(home) / ".cache" / "kiln");
    return new DiskCache(fs::path(), "neither KILN_CACHE_DIR nor HOME is set", Disabled{});
  }();
  return cache;
}

fs::path DiskCache::entry_path(std::string_view key) const {
  return dir_ / (hex16(fnv1a(key)) + std::string(kEntrySuffix));
}

std::optional<std::string> DiskCache::load(std::string_view key) const {
  return load(key, nullptr);
}

std::optional<std::string> DiskCache::load(std::string_view key, std::string* why) const {
  const std::string hash = hex16(fnv1a(key));
  auto miss = [&](std::string reason) -> std::optional<std::string> {
    log_line("miss " + hash + ": " + reason);
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (dir_fd_ < 0) { // not logged: the one line said so when the cache was disabled
    if (why != nullptr) *why = "the cache is disabled: " + disabled_reason_;
    return std::nullopt;
  }

  // O_NOFOLLOW: a symlink is never followed; O_NONBLOCK: a FIFO planted as an entry can't hang
  // the open. Everything after works on the descriptor, so an entry removed or replaced from
  // now on (a concurrent clear or store) is still read whole, as it was when opened.
  const std::string name = hash + std::string(kEntrySuffix);
  int fd = ::openat(dir_fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return miss("no entry");
    if (errno == ELOOP) return miss("the entry is a symlink");
    return miss("cannot open the entry: " + errno_text(errno));
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return miss("cannot stat the entry: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return miss("the entry is not a regular file");
  if (st.st_uid != ::geteuid())
    return miss("the entry is owned by uid " + std::to_string(st.st_uid) + ", not " +
                std::to_string(::geteuid()));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize)
    return miss("truncated: " + std::to_string(size) + " bytes, shorter than the header");

  char header[kHeaderSize];
  std::string err;
  if (!read_exact(fd, header, kHeaderSize, 0, err)) return miss(err);
  EntryHeader h;
  if (std::string bad = read_entry_header(header, size, h); !bad.empty()) return miss(bad);
  if (h.key_len != key.size())
    return miss("key mismatch: the stored key has " + std::to_string(h.key_len) + " bytes, not " +
                std::to_string(key.size()));

  // The whole entry (its size is now known to be the header's lengths, bounded), checked
  // again by the same parser the fuzzer runs.
  std::string bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    return miss("out of memory for " + std::to_string(size) + " bytes");
  }
  if (!read_exact(fd, bytes.data(), size, 0, err)) return miss(err);
  std::string bad;
  std::optional<CacheEntry> entry = parse_cache_entry(bytes, &bad);
  if (!entry) return miss(bad);
  if (entry->key != key) return miss("key mismatch: another key with the same hash");
  log_line("hit " + hash);
  return std::string(entry->payload);
}

std::optional<CacheEntry> parse_cache_entry(std::string_view bytes, std::string* why) {
  auto bad = [&](std::string reason) -> std::optional<CacheEntry> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (bytes.size() < kHeaderSize)
    return bad("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  EntryHeader h;
  if (std::string e = read_entry_header(bytes.data(), bytes.size(), h); !e.empty())
    return bad(std::move(e));
  CacheEntry entry;
  entry.key = bytes.substr(kHeaderSize, h.key_len);
  entry.payload = bytes.substr(kHeaderSize + h.key_len);
  if (fnv1a(entry.payload) != h.checksum) return bad("payload checksum mismatch");
  return entry;
}

void DiskCache::store(std::string_view key, std::string_view bytes) const {
  if (dir_fd_ < 0) return; // said once, when the cache was disabled
  const std::string hash = hex16(fnv1a(key));
  auto fail = [&](const std::string& why) { log_line("store " + hash + " failed: " + why); };
  if (bytes.size() > kMaxPayloadBytes)
    return fail(std::to_string(bytes.size()) + " bytes is over the limit");

  char header[kHeaderSize];
  std::memcpy(header, kMagic, sizeof(kMagic));
  put_u32(header + 8, kFormatVersion);
  put_u32(header + 12, 0);
  put_u64(header + 16, key.size());
  put_u64(header + 24, bytes.size());
  put_u64(header + 32, fnv1a(bytes));

  // A temp name no other store picks: this process's id and counter (threads), and the time
  // (another pid namespace sharing the directory); O_EXCL settles the rest.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 4 && fd < 0; ++attempt) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    tmp = hash + std::string(kTempInfix) + std::to_string(::getpid()) + "." +
          std::to_string(counter.fetch_add(1)) + "." + std::to_string(now);
    fd = ::openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return fail("cannot create a temp file: " + errno_text(errno));
  }
  if (fd < 0) return fail("cannot create a temp file: every name taken");

  // No fsync: after a crash, a torn entry fails its checksum and is a miss, which is all a
  // cache needs; syncing every kernel would slow cold compiles for nothing.
  std::string err;
  bool ok = write_all(fd, std::string_view(header, kHeaderSize), err) && write_all(fd, key, err) &&
            write_all(fd, bytes, err);
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = "close failed: " + errno_text(errno);
  }
  const std::string name = hash + std::string(kEntrySuffix);
  if (ok && ::renameat(dir_fd_, tmp.c_str(), dir_fd_, name.c_str()) != 0) {
    ok = false;
    err = "cannot rename the temp file over the entry: " + errno_text(errno);
  }
  if (!ok) {
    ::unlinkat(dir_fd_, tmp.c_str(), 0);
    return fail(err);
  }
  log_line("store " + hash + " (" + std::to_string(bytes.size()) + " bytes)");
}

DiskCache::Stats DiskCache::stats() const {
  Stats s;
  if (dir_fd_ < 0) return s;
  for (const std::string& name : list_names(dir_fd_)) {
    struct stat st {};
    if (!is_entry_name(name) || ::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    ++s.entries;
    s.bytes += static_cast<int64_t>(st.st_size);
  }
  return s;
}

int64_t DiskCache::clear() const {
  if (dir_fd_ < 0) return 0;
  int64_t entries = 0, temps = 0;
  // Listed first, removed after: removing while reading a directory leaves unspecified which
  // names the listing still returns.
  for (const std::string& name : list_names(dir_fd_)) {
    const bool entry = is_entry_name(name);
    if (!entry && !is_temp_name(name)) continue;
    // unlinkat without AT_REMOVEDIR leaves a directory of that name alone; one gone already
    // (another clear) is not counted.
    if (::unlinkat(dir_fd_, name.c_str(), 0) != 0) continue;
    if (entry)
      ++entries;
    else
      ++temps;
  }
  log_line("clear: removed " + std::to_string(entries) + " entries and " + std::to_string(temps) +
           " temp files");
  return entries;
}

// The kernel text does not show how the code generator compiles it: the build ID does.
const std::string& build_id() {
  static const std::string id = [] {
    struct Search {
      uintptr_t address;
      std::string hex;
    } search{reinterpret_cast<uintptr_t>(&build_id), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
          auto* s = static_cast<Search*>(data);
          bool mine = false;
          for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
            mine = ph.p_type == PT_LOAD && s->address >= begin && s->address < begin + ph.p_memsz;
          }
          if (!mine) return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              ElfW(Nhdr) note;
              std::memcpy(&note, p, sizeof note);
              const char* name = p + sizeof note;
              const char* desc = name + ((note.n_namesz + 3) & ~3u);
              if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
                  std::memcmp(name, "GNU", 4) == 0 && desc + note.n_descsz <= end) {
                static const char digits[] = "0123456789abcdef";
                for (uint32_t k = 0; k < note.n_descsz; ++k) {
                  auto byte = static_cast<unsigned char>(desc[k]);
                  s->hex += digits[byte >> 4];
                  s->hex += digits[byte & 15];
                }
                return 1;
              }
              p = desc + ((note.n_descsz + 3) & ~3u);
            }
          }
          return 1;
        },
        &search);
    return search.hex;
  }();
  return id;
}

} // namespace kiln::codegen
