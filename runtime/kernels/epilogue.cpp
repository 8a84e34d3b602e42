// Library epilogues (runtime/epilogue.h): matmul plus its pointwise tail through one oneDNN
// primitive with post-ops, or the same ops one by one through dispatch.
#include "runtime/epilogue.h"

#include <optional>

#include "runtime/cuda/blas.h"
#include "runtime/error.h"
#include "runtime/kernels/onednn.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/plan.h"

namespace kiln {

std::string PostOp::str() const {
  switch (kind) {
  case Kind::relu: return "relu";
  case Kind::gelu_erf: return "gelu";
  case Kind::gelu_tanh: return "gelu_tanh";
  case Kind::silu: return "silu";
  case Kind::sigmoid: return "sigmoid";
  case Kind::tanh: return "tanh";
  case Kind::binary: break;
  }
  std::string other = is_scalar ? std::to_string(scalar) : std::to_string(operand);
  if (!is_scalar) other.insert(other.begin(), '$');
  std::string s(op_name(op));
  s += operand_first ? "(" : "(y, ";
  s += other;
  s += operand_first ? ", y)" : ")";
  return s;
}

std::string Epilogue::str() const {
  std::string s;
  for (const PostOp& op : ops) {
    if (!s.empty()) s += ", ";
    s += op.str();
  }
  if (s.empty()) s = "no post-ops";
  if (!strides.empty()) s += ", result strides " + shape_str(strides);
  return s;
}

bool library_epilogues_available() { return kernels::onednn_available(); }

namespace {

/// Whether op with ep on these operands goes to the library (oneDNN): a matmul or conv2d in
/// f32, with nothing empty (the eager kernels know empties; oneDNN traps on a zero-sized
/// reduction dimension).
[[maybe_unused]] bool library_takes(Op op, std::span<const Tensor> operands, const Epilogue& ep) {
  if (!kernels::onednn_enabled() || ep.dtype != DType::f32 ||
      (op != Op::matmul && op != Op::conv2d) || numel_of(ep.sizes) == 0)
    return false;
  for (const Tensor& t : operands)
    if (!t.device().is_cpu()) return false; // a CPU library
  for (const Tensor& t : operands.first(ep.contraction_operands))
    if (t.numel() == 0) return false;
  return true;
}

} // namespace

Tensor run_with_epilogue(Op op, const Attrs& attrs, std::span<const Tensor> operands,
                         const Epilogue& ep, const Tensor* out) {
  KILN_ASSERT(operands.size() >= ep.contraction_operands, "epilogue of ", op_name(op), ": ",
              operands.size(), " operands for a contraction of ", ep.contraction_operands);
#ifdef KILN_HAVE_ONEDNN
  if (library_takes(op, operands, ep)) {
    Tensor dst = out ? *out : empty_with_layout(ep.sizes, ep.strides, ep.dtype);
    if (op == Op::matmul ? kernels::matmul_with_post_ops(operands, ep, dst)
                         : kernels::conv2d_with_post_ops(operands, attrs, ep, dst))
      return dst;
  }
#endif
  // On a CUDA device a matmul goes to cuBLASLt with the post-ops it fuses; the rest run one by
  // one on the device's eager kernels.
  Tensor y;
  size_t fused = 0;
  if (op == Op::matmul && operands[0].device().is_cuda())
    if (std::optional<Tensor> r =
            cuda::blas_matmul(operands[0], operands[1], ep.ops, operands, &fused))
      y = std::move(*r);
  if (!y.defined()) y = dispatch1(op, operands.first(ep.contraction_operands), attrs);
  for (const PostOp& p : std::span<const PostOp>(ep.ops).subspan(fused)) {
    switch (p.kind) {
    case PostOp::Kind::relu: y = dispatch1(Op::relu, {y}); break;
    case PostOp::Kind::sigmoid: y = dispatch1(Op::sigmoid, {y}); break;
    case PostOp::Kind::tanh: y = dispatch1(Op::tanh, {y}); break;
    case PostOp::Kind::gelu_erf: y = gelu(y, "none"); break;
    case PostOp::Kind::gelu_tanh: y = gelu(y, "tanh"); break;
    case PostOp::Kind::silu: y = silu(y); break;
    case PostOp::Kind::binary: {
      const Tensor& t = operands[p.operand];
      y = p.operand_first ? dispatch1(p.op, {t, y}) : dispatch1(p.op, {y, t});
      break;
    }
    }
  }
  if (!out && ep.strides.empty()) return y;
  Tensor dst = out ? *out : empty_with_layout(ep.sizes, ep.strides, ep.dtype, y.device());
  dispatch(Op::copy, std::span<const Tensor>(&y, 1), {}, std::span<Tensor>(&dst, 1));
  return dst;
}

#ifndef KILN_HAVE_ONEDNN
bool in_library_call() { return false; }
#endif

std::unique_ptr<PreparedLibraryCall> run_and_prepare(Op op, const Attrs& attrs,
                                                     std::span<const Tensor> operands,
                                                     const Epilogue& ep, const Tensor& out) {
#ifdef KILN_HAVE_ONEDNN
  if (out.defined() && library_takes(op, operands, ep)) {
    std::vector<const void*> addresses;
    for (const Tensor& t : operands)
      addresses.push_back(t.numel() == 0 ? nullptr : t.raw_data());
    addresses.push_back(out.numel() == 0 ? nullptr : out.raw_data());
    bool ran = false;
    Tensor dst = out;
    auto prepared = kernels::record_library_call(addresses, [&] {
      ran = op == Op::matmul ? kernels::matmul_with_post_ops(operands, ep, dst)
                             : kernels::conv2d_with_post_ops(operands, attrs, ep, dst);
      return ran;
    });
    if (ran) return prepared;
  }
#endif
  run_with_epilogue(op, attrs, operands, ep, &out);
  return nullptr;
}

namespace kernels {

#ifndef KILN_HAVE_ONEDNN
// Without oneDNN no primitive takes the call: the callers run it op by op.
bool matmul_with_post_ops(std::span<const Tensor>, const Epilogue&, Tensor&) { return false; }
#else
bool matmul_with_post_ops(std::span<const Tensor> operands, const Epilogue& ep, Tensor& out) {
  const Tensor& a = operands[0];
  const Tensor& b = operands[1];
  using dt = dnnl::memory::data_type;
  if (a.dtype() != DType::f32 || b.dtype() != DType::f32 || a.dim() < 2 || b.dim() < 2)
    return false;
  // A strided result (attention's block of scores, rows of a wider matrix) only where its
  // dims are the primitive's.
  const bool strided_out = !out.is_contiguous();
  if (strided_out && out.dim() != std::max(a.dim(), b.dim())) return false;
  dnnl::memory::dims ad, bd, as, bs, cd;
  const int64_t k = a.size(-1), m = b.size(-1);
  bool packable = false;
  if (b.dim() == 2 && (a.dim() == 2 || (a.is_contiguous() && !strided_out))) {
    // Leading dims of A fold into rows: one GEMM against the (parameter) weights.
    const int64_t rows = a.numel() / std::max<int64_t>(k, 1);
    ad = {rows, k};
    as = a.dim() == 2 ? onednn_strides(a) : dnnl::memory::dims{k, 1};
    bd = {k, m};
    bs = onednn_strides(b);
    cd = {rows, m};
    packable = ep.weights_are_parameters;
  } else {
    const int64_t rank = out.dim();
    if (a.dim() != rank || b.dim() != rank) return false;
    for (int64_t d = 0; d + 2 < rank; ++d)
      if (a.size(d) != out.size(d) || b.size(d) != out.size(d)) return false;
    ad.assign(a.sizes().begin(), a.sizes().end());
    bd.assign(b.sizes().begin(), b.sizes().end());
    cd.assign(out.sizes().begin(), out.sizes().end());
    as = onednn_strides(a);
    bs = onednn_strides(b);
  }
  std::unordered_map<int, dnnl::memory> args;
  dnnl::post_ops po;
  std::vector<int64_t> key{4, packable ? 1 : 0, static_cast<int64_t>(ad.size())};
  for (const auto* v : {&ad, &bd, &as, &bs})
    key.insert(key.end(), v->begin(), v->end());
  if (strided_out) {
    const dnnl::memory::dims os = onednn_strides(out);
    key.push_back(-1);
    key.insert(key.end(), os.begin(), os.end());
  }
  const std::vector<Tensor> dense = dense_post_operands(operands, ep);
  if (!onednn_post_ops(ep, dense, cd, po, key, args)) return false;
  auto plain = [](const dnnl::memory::dims& dims) {
    dnnl::memory::dims s(dims.size(), 1);
    for (size_t d = dims.size(); d-- > 1;)
      s[d - 1] = s[d] * dims[d];
    return s;
  };
  const dnnl::memory::dims cs = strided_out ? onednn_strides(out) : plain(cd);
  auto prim = cached_primitive(key, [&] {
    dnnl::memory::desc amd(ad, dt::f32, as), cmd(cd, dt::f32, cs);
    dnnl::memory::desc bmd = packable
                                 ? dnnl::memory::desc(bd, dt::f32, dnnl::memory::format_tag::any)
                                 : dnnl::memory::desc(bd, dt::f32, bs);
    dnnl::primitive_attr attr = onednn_attr();
    attr.set_post_ops(po);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, cmd), attr, onednn_engine());
    reject_reference_impl(pd);
    CachedPrimitive p{dnnl::matmul(pd), pd.scratchpad_desc().get_size(), {}};
    if (packable) p.layouts[DNNL_ARG_WEIGHTS] = pd.weights_desc();
    return p;
  });
  if (!prim) return false;
  const auto& eng = onednn_engine();
  args.emplace(DNNL_ARG_SRC, dnnl::memory(dnnl::memory::desc(ad, dt::f32, as), eng, a.raw_data()));
  args.emplace(DNNL_ARG_WEIGHTS,
               dnnl::memory(dnnl::memory::desc(bd, dt::f32, bs), eng, b.raw_data()));
  args.emplace(DNNL_ARG_DST,
               dnnl::memory(dnnl::memory::desc(cd, dt::f32, cs), eng, out.raw_data()));
  onednn_execute("matmul", *prim, std::move(args), packable ? &b.impl().storage : nullptr);
  return true;
}
#endif

} // namespace kernels
} // namespace kiln
