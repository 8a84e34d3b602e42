// safetensors: exact round trips for every dtype, and one test per kind of corrupt file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <kiln/kiln.h>

#include "runtime/ops/dispatch.h"
#include "temp_dir.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

/// A fresh directory for one test's files.
struct TempDir : kiln::testing::TempDir {
  TempDir() : kiln::testing::TempDir("kiln_safetensors") {}
};

/// The tensor's elements as raw bytes in row-major order.
std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw_data()),
                     static_cast<size_t>(c.numel() * c.itemsize()));
}

/// A tensor of the given dtype and shape holding exactly these bytes.
Tensor from_bytes(DType dtype, Shape shape, const std::string& bytes) {
  Tensor t = make_tensor(shape, dtype);
  REQUIRE(static_cast<size_t>(t.numel() * t.itemsize()) == bytes.size());
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

template <typename T> std::string pack(std::initializer_list<T> values) {
  std::string out;
  for (T v : values)
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Writes a file with this header text and data buffer (and, optionally, a false length).
std::string write_raw(const TempDir& d, const std::string& header, const std::string& data,
                      std::optional<uint64_t> length = std::nullopt) {
  std::string path = d.file("raw.safetensors");
  write_file(path, le64(length.value_or(header.size())) + header + data);
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

} // namespace

TEST_CASE("safetensors: every dtype round-trips bit for bit", "[safetensors]") {
  TempDir d;
  uint32_t nan_payload = 0x7fc12345u, neg_nan = 0xffc00001u;
  float f_nan, f_neg_nan;
  std::memcpy(&f_nan, &nan_payload, 4);
  std::memcpy(&f_neg_nan, &neg_nan, 4);
  std::map<std::string, Tensor> tensors{
      {"f32", from_bytes(DType::f32, {2, 3},
                         pack<float>({1.5f, -0.0f, f_nan, f_neg_nan,
                                      std::numeric_limits<float>::infinity(),
                                      std::numeric_limits<float>::denorm_min()}))},
      {"f64", from_bytes(DType::f64, {3}, pack<double>({-0.0, std::nan("7"), 1e300}))},
      {"f16", from_bytes(DType::f16, {4}, pack<uint16_t>({0x3c00, 0x8000, 0x7e01, 0x0001}))},
      {"bf16", from_bytes(DType::bf16, {2, 2}, pack<uint16_t>({0x3f80, 0x8000, 0x7fc1, 0xff80}))},
      {"i64",
       from_bytes(DType::i64, {2}, pack<int64_t>({std::numeric_limits<int64_t>::min(), 42}))},
      {"i32", from_bytes(DType::i32, {3}, pack<int32_t>({-1, 0, 2147483647}))},
      {"i8", from_bytes(DType::i8, {2}, pack<int8_t>({-128, 127}))},
      {"u8", from_bytes(DType::u8, {3}, pack<uint8_t>({0, 200, 255}))},
      {"bool", from_bytes(DType::bool_, {3}, pack<uint8_t>({1, 0, 1}))},
  };
  std::string path = d.file("all.safetensors");
  save(tensors, path);
  auto loaded = load(path);
  REQUIRE(loaded.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    REQUIRE(loaded.count(name));
    const Tensor& l = loaded.at(name);
    CHECK(l.dtype() == t.dtype());
    CHECK(l.sizes() == t.sizes());
    CHECK(l.is_contiguous());
    CHECK(bytes_of(l) == bytes_of(t));
  }
  CHECK(loaded.at("bool").to_vector<bool>() == std::vector<bool>{true, false, true});
}

TEST_CASE("safetensors: 0-d, empty and non-contiguous tensors", "[safetensors]") {
  TempDir d;
  Tensor base = from_bytes(DType::f32, {2, 3}, pack<float>({1, 2, 3, 4, 5, 6}));
  Tensor scalar = from_bytes(DType::i64, {}, pack<int64_t>({-7}));
  std::map<std::string, Tensor> tensors{
      {"scalar", scalar},
      {"empty", make_tensor({0, 3}, DType::f32)},
      {"empty_i8", make_tensor({0}, DType::i8)},
      {"transposed", base.t()},
      {"strided", base.slice(1, 0, 3, 2)},
  };
  std::string path = d.file("shapes.safetensors");
  save(tensors, path);
  auto l = load(path);
  CHECK(l.at("scalar").dim() == 0);
  CHECK(l.at("scalar").item<int64_t>() == -7);
  CHECK(l.at("empty").sizes() == Shape{0, 3});
  CHECK(l.at("empty_i8").sizes() == Shape{0});
  CHECK(l.at("empty_i8").dtype() == DType::i8);
  CHECK(l.at("transposed").sizes() == Shape{3, 2});
  CHECK(l.at("transposed").to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(l.at("strided").to_vector<float>() == std::vector<float>{1, 3, 4, 6});
  // An empty map is a valid file too.
  save({}, path);
  CHECK(load(path).empty());
}

TEST_CASE("safetensors: the file layout is the reference one", "[safetensors]") {
  TempDir d;
  std::string path = d.file("layout.safetensors");
  save({{"b", from_bytes(DType::f32, {2}, pack<float>({1, 2}))},
        {"a", from_bytes(DType::u8, {1, 1}, pack<uint8_t>({9}))}},
       path, {{"format", "pt"}});
  std::string bytes = read_file(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (size_t i = 8; i-- > 0;)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);
  std::string header = bytes.substr(8, n);
  // Keys sorted, offsets contiguous from 0, padded with spaces.
  CHECK(header.rfind("{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"U8\",\"shape\":[1,1],\"data_offsets\":[0,1]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}",
                     0) == 0);
  CHECK(header.find_first_not_of(' ', header.find_last_of('}') + 1) == std::string::npos);
  CHECK(bytes.size() == 8 + n + 9);
  CHECK(load_metadata(path) == std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("safetensors: names and metadata with JSON escapes round-trip", "[safetensors]") {
  TempDir d;
  std::string path = d.file("names.safetensors");
  std::string odd = "a \"quoted\" \\ name\n\x01 \xc3\xa9";
  save({{odd, from_bytes(DType::u8, {1}, pack<uint8_t>({3}))}}, path, {{"k\t", "v\"\\"}});
  auto l = load(path);
  REQUIRE(l.count(odd));
  CHECK(load_metadata(path) == std::map<std::string, std::string>{{"k\t", "v\"\\"}});
  // \u escapes, surrogate pairs and whitespace are read too.
  std::string header =
      " { \"\\u00e9\\ud83d\\ude00\" : {\"dtype\":\"U8\", \"shape\":[], \"data_offsets\":[0,1]} } ";
  auto m = load(write_raw(d, header, "\x05"));
  REQUIRE(m.count("\xc3\xa9\xf0\x9f\x98\x80"));
  CHECK(m.begin()->second.item<int64_t>() == 5);
}

TEST_CASE("safetensors: save writes atomically and reports bad paths", "[safetensors]") {
  TempDir d;
  std::string path = d.file("model.safetensors");
  save({{"x", from_bytes(DType::f32, {1}, pack<float>({1}))}}, path);
  save({{"y", from_bytes(DType::f32, {1}, pack<float>({2}))}}, path); // replaces the file
  CHECK(load(path).count("y"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.dir)) {
    ++files;
    CHECK(e.path().filename() == "model.safetensors");
  }
  CHECK(files == 1);
  std::string missing_dir = d.file("no/such/dir/m.safetensors");
  CHECK_THROWS_WITH(save({}, missing_dir), Catch::Contains(missing_dir));
  CHECK_THROWS_WITH(save({{"__metadata__", make_tensor({1}, DType::f32)}}, path),
                    Catch::Contains("reserved"));
  CHECK_THROWS_WITH(save({{"u", Tensor()}}, path), Catch::Contains("\"u\" is undefined"));
  CHECK(load(path).count("y")); // failed saves leave the old file alone
}

TEST_CASE("safetensors: missing and non-regular files", "[safetensors]") {
  TempDir d;
  std::string path = d.file("absent.safetensors");
  CHECK_THROWS_WITH(load(path), Catch::Contains(path) && Catch::Contains("no such file"));
  CHECK_THROWS_WITH(load(d.dir.string()), Catch::Contains("not a regular file"));
}

// ---- corrupt files: one test per check, each expecting its message and the path ----

namespace {
const std::string kEntryA = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
}

TEST_CASE("safetensors corrupt: truncated before the header length", "[safetensors]") {
  TempDir d;
  std::string path = d.file("short.safetensors");
  write_file(path, "abcde");
  CHECK_THROWS_WITH(load(path), Catch::Contains(path) && Catch::Contains("truncated: 5 bytes"));
}

TEST_CASE("safetensors corrupt: header larger than 100 MB", "[safetensors]") {
  TempDir d;
  CHECK_THROWS_WITH(load(write_raw(d, "{}", "", 200'000'000)),
                    Catch::Contains("header length 200000000 is larger than the limit"));
}

TEST_CASE("safetensors corrupt: header length beyond the file", "[safetensors]") {
  TempDir d;
  CHECK_THROWS_WITH(load(write_raw(d, "{}", "", 100)),
                    Catch::Contains("header length 100 is beyond the end of the file"));
}

TEST_CASE("safetensors corrupt: overlapping tensors", "[safetensors]") {
  TempDir d;
  std::string h = "{" + kEntryA + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string(12, '\0'))),
                    Catch::Contains("tensor \"b\" (bytes [4, 12)) overlaps tensor \"a\""));
}

TEST_CASE("safetensors corrupt: gap between tensors", "[safetensors]") {
  TempDir d;
  std::string h = "{" + kEntryA + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string(20, '\0'))),
                    Catch::Contains("gap of 4 bytes in the data buffer before tensor \"b\""));
}

