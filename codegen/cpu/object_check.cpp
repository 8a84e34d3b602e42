// check_object: every structure JITLink reads from an ELF object, checked to lie inside the
// buffer and to refer to things that exist, and the object held to what kiln's kernel objects
// contain, so that a corrupt cache entry is a miss, not a crash.
#include "codegen/cpu/object_check.h"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::codegen::cpu {
namespace {

/// Largest section alignment accepted: kernels need 64 (AVX-512 constants); LLVM emits 4096
/// at most for pages. A huge one would make the JIT's allocator reserve that much.
constexpr uint64_t kMaxAlign = uint64_t{1} << 16;
/// Largest zero-fill (SHT_NOBITS) section accepted: its size takes no bytes in the file.
constexpr uint64_t kMaxZeroFill = uint64_t{1} << 28;

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;
#endif

/// SHF_X86_64_LARGE, the x86-64 psABI's flag of large-model sections (glibc's elf.h lacks it).
constexpr uint64_t kX86_64Large = 0x10000000;
/// The section flags of kernel objects (`.ltext` is large code on x86-64); the others
/// (thread-local, grouped, compressed, excluded, OS- or processor-specific) are refused.
constexpr uint64_t kKernelSectionFlags = SHF_WRITE | SHF_ALLOC | SHF_EXECINSTR | SHF_MERGE |
                                         SHF_STRINGS | SHF_INFO_LINK |
                                         (kHostMachine == EM_X86_64 ? kX86_64Large : 0);

/// Reads a T (an ELF struct or integer: the host is little-endian) at `offset`, which the
/// caller has checked to be in range; memcpy, since the file's fields may be misaligned.
template <typename T> T read_at(std::string_view bytes, uint64_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

/// Whether [offset, offset + size) lies inside a buffer of `total` bytes, without overflow.
bool in_range(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

/// The bytes patched by a relocation at its offset. kiln's objects (the large code model)
/// use R_X86_64_64 alone; the other plain data and branch forms are accepted, and nothing
/// that makes JITLink build GOT, PLT or TLS entries or rewrite instructions around the
/// offset: an unknown type is refused (width 0).
uint64_t x86_64_patch_width(uint32_t type) {
  switch (type) {
  case R_X86_64_NONE: return 0;
  case R_X86_64_PC32:
  case R_X86_64_PLT32:
  case R_X86_64_32:
  case R_X86_64_32S: return 4;
  case R_X86_64_64:
  case R_X86_64_PC64: return 8;
  default: return ~uint64_t{0};
  }
}

/// Width of the field a relocation patches; ~0 for a type this host refuses.
uint64_t host_patch_width(uint32_t type) {
  if (kHostMachine == EM_X86_64) return x86_64_patch_width(type);
  // AArch64: instructions are 4 bytes, data relocations up to 8.
  return 8;
}

/// Whether a section of this name is one a kernel object has: code, constants, data, their
/// relocations, the tables, and the stack note. Anything else (.eh_frame, .init_array,
/// .tdata, debug info, ...) would make the JIT register, run or resolve something on the
/// object's word.
bool kernel_section_name(std::string_view name) {
  for (std::string_view exact : {".strtab", ".symtab", ".shstrtab", ".note.GNU-stack", ".comment"})
    if (name == exact) return true;
  if (name.starts_with(".rela."))
    name.remove_prefix(5);
  else if (name.starts_with(".rel."))
    name.remove_prefix(4);
  for (std::string_view kind :
       {".text", ".ltext", ".rodata", ".lrodata", ".data", ".ldata", ".bss", ".lbss"})
    if (name == kind || (name.starts_with(kind) && name[kind.size()] == '.')) return true;
  return false;
}

/// The checker: one pass over the section table, then the tables that refer to sections.
class ObjectChecker {
public:
  explicit ObjectChecker(std::string_view bytes) : b_(bytes), size_(bytes.size()) {}

  /// The first problem found, or "" when the object is well-formed.
  std::string run() {
    if (std::string e = header(); !e.empty()) return e;
    if (std::string e = sections(); !e.empty()) return e;
    for (uint64_t i = 0; i < shdrs_.size(); ++i) {
      std::string e;
      switch (shdrs_[i].sh_type) {
      case SHT_SYMTAB: e = symbols(i); break;
      case SHT_RELA: e = relocations(i, true); break;
      case SHT_REL: e = relocations(i, false); break;
      default: break;
      }
      if (!e.empty()) return e;
    }
    return "";
  }

private:
  std::string header() {
    if (size_ < sizeof(Elf64_Ehdr))
      return "the object has " + std::to_string(size_) + " bytes, fewer than an ELF header";
    eh_ = read_at<Elf64_Ehdr>(b_, 0);
    if (std::memcmp(eh_.e_ident, ELFMAG, SELFMAG) != 0) return "no ELF magic";
    if (eh_.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
    if (eh_.e_ident[EI_DATA] != ELFDATA2LSB) return "not a little-endian ELF file";
    if (eh_.e_ident[EI_VERSION] != EV_CURRENT || eh_.e_version != EV_CURRENT)
      return "unknown ELF version";
    if (eh_.e_type != ET_REL)
      return "not a relocatable object (e_type " + std::to_string(eh_.e_type) + ")";
    if (eh_.e_machine != kHostMachine)
      return "built for machine " + std::to_string(eh_.e_machine) + ", not this host's";
    if (eh_.e_ehsize != sizeof(Elf64_Ehdr)) return "bad ELF header size";
    if (eh_.e_phnum != 0) return "a relocatable object with program headers";
    if (eh_.e_shentsize != sizeof(Elf64_Shdr)) return "bad section header entry size";
    if (eh_.e_shnum == 0 || eh_.e_shnum >= SHN_LORESERVE)
      return "bad section count " + std::to_string(eh_.e_shnum);
    if (!in_range(eh_.e_shoff, uint64_t{eh_.e_shnum} * sizeof(Elf64_Shdr), size_))
      return "the section header table (offset " + std::to_string(eh_.e_shoff) + ", " +
             std::to_string(eh_.e_shnum) + " entries) is outside the object";
    if (eh_.e_shstrndx == SHN_UNDEF || eh_.e_shstrndx >= eh_.e_shnum)
      return "section name table index " + std::to_string(eh_.e_shstrndx) + " out of range";
    return "";
  }

  std::string section_label(uint64_t i) const { return "section " + std::to_string(i); }

  /// The name of section i (checked by sections()), or "" before the checks.
  std::string_view section_name(uint64_t i) const {
    if (!names_checked_) return "";
    const Elf64_Shdr& strtab = shdrs_[eh_.e_shstrndx];
    return std::string_view(b_.data() + strtab.sh_offset + shdrs_[i].sh_name);
  }

  std::string sections() {
    shdrs_.resize(eh_.e_shnum);
    for (uint64_t i = 0; i < shdrs_.size(); ++i)
      shdrs_[i] = read_at<Elf64_Shdr>(b_, eh_.e_shoff + i * sizeof(Elf64_Shdr));
    const Elf64_Shdr null_section{};
    if (std::memcmp(&shdrs_[0], &null_section, sizeof null_section) != 0)
      return "section 0 is not the null section (all zero)";
    uint64_t symtabs = 0;
    for (uint64_t i = 1; i < shdrs_.size(); ++i) {
      const Elf64_Shdr& s = shdrs_[i];
      const std::string label = section_label(i);
      // An inactive section holds nothing a kernel object needs, and its offset and size
      // go unchecked: the cache fuzzer named one .eh_frame and had it walked out of range.
      if (s.sh_type == SHT_NULL) return label + ": a null section past section 0";
      if (s.sh_type == SHT_NOBITS) {
        if (s.sh_size > kMaxZeroFill)
          return label + ": zero-fill size " + std::to_string(s.sh_size) + " over the limit";
      } else if (!in_range(s.sh_offset, s.sh_size, size_)) {
        return label + ": bytes [" + std::to_string(s.sh_offset) + ", +" +
               std::to_string(s.sh_size) + ") are outside the object of " + std::to_string(size_) +
               " bytes";
      }
      if (s.sh_addralign > kMaxAlign || (s.sh_addralign & (s.sh_addralign - 1)) != 0)
        return label + ": bad alignment " + std::to_string(s.sh_addralign);
      if (s.sh_link >= shdrs_.size())
        return label + ": sh_link " + std::to_string(s.sh_link) + " out of range";
      if (s.sh_type == SHT_STRTAB) {
        if (s.sh_size == 0 || b_[s.sh_offset] != '\0' || b_[s.sh_offset + s.sh_size - 1] != '\0')
          return label + ": a string table must begin and end with NUL";
      }
      if (s.sh_type == SHT_SYMTAB && ++symtabs > 1) return "more than one symbol table";
      if (s.sh_type != SHT_PROGBITS && s.sh_type != SHT_NOBITS && s.sh_type != SHT_STRTAB &&
          s.sh_type != SHT_SYMTAB && s.sh_type != SHT_RELA && s.sh_type != SHT_REL)
        return label + ": section type " + std::to_string(s.sh_type) +
               " has no place in a kernel object";
      if ((s.sh_flags & ~kKernelSectionFlags) != 0)
        return label + ": flags " + std::to_string(s.sh_flags) +
               " (thread-local, grouped, compressed or unknown ones) have no place in a kernel "
               "object";
      // Zero-fill is memory the JIT allocates: the cache fuzzer had a symbol looked up in an
      // unallocated one, and JITLink copied its contents from address 0.
      if (s.sh_type == SHT_NOBITS && (s.sh_flags & SHF_ALLOC) == 0)
        return label + ": zero-fill that is not allocated";
    }
    const Elf64_Shdr& names = shdrs_[eh_.e_shstrndx];
    if (names.sh_type != SHT_STRTAB) return "the section name table is not a string table";
    for (uint64_t i = 0; i < shdrs_.size(); ++i)
      if (shdrs_[i].sh_name >= names.sh_size)
        return section_label(i) + ": name offset " + std::to_string(shdrs_[i].sh_name) +
               " out of range";
    names_checked_ = true;
    for (uint64_t i = 1; i < shdrs_.size(); ++i)
      if (const std::string_view name = section_name(i); !kernel_section_name(name))
        return section_label(i) + ": a section named '" + std::string(name.substr(0, 64)) +
               "' has no place in a kernel object";
    return "";
  }

  /// Checks that section `link` is a string table (for the table at `i`).
  std::string linked_strtab(uint64_t i, uint64_t link) const {
    if (link == 0 || shdrs_[link].sh_type != SHT_STRTAB)
      return section_label(i) + ": sh_link " + std::to_string(link) + " is not a string table";
    return "";
  }

  std::string symbols(uint64_t i) {
    const Elf64_Shdr& s = shdrs_[i];
    const std::string label = section_label(i) + " (symbol table)";
    if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_size % sizeof(Elf64_Sym) != 0)
      return label + ": bad entry size";
    if (std::string e = linked_strtab(i, s.sh_link); !e.empty()) return e;
    const Elf64_Shdr& strtab = shdrs_[s.sh_link];
    const uint64_t n = s.sh_size / sizeof(Elf64_Sym);
    if (n == 0) return label + ": empty (no null symbol)";
    if (s.sh_info == 0 || s.sh_info > n)
      return label + ": first global index " + std::to_string(s.sh_info) + " out of range";
    const auto null_symbol = read_at<Elf64_Sym>(b_, s.sh_offset);
    const Elf64_Sym zero{};
    if (std::memcmp(&null_symbol, &zero, sizeof zero) != 0)
      return label + ": symbol 0 is not the null symbol (all zero)";
    for (uint64_t k = 1; k < n; ++k) {
      const auto sym = read_at<Elf64_Sym>(b_, s.sh_offset + k * sizeof(Elf64_Sym));
      const std::string what = label + ": symbol " + std::to_string(k);
      if (sym.st_name >= strtab.sh_size) return what + ": name offset out of range";
      const unsigned bind = ELF64_ST_BIND(sym.st_info), type = ELF64_ST_TYPE(sym.st_info);
      if (bind != STB_LOCAL && bind != STB_GLOBAL && bind != STB_WEAK)
        return what + ": unknown binding " + std::to_string(bind);
      if ((k < s.sh_info) != (bind == STB_LOCAL))
        return what + ": locals must come before the first global index";
      // No thread-local, common or indirect (resolver-run) symbols: kernel objects have none.
      if (type != STT_NOTYPE && type != STT_OBJECT && type != STT_FUNC && type != STT_SECTION &&
          type != STT_FILE)
        return what + ": type " + std::to_string(type) + " has no place in a kernel object";
      const uint16_t shndx = sym.st_shndx;
      if (shndx == SHN_COMMON) return what + ": a common symbol has no place in a kernel object";
      if (shndx == SHN_UNDEF) {
        // An external the JIT resolves by name: a name, and nothing else.
        if (b_[strtab.sh_offset + sym.st_name] == '\0' || sym.st_value != 0)
          return what + ": an undefined symbol needs a name and value 0";
        continue;
      }
      if (shndx == SHN_ABS) continue;
      if (shndx >= shdrs_.size())
        return what + ": section index " + std::to_string(shndx) + " out of range";
      const Elf64_Shdr& target = shdrs_[shndx];
      if ((target.sh_flags & SHF_ALLOC) == 0 ||
          (target.sh_type != SHT_PROGBITS && target.sh_type != SHT_NOBITS))
        return what + ": defined in section " + std::to_string(shndx) +
               ", which is not allocated code or data";
      if (!in_range(sym.st_value, sym.st_size, target.sh_size))
        return what + ": [" + std::to_string(sym.st_value) + ", +" + std::to_string(sym.st_size) +
               ") is outside its section of " + std::to_string(target.sh_size) + " bytes";
    }
    return "";
  }

  std::string relocations(uint64_t i, bool rela) {
    const Elf64_Shdr& s = shdrs_[i];
    const std::string label = section_label(i) + " (relocations)";
    const uint64_t entsize = rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
    if (s.sh_entsize != entsize || s.sh_size % entsize != 0) return label + ": bad entry size";
    if (s.sh_link == 0 || shdrs_[s.sh_link].sh_type != SHT_SYMTAB)
      return label + ": sh_link " + std::to_string(s.sh_link) + " is not the symbol table";
    if (s.sh_info == 0 || s.sh_info >= shdrs_.size())
      return label + ": target section " + std::to_string(s.sh_info) + " out of range";
    const Elf64_Shdr& target = shdrs_[s.sh_info];
    if (target.sh_type != SHT_PROGBITS || (target.sh_flags & SHF_ALLOC) == 0)
      return label + ": target section " + std::to_string(s.sh_info) +
             " is not allocated code or data with bytes";
    const uint64_t symbols = shdrs_[s.sh_link].sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < s.sh_size / entsize; ++k) {
      const uint64_t at = s.sh_offset + k * entsize;
      const uint64_t offset = read_at<uint64_t>(b_, at);
      const uint64_t info = read_at<uint64_t>(b_, at + 8);
      const std::string what = label + ": relocation " + std::to_string(k);
      if (ELF64_R_SYM(info) >= symbols)
        return what + ": symbol index " + std::to_string(ELF64_R_SYM(info)) + " out of range";
      // Symbol 0 means "no symbol": only a no-op relocation may use it (JITLink crashes
      // building the error for any other).
      if (ELF64_R_SYM(info) == 0 && ELF64_R_TYPE(info) != 0)
        return what + ": type " + std::to_string(ELF64_R_TYPE(info)) + " against the null symbol";
      const uint64_t width = host_patch_width(static_cast<uint32_t>(ELF64_R_TYPE(info)));
      if (width == ~uint64_t{0})
        return what + ": type " + std::to_string(ELF64_R_TYPE(info)) +
               " has no place in a kernel object";
      if (!in_range(offset, width, target.sh_size))
        return what + ": offset " + std::to_string(offset) + " (type " +
               std::to_string(ELF64_R_TYPE(info)) + ") is outside its target section of " +
               std::to_string(target.sh_size) + " bytes";
    }
    return "";
  }

  std::string_view b_;
  uint64_t size_;
  Elf64_Ehdr eh_{};
  std::vector<Elf64_Shdr> shdrs_;
  bool names_checked_ = false;
};

} // namespace

namespace {

constexpr std::string_view kBundleMagic = "KILNOBJS";
constexpr uint32_t kMaxBundled = 256;

template <typename T> T read_le(std::string_view bytes, size_t at) {
  T v = 0;
  for (size_t k = 0; k < sizeof(T); ++k)
    v |= static_cast<T>(static_cast<unsigned char>(bytes[at + k])) << (8 * k);
  return v;
}

template <typename T> void write_le(std::string& out, T v) {
  for (size_t k = 0; k < sizeof(T); ++k)
    out += static_cast<char>((v >> (8 * k)) & 0xff);
}

} // namespace

Expected<std::vector<std::string_view>> split_objects(std::string_view blob) {
  if (!blob.starts_with(kBundleMagic)) return std::vector<std::string_view>{blob};
  const size_t header = kBundleMagic.size() + sizeof(uint32_t);
  if (blob.size() < header) return Error::without_location("malformed bundle: truncated header");
  const uint32_t count = read_le<uint32_t>(blob, kBundleMagic.size());
  if (count < 2 || count > kMaxBundled)
    return Error::without_location("malformed bundle: " + std::to_string(count) + " objects");
  std::vector<std::string_view> objects;
  size_t at = header;
  for (uint32_t k = 0; k < count; ++k) {
    if (blob.size() - at < sizeof(uint64_t))
      return Error::without_location("malformed bundle: object " + std::to_string(k) +
                                     "'s length is cut off");
    const uint64_t size = read_le<uint64_t>(blob, at);
    at += sizeof(uint64_t);
    if (size > blob.size() - at)
      return Error::without_location("malformed bundle: object " + std::to_string(k) +
                                     " runs past the end");
    objects.push_back(blob.substr(at, static_cast<size_t>(size)));
    at += static_cast<size_t>(size);
  }
  if (at != blob.size()) return Error::without_location("malformed bundle: bytes after the end");
  return objects;
}

std::string bundle_objects(std::span<const std::string> objects) {
  KILN_ASSERT(objects.size() >= 2 && objects.size() <= kMaxBundled, "a bundle of ", objects.size(),
              " objects");
  std::string out(kBundleMagic);
  write_le<uint32_t>(out, static_cast<uint32_t>(objects.size()));
  for (const std::string& o : objects) {
    write_le<uint64_t>(out, o.size());
    out += o;
  }
  return out;
}

Expected<void> check_object(std::string_view object) {
  Expected<std::vector<std::string_view>> parts = split_objects(object);
  if (!parts) return parts.error();
  for (size_t k = 0; k < parts->size(); ++k) {
    std::string problem = ObjectChecker((*parts)[k]).run();
    if (problem.empty()) continue;
    return Error::without_location((parts->size() > 1
                                        ? "malformed object " + std::to_string(k) + " of a bundle: "
                                        : std::string("malformed object: ")) +
                                   problem);
  }
  return {};
}

} // namespace kiln::codegen::cpu
