// The schema table built from ops.def: names, kinds, attribute specs, inference and kernels.
#include <array>
#include <sstream>

#include "runtime/error.h"
#include "runtime/ops/op.h"

namespace kiln {
namespace {

AttrKind parse_attr_kind(std::string_view s, std::string_view op) {
  if (s == "int") return AttrKind::int_;
  if (s == "float") return AttrKind::float_;
  if (s == "bool") return AttrKind::bool_;
  if (s == "ints") return AttrKind::ints;
  if (s == "dtype") return AttrKind::dtype;
  if (s == "str") return AttrKind::str;
  if (s == "scalar") return AttrKind::scalar;
  KILN_UNREACHABLE("ops.def: unknown attribute kind in " + std::string(op));
}

std::vector<AttrSpec> parse_attrs(std::string_view spec, std::string_view op) {
  std::vector<AttrSpec> out;
  std::istringstream is{std::string(spec)};
  std::string item;
  while (is >> item) {
    auto colon = item.find(':');
    KILN_ASSERT(colon != std::string::npos, "ops.def: attribute without kind in ", op);
    out.push_back(
        {item.substr(0, colon), parse_attr_kind(std::string_view(item).substr(colon + 1), op)});
  }
  return out;
}

constexpr OpKind kind_factory = OpKind::factory, kind_random = OpKind::random,
                 kind_pointwise = OpKind::pointwise, kind_reduction = OpKind::reduction,
                 kind_view = OpKind::view, kind_data = OpKind::data,
                 kind_contraction = OpKind::contraction;

using Fold = OpTraits::Fold;
constexpr OpTraits traits_eager{}, traits_cheap{.lowerable = true},
    traits_costly{.lowerable = true, .costly = true},
    traits_fold_sum{.lowerable = true, .fold = Fold::sum},
    traits_fold_prod{.lowerable = true, .fold = Fold::prod},
    traits_fold_max{.lowerable = true, .fold = Fold::max},
    traits_fold_min{.lowerable = true, .fold = Fold::min},
    traits_arg_max{.lowerable = true, .fold = Fold::max, .arg = true},
    traits_arg_min{.lowerable = true, .fold = Fold::min, .arg = true};

const std::array<OpSchema, kNumOps>& table() {
  static const std::array<OpSchema, kNumOps> t = {{
#define KILN_OP(name, kind, traits, nin, nout, attrs, doc)                                         \
  {Op::name,                                                                                       \
   #name,                                                                                          \
   kind_##kind,                                                                                    \
   nin,                                                                                            \
   nout,                                                                                           \
   parse_attrs(attrs, #name),                                                                      \
   traits_##traits,                                                                                \
   doc,                                                                                            \
   ops::infer_##name,                                                                              \
   ops::kernel_##name},
#include "runtime/ops/ops.def"
#undef KILN_OP
  }};
  return t;
}

} // namespace

const OpSchema& schema(Op op) { return table()[static_cast<size_t>(op)]; }
std::string_view op_name(Op op) { return schema(op).name; }

std::optional<Op> find_op(std::string_view name) {
  for (const auto& s : table())
    if (s.name == name) return s.op;
  return std::nullopt;
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
  case OpKind::factory: return "factory";
  case OpKind::random: return "random";
  case OpKind::pointwise: return "pointwise";
  case OpKind::reduction: return "reduction";
  case OpKind::view: return "view";
  case OpKind::data: return "data";
  case OpKind::contraction: return "contraction";
  }
  return "?";
}

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
  case AttrKind::int_: return "int";
  case AttrKind::float_: return "float";
  case AttrKind::bool_: return "bool";
  case AttrKind::ints: return "ints";
  case AttrKind::dtype: return "dtype";
  case AttrKind::str: return "str";
  case AttrKind::scalar: return "scalar";
  }
  return "?";
}

} // namespace kiln
