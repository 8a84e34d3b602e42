// Kernel: text form and domain helpers.
#include "ir/kernel/kernel.h"

#include <algorithm>
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

bool Kernel::may_write_over(int out, int in) const {
  if (!parts.empty()) {
    // Within the part that has both, when no other part reads `in`: the parts run side by
    // side, so another part could read it after this one wrote over it.
    int readers = 0, o = -1, i = -1;
    const Part* both = nullptr;
    for (const Part& p : parts) {
      auto local = [&](int b) {
        auto it = std::find(p.buffers.begin(), p.buffers.end(), b);
        return it == p.buffers.end() ? -1 : static_cast<int>(it - p.buffers.begin());
      };
      const int po = local(out), pi = local(in);
      readers += pi >= 0 ? 1 : 0;
      if (po >= 0 && pi >= 0) {
        both = &p;
        o = po;
        i = pi;
      }
    }
    return both != nullptr && readers == 1 && both->kernel.may_write_over(o, i);
  }
  const Buffer& o = buffers.at(static_cast<size_t>(out));
  const Buffer& i = buffers.at(static_cast<size_t>(in));
  if (!o.output || i.output || o.dtype != i.dtype || o.extent != i.extent) return false;
  // Program order: (item, position in its loop body). The stores to `out` (a reduction's
  // stash may store and reload it) all at one index, and every load of `in` at that index
  // and before the first store.
  struct At {
    size_t item = 0, pos = 0;
  };
  const Instr* store = nullptr;
  At first_store;
  std::vector<std::pair<const Instr*, At>> loads;
  for (size_t it = 0; it < items.size(); ++it) {
    const bool in_loop = items[it].instr < 0;
    auto visit = [&](int id, size_t pos) {
      const Instr& x = instrs[static_cast<size_t>(id)];
      if (x.kind == Instr::Kind::load && x.buffer == in) loads.push_back({&x, At{it, pos}});
      if (x.kind != Instr::Kind::store || x.buffer != out)
        return x.kind != Instr::Kind::store || x.buffer != in;
      if (store && !(x.index == store->index)) return false;
      // Each store writes every element once: as many points as elements.
      int64_t points = outer_numel();
      if (in_loop)
        for (int64_t s : inner)
          points *= s;
      if (points != o.extent) return false;
      if (!store) first_store = {it, pos};
      store = &x;
      return true;
    };
    if (!in_loop) {
      if (!visit(items[it].instr, 0)) return false;
      continue;
    }
    const Loop& l = loops[static_cast<size_t>(items[it].loop)];
    for (size_t p = 0; p < l.body.size(); ++p)
      if (!visit(l.body[p], p)) return false;
  }
  if (!store) return false;
  for (const auto& [load, at] : loads) {
    if (!(load->index == store->index)) return false;
    if (at.item > first_store.item || (at.item == first_store.item && at.pos >= first_store.pos))
      return false;
  }
  return true;
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
    // Up to 24 + 21 + 22 characters: 64 cut off the i-form of large integers (two i64
    // constants near 2^63 printed, and keyed, alike).
    char buf[128];
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
  for (size_t p = 0; p < parts.size(); ++p) {
    os << " part " << p << " buffers";
    for (int b : parts[p].buffers)
      os << " " << buffers.at(static_cast<size_t>(b)).name;
    os << " {\n" << parts[p].kernel.str() << " }\n";
  }
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
