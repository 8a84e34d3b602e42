// Structural hash and equality over one canonical byte encoding of a graph's structure.
//
// The encoding is a flat sequence of tagged fields: inputs (kind, type, constant data),
// nodes (op, operands as value numbers, attributes, result types), outputs and writes.
// Names and locations are left out. The hash is FNV-1a (64-bit) over the encoding, and two
// graphs are equal exactly when their encodings are equal, so no pointer or hash-map order
// ever takes part.
#include "ir/hash.h"

#include <bit>
#include <cstring>
#include <string>

#include "ir/numbering.h"

namespace kiln::ir {
namespace {

/// Appends the canonical encoding of a graph to a byte string.
class Encoder {
public:
  explicit Encoder(const Graph& g) : g_(g), num_(g) {}

  std::string encode() {
    out_.reserve(64 * (g_.num_inputs() + g_.num_nodes()) + 64);
    u64(g_.num_inputs());
    for (const Value* v : g_.inputs())
      input(*v);
    u64(g_.num_nodes());
    for (const Node* n : g_.nodes())
      node(*n);
    u64(g_.num_outputs());
    for (const Value* v : g_.outputs())
      value_ref(v);
    u64(g_.writes().size());
    for (const InPlaceWrite& w : g_.writes()) {
      value_ref(w.target);
      value_ref(w.source);
    }
    return std::move(out_);
  }

private:
  void u8(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void u64(uint64_t x) { // little-endian, whatever the host
    char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<char>(static_cast<uint8_t>(x >> (8 * i)));
    out_.append(b, 8);
  }
  void i64(int64_t x) { u64(static_cast<uint64_t>(x)); }
  void bytes(const void* p, size_t n) {
    u64(n);
    out_.append(static_cast<const char*>(p), n);
  }
  void dims(const Shape& s) {
    u64(s.size());
    for (int64_t d : s)
      i64(d);
  }
  void value_ref(const Value* v) { i64(num_[v]); }

  void type(const Type& t) {
    u8(static_cast<uint8_t>(t.dtype()));
    dims(t.sizes());
    dims(t.strides()); // normalised by Type: empty exactly when contiguous
    u8(static_cast<uint8_t>(t.device().type));
    i64(t.device().index);
    u8(t.wrapped_number() ? 1 : 0);
  }

  void input(const Value& v) {
    u8(static_cast<uint8_t>(v.input_kind()));
    type(v.type());
    if (!v.is_constant()) return;
    const Tensor& t = v.constant();
    u8(t.defined() ? 1 : 0);
    if (!t.defined()) return;
    u8(static_cast<uint8_t>(t.dtype()));
    dims(t.sizes());
    if (t.is_contiguous()) {
      bytes(t.raw_data(), static_cast<size_t>(t.numel() * t.itemsize()));
    } else {
      Tensor c = t.contiguous();
      bytes(c.raw_data(), static_cast<size_t>(c.numel() * c.itemsize()));
    }
  }

  void attr(const AttrValue& a) {
    u8(static_cast<uint8_t>(a.index()));
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            i64(x);
          } else if constexpr (std::is_same_v<T, double>) {
            u64(std::bit_cast<uint64_t>(x)); // by bits: -0.0 != 0.0, NaN payloads kept
          } else if constexpr (std::is_same_v<T, bool>) {
            u8(x ? 1 : 0);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            dims(x);
          } else if constexpr (std::is_same_v<T, DType>) {
            u8(static_cast<uint8_t>(x));
          } else if constexpr (std::is_same_v<T, std::string>) {
            bytes(x.data(), x.size());
          } else {
            static_assert(std::is_same_v<T, Scalar>);
            u8(static_cast<uint8_t>(x.kind()));
            if (x.is_floating())
              u64(std::bit_cast<uint64_t>(x.to_double()));
            else
              i64(x.to_int());
          }
        },
        a);
  }

  void node(const Node& n) {
    u64(static_cast<uint64_t>(n.op()));
    u64(n.num_inputs());
    for (const Value* v : n.inputs())
      value_ref(v);
    u64(n.attrs().size());
    for (const AttrValue& a : n.attrs().values())
      attr(a);
    u64(n.num_outputs());
    for (size_t k = 0; k < n.num_outputs(); ++k)
      type(n.output(k)->type());
  }

  const Graph& g_;
  ValueNumbering num_;
  std::string out_;
};

} // namespace

std::string structural_key(const Graph& g) { return Encoder(g).encode(); }

uint64_t structural_hash(const Graph& g) { return key_hash(structural_key(g)); }

uint64_t key_hash(std::string_view e) {
  uint64_t h = 14695981039346656037ull; // FNV-1a offset basis
  for (char c : e) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull; // FNV prime
  }
  return h;
}

bool structurally_equal(const Graph& a, const Graph& b) {
  if (&a == &b) return true;
  if (a.num_inputs() != b.num_inputs() || a.num_nodes() != b.num_nodes() ||
      a.num_outputs() != b.num_outputs() || a.writes().size() != b.writes().size())
    return false;
  return Encoder(a).encode() == Encoder(b).encode();
}

} // namespace kiln::ir
