// `kiln opt` on loop IR: parse, verify and print kernels, or compile them with the CPU JIT,
// run them on given or generated inputs and print their output buffers (`--run`).
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "codegen/cpu/jit_target.h"
#include "codegen/schedule.h"
#include "ir/kernel/parser.h"
#include "ir/kernel/verifier.h"
#include "ir/literal.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

using ir::kernel::Buffer;
using ir::kernel::Kernel;
using ir::kernel::ParsedKernel;

std::string at(const std::string& file, ir::kernel::SourceLoc loc) {
  return file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col) + ": error: ";
}

/// Writes element i of a buffer of dtype t from a double (floats) or an int64 (the rest).
void put(DType t, unsigned char* p, int64_t i, double f, int64_t n) {
  switch (t) {
  case DType::f32: reinterpret_cast<float*>(p)[i] = static_cast<float>(f); break;
  case DType::f64: reinterpret_cast<double*>(p)[i] = f; break;
  case DType::f16: reinterpret_cast<Half*>(p)[i] = Half(static_cast<float>(f)); break;
  case DType::bf16: reinterpret_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(f)); break;
  case DType::i8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(n); break;
  case DType::u8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(n); break;
  case DType::i32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(n); break;
  case DType::i64: reinterpret_cast<int64_t*>(p)[i] = n; break;
  case DType::bool_: p[i] = n != 0; break;
  }
}

std::string show(DType t, const unsigned char* p, int64_t i) {
  char buf[64];
  switch (t) {
  case DType::f32:
    std::snprintf(buf, sizeof buf, "%.9g",
                  static_cast<double>(reinterpret_cast<const float*>(p)[i]));
    break;
  case DType::f16:
  case DType::bf16: {
    const float f = t == DType::f16 ? static_cast<float>(reinterpret_cast<const Half*>(p)[i])
                                    : static_cast<float>(reinterpret_cast<const BFloat16*>(p)[i]);
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
    break;
  }
  case DType::f64:
    std::snprintf(buf, sizeof buf, "%.17g", reinterpret_cast<const double*>(p)[i]);
    break;
  case DType::i8: return std::to_string(reinterpret_cast<const int8_t*>(p)[i]);
  case DType::u8: return std::to_string(reinterpret_cast<const uint8_t*>(p)[i]);
  case DType::i32: return std::to_string(reinterpret_cast<const int32_t*>(p)[i]);
  case DType::i64: return std::to_string(reinterpret_cast<const int64_t*>(p)[i]);
  case DType::bool_: return p[i] ? "true" : "false";
  }
  return buf;
}

