// check_object and the JIT against corrupt objects: every truncation, thousands of bit flips and
// targeted damage (offsets, sizes, indices out of range) of a real generated object give a
// clear error or a working library, never a crash; a corrupt cached object is recompiled.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include <kiln/kiln.h>

#include "codegen/cache.h"
#include "codegen/cpu/jit.h"
#include "codegen/cpu/object_check.h"
#include "frontend/frontend_testing.h"

using namespace kiln;
using codegen::cpu::check_object;
namespace fs = std::filesystem;

namespace {

Tensor affine_relu(const Tensor& x) { return (x * 3 - 1).relu(); }

/// The newest entry file of the process-wide cache.
fs::path newest_entry() {
  fs::path best;
  fs::file_time_type when{};
  for (const auto& e : fs::directory_iterator(codegen::DiskCache::global().dir()))
    if (e.path().extension() == ".kobj" && (best.empty() || e.last_write_time() > when)) {
      best = e.path();
      when = e.last_write_time();
    }
  return best;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

/// A real object from the code generator (one kernel, kiln_k0), with its cache key: compiled
/// once through kiln::compile and read back from the kernel cache.
struct RealObject {
  std::string key;
  std::string object;
};
const RealObject& real_object() {
  static const RealObject r = [] {
    REQUIRE(codegen::DiskCache::global().enabled());
    codegen::DiskCache::global().clear();
    Tensor x = randn({9, 17});
    compile(affine_relu)(x);
    std::string bytes = read_file(newest_entry());
    std::string why;
    auto entry = codegen::parse_cache_entry(bytes, &why);
    INFO(why);
    REQUIRE(entry);
    return RealObject{std::string(entry->key), std::string(entry->payload)};
  }();
  return r;
}

template <typename T> T get(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}
template <typename T> void put(std::string& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

Elf64_Ehdr ehdr(const std::string& o) { return get<Elf64_Ehdr>(o, 0); }
size_t shdr_at(const std::string& o, size_t i) { return ehdr(o).e_shoff + i * sizeof(Elf64_Shdr); }
Elf64_Shdr shdr(const std::string& o, size_t i) { return get<Elf64_Shdr>(o, shdr_at(o, i)); }

/// The index of the first section of this type, or 0.
size_t section_of_type(const std::string& o, uint32_t type) {
  for (size_t i = 1; i < ehdr(o).e_shnum; ++i)
    if (shdr(o, i).sh_type == type) return i;
  return 0;
}

/// The file offset of the symbol table entry named `name`, or 0.
size_t symbol_at(const std::string& o, std::string_view name) {
  const size_t symtab = section_of_type(o, SHT_SYMTAB);
  const Elf64_Shdr s = shdr(o, symtab), strtab = shdr(o, s.sh_link);
  for (size_t at = s.sh_offset; at + sizeof(Elf64_Sym) <= s.sh_offset + s.sh_size;
       at += sizeof(Elf64_Sym))
    if (std::string_view(o.data() + strtab.sh_offset + get<Elf64_Sym>(o, at).st_name) == name)
      return at;
  return 0;
}

/// What the JIT made of a (possibly corrupt) object.
enum class Outcome { rejected_by_check, refused_by_jit, loaded };

/// Checks the object, then links it and looks up its kernel; only kiln::Error may come out.
Outcome try_load(const std::string& object) {
  if (!check_object(object)) {
    CHECK_THROWS_WITH(codegen::cpu::load_object(object, "corrupt"),
                      Catch::Contains("malformed object"));
    return Outcome::rejected_by_check;
  }
  try {
    auto lib = codegen::cpu::load_object(object, "corrupt");
    (void)lib->lookup("kiln_k0"); // the link happens here
    return Outcome::loaded;
  } catch (const Error&) {
    return Outcome::refused_by_jit;
  }
}

} // namespace

TEST_CASE("a generated object passes check_object and links", "[object_check][llvm]") {
  const std::string& o = real_object().object;
  auto ok = check_object(o);
  INFO((ok ? std::string() : ok.error().message()));
  REQUIRE(ok);
  auto lib = codegen::cpu::load_object(o, "good");
  CHECK(lib->lookup("kiln_k0") != nullptr);
  CHECK(section_of_type(o, SHT_SYMTAB) != 0);
  CHECK(section_of_type(o, SHT_RELA) != 0);
}

TEST_CASE("check_object rejects every truncation of a generated object", "[object_check][llvm]") {
  const std::string& o = real_object().object;
  for (size_t n = 0; n < o.size(); ++n) {
    INFO("prefix of " << n << " of " << o.size() << " bytes");
    CHECK_FALSE(check_object(std::string_view(o).substr(0, n)));
  }
  CHECK_FALSE(check_object(""));
  CHECK_FALSE(check_object("not an object file"));
}

TEST_CASE("targeted damage to a generated object is a clear error", "[object_check][llvm]") {
  const std::string good = real_object().object;
  const size_t symtab = section_of_type(good, SHT_SYMTAB);
  const size_t rela = section_of_type(good, SHT_RELA);
  REQUIRE(symtab != 0);
  REQUIRE(rela != 0);
  const Elf64_Shdr rela_sh = shdr(good, rela);
  const size_t kernel_sym = symbol_at(good, "kiln_k0");
  REQUIRE(kernel_sym != 0);
  REQUIRE(get<Elf64_Sym>(good, kernel_sym).st_shndx != SHN_UNDEF);
  struct Damage {
    const char* what;
    const char* expect;
    std::function<void(std::string&)> apply;
  };
  auto shdr_field = [&](size_t i, size_t field_offset, uint64_t v) {
    return [=](std::string& o) { put<uint64_t>(o, shdr_at(o, i) + field_offset, v); };
  };
  std::vector<Damage> damages = {
      {"section table offset past the end", "section header table",
       [](std::string& o) { put<uint64_t>(o, offsetof(Elf64_Ehdr, e_shoff), o.size() - 8); }},
      {"section count huge", "section header table",
       [](std::string& o) { put<uint16_t>(o, offsetof(Elf64_Ehdr, e_shnum), 0xfe00); }},
      {"name table index out of range", "section name table index",
       [](std::string& o) { put<uint16_t>(o, offsetof(Elf64_Ehdr, e_shstrndx), 900); }},
      {"wrong machine", "machine",
       [](std::string& o) { put<uint16_t>(o, offsetof(Elf64_Ehdr, e_machine), EM_MIPS); }},
      {"symbol table offset past the end", "outside the object",
       shdr_field(symtab, offsetof(Elf64_Shdr, sh_offset), good.size())},
      {"symbol table size overflows", "outside the object",
       shdr_field(symtab, offsetof(Elf64_Shdr, sh_size), ~uint64_t{0} - 7)},
      {"relocations' size wraps the offset", "outside the object",
       shdr_field(rela, offsetof(Elf64_Shdr, sh_size), ~uint64_t{0} - rela_sh.sh_offset + 25)},
      {"alignment not a power of two", "bad alignment",
       shdr_field(symtab, offsetof(Elf64_Shdr, sh_addralign), 24)},
      {"alignment 2^40", "bad alignment",
       shdr_field(symtab, offsetof(Elf64_Shdr, sh_addralign), uint64_t{1} << 40)},
      {"symbol table linked to itself", "not a string table",
       [&](std::string& o) {
         put<uint32_t>(o, shdr_at(o, symtab) + offsetof(Elf64_Shdr, sh_link),
                       static_cast<uint32_t>(symtab));
       }},
      {"sh_link out of range", "sh_link",
       [&](std::string& o) {
         put<uint32_t>(o, shdr_at(o, rela) + offsetof(Elf64_Shdr, sh_link), 4000);
       }},
      {"relocation target section out of range", "target section",
       [&](std::string& o) {
         put<uint32_t>(o, shdr_at(o, rela) + offsetof(Elf64_Shdr, sh_info), 4000);
       }},
      {"section name out of range", "name offset",
       [&](std::string& o) {
         put<uint32_t>(o, shdr_at(o, rela) + offsetof(Elf64_Shdr, sh_name), 0x7fffffff);
       }},
      {"symbol in section 4000", "section index 4000",
       [&](std::string& o) { put<uint16_t>(o, kernel_sym + offsetof(Elf64_Sym, st_shndx), 4000); }},
      {"symbol past its section", "outside its section",
       [&](std::string& o) {
         put<uint64_t>(o, kernel_sym + offsetof(Elf64_Sym, st_value), uint64_t{1} << 40);
       }},
      {"symbol name out of range", "name offset",
       [&](std::string& o) {
         put<uint32_t>(o, kernel_sym + offsetof(Elf64_Sym, st_name), 0x7fffffff);
       }},
      {"relocation of symbol 10^6", "symbol index",
       [&](std::string& o) {
         const size_t info = rela_sh.sh_offset + offsetof(Elf64_Rela, r_info);
         put<uint64_t>(o, info, ELF64_R_INFO(1000000, ELF64_R_TYPE(get<uint64_t>(o, info))));
       }},
      {"relocation past its section", "outside its target section",
       [&](std::string& o) {
         put<uint64_t>(o, rela_sh.sh_offset + offsetof(Elf64_Rela, r_offset), uint64_t{1} << 33);
       }},
      {"null symbol with a value", "symbol 0 is not the null symbol",
       [&](std::string& o) {
         put<uint64_t>(o, shdr(o, symtab).sh_offset + offsetof(Elf64_Sym, st_value),
                       uint64_t{2} << 40);
       }},
      // Found by cache_fuzzer: JITLink crashed building its error for a relocation against the
      // null symbol (test/fuzz/corpus-cache/crash-null-symbol.kobj).
      {"relocation against the null symbol", "against the null symbol",
       [&](std::string& o) {
         const size_t info = rela_sh.sh_offset + offsetof(Elf64_Rela, r_info);
         put<uint64_t>(o, info, ELF64_R_INFO(0, ELF64_R_TYPE(get<uint64_t>(o, info))));
       }},
      {"undefined symbol with a value", "undefined symbol needs a name",
       [&](std::string& o) {
         const size_t sym = shdr(o, symtab).sh_offset + sizeof(Elf64_Sym); // symbol 1
         put<uint16_t>(o, sym + offsetof(Elf64_Sym, st_shndx), SHN_UNDEF);
         put<uint64_t>(o, sym + offsetof(Elf64_Sym, st_value), 64);
       }},
      {"relocation entry size wrong", "bad entry size",
       shdr_field(rela, offsetof(Elf64_Shdr, sh_entsize), 16)},
      // Found by cache_fuzzer: a null section named .eh_frame, its offset never range-checked,
      // was walked as unwind records (test/fuzz/corpus-cache/crash-null-eh-frame.kobj).
      {"a null section with its bytes past the end", "a null section past section 0",
       [&](std::string& o) {
         put<uint32_t>(o, shdr_at(o, rela) + offsetof(Elf64_Shdr, sh_type), SHT_NULL);
         put<uint64_t>(o, shdr_at(o, rela) + offsetof(Elf64_Shdr, sh_offset), uint64_t{1} << 40);
       }},
  };
  // What kiln's objects never contain is refused even when well-formed: unwind tables and
  // init arrays (the JIT would register or run them), thread-local, common and indirect
  // symbols, GOT and TLS relocations. The last cache fuzzer failure was in that territory.
  const size_t code = static_cast<size_t>(get<Elf64_Sym>(good, kernel_sym).st_shndx);
  auto code_type = [&](uint32_t type) {
    return [=](std::string& o) {
      put<uint32_t>(o, shdr_at(o, code) + offsetof(Elf64_Shdr, sh_type), type);
    };
  };
  auto code_flags = [&](uint64_t set, uint64_t clear) {
    return [=](std::string& o) {
      const size_t at = shdr_at(o, code) + offsetof(Elf64_Shdr, sh_flags);
      put<uint64_t>(o, at, (get<uint64_t>(o, at) | set) & ~clear);
    };
  };
  auto kernel_type = [&](unsigned type) {
    return [=](std::string& o) {
      put<uint8_t>(o, kernel_sym + offsetof(Elf64_Sym, st_info), ELF64_ST_INFO(STB_GLOBAL, type));
    };
  };
  auto relocation_type = [&](uint32_t type) {
    return [=](std::string& o) {
      const size_t info = rela_sh.sh_offset + offsetof(Elf64_Rela, r_info);
      put<uint64_t>(o, info, ELF64_R_INFO(ELF64_R_SYM(get<uint64_t>(o, info)), type));
    };
  };
  damages.insert(
      damages.end(),
      {
          {"an init array", "section type 14 has no place", code_type(SHT_INIT_ARRAY)},
          {"an unwind section", "section type", code_type(SHT_X86_64_UNWIND)},
          {"a group section", "section type 17 has no place", code_type(SHT_GROUP)},
          {"thread-local code", "thread-local", code_flags(SHF_TLS, 0)},
          {"an excluded section", "unknown ones", code_flags(SHF_EXCLUDE, 0)},
          {"a section named after the kernel", "a section named 'kiln_k0'",
           [&](std::string& o) {
             put<uint32_t>(o, shdr_at(o, code) + offsetof(Elf64_Shdr, sh_name),
                           get<Elf64_Sym>(o, kernel_sym).st_name);
           }},
          {"an indirect function", "type 10 has no place", kernel_type(STT_GNU_IFUNC)},
          {"a thread-local symbol", "type 6 has no place", kernel_type(STT_TLS)},
          {"a common symbol", "a common symbol",
           [&](std::string& o) {
             put<uint16_t>(o, kernel_sym + offsetof(Elf64_Sym, st_shndx), SHN_COMMON);
           }},
          {"a GOT relocation", "type 9 has no place", relocation_type(R_X86_64_GOTPCREL)},
          {"a TLS relocation", "type 19 has no place", relocation_type(R_X86_64_TLSGD)},
          // Found by cache_fuzzer: the kernel's section turned into unallocated zero-fill;
          // JITLink copied its contents from address 0
          // (corpus-cache/crash-unallocated-zero-fill.kobj).
          {"unallocated zero-fill", "zero-fill that is not allocated",
           [&](std::string& o) {
             code_type(SHT_NOBITS)(o);
             code_flags(0, SHF_ALLOC)(o);
           }},
          {"a symbol in the symbol table", "not allocated code or data",
           [&](std::string& o) {
             put<uint16_t>(o, kernel_sym + offsetof(Elf64_Sym, st_shndx),
                           static_cast<uint16_t>(symtab));
           }},
          {"relocations of the symbol table", "not allocated code or data with bytes",
           [&](std::string& o) {
             put<uint32_t>(o, shdr_at(o, rela) + offsetof(Elf64_Shdr, sh_info),
                           static_cast<uint32_t>(symtab));
           }},
          {"flags on the null section", "section 0 is not the null section",
           shdr_field(0, offsetof(Elf64_Shdr, sh_flags), SHF_ALLOC)},
      });
  for (const Damage& d : damages) {
    INFO(d.what);
    std::string bad = good;
    d.apply(bad);
    auto r = check_object(bad);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains(d.expect));
    CHECK_THROWS_WITH(codegen::cpu::load_object(bad, "damaged"),
                      Catch::Contains("can't load object damaged") &&
                          Catch::Contains("malformed object"));
  }
}

TEST_CASE("bit flips anywhere in a generated object never crash the JIT", "[object_check][llvm]") {
  const std::string good = real_object().object;
  const Elf64_Ehdr eh = ehdr(good);
  // Every bit of the structures JITLink reads (the ELF header, the section table, the symbol
  // and relocation tables); one bit in every 5th byte elsewhere (code, constants, names).
  auto structural = [&](size_t at) {
    if (at < sizeof(Elf64_Ehdr)) return true;
    if (at >= eh.e_shoff && at < eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr)) return true;
    for (size_t i = 1; i < eh.e_shnum; ++i) {
      Elf64_Shdr s = shdr(good, i);
      if ((s.sh_type == SHT_SYMTAB || s.sh_type == SHT_RELA) && at >= s.sh_offset &&
          at < s.sh_offset + s.sh_size)
        return true;
    }
    return false;
  };
  int counts[3] = {0, 0, 0};
  for (size_t at = 0; at < good.size(); ++at) {
    const bool all_bits = structural(at);
    if (!all_bits && at % 5 != 0) continue;
    for (int bit = 0; bit < 8; ++bit) {
      if (!all_bits && bit != static_cast<int>(at % 8)) continue;
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
      INFO("byte " << at << " bit " << bit);
      ++counts[static_cast<int>(try_load(bad))];
    }
  }
  INFO("rejected " << counts[0] << ", refused by the JIT " << counts[1] << ", loaded "
                   << counts[2]);
  CHECK(counts[0] > 100);
  CHECK(counts[2] > 0);
}

