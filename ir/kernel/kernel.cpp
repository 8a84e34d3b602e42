// Kernel: text form and domain helpers.
#include "ir/kernel/kernel.h"

#include <cstdio>
#include <cstring>
#include <sstream>

namespace kiln::ir::kernel {

std::vector<int64_t> Kernel::extents() const {
  std::vector<int64_t> e = outer;
  e.insert(e.end(), inner.begin(), inner.end());
  return e;
}

int64_t Kernel::outer_numel() const {
  int64_t n = 1;
  for (int64_t s : outer)
    n *= s;
  return n;
}

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += ",";
    s += std::to_string(v[k]);
  }
  s += "]";
  return s;
}

void print_instr(std::ostream& os, const Kernel& k, int id) {
  const Instr& in = k.instrs[static_cast<size_t>(id)];
  os << "  %" << id << ":" << dtype_name(in.dtype) << " = ";
  auto args = [&] {
    for (size_t a = 0; a < in.args.size(); ++a)
      os << (a ? ", %" : "%") << in.args[a];
  };
  switch (in.kind) {
  case Instr::Kind::load:
    os << "load " << k.buffers[static_cast<size_t>(in.buffer)].name << "[" << in.index.str() << "]";
    break;
  case Instr::Kind::constant: {
    // Bit-exact: the cache key must tell 0.0 from -0.0 and every NaN payload apart.
    uint64_t bits;
    std::memcpy(&bits, &in.value, sizeof bits);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g (0x%016llx) i%lld", in.value,
                  static_cast<unsigned long long>(bits), static_cast<long long>(in.ivalue));
    os << "constant " << buf;
    break;
  }
  case Instr::Kind::op:
    os << op_name(in.op) << " ";
    args();
    break;
  case Instr::Kind::cast:
    os << "cast ";
    args();
    break;
  case Instr::Kind::reduce:
    os << "reduce." << op_name(in.op) << " ";
    args();
    if (in.arg_var >= 0) os << " along v" << in.arg_var;
    break;
  case Instr::Kind::store:
    os << "store " << k.buffers[static_cast<size_t>(in.buffer)].name << "[" << in.index.str()
       << "], ";
    args();
    break;
  }
  os << "\n";
}

} // namespace

std::string Kernel::str() const {
  std::ostringstream os;
  os << "kernel " << name << " outer" << list(outer) << " inner" << list(inner) << "\n";
  for (const Buffer& b : buffers)
    os << "  buffer " << b.name << ":" << dtype_name(b.dtype) << (b.output ? " out" : " in")
       << " extent " << b.extent << "\n";
  for (const Item& it : items) {
    if (it.instr >= 0) {
      print_instr(os, *this, it.instr);
      continue;
    }
    const Loop& l = loops[static_cast<size_t>(it.loop)];
    os << " " << (l.kind == Loop::Kind::reduce ? "reduce" : "map") << " loop {\n";
    for (int id : l.body)
      print_instr(os, *this, id);
    os << " }\n";
  }
  return os.str();
}

} // namespace kiln::ir::kernel