/// Fills a buffer from "v,v,...": floats as ir::parse_double reads them (nan, inf, -0),
/// integers exactly and in the dtype's range, bools as true/false/0/1.
bool fill_from_text(const Buffer& b, unsigned char* p, std::string_view text, std::string& why) {
  std::vector<std::string_view> items;
  while (true) {
    const size_t comma = text.find(',');
    items.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  if (static_cast<int64_t>(items.size()) != b.extent) {
    why =
        std::to_string(items.size()) + " values for a buffer of extent " + std::to_string(b.extent);
    return false;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string_view s = items[i];
    const int64_t k = static_cast<int64_t>(i);
    if (b.dtype == DType::bool_) {
      if (s != "true" && s != "false" && s != "0" && s != "1") {
        why = detail::str("'", s, "' is not a bool (true, false, 0, 1)");
        return false;
      }
      put(b.dtype, p, k, 0, s == "true" || s == "1");
      continue;
    }
    if (is_floating(b.dtype)) {
      double f = 0;
      if (ir::parse_double(s, f) != ir::LiteralStatus::ok) {
        why = detail::str("'", s, "' is not a number");
        return false;
      }
      put(b.dtype, p, k, f, 0);
      continue;
    }
    int64_t n = 0;
    const int64_t lo = b.dtype == DType::i8    ? -128
                       : b.dtype == DType::u8  ? 0
                       : b.dtype == DType::i32 ? INT32_MIN
                                               : INT64_MIN;
    const int64_t hi = b.dtype == DType::i8    ? 127
                       : b.dtype == DType::u8  ? 255
                       : b.dtype == DType::i32 ? INT32_MAX
                                               : INT64_MAX;
    if (ir::parse_int(s, n) != ir::LiteralStatus::ok || n < lo || n > hi) {
      why = detail::str("'", s, "' is not an integer of ", b.dtype);
      return false;
    }
    put(b.dtype, p, k, 0, n);
  }
  return true;
}

/// One kernel's buffers: the bytes of each, and their base pointers in Kernel::buffers order.
struct Buffers {
  std::vector<std::vector<unsigned char>> bytes;
  std::vector<char*> bases;
};

/// Inputs without --input hold their element index (bool: whether it is odd); outputs start
/// as zeros.
bool make_buffers(const Kernel& k, const std::vector<std::pair<std::string, std::string>>& given,
                  std::unordered_set<std::string>& used, Buffers& out, std::string& why) {
  for (const Buffer& b : k.buffers) {
    // Eight spare bytes: a buffer of extent 0 still has an address.
    out.bytes.emplace_back(static_cast<size_t>(b.extent * itemsize(b.dtype)) + 8, 0);
    unsigned char* p = out.bytes.back().data();
    out.bases.push_back(reinterpret_cast<char*>(p));
    bool filled = false;
    for (const auto& [name, values] : given) {
      if (name != b.name) continue;
      used.insert(name);
      if (!fill_from_text(b, p, values, why)) {
        why = "--input " + name + ": " + why;
        return false;
      }
      filled = true;
    }
    if (filled || b.output) continue;
    for (int64_t i = 0; i < b.extent; ++i)
      put(b.dtype, p, i, static_cast<double>(i), b.dtype == DType::bool_ ? i % 2 : i);
  }
  return true;
}

int run_kernels(const std::vector<ParsedKernel>& parsed,
                const std::vector<codegen::Schedule>& schedules, const std::string& file,
                std::span<const std::string> inputs, std::ostream& out) {
  std::vector<std::pair<std::string, std::string>> given;
  for (const std::string& in : inputs) {
    const size_t eq = in.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "kiln opt: --input '" << in << "' is not NAME=v,v,...\n";
      return 2;
    }
    given.emplace_back(in.substr(0, eq), in.substr(eq + 1));
  }
  std::vector<Kernel> kernels;
  std::unordered_set<std::string> names;
  for (const ParsedKernel& pk : parsed) {
    if (!names.insert(pk.kernel.name).second) {
      std::cerr << at(file, pk.at) << "kernel " << pk.kernel.name
                << " is defined twice; --run needs distinct names\n";
      return 1;
    }
    kernels.push_back(pk.kernel);
  }
  try {
    const codegen::Target& target = codegen::cpu::jit_target();
    Expected<std::string> object = target.compile(kernels, schedules);
    if (!object) {
      std::cerr << "kiln opt: " << object.error().message() << "\n";
      return 1;
    }
    Expected<codegen::LoadedCode> code = target.load(*object, kernels);
    if (!code) {
      std::cerr << "kiln opt: " << code.error().message() << "\n";
      return 1;
    }
    std::unordered_set<std::string> used;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const Kernel& k = kernels[i];
      Buffers bufs;
      std::string why;
      if (!make_buffers(k, given, used, bufs, why)) {
        std::cerr << "kiln opt: kernel " << k.name << ": " << why << "\n";
        return 1;
      }
      const KernelEntry entry = code->entries[i];
      int64_t points = k.outer_numel();
      if (points > 0) entry(bufs.bases.data(), 0, schedules[i].rows(k));
      out << "// kernel " << k.name << "\n";
      for (size_t b = 0; b < k.buffers.size(); ++b) {
        const Buffer& buf = k.buffers[b];
        if (!buf.output) continue;
        out << buf.name << " = [";
        for (int64_t e = 0; e < buf.extent; ++e)
          out << (e ? ", " : "") << show(buf.dtype, bufs.bytes[b].data(), e);
        out << "]\n";
      }
    }
    for (const auto& [name, values] : given)
      if (!used.count(name)) {
        std::cerr << "kiln opt: --input " << name << ": no kernel has a buffer named " << name
                  << "\n";
        return 2;
      }
  } catch (const Error& e) {
    std::cerr << file << ": error: " << e.message() << "\n";
    return 1;
  }
  return 0;
}

} // namespace

int opt_kernels(const std::string& text, const std::string& file, const KernelOptOptions& o,
                std::ostream& out) {
  Expected<std::vector<ParsedKernel>> parsed = ir::kernel::parse_kernels(text, file);
  if (!parsed) {
    std::cerr << parsed.error().message() << "\n";
    return 1;
  }
  std::vector<codegen::Schedule> schedules;
  const codegen::ScheduleOverride fixed =
      codegen::parse_schedule_override(codegen::schedule_override_env());
  for (const ParsedKernel& pk : *parsed) {
    if (o.verify || o.run)
      if (auto v = ir::kernel::verify(pk, file); !v) {
        std::cerr << v.error().message() << "\n";
        return 1;
      }
    if (!pk.schedule) {
      schedules.push_back(
          codegen::choose_schedule(pk.kernel, codegen::cpu::jit_target().vector_bytes(), fixed));
      continue;
    }
    Expected<codegen::Schedule> s = codegen::parse_schedule(*pk.schedule);
    if (!s) {
      std::cerr << at(file, pk.schedule_at) << s.error().message() << "\n";
      return 1;
    }
    if (auto fits = codegen::check_schedule(*s, pk.kernel); !fits) {
      std::cerr << at(file, pk.schedule_at) << fits.error().message() << "\n";
      return 1;
    }
    schedules.push_back(*s);
  }
  if (o.run) return run_kernels(*parsed, schedules, file, o.inputs, out);
  for (size_t i = 0; i < parsed->size(); ++i) {
    const ParsedKernel& pk = (*parsed)[i];
    if (pk.schedule) out << "// schedule " << schedules[i].str() << "\n";
    out << pk.kernel.str();
  }
  return 0;
}

} // namespace kiln::tools
