// The conv2d kernel: NCHW input, OIHW weight (grouped), optional bias. f32/bf16/f16 go
// through oneDNN's convolution_forward (bias fused) when it implements the dtype on this CPU;
// everything else (and the fallback) is a direct loop accumulating in the compute type.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "runtime/kernels/onednn.h"
#include "runtime/ops/op.h"
#include "runtime/parallel.h"

namespace kiln::ops {

namespace {

struct ConvParams {
  int64_t n, c, h, w;    // input
  int64_t o, cg, kh, kw; // weight: out channels, in channels per group, kernel
  int64_t oh, ow;        // output
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

ConvParams conv_params(std::span<const Tensor> in, const Attrs& a, const Tensor& out) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  return {x.size(0),    x.size(1),    x.size(2),    x.size(3),    w.size(0),    w.size(1),
          w.size(2),    w.size(3),    out.size(2),  out.size(3),  a.ints(0)[0], a.ints(0)[1],
          a.ints(1)[0], a.ints(1)[1], a.ints(2)[0], a.ints(2)[1], a.i(3)};
}

int64_t div_floor(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/// Output positions [lo, hi) whose input index pos * stride + offset lies in [0, size).
void valid_range(int64_t out, int64_t stride, int64_t offset, int64_t size, int64_t& lo,
                 int64_t& hi) {
  lo = std::max<int64_t>(0, div_floor(-offset + stride - 1, stride));
  hi = std::min<int64_t>(out, div_floor(size - 1 - offset, stride) + 1);
  if (hi < lo) hi = lo;
}

/// The loop path: one (image, output channel) plane at a time.
template <typename T> void conv_loop(std::span<const Tensor> in, const ConvParams& p, Tensor& out) {
  using Acc = compute_t<T>;
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const T* px = static_cast<const T*>(x.raw_data());
  const T* pw = static_cast<const T*>(w.raw_data());
  const T* pb = in.size() == 3 ? static_cast<const T*>(in[2].raw_data()) : nullptr;
  const int64_t bstride = in.size() == 3 ? in[2].stride(0) : 0;
  T* po = static_cast<T*>(out.raw_data());
  const int64_t og = p.o / p.groups;
  const int64_t plane = p.oh * p.ow;
  const int64_t work = std::max<int64_t>(1, plane * p.cg * p.kh * p.kw);
  parallel_for(
      0, p.n * p.o, std::max<int64_t>(1, kParallelGrain / work), [&](int64_t begin, int64_t end) {
        std::vector<Acc> acc(static_cast<size_t>(plane));
        for (int64_t r = begin; r < end; ++r) {
          const int64_t n = r / p.o, o = r % p.o, g = o / og;
          std::fill(acc.begin(), acc.end(), pb ? static_cast<Acc>(pb[o * bstride]) : Acc(0));
          for (int64_t c = 0; c < p.cg; ++c) {
            const T* xc = px + n * x.stride(0) + (g * p.cg + c) * x.stride(1);
            for (int64_t ky = 0; ky < p.kh; ++ky) {
              int64_t ylo, yhi;
              valid_range(p.oh, p.sh, ky * p.dh - p.ph, p.h, ylo, yhi);
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                int64_t xlo, xhi;
                valid_range(p.ow, p.sw, kx * p.dw - p.pw, p.w, xlo, xhi);
                const Acc wv = static_cast<Acc>(
                    pw[o * w.stride(0) + c * w.stride(1) + ky * w.stride(2) + kx * w.stride(3)]);
                for (int64_t y = ylo; y < yhi; ++y) {
                  const T* xrow = xc + (y * p.sh + ky * p.dh - p.ph) * x.stride(2);
                  Acc* arow = acc.data() + y * p.ow;
                  for (int64_t xo = xlo; xo < xhi; ++xo)
                    arow[xo] +=
                        wv * static_cast<Acc>(xrow[(xo * p.sw + kx * p.dw - p.pw) * x.stride(3)]);
                }
              }
            }
          }
          T* dst = po + r * plane;
          for (int64_t i = 0; i < plane; ++i)
            dst[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
        }
      });
}

#ifdef KILN_HAVE_ONEDNN

/// t's elements as a dense row-major buffer (only called for non-contiguous t).
template <typename T> void pack(const Tensor& t, std::vector<T>& buf) {
  const int64_t rank = t.dim(), total = t.numel();
  buf.resize(static_cast<size_t>(total));
  const T* src = static_cast<const T*>(t.raw_data());
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d)
      off += idx[static_cast<size_t>(d)] * t.stride(d);
    buf[static_cast<size_t>(i)] = src[off];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.size(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

/// Whether t is a dense 4-D channels-last (NHWC) tensor that is not also contiguous.
bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4 || t.is_contiguous()) return false;
  const Shape cl = channels_last_strides(t.sizes());
  for (int64_t d = 0; d < 4; ++d)
    if (t.size(d) != 1 && t.stride(d) != cl[static_cast<size_t>(d)]) return false;
  return true;
}

/// A pointer to t's elements in dense row-major order, packing into buf when needed.
template <typename T> T* dense_data(const Tensor& t, std::vector<T>& buf) {
  if (t.is_contiguous()) return static_cast<T*>(t.raw_data());
  pack(t, buf);
  return buf.data();
}

/// The forward convolution of p in dtype dt: source and result in the given formats (`any`:
/// oneDNN's choice), weights in oneDNN's choice, bias plain.
dnnl::convolution_forward::primitive_desc
conv_primitive_desc(const ConvParams& p, dnnl::memory::data_type dt, bool has_bias,
                    dnnl::memory::format_tag src, dnnl::memory::format_tag dst,
                    const dnnl::primitive_attr& attr) {
  using tag = dnnl::memory::format_tag;
  using dims = dnnl::memory::dims;
  using fwd = dnnl::convolution_forward;
  // oneDNN counts dilation from 0; equal right padding reproduces PyTorch's floor output size.
  const dims strides{p.sh, p.sw}, dil{p.dh - 1, p.dw - 1}, pad{p.ph, p.pw};
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::convolution_direct;
  const dims w_dims =
      p.groups > 1 ? dims{p.groups, p.o / p.groups, p.cg, p.kh, p.kw} : dims{p.o, p.cg, p.kh, p.kw};
  const dnnl::memory::desc src_md({p.n, p.c, p.h, p.w}, dt, src);
  const dnnl::memory::desc w_md(w_dims, dt, tag::any);
  const dnnl::memory::desc b_md({p.o}, dt, tag::x);
  const dnnl::memory::desc dst_md({p.n, p.o, p.oh, p.ow}, dt, dst);
  fwd::desc d = has_bias ? fwd::desc(kind, algo, src_md, w_md, b_md, dst_md, strides, dil, pad, pad)
                         : fwd::desc(kind, algo, src_md, w_md, dst_md, strides, dil, pad, pad);
  return fwd::primitive_desc(d, attr, kernels::onednn_engine());
}

/// Runs the convolution through a cached oneDNN primitive; false when oneDNN has no
/// implementation for this dtype on this CPU. With `ep`, its ops are the primitive's
/// post-ops (their operands in ep_operands) and parameter weights are packed once.
template <typename T>
bool conv_onednn(std::span<const Tensor> in, const ConvParams& p, Tensor& out,
                 dnnl::memory::data_type dt, const Epilogue* ep = nullptr,
                 std::span<const Tensor> ep_operands = {}) {
  using tag = dnnl::memory::format_tag;
  const bool has_bias = in.size() == 3;
  std::vector<int64_t> key{2,       static_cast<int64_t>(dt),
                           p.n,     p.c,
                           p.h,     p.w,
                           p.o,     p.kh,
                           p.kw,    p.sh,
                           p.sw,    p.ph,
                           p.pw,    p.dh,
                           p.dw,    p.groups,
                           has_bias};
  // Channels-last source and destination are given to oneDNN as such (nhwc), so that a
  // channels-last graph region runs without reorders; anything else is dense NCHW.
  const bool src_nhwc = is_channels_last(in[0]);
  const bool dst_nhwc = is_channels_last(out);
  key.push_back(src_nhwc);
  key.push_back(dst_nhwc);
  std::unordered_map<int, dnnl::memory> args;
  dnnl::post_ops po;
  const bool packable = ep && ep->weights_are_parameters;
  if (ep) {
    key.push_back(packable ? 1 : 0);
    if (!kernels::onednn_post_ops(*ep, ep_operands, {p.n, p.o, p.oh, p.ow}, po, key, args))
      return false;
  }
  const dnnl::memory::desc src_md({p.n, p.c, p.h, p.w}, dt, src_nhwc ? tag::nhwc : tag::nchw);
  const dnnl::memory::desc w_md =
      p.groups > 1
          ? dnnl::memory::desc({p.groups, p.o / p.groups, p.cg, p.kh, p.kw}, dt, tag::goihw)
          : dnnl::memory::desc({p.o, p.cg, p.kh, p.kw}, dt, tag::oihw);
  const dnnl::memory::desc b_md({p.o}, dt, tag::x);
  const dnnl::memory::desc dst_md({p.n, p.o, p.oh, p.ow}, dt, dst_nhwc ? tag::nhwc : tag::nchw);
  auto prim = kernels::cached_primitive(key, [&] {
    // NCHW layouts are oneDNN's choice (blocked or nhwc ones give its direct JIT
    // convolutions; plain NCHW leaves only im2col + GEMM): the arguments are reordered to
    // and from them per call. Channels-last ones are kept. Weights are always oneDNN's
    // choice (parameter weights with an epilogue are reordered once per version).
    dnnl::primitive_attr attr = kernels::onednn_attr();
    if (ep) attr.set_post_ops(po);
    using fwd = dnnl::convolution_forward;
    fwd::primitive_desc pd = conv_primitive_desc(p, dt, has_bias, src_nhwc ? tag::nhwc : tag::any,
                                                 dst_nhwc ? tag::nhwc : tag::any, attr);
    if (ep) kernels::reject_reference_impl(pd);
    return kernels::CachedPrimitive{fwd(pd),
                                    pd.scratchpad_desc().get_size(),
                                    {{DNNL_ARG_SRC, pd.src_desc()},
                                     {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                                     {DNNL_ARG_DST, pd.dst_desc()}}};
  });
  if (!prim) return false;
  std::vector<T> x_buf, w_buf, b_buf;
  const auto& eng = kernels::onednn_engine();
  args.emplace(DNNL_ARG_SRC,
               dnnl::memory(src_md, eng, src_nhwc ? in[0].raw_data() : dense_data(in[0], x_buf)));
  args.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(w_md, eng, dense_data(in[1], w_buf)));
  args.emplace(DNNL_ARG_DST, dnnl::memory(dst_md, eng, out.raw_data()));
  if (has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(b_md, eng, dense_data(in[2], b_buf)));
  kernels::onednn_execute("conv2d", *prim, std::move(args),
                          packable ? &in[1].impl().storage : nullptr);
  return true;
}

#endif

} // namespace

void kernel_conv2d(std::span<const Tensor> in, const Attrs& a, std::span<Tensor> out) {
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const ConvParams p = conv_params(in, a, y);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_floating_point_v<compute_t<T>>) {
      KILN_ASSERT(false, "conv2d: a non-floating dtype reached the kernel");
    } else {
#ifdef KILN_HAVE_ONEDNN
      // An input without channels (C = 0) gives bias only: the loop handles it.
      if constexpr (!std::is_same_v<T, double>) {
        using dt = dnnl::memory::data_type;
        const dt d = std::is_same_v<T, float>      ? dt::f32
                     : std::is_same_v<T, BFloat16> ? dt::bf16
                                                   : dt::f16;
        if (kernels::onednn_enabled() && in[0].numel() > 0 && conv_onednn<T>(in, p, y, d)) return;
      }
#endif
      conv_loop<T>(in, p, y);
    }
  });
}

} // namespace kiln::ops

