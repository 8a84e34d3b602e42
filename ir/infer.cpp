// Result-type inference for IR nodes: schema checks, then the runtime's inference functions.
#include "ir/infer.h"

#include <algorithm>

namespace kiln::ir {
namespace {

bool holds_kind(const AttrValue& v, AttrKind k) {
  switch (k) {
  case AttrKind::int_: return std::holds_alternative<int64_t>(v);
  case AttrKind::float_: return std::holds_alternative<double>(v);
  case AttrKind::bool_: return std::holds_alternative<bool>(v);
  case AttrKind::ints: return std::holds_alternative<std::vector<int64_t>>(v);
  case AttrKind::dtype: return std::holds_alternative<DType>(v);
  case AttrKind::str: return std::holds_alternative<std::string>(v);
  case AttrKind::scalar: return std::holds_alternative<Scalar>(v);
  }
  return false;
}

} // namespace

Expected<void> check_attrs(Op op, const Attrs& attrs) {
  const OpSchema& s = schema(op);
  if (attrs.size() != s.attrs.size())
    return Error::without_location(
        detail::str(s.name, ": expects ", s.attrs.size(), " attributes, got ", attrs.size()));
  for (size_t k = 0; k < s.attrs.size(); ++k)
    if (!holds_kind(attrs[k], s.attrs[k].kind))
      return Error::without_location(detail::str(s.name, ": attribute '", s.attrs[k].name,
                                                 "' must be of kind ",
                                                 attr_kind_name(s.attrs[k].kind)));
  return {};
}

Expected<void> check_arity(Op op, size_t num_inputs) {
  const OpSchema& s = schema(op);
  if (s.num_inputs < 0 ? num_inputs < 1 : num_inputs != static_cast<size_t>(s.num_inputs))
    return Error::without_location(
        detail::str(s.name, ": expects ",
                    s.num_inputs < 0 ? std::string("at least 1") : std::to_string(s.num_inputs),
                    " operands, got ", num_inputs));
  return {};
}

Expected<std::vector<Type>> infer_types(Op op, std::span<const Type> inputs, const Attrs& attrs) {
  if (auto ok = check_arity(op, inputs.size()); !ok) return ok.error();
  if (auto ok = check_attrs(op, attrs); !ok) return ok.error();
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_static())
      return Error::without_location(detail::str(op_name(op), ": operand ", i, " has type ",
                                                 inputs[i].str(),
                                                 "; symbolic sizes are not inferred yet"));
    metas.push_back(inputs[i].to_meta());
  }
  std::vector<TensorMeta> out;
  try {
    out = schema(op).infer(metas, attrs);
  } catch (const Error& e) {
    return Error::without_location(e.message());
  }
  std::vector<Type> types;
  types.reserve(out.size());
  for (const TensorMeta& m : out)
    types.push_back(Type::from_meta(m));
  return types;
}

Expected<std::vector<Type>> infer_types(Op op, std::span<Value* const> inputs, const Attrs& attrs) {
  std::vector<Type> types;
  types.reserve(inputs.size());
  for (Value* v : inputs)
    types.push_back(v->type());
  return infer_types(op, std::span<const Type>(types), attrs);
}

} // namespace kiln::ir