TEST_CASE("safetensors corrupt: data buffer longer than the tensors", "[safetensors]") {
  TempDir d;
  CHECK_THROWS_WITH(load(write_raw(d, "{" + kEntryA + "}", std::string(12, '\0'))),
                    Catch::Contains("4 trailing bytes belong to no tensor"));
  CHECK_THROWS_WITH(load(write_raw(d, "{}", "x")), Catch::Contains("1 trailing bytes"));
}

TEST_CASE("safetensors corrupt: shape product overflows", "[safetensors]") {
  TempDir d;
  std::string h = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, "")), Catch::Contains("element count of shape") &&
                                                   Catch::Contains("overflows 64 bits"));
  std::string h2 = R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h2, "")), Catch::Contains("byte size of shape"));
  std::string h3 = R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h3, "")),
                    Catch::Contains("shape must be a list of integers"));
}

TEST_CASE("safetensors corrupt: unknown dtype", "[safetensors]") {
  TempDir d;
  std::string h = R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, "x")), Catch::Contains("unknown dtype \"F8_E4M3\""));
  std::string h2 = R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h2, "x")), Catch::Contains("dtype must be a string"));
}

TEST_CASE("safetensors corrupt: bad JSON", "[safetensors]") {
  TempDir d;
  auto bad = [&](const std::string& header, const std::string& what) {
    INFO(header);
    CHECK_THROWS_WITH(load(write_raw(d, header, "")),
                      Catch::Contains("bad JSON at byte") && Catch::Contains(what));
  };
  bad(R"({"a)", "unterminated string");
  bad(R"({"__metadata__":{"k":"v"},})", "trailing comma in object");
  bad(R"({"__metadata__":{"k":"v"}} x)", "trailing characters");
  bad(R"({"a":{"dtype":"F32","shape":[1,],"data_offsets":[0,4]}})", "trailing comma in array");
  bad(R"({"__metadata__":{"k":'v'}})", "unexpected character");
  bad(R"({"__metadata__":{"k" "v"}})", "expected ':'");
  bad(R"({"__metadata__":{"k":"v\q"}})", "invalid escape");
  bad("{\"__metadata__\":{\"k\":\"a\nb\"}}", "control character in string");
  bad(R"({"__metadata__":{"k":"\ud800"}})", "lone high surrogate");
  bad("{\"__metadata__\":{\"k\":\"\xc3\"}}", "invalid UTF-8");
  bad("{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", "invalid UTF-8"); // overlong '/'
  bad(R"({"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", "leading zero");
  bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", "unterminated object");
  bad("", "unexpected end of input");
  bad(R"({"a":tru})", "invalid literal");
  bad(R"({"__metadata__":{"k":)" + std::string(100, '[') + std::string(100, ']') + "}}",
      "nesting deeper than 64 levels");
  CHECK_THROWS_WITH(load(write_raw(d, "[]", "")), Catch::Contains("must be a JSON object"));
}

TEST_CASE("safetensors corrupt: offsets out of range", "[safetensors]") {
  TempDir d;
  CHECK_THROWS_WITH(load(write_raw(d, "{" + kEntryA + "}", std::string(4, '\0'))),
                    Catch::Contains("data_offsets [0, 8] are out of range of the data buffer "
                                    "of 4"));
  std::string h = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string(8, '\0'))), Catch::Contains("end before"));
  std::string h2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h2, "")), Catch::Contains("non-negative integers, got -8"));
  std::string h3 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h3, "")), Catch::Contains("list of two integers"));
}