#ifdef KILN_HAVE_ONEDNN
namespace kiln::kernels {

bool conv2d_with_post_ops(std::span<const Tensor> operands, const Attrs& attrs, const Epilogue& ep,
                          Tensor& out) {
  std::span<const Tensor> in = operands.first(ep.contraction_operands);
  if (out.dtype() != DType::f32 || (!out.is_contiguous() && !ops::is_channels_last(out)) ||
      in[0].numel() == 0 || out.numel() == 0)
    return false;
  for (const Tensor& t : in)
    if (t.dtype() != DType::f32) return false;
  const std::vector<Tensor> dense = dense_post_operands(operands, ep);
  return ops::conv_onednn<float>(in, ops::conv_params(in, attrs, out), out,
                                 dnnl::memory::data_type::f32, &ep, dense);
}

} // namespace kiln::kernels
#endif

namespace kiln {

bool library_conv_runs_nhwc(IntList x, IntList w, IntList y, bool bias, const Attrs& attrs) {
#ifdef KILN_HAVE_ONEDNN
  if (!kernels::onednn_enabled() || x.size() != 4 || w.size() != 4 || y.size() != 4 ||
      numel_of(x) == 0 || numel_of(y) == 0)
    return false;
  const ops::ConvParams p{x[0],
                          x[1],
                          x[2],
                          x[3],
                          w[0],
                          w[1],
                          w[2],
                          w[3],
                          y[2],
                          y[3],
                          attrs.ints(0)[0],
                          attrs.ints(0)[1],
                          attrs.ints(1)[0],
                          attrs.ints(1)[1],
                          attrs.ints(2)[0],
                          attrs.ints(2)[1],
                          attrs.i(3)};
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  try {
    const auto pd =
        ops::conv_primitive_desc(p, dt::f32, bias, tag::any, tag::any, kernels::onednn_attr());
    return pd.src_desc() == dnnl::memory::desc({p.n, p.c, p.h, p.w}, dt::f32, tag::nhwc) &&
           pd.dst_desc() == dnnl::memory::desc({p.n, p.o, p.oh, p.ow}, dt::f32, tag::nhwc);
  } catch (const dnnl::error&) {
    return false;
  }
#else
  (void)x, (void)w, (void)y, (void)bias, (void)attrs;
  return false;
#endif
}

} // namespace kiln
