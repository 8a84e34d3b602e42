// MLIR output of conv2d and the pools: tensor.pad, then the named linalg convolution and
// pooling ops, accumulating in the dtype the eager kernels accumulate in.
#include <algorithm>

#include "ir/mlir_emitter.h"

namespace kiln::ir::mlir {
namespace {

/// Pads an NCHW tensor of sizes s on H and W (low ph, pw; high eh, ew) with `value`.
std::string pad_hw(Emitter& e, const std::string& v, const Shape& s, DType t, int64_t ph,
                   int64_t pw, int64_t eh, int64_t ew, const std::string& value) {
  if (ph == 0 && pw == 0 && eh == 0 && ew == 0) return v;
  Shape o = {s[0], s[1], s[2] + ph + eh, s[3] + pw + ew};
  std::string c = e.fresh();
  e.line(c + " = " + constant_op(value, t));
  std::string r = e.fresh();
  e.line(r + " = tensor.pad " + v +
         detail::str(" low[0, 0, ", ph, ", ", pw, "] high[0, 0, ", eh, ", ", ew, "] {"));
  e.line("^bb0(%i0: index, %i1: index, %i2: index, %i3: index):");
  e.line("  tensor.yield " + c + " : " + elem(t));
  e.line("} : " + tensor_type(s, t) + " to " + tensor_type(o, t));
  return r;
}

/// `tensor.expand_shape` (grow = true) or `tensor.collapse_shape` between `from` and `to`.
std::string reshape_op(Emitter& e, bool grow, const std::string& v, const Shape& from,
                       const Shape& to, DType t, const std::string& reassociation) {
  std::string r = e.fresh();
  if (grow)
    e.line(r + " = tensor.expand_shape " + v + " " + reassociation + " output_shape [" +
           ints_list(to) + "] : " + tensor_type(from, t) + " into " + tensor_type(to, t));
  else
    e.line(r + " = tensor.collapse_shape " + v + " " + reassociation + " : " +
           tensor_type(from, t) + " into " + tensor_type(to, t));
  return r;
}

std::string window_attrs(const std::vector<int64_t>& dilation, const std::vector<int64_t>& stride) {
  return "{dilations = dense<[" + ints_list(dilation) + "]> : tensor<2xi64>, strides = dense<[" +
         ints_list(stride) + "]> : tensor<2xi64>}";
}

/// conv2d (infer makes it floating, with a 4-d input and weight, stride/padding/dilation
/// pairs). The accumulator starts from the bias, as the eager kernel's sums do, in f32 for
/// f16/bf16. groups > 1 splits the channels: input [N, G, C/G, H, W], weight
/// [G, O/G, C/G, kH, kW] for linalg.conv_2d_ngchw_gfchw, the result collapsed back.
void conv2d(Emitter& e, const Node& n) {
  const Type& xt = n.input(0)->type();
  const Type& wt = n.input(1)->type();
  const Type& out = n.output()->type();
  DType t = out.dtype(), c = compute_dtype(t);
  const auto& stride = n.attrs().ints(0);
  const auto& pad = n.attrs().ints(1);
  const auto& dilation = n.attrs().ints(2);
  int64_t g = n.attrs().i(3);
  const Shape& xs = xt.sizes();
  const Shape& ws = wt.sizes();
  const Shape& os = out.sizes();
  int64_t og = ws[0] / g;
  std::string x = pad_hw(e, e.name(n.input(0)), xs, t, pad[0], pad[1], pad[0], pad[1],
                         Emitter::scalar_literal(0, t));
  Shape ps = {xs[0], xs[1], xs[2] + 2 * pad[0], xs[3] + 2 * pad[1]};
  Shape as = g == 1 ? os : Shape{os[0], g, og, os[2], os[3]};
  std::string acc;
  if (n.num_inputs() == 3) {
    const Type& bt = n.input(2)->type();
    Shape bs = g == 1 ? Shape{ws[0], 1, 1} : Shape{g, og, 1, 1};
    Operand b{reshape(e, e.name(n.input(2)), bt.sizes(), bs, bt.dtype()), bs, bt.dtype()};
    acc = e.generic(std::span<const Operand>(&b, 1), as, c, [&](const std::vector<std::string>& v) {
      return e.convert(v[0], bt.dtype(), c);
    });
  } else {
    acc = e.filled(as, c, Emitter::scalar_literal(0, c));
  }
  std::string w = e.name(n.input(1));
  std::string r = e.fresh();
  if (g == 1) {
    e.line(r + " = linalg.conv_2d_nchw_fchw " + window_attrs(dilation, stride) + " ins(" + x +
           ", " + w + " : " + tensor_type(ps, t) + ", " + tensor_type(wt) + ") outs(" + acc +
           " : " + tensor_type(as, c) + ") -> " + tensor_type(as, c));
  } else {
    Shape xg = {ps[0], g, ps[1] / g, ps[2], ps[3]};
    Shape wg = {g, og, ws[1], ws[2], ws[3]};
    std::string x5 = reshape_op(e, true, x, ps, xg, t, "[[0], [1, 2], [3], [4]]");
    std::string w5 = reshape_op(e, true, w, ws, wg, t, "[[0, 1], [2], [3], [4]]");
    e.line(r + " = linalg.conv_2d_ngchw_gfchw " + window_attrs(dilation, stride) + " ins(" + x5 +
           ", " + w5 + " : " + tensor_type(xg, t) + ", " + tensor_type(wg, t) + ") outs(" + acc +
           " : " + tensor_type(as, c) + ") -> " + tensor_type(as, c));
    r = reshape_op(e, false, r, as, os, c, "[[0], [1, 2], [3], [4]]");
  }
  e.bind(n.output(), convert_tensor(e, r, os, c, t));
}

/// The divisors of an average pool over an h x w plane, one per output position, as the
/// eager kernel (PyTorch) computes them: the window clipped to the padded input when padding
/// counts, else to the input; 1 for a window that holds no input (its sum is 0 anyway).
std::vector<int64_t> avg_divisors(int64_t h, int64_t w, int64_t oh, int64_t ow,
                                  const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                                  const std::vector<int64_t>& p, bool count_include_pad) {
  std::vector<int64_t> d;
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox) {
      int64_t y0 = oy * s[0] - p[0], x0 = ox * s[1] - p[1];
      int64_t y1 = std::min(y0 + k[0], h + p[0]), x1 = std::min(x0 + k[1], w + p[1]);
      int64_t pool_size = (y1 - y0) * (x1 - x0);
      y0 = std::max<int64_t>(y0, 0);
      x0 = std::max<int64_t>(x0, 0);
      y1 = std::min(y1, h);
      x1 = std::min(x1, w);
      if (y0 >= y1 || x0 >= x1)
        d.push_back(1);
      else
        d.push_back(count_include_pad ? pool_size : (y1 - y0) * (x1 - x0));
    }
  return d;
}

/// A dense [rows, cols] constant of integer values in dtype t (a splat when all are equal).
std::string dense_2d(const std::vector<int64_t>& v, int64_t rows, int64_t cols, DType t) {
  auto lit = [&](int64_t x) { return Emitter::scalar_literal(static_cast<double>(x), t); };
  if (std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; }))
    return "dense<" + lit(v[0]) + ">";
  std::string s = "dense<[";
  for (int64_t r = 0; r < rows; ++r) {
    s += r ? ", [" : "[";
    for (int64_t q = 0; q < cols; ++q)
      s += (q ? ", " : "") + lit(v[static_cast<size_t>(r * cols + q)]);
    s += "]";
  }
  return s + "]>";
}

