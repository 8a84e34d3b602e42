// safetensors against hostile input: names that are not UTF-8 refused at save, and every
// truncation and bit flip of a real file read from memory giving a kiln::Error, never a crash.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <kiln/kiln.h>

#include "runtime/serialize/safetensors.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

/// A fresh directory under the system temp dir, removed with everything in it.
struct ScratchDir {
  fs::path dir;
  ScratchDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("kiln_st_hostile_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {}));
  }
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Tensor small_tensor() { return arange(0, 6, 1, DType::f32).reshape({2, 3}); }

} // namespace

TEST_CASE("safetensors save refuses tensor names that are not UTF-8 and writes nothing",
          "[safetensors]") {
  ScratchDir d;
  std::string path = d.file("bad.safetensors");
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate, > U+10FFFF.
  for (std::string bad : {std::string("w\x80"), std::string("w\xc3"), std::string("\xc0\xaf"),
                          std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80")}) {
    INFO(bad.size());
    CHECK_THROWS_WITH(save({{"ok", small_tensor()}, {bad, small_tensor()}}, path),
                      Catch::Contains("save: tensor name \"") &&
                          Catch::Contains("is not valid UTF-8") && Catch::Contains(path));
    CHECK(d.entries() == 0); // neither the file nor a temporary
  }
  CHECK_THROWS_WITH(save({{"w\xff", small_tensor()}}, path),
                    Catch::Contains("tensor name \"w\\xff\"") &&
                        Catch::Contains("byte 1 is \\xff"));
}

TEST_CASE("safetensors save refuses metadata keys and values that are not UTF-8", "[safetensors]") {
  ScratchDir d;
  std::string path = d.file("meta.safetensors");
  CHECK_THROWS_WITH(save({{"x", small_tensor()}}, path, {{"k\xfe", "v"}}),
                    Catch::Contains("metadata key \"k\\xfe\"") &&
                        Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(save({{"x", small_tensor()}}, path, {{"author", "caf\xe9"}}),
                    Catch::Contains("metadata value \"caf\\xe9\" of key \"author\"") &&
                        Catch::Contains("not valid UTF-8"));
  CHECK(d.entries() == 0);
  // A failed save leaves an earlier file as it was.
  save({{"x", small_tensor()}}, path, {{"author", "caf\xc3\xa9"}});
  CHECK_THROWS(save({{"y", small_tensor()}}, path, {{"author", "caf\xe9"}}));
  CHECK(load(path).count("x") == 1);
  CHECK(load_metadata(path).at("author") == "caf\xc3\xa9");
}

TEST_CASE("safetensors names in every UTF-8 length round-trip", "[safetensors]") {
  ScratchDir d;
  std::string path = d.file("utf8.safetensors");
  // 1-, 2-, 3- and 4-byte characters, U+FFFF and U+10FFFF at the edges.
  std::vector<std::string> names = {
      "a", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf"};
  std::map<std::string, Tensor> tensors;
  for (const std::string& n : names)
    tensors.emplace(n, small_tensor());
  save(tensors, path, {{"\xe2\x82\xac", "\xf0\x9f\x98\x80"}});
  auto back = load(path);
  CHECK(back.size() == names.size());
  for (const std::string& n : names)
    CHECK(back.count(n) == 1);
  CHECK(load_metadata(path).at("\xe2\x82\xac") == "\xf0\x9f\x98\x80");
}

TEST_CASE("safetensors load_bytes reads what save wrote and rejects every truncation",
          "[safetensors]") {
  ScratchDir d;
  std::string path = d.file("m.safetensors");
  save({{"a", small_tensor()}, {"b", full({3}, 1.0, DType::i64)}}, path, {{"k", "v"}});
  std::string bytes = read_file(path);
  auto m = load_bytes(bytes, "memory");
  REQUIRE(m.size() == 2);
  CHECK(m.at("a").sum().item<double>() == 15.0);
  CHECK(m.at("b").sum().item<int64_t>() == 3);
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(load_bytes(std::string_view(bytes).substr(0, n), "memory"), Error);
  }
}

TEST_CASE("safetensors load_bytes survives every single bit flip of a real file", "[safetensors]") {
  ScratchDir d;
  std::string path = d.file("f.safetensors");
  save({{"w", small_tensor()}, {"mask", full({2}, 1.0, DType::bool_)}}, path);
  std::string bytes = read_file(path);
  int rejected = 0, read = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      try {
        load_bytes(flipped, "flipped");
        ++read; // a flip in the data or in padding can leave a valid file
      } catch (const Error&) {
        ++rejected;
      }
    }
  CHECK(rejected > 0);
  CHECK(read > 0);
}
