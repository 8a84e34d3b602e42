// Group domains and the index maps of broadcasting and views.
#include "ir/kernel/domain.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/ops/reduce_dims.h"
#include "runtime/ops/view_geometry.h"

namespace kiln::ir::kernel {

bool is_view(const ir::Node* n) { return n && n->schema().kind == OpKind::view; }

const ir::Value* view_source(const ir::Value* v) {
  while (is_view(v->producer()))
    v = v->producer()->input(0);
  return v;
}

IndexVec broadcast_index(const Shape& operand, const IndexVec& idx) {
  IndexVec r(operand.size());
  size_t lead = idx.size() - operand.size();
  for (size_t k = 0; k < operand.size(); ++k)
    r[k] = operand[k] == 1 ? Index::constant(0) : idx[lead + k];
  return r;
}

IndexVec view_operand_index(const ir::Node& n, const IndexVec& idx,
                            std::span<const int64_t> extents) {
  const Shape& in = n.input(0)->type().sizes();
  const Shape& out = n.output()->type().sizes();
  switch (n.op()) {
  case Op::permute: {
    const auto& p = n.attrs().ints(0);
    IndexVec r(in.size());
    for (size_t k = 0; k < p.size(); ++k)
      r[static_cast<size_t>(wrap_dim(p[k], static_cast<int64_t>(in.size()), "permute"))] = idx[k];
    return r;
  }
  case Op::expand: return broadcast_index(in, idx);
  case Op::slice: {
    int64_t rank = static_cast<int64_t>(in.size());
    int64_t d = wrap_dim(n.attrs().i(0), rank, "slice");
    Shape ones(in.size(), 1);
    int64_t start =
        slice_geometry(in, ones, d, n.attrs().i(1), n.attrs().i(2), n.attrs().i(3)).offset;
    IndexVec r = idx;
    r[static_cast<size_t>(d)] =
        Index::constant(start) + idx[static_cast<size_t>(d)] * n.attrs().i(3);
    return r;
  }
  case Op::view: {
    // Same elements in row-major order: linearise in the result, split in the operand.
    // An empty view is never read (its domain has no points).
    if (std::find(in.begin(), in.end(), 0) != in.end())
      return IndexVec(in.size(), Index::constant(0));
    Shape rs = contiguous_strides(out), is = contiguous_strides(in);
    Index linear;
    for (size_t k = 0; k < out.size(); ++k)
      linear = linear + idx[k] * rs[k];
    IndexVec r(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k] == 1) {
        r[k] = Index::constant(0);
        continue;
      }
      Index q = Index::floordiv(linear, is[k], extents);
      r[k] = k == 0 ? q : Index::mod(q, in[k], extents);
    }
    return r;
  }
  default: KILN_UNREACHABLE("not a view op");
  }
}

Index linearize(const ir::Type& t, const IndexVec& idx) {
  Shape strides = t.full_strides();
  Index r;
  for (size_t k = 0; k < idx.size(); ++k)
    if (t.sizes()[k] != 1) r = r + idx[k] * strides[k];
  return r;
}

std::vector<int64_t> reduction_dims(const ir::Node& n) {
  int64_t rank = n.input(0)->type().rank();
  std::vector<int64_t> dims;
  if (op_traits(n.op()).arg) {
    if (rank > 0) dims.push_back(wrap_dim(n.attrs().i(0), rank, op_name(n.op()).data()));
    return dims;
  }
  std::vector<bool> mask = reduced_dims_mask(n.attrs().ints(0), rank, op_name(n.op()).data());
  for (int64_t d = 0; d < rank; ++d)
    if (mask[static_cast<size_t>(d)]) dims.push_back(d);
  return dims;
}

Domain Domain::of(const ir::Node& n) {
  if (op_traits(n.op()).is_fold()) return {true, n.input(0)->type().sizes(), reduction_dims(n), {}};
  return {false, n.output()->type().sizes(), {}, {}};
}

Shape Domain::outer() const {
  if (!reduction && var_of.empty()) return shape;
  if (!reduction) {
    Shape o(shape.size());
    for (size_t k = 0; k < shape.size(); ++k)
      o[static_cast<size_t>(var_of[k])] = shape[k];
    return o;
  }
  Shape o;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d))
      o.push_back(shape[static_cast<size_t>(d)]);
  return o;
}

Shape Domain::inner() const {
  Shape i;
  for (int64_t d : dims)
    i.push_back(shape[static_cast<size_t>(d)]);
  return i;
}

std::optional<IndexVec> Domain::canonical(const Shape& sizes) const {
  if (!reduction) {
    if (sizes != shape) return std::nullopt;
    IndexVec r;
    for (size_t k = 0; k < shape.size(); ++k)
      r.push_back(var(var_of.empty() ? static_cast<int>(k) : var_of[k], shape[k]));
    return r;
  }
  int n_outer = static_cast<int>(shape.size() - dims.size());
  IndexVec full, kept, flat;
  int o = 0, i = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool red = std::binary_search(dims.begin(), dims.end(), d);
    const int64_t extent = shape[static_cast<size_t>(d)];
    if (red) {
      full.push_back(var(n_outer + i++, extent));
      kept.push_back(Index::constant(0));
    } else {
      full.push_back(var(o, extent));
      kept.push_back(var(o, extent));
      flat.push_back(var(o, extent));
      ++o;
    }
  }
  if (sizes == shape) return full;
  Shape keep_shape, flat_shape;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool red = std::binary_search(dims.begin(), dims.end(), d);
    keep_shape.push_back(red ? 1 : shape[static_cast<size_t>(d)]);
    if (!red) flat_shape.push_back(shape[static_cast<size_t>(d)]);
  }
  if (sizes == keep_shape) return kept;
  if (sizes == flat_shape) return flat;
  return std::nullopt;
}

Index Domain::var(int v, int64_t extent) {
  return extent == 1 ? Index::constant(0) : Index::var(v);
}

std::string Domain::str() const {
  std::string s = shape_str(shape);
  if (reduction) {
    s += " reducing ";
    s += shape_str(dims);
  }
  return s;
}

} // namespace kiln::ir::kernel