TEST_CASE("a cached object that fails check_object is a miss and is recompiled",
          "[object_check][llvm]") {
  const RealObject& r = real_object();
  std::string bad = r.object;
  put<uint64_t>(bad, offsetof(Elf64_Ehdr, e_shoff), bad.size()); // the section table: gone
  // Stored through the cache: the checksum matches, only the object inside is bad.
  codegen::DiskCache::global().store(r.key, bad);
  REQUIRE(codegen::DiskCache::global().load(r.key) == bad);
  Tensor x = randn({9, 17});
  auto f = compile(affine_relu);
  Tensor got = f(x);
  CHECK(f.stats().disk_cache_hits == 0);
  CHECK(kiln::testing::close_to_eager(got, affine_relu, x) == std::nullopt);
  CHECK(codegen::DiskCache::global().load(r.key) == r.object); // rewritten by the recompile
}

TEST_CASE("bundles of objects split back, and a damaged bundle is a clear error",
          "[object_check][llvm]") {
  const std::string a = "first object", b = "the second";
  const std::string bundle = codegen::cpu::bundle_objects(std::vector<std::string>{a, b});
  Expected<std::vector<std::string_view>> parts = codegen::cpu::split_objects(bundle);
  REQUIRE(parts);
  REQUIRE(parts->size() == 2);
  CHECK((*parts)[0] == a);
  CHECK((*parts)[1] == b);
  // Not a bundle: the blob is its one object.
  parts = codegen::cpu::split_objects("\x7f"
                                      "ELF...");
  REQUIRE(parts);
  CHECK(parts->size() == 1);
  // Every truncation, a count of one, an object running past the end, bytes after the end.
  for (size_t n = 8; n < bundle.size(); ++n) {
    INFO("prefix of " << n);
    CHECK_FALSE(codegen::cpu::split_objects(std::string_view(bundle).substr(0, n)));
  }
  std::string one = bundle;
  one[8] = 1;
  CHECK_FALSE(codegen::cpu::split_objects(one));
  std::string long_length = bundle;
  long_length[12] = static_cast<char>(0xff);
  CHECK_FALSE(codegen::cpu::split_objects(long_length));
  CHECK_FALSE(codegen::cpu::split_objects(bundle + "x"));
  // A bundle's objects are each checked: damage in the second is named.
  const std::string& o = real_object().object;
  std::string damaged = o;
  damaged[0] = 'X';
  auto bad = check_object(codegen::cpu::bundle_objects(std::vector<std::string>{o, damaged}));
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("malformed object 1 of a bundle"));
  // Two well-formed objects that define the same kernel: the JIT refuses, with an error.
  CHECK(try_load(codegen::cpu::bundle_objects(std::vector<std::string>{o, o})) ==
        Outcome::refused_by_jit);
}
