// Op: the primitive op enum generated from ops.def, its schema, attributes and tensor metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace kiln {

enum class Op : uint16_t {
#define KILN_OP(name, kind, traits, nin, nout, attrs, doc) name,
#include "runtime/ops/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(name, kind, traits, nin, nout, attrs, doc) +1
#include "runtime/ops/ops.def"
#undef KILN_OP
    ;

enum class OpKind : uint8_t { factory, random, pointwise, reduction, view, data, contraction };
enum class AttrKind : uint8_t { int_, float_, bool_, ints, dtype, str, scalar };

/// The ops.def `traits` column: what the compiler knows of an op beyond its kind.
struct OpTraits {
  /// The reductions the code generator folds, by their combine (identity 0, 1, -inf, +inf).
  enum class Fold : uint8_t { none, sum, prod, max, min };
  /// The code generator lowers the op (dtype rules aside: passes::is_lowerable).
  bool lowerable = false;
  /// Worth computing once per element: transcendentals, division, roots.
  bool costly = false;
  Fold fold = Fold::none;
  /// An arg-reduction: the fold (max or min) tracks the index of the first extremum.
  bool arg = false;
  bool is_fold() const { return fold != Fold::none; }
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
};

using AttrValue =
    std::variant<int64_t, double, bool, std::vector<int64_t>, DType, std::string, Scalar>;

/// Attribute values of one op call, in the schema's order.
class Attrs {
public:
  Attrs() = default;
  Attrs(std::initializer_list<AttrValue> v) : values_(v) {}
  explicit Attrs(std::vector<AttrValue> v) : values_(std::move(v)) {}
  size_t size() const { return values_.size(); }
  const AttrValue& operator[](size_t k) const { return values_.at(k); }
  int64_t i(size_t k) const { return get<int64_t>(k); }
  double f(size_t k) const { return get<double>(k); }
  bool b(size_t k) const { return get<bool>(k); }
  const std::vector<int64_t>& ints(size_t k) const { return get<std::vector<int64_t>>(k); }
  DType dtype(size_t k) const { return get<DType>(k); }
  const std::string& str(size_t k) const { return get<std::string>(k); }
  const Scalar& scalar(size_t k) const { return get<Scalar>(k); }
  const std::vector<AttrValue>& values() const { return values_; }

private:
  template <typename T> const T& get(size_t k) const {
    KILN_ASSERT(k < values_.size() && std::holds_alternative<T>(values_[k]), "attribute ", k,
                " missing or of the wrong kind");
    return std::get<T>(values_[k]);
  }
  std::vector<AttrValue> values_;
};

/// What shape/dtype inference sees and produces: a tensor without data.
struct TensorMeta {
  DType dtype = DType::f32;
  Device device;
  Shape sizes;
  Shape strides; // empty = contiguous (inference of non-view ops leaves it empty)
  bool wrapped_number = false;
  static TensorMeta of(const Tensor& t);
  /// A contiguous result on like's device.
  static TensorMeta dense(const TensorMeta& like, Shape sizes, DType dtype) {
    return {dtype, like.device, std::move(sizes), {}, false};
  }
};

/// Shape/dtype inference: throws kiln::Error naming the op and the shapes on bad input.
using InferFn = std::vector<TensorMeta> (*)(std::span<const TensorMeta> inputs, const Attrs& attrs);
/// Eager CPU kernel: reads inputs, writes the preallocated outputs (any strides), or for a
/// view op, sets outputs[0] to a view of inputs[0].
using KernelFn = void (*)(std::span<const Tensor> inputs, const Attrs& attrs,
                          std::span<Tensor> outputs);

struct OpSchema {
  Op op;
  std::string_view name;
  OpKind kind;
  int num_inputs; // -1 = variadic
  int num_outputs;
  std::vector<AttrSpec> attrs;
  OpTraits traits;
  std::string_view summary;
  InferFn infer;
  KernelFn kernel;
};

const OpSchema& schema(Op op);
inline const OpTraits& op_traits(Op op) { return schema(op).traits; }
std::string_view op_name(Op op);
std::optional<Op> find_op(std::string_view name);
std::string_view op_kind_name(OpKind k);
std::string_view attr_kind_name(AttrKind k);

// Every primitive's inference and kernel, defined beside its category (runtime/ops/infer_*.cpp,
// runtime/kernels/*.cpp). A missing one is a link error.
#define KILN_OP(name, kind, traits, nin, nout, attrs, doc)                                         \
  std::vector<TensorMeta> infer_##name(std::span<const TensorMeta> in, const Attrs& a);            \
  void kernel_##name(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out);
namespace ops {
#include "runtime/ops/ops.def"
} // namespace ops
#undef KILN_OP

} // namespace kiln
