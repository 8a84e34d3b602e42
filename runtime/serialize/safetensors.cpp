// safetensors: the writer (atomic rename) and the validating reader.
#include "runtime/serialize/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/ops/dispatch.h"
#include "runtime/serialize/json.h"

namespace kiln {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps here");

/// The header length limit of the reference implementation (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::f64, "F64"},   {DType::f32, "F32"}, {DType::f16, "F16"},
    {DType::bf16, "BF16"}, {DType::i64, "I64"}, {DType::i32, "I32"},
    {DType::i8, "I8"},     {DType::u8, "U8"},   {DType::bool_, "BOOL"},
};

const char* safetensors_name(DType t) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == t) return d.name;
  KILN_UNREACHABLE("every kiln dtype has a safetensors name");
}

std::string file_label(const std::string& path) { return "safetensors file \"" + path + "\""; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(file_label(path) + ": " + what);
}

// ---------------------------------------------------------------------------------------------
// Reading

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  uint64_t header_bytes = 0;  // N
  std::vector<Entry> entries; // sorted by data offset
  std::map<std::string, std::string> metadata;
};

std::string tensor_label(const std::string& name) { return "tensor " + json::quote(name); }

/// Reads a non-negative integer that fits int64 from a JSON number.
uint64_t read_offset(const std::string& path, const std::string& name, const json::Value& v) {
  if (v.type != json::Value::Type::number || !v.is_int64 || v.int64 < 0)
    fail(path,
         tensor_label(name) + ": data_offsets must be two non-negative integers, got " +
             (v.type == json::Value::Type::number ? v.number : json::Value::type_name(v.type)));
  return static_cast<uint64_t>(v.int64);
}

Entry read_entry(const std::string& path, const std::string& name, const json::Value& v,
                 uint64_t data_bytes) {
  using Type = json::Value::Type;
  const std::string label = tensor_label(name);
  if (v.type != Type::object)
    fail(path, label + ": expected an object with dtype, shape and data_offsets, got " +
                   json::Value::type_name(v.type));
  const json::Value* dtype = nullptr;
  const json::Value* shape = nullptr;
  const json::Value* offsets = nullptr;
  for (const auto& [key, value] : v.object) {
    if (key == "dtype")
      dtype = &value;
    else if (key == "shape")
      shape = &value;
    else if (key == "data_offsets")
      offsets = &value;
    else
      fail(path, label + ": unexpected field " + json::quote(key));
  }
  if (!dtype) fail(path, label + ": missing field \"dtype\"");
  if (!shape) fail(path, label + ": missing field \"shape\"");
  if (!offsets) fail(path, label + ": missing field \"data_offsets\"");

  Entry e;
  e.name = name;
  if (dtype->type != Type::string)
    fail(path, label + ": dtype must be a string, got " + json::Value::type_name(dtype->type));
  bool known = false;
  for (const auto& d : kDTypeNames)
    if (dtype->string == d.name) {
      e.dtype = d.dtype;
      known = true;
    }
  if (!known)
    fail(path, label + ": unknown dtype " + json::quote(dtype->string) +
                   " (kiln reads F64 F32 F16 BF16 I64 I32 I8 U8 BOOL)");

  if (shape->type != Type::array)
    fail(path,
         label + ": shape must be a list of integers, got " + json::Value::type_name(shape->type));
  int64_t numel = 1;
  for (const json::Value& d : shape->array) {
    if (d.type != Type::number || !d.is_int64)
      fail(path, label + ": shape must be a list of integers, got element " +
                     (d.type == Type::number ? d.number : json::Value::type_name(d.type)));
    if (d.int64 < 0) fail(path, detail::str(label, ": negative dim ", d.int64, " in shape"));
    e.shape.push_back(d.int64);
    if (__builtin_mul_overflow(numel, d.int64, &numel))
      fail(path, detail::str(label, ": the element count of shape ", shape_str(e.shape),
                             "... overflows 64 bits"));
  }
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, itemsize(e.dtype), &nbytes))
    fail(path, detail::str(label, ": the byte size of shape ", shape_str(e.shape), " of ",
                           dtype->string, " overflows 64 bits"));

  if (offsets->type != Type::array || offsets->array.size() != 2)
    fail(path, label + ": data_offsets must be a list of two integers [begin, end]");
  e.begin = read_offset(path, name, offsets->array[0]);
  e.end = read_offset(path, name, offsets->array[1]);
  if (e.end < e.begin)
    fail(path, detail::str(label, ": data_offsets [", e.begin, ", ", e.end,
                           "] end before they "
                           "begin"));
  if (e.end > data_bytes)
    fail(path, detail::str(label, ": data_offsets [", e.begin, ", ", e.end,
                           "] are out of range "
                           "of the data buffer of ",
                           data_bytes, " bytes"));
  if (e.end - e.begin != static_cast<uint64_t>(nbytes))
    fail(path, detail::str(label, ": shape ", shape_str(e.shape), " of ", dtype->string, " needs ",
                           nbytes, " bytes but data_offsets [", e.begin, ", ", e.end, "] hold ",
                           e.end - e.begin));
  return e;
}