/// max_pool2d, avg_pool2d over a 4-d (N, C, H, W) or 3-d (C, H, W) input (infer checks the
/// pairs and rejects bool). The input is padded with the identity (-inf or the integer min;
/// 0 for sums) low by `padding` and high by whatever makes exactly the result's windows fit,
/// which covers ceil_mode. Max compares in the dtype itself (u8 widened to i32: the named op
/// compares signed); avg sums in f32 for f16/bf16 and in i64 for integers, then divides by
/// a constant tensor of per-position divisors (truncating for integers, as eager).
void pool(Emitter& e, const Node& n) {
  bool mx = n.op() == Op::max_pool2d;
  const Type& out = n.output()->type();
  DType t = out.dtype();
  DType c = mx ? (t == DType::u8 ? DType::i32 : t) : is_floating(t) ? compute_dtype(t) : DType::i64;
  const auto& k = n.attrs().ints(0);
  const auto& s = n.attrs().ints(1);
  const auto& p = n.attrs().ints(2);
  std::vector<int64_t> d = mx ? n.attrs().ints(3) : std::vector<int64_t>{1, 1};
  Shape xs = n.input(0)->type().sizes(), os = out.sizes();
  std::string x = e.name(n.input(0));
  bool three = xs.size() == 3;
  if (three) {
    Shape x4 = {1, xs[0], xs[1], xs[2]};
    x = reshape_op(e, true, x, xs, x4, t, "[[0, 1], [2], [3]]");
    xs = x4;
    os = {1, os[0], os[1], os[2]};
  }
  x = convert_tensor(e, x, xs, t, c);
  int64_t eh = (os[2] - 1) * s[0] + d[0] * (k[0] - 1) + 1 - xs[2] - p[0];
  int64_t ew = (os[3] - 1) * s[1] + d[1] * (k[1] - 1) + 1 - xs[3] - p[1];
  eh = std::max<int64_t>(eh, 0);
  ew = std::max<int64_t>(ew, 0);
  std::string identity = mx ? extremum_init(true, c) : Emitter::scalar_literal(0, c);
  std::string px = pad_hw(e, x, xs, c, p[0], p[1], eh, ew, identity);
  Shape ps = {xs[0], xs[1], xs[2] + p[0] + eh, xs[3] + p[1] + ew};
  std::string acc = e.filled(os, c, identity);
  std::string win = e.empty({k[0], k[1]}, c);
  std::string r = e.fresh();
  e.line(r + " = linalg." + (mx ? "pooling_nchw_max " : "pooling_nchw_sum ") + window_attrs(d, s) +
         " ins(" + px + ", " + win + " : " + tensor_type(ps, c) + ", " +
         tensor_type({k[0], k[1]}, c) + ") outs(" + acc + " : " + tensor_type(os, c) + ") -> " +
         tensor_type(os, c));
  if (!mx) {
    std::vector<int64_t> div = avg_divisors(xs[2], xs[3], os[2], os[3], k, s, p, n.attrs().b(4));
    std::string dv = e.fresh();
    e.line(dv + " = arith.constant " + dense_2d(div, os[2], os[3], c) + " : " +
           tensor_type({os[2], os[3]}, c));
    Operand o[2] = {{r, os, c}, {dv, {os[2], os[3]}, c}};
    r = e.generic(o, os, c, [&](const std::vector<std::string>& v) {
      return e.op(std::string(is_floating(c) ? "arith.divf " : "arith.divsi ") + v[0] + ", " + v[1],
                  elem(c));
    });
  }
  r = convert_tensor(e, r, os, c, t);
  if (three) r = reshape_op(e, false, r, os, out.sizes(), t, "[[0, 1], [2], [3]]");
  e.bind(n.output(), r);
}

} // namespace

bool lower_conv_pool(Emitter& e, const Node& n) {
  switch (n.op()) {
  case Op::conv2d: conv2d(e, n); return true;
  case Op::max_pool2d:
  case Op::avg_pool2d: pool(e, n); return true;
  default: return false;
  }
}

} // namespace kiln::ir::mlir