TEST_CASE("safetensors corrupt: byte length does not match the shape", "[safetensors]") {
  TempDir d;
  std::string h = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string(20, '\0'))),
                    Catch::Contains("shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] "
                                    "hold 20"));
}

TEST_CASE("safetensors corrupt: missing and unexpected fields", "[safetensors]") {
  TempDir d;
  std::string h = R"({"a":{"dtype":"F32","data_offsets":[0,8]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string(8, '\0'))),
                    Catch::Contains("tensor \"a\": missing field \"shape\""));
  std::string h2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})";
  CHECK_THROWS_WITH(load(write_raw(d, h2, std::string(8, '\0'))),
                    Catch::Contains("unexpected field \"x\""));
  CHECK_THROWS_WITH(load(write_raw(d, R"({"a":[1]})", "")), Catch::Contains("expected an object"));
  CHECK_THROWS_WITH(load(write_raw(d, R"({"__metadata__":{"k":1}})", "")),
                    Catch::Contains("__metadata__ value for \"k\" must be a string"));
}

TEST_CASE("safetensors corrupt: negative or fractional dim", "[safetensors]") {
  TempDir d;
  std::string h = R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, "")), Catch::Contains("negative dim -1"));
  std::string h2 = R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,0]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h2, "")),
                    Catch::Contains("shape must be a list of integers, got element 2.5"));
  std::string h3 = R"({"a":{"dtype":"F32","shape":[1e1],"data_offsets":[0,40]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h3, std::string(40, '\0'))),
                    Catch::Contains("got element 1e1"));
}

TEST_CASE("safetensors corrupt: duplicate key", "[safetensors]") {
  TempDir d;
  std::string h = "{" + kEntryA + "," + kEntryA + "}";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string(8, '\0'))),
                    Catch::Contains("duplicate key \"a\""));
}

TEST_CASE("safetensors corrupt: bool bytes other than 0 and 1", "[safetensors]") {
  TempDir d;
  std::string h = R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  CHECK_THROWS_WITH(load(write_raw(d, h, std::string("\x01\x00\x02", 3))),
                    Catch::Contains("holds byte 2 at element 2"));
}