/// Where a safetensors file's bytes come from: a file on disk or a buffer in memory. Reads are
/// sequential.
class ByteSource {
public:
  virtual ~ByteSource() = default;
  /// The total size in bytes.
  virtual uint64_t size() const = 0;
  /// Reads up to n bytes at the cursor; returns how many were read.
  virtual uint64_t read(char* dst, uint64_t n) = 0;
};

class FileSource final : public ByteSource {
public:
  explicit FileSource(const std::string& path) {
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (status.type() == std::filesystem::file_type::not_found)
      fail(path, "cannot open: no such file");
    if (ec) fail(path, "cannot open: " + ec.message());
    if (!std::filesystem::is_regular_file(status)) fail(path, "cannot open: not a regular file");
    size_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, "cannot read its size: " + ec.message());
    in_.open(path, std::ios::binary);
    if (!in_) fail(path, std::string("cannot open: ") + std::strerror(errno));
  }
  uint64_t size() const override { return size_; }
  uint64_t read(char* dst, uint64_t n) override {
    in_.read(dst, static_cast<std::streamsize>(n));
    return static_cast<uint64_t>(in_.gcount());
  }

private:
  std::ifstream in_;
  uint64_t size_ = 0;
};

class MemorySource final : public ByteSource {
public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  uint64_t read(char* dst, uint64_t n) override {
    uint64_t k = std::min<uint64_t>(n, bytes_.size() - pos_);
    if (k > 0) std::memcpy(dst, bytes_.data() + pos_, k);
    pos_ += k;
    return k;
  }

private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

/// Reads exactly n bytes at the source's cursor.
void read_exact(ByteSource& in, const std::string& path, char* dst, uint64_t n, const char* what) {
  if (in.read(dst, n) != n) fail(path, std::string("the file ended while reading ") + what);
}

Header read_header(ByteSource& in, const std::string& path) {
  const uint64_t file_bytes = in.size();
  if (file_bytes < 8)
    fail(path, detail::str("the file is truncated: ", file_bytes, " bytes, too short for the ",
                           "8-byte header length"));
  unsigned char len_bytes[8];
  read_exact(in, path, reinterpret_cast<char*>(len_bytes), 8, "the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | len_bytes[i];
  if (n > kMaxHeaderBytes)
    fail(path, detail::str("the header length ", n, " is larger than the limit of ",
                           kMaxHeaderBytes, " bytes (100 MB)"));
  if (n > file_bytes - 8)
    fail(path, detail::str("the header length ", n, " is beyond the end of the file (",
                           file_bytes - 8, " bytes follow the length)"));

  std::string text(n, '\0');
  read_exact(in, path, text.data(), n, "the header");
  json::Value root = json::parse(text, file_label(path));
  if (root.type != json::Value::Type::object)
    fail(path,
         std::string("the header must be a JSON object, got ") + json::Value::type_name(root.type));

  Header h;
  h.header_bytes = n;
  uint64_t data_bytes = file_bytes - 8 - n;
  for (const auto& [key, value] : root.object) {
    if (key == "__metadata__") {
      if (value.type != json::Value::Type::object)
        fail(path, "__metadata__ must be an object of strings");
      for (const auto& [mk, mv] : value.object) {
        if (mv.type != json::Value::Type::string)
          fail(path, "__metadata__ value for " + json::quote(mk) + " must be a string, got " +
                         json::Value::type_name(mv.type));
        h.metadata.emplace(mk, mv.string);
      }
      continue;
    }
    h.entries.push_back(read_entry(path, key, value, data_bytes));
  }

  // The tensors must tile the data buffer: sorted by offset, each begins where the last ended.
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : h.entries) {
    if (e.begin < cursor)
      fail(path,
           detail::str(tensor_label(e.name), " (bytes [", e.begin, ", ", e.end, ")) overlaps ",
                       tensor_label(prev->name), " (bytes [", prev->begin, ", ", prev->end, "))"));
    if (e.begin > cursor)
      fail(path, detail::str("gap of ", e.begin - cursor, " bytes in the data buffer before ",
                             tensor_label(e.name), " (bytes [", cursor, ", ", e.begin,
                             ") belong to no tensor)"));
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_bytes)
    fail(path, detail::str("the data buffer has ", data_bytes, " bytes but the tensors cover ",
                           cursor, " (", data_bytes - cursor,
                           " trailing bytes belong to no "
                           "tensor)"));
  return h;
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Writes all of buf to fd, retrying short writes and EINTR.
bool write_all(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// A temporary file beside the target, removed unless committed by rename.
class TempFile {
public:
  explicit TempFile(const std::string& target) : target_(target) {
    static std::atomic<uint64_t> counter{0};
    path_ = detail::str(target, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw Error(detail::str("save: cannot create a temporary file for \"", target,
                              "\": ", std::strerror(errno)));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t n) {
    if (!write_all(fd_, static_cast<const char*>(data), n)) fail_errno("write");
  }

  /// Flushes to disk and renames over the target.
  void commit() {
    if (::fsync(fd_) != 0) fail_errno("flush");
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_errno("close");
    if (std::rename(path_.c_str(), target_.c_str()) != 0)
      fail_errno("rename the temporary file to");
    committed_ = true;
  }

private:
  [[noreturn]] void fail_errno(const char* what) {
    throw Error(detail::str("save: cannot ", what, " \"", target_, "\": ", std::strerror(errno)));
  }

  std::string target_;
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

/// `text` with every byte outside printable ASCII written as \xNN, for messages about bytes
/// that are not UTF-8.
std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(b));
      out += buf;
    }
  }
  return out;
}

/// Throws when `text` (a tensor name or a metadata key or value, `what`) is not valid UTF-8.
void check_utf8(const std::string& path, const char* what, std::string_view text,
                std::string_view key) {
  size_t bad = json::invalid_utf8_at(text);
  if (bad == std::string_view::npos) return;
  std::string where = std::string(what) + " \"" + escaped(text) + "\"";
  if (std::string_view(what) == "metadata value") where += " of key \"" + escaped(key) + "\"";
  throw Error(detail::str("save: ", where, " is not valid UTF-8 (byte ", bad, " is ",
                          escaped(text.substr(bad, 1)),
                          "); safetensors headers are UTF-8 JSON, so load() could not read the "
                          "file back (nothing written to \"",
                          path, "\")"));
}

} // namespace

