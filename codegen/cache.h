// DiskCache: the on-disk cache of compiled artefacts (object files), keyed by a full key string
// (docs/user-guide.md, "The kernel cache"). No LLVM types: the JIT stores and loads plain bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::codegen {

/// One entry file's contents as parse_cache_entry found them: views into the bytes given.
struct CacheEntry {
  std::string_view key;
  std::string_view payload;
};

/// Parses and verifies the bytes of one entry file: the header (magic, version, reserved
/// field), the lengths against the size, and the payload's checksum. The reason it is bad
/// goes to `why` (when not null). Pure (no file system): DiskCache::load and the cache
/// fuzzer run it.
std::optional<CacheEntry> parse_cache_entry(std::string_view bytes, std::string* why = nullptr);

/// FNV-1a, 64 bits: names entries (of the key) and checks payloads. Any change to a single
/// byte changes it (each step is a bijection of the state), which is what a bit flip needs.
uint64_t fnv1a(std::string_view bytes);

/// A directory of compiled artefacts (object files) keyed by a full key string.
///
/// One entry per key, in a file named after a 64-bit hash of the key (16 hex digits, then
/// `.kobj`). The file holds a 40-byte header (magic "KILNOBJ1", format version, key length,
/// payload length, FNV-1a checksum of the payload, all little-endian), the key, then the
/// payload. A load verifies all of it and compares the full key, so a hash collision, a
/// truncated or bit-flipped file, a symlink, a file of another user or a file removed under
/// our feet is a miss (logged under KILN_LOGS=cache), never wrong bytes and never an
/// exception. A store writes a temp file in the same directory and renames it over the entry,
/// so concurrent readers and writers, in this process or others, see a whole old or a whole
/// new entry. Only names of that shape are the cache's: other files in the directory are left
/// alone. Every method is safe to call from several threads at once.
///
/// A cache whose directory can't be used (a symlink, owned by another user, writable by its
/// group or others, not a directory, can't be created) is disabled: every load misses,
/// stores do nothing; one log line says why. A directory others can write to is also warned
/// about on stderr, once per directory and process.
class DiskCache {
public:
  /// Opens the cache at `dir`, creating it owner-only (0700) when missing (its parents with the
  /// default mode).
  explicit DiskCache(std::filesystem::path dir);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  /// The process-wide cache at $KILN_CACHE_DIR, or ~/.cache/kiln ($HOME). With neither set
  /// (or both empty), the cache is disabled. The environment is read at the first call.
  static DiskCache& global();

  /// The bytes stored under `key`, or nullopt on a miss.
  std::optional<std::string> load(std::string_view key) const;
  /// The same; on a miss, `why` (when not null) says why ("no entry", "key mismatch", ...).
  std::optional<std::string> load(std::string_view key, std::string* why) const;
  /// Stores `bytes` under `key`, replacing any entry. A failure (full disk, read-only
  /// directory) is logged, never thrown; the old entry, if any, stays.
  void store(std::string_view key, std::string_view bytes) const;

  struct Stats {
    int64_t entries = 0;
    int64_t bytes = 0; // file sizes, headers and keys included
  };
  /// The entries now in the directory (files named like entries; not their validity).
  Stats stats() const;
  /// Removes every entry and every temp file left by an interrupted store (in this process
  /// or another: a store racing with clear fails, logged); returns how many entries were
  /// removed.
  int64_t clear() const;

  const std::filesystem::path& dir() const { return dir_; }
  /// Whether the directory is usable; when not, disabled_reason() says why.
  bool enabled() const { return dir_fd_ >= 0; }
  const std::string& disabled_reason() const { return disabled_reason_; }
  /// Where the entry for `key` lives (whether or not it exists).
  std::filesystem::path entry_path(std::string_view key) const;

private:
  struct Disabled {};
  DiskCache(std::filesystem::path dir, std::string disabled_reason, Disabled);
  void disable(std::string reason);

  std::filesystem::path dir_;
  /// The directory, opened once (O_DIRECTORY|O_NOFOLLOW): every file is reached through it,
  /// so the directory can't be swapped for a symlink after the checks. -1 when disabled.
  int dir_fd_ = -1;
  std::string disabled_reason_;
};

/// The GNU build ID (hex) of the binary holding the code generator, part of every cache key
/// so that a rebuilt kiln never loads an object an older build cached; empty if it has none.
const std::string& build_id();

/// The first lines of every cache key of `kind` ("object", "autotune"): the kind and its format
/// version, kiln's version and build ("kiln object v1\nkiln 0.1.0\nbuild 3fa2...\n").
std::string cache_key_header(std::string_view kind);

} // namespace kiln::codegen