void save(const std::map<std::string, Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
  // The header is UTF-8 JSON and load() rejects anything else: refuse what it could not read
  // back before the file is touched.
  for (const auto& [k, v] : metadata) {
    check_utf8(path, "metadata key", k, k);
    check_utf8(path, "metadata value", v, k);
  }
  for (const auto& entry : tensors)
    check_utf8(path, "tensor name", entry.first, entry.first);
  // Host copies first: every check happens before the file is touched.
  std::vector<Tensor> data;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += json::quote(k) + ":" + json::quote(v);
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    KILN_CHECK(name != "__metadata__",
               "save: \"__metadata__\" is reserved in safetensors files "
               "and cannot name a tensor (writing \"",
               path, "\")");
    KILN_CHECK(t.defined(), "save: tensor \"", name, "\" is undefined (writing \"", path, "\")");
    KILN_CHECK(!t.is_traced(), "save: tensor \"", name,
               "\" is traced and has no data yet "
               "(writing \"",
               path, "\")");
    Tensor host = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
    auto nbytes = static_cast<uint64_t>(host.numel() * host.itemsize());
    if (header.size() > 1) header += ',';
    header += detail::str(json::quote(name), ":{\"dtype\":\"", safetensors_name(host.dtype()),
                          "\",\"shape\":[");
    for (size_t i = 0; i < host.sizes().size(); ++i)
      header += detail::str(i ? "," : "", host.sizes()[i]);
    header += detail::str("],\"data_offsets\":[", offset, ",", offset + nbytes, "]}");
    offset += nbytes;
    data.push_back(std::move(host));
  }
  header += "}";
  // Padding keeps the data buffer 8-byte aligned for readers that map the file.
  header.append((8 - header.size() % 8) % 8, ' ');

  TempFile file(path);
  unsigned char len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(n >> (8 * i));
  file.write(len, 8);
  file.write(header.data(), header.size());
  for (const Tensor& t : data)
    if (t.numel() > 0) file.write(t.raw_data(), static_cast<size_t>(t.numel() * t.itemsize()));
  file.commit();
}

namespace {

std::map<std::string, Tensor> load_from(ByteSource& in, const std::string& path) {
  Header h = read_header(in, path);
  std::map<std::string, Tensor> out;
  // The entries tile the data buffer in order, so the reads are sequential.
  for (const Entry& e : h.entries) {
    Tensor t = make_tensor(e.shape, e.dtype);
    uint64_t n = e.end - e.begin;
    if (n > 0) {
      read_exact(in, path, static_cast<char*>(t.raw_data()), n, tensor_label(e.name).c_str());
      if (e.dtype == DType::bool_) {
        const auto* p = static_cast<const unsigned char*>(t.raw_data());
        for (uint64_t i = 0; i < n; ++i)
          if (p[i] > 1)
            fail(path, detail::str(tensor_label(e.name), " of dtype BOOL holds byte ",
                                   static_cast<int>(p[i]), " at element ", i, "; expected 0 or 1"));
      }
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

} // namespace

std::map<std::string, Tensor> load(const std::string& path) {
  FileSource in(path);
  return load_from(in, path);
}

std::map<std::string, Tensor> load_bytes(std::string_view bytes, const std::string& name) {
  MemorySource in(bytes);
  return load_from(in, name);
}

std::map<std::string, std::string> load_metadata(const std::string& path) {
  FileSource in(path);
  return read_header(in, path).metadata;
}

} // namespace kiln
