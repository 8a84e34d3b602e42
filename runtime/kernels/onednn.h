// The oneDNN engine, the primitive cache and the switch the matmul and conv kernels share.
//
// Without KILN_HAVE_ONEDNN only the switch exists (and reports oneDNN unavailable), so tests
// can include this header in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/epilogue.h"

#ifdef KILN_HAVE_ONEDNN
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#endif

namespace kiln::kernels {

/// True when kiln was built with oneDNN.
bool onednn_available();
/// Whether matmul/conv may call oneDNN now: available and not switched off.
bool onednn_enabled();
/// Switches oneDNN on or off for every thread (tests turn it off to compare against the
/// plain loops); returns the previous setting.
bool set_onednn_enabled(bool on);

#ifdef KILN_HAVE_ONEDNN
/// The process-wide CPU engine.
const dnnl::engine& onednn_engine();

/// A built primitive and the bytes of user scratchpad one execution needs.
struct CachedPrimitive {
  dnnl::primitive primitive;
  size_t scratchpad_bytes = 0;
  /// Memory layouts the primitive chose for its arguments, when it chose them (format
  /// `any`): the caller reorders to and from them.
  std::unordered_map<int, dnnl::memory::desc> layouts;
};

/// Attributes every kiln primitive is built with: a user scratchpad, so that concurrent
/// executions of one cached primitive never share scratch memory.
dnnl::primitive_attr onednn_attr();

/// The primitive cached under `key`, built by make() on its first use. When make() throws
/// (oneDNN has no implementation, e.g. bf16 on a CPU without AVX-512) the answer is null,
/// and that is cached too so the caller's loop fallback costs nothing the next time.
std::shared_ptr<const CachedPrimitive>
cached_primitive(const std::vector<int64_t>& key, const std::function<CachedPrimitive()>& make);

/// Runs p with these arguments plus a scratchpad (from kiln's allocator, not cleared) and
/// waits for it. An argument whose memory's layout differs from p.layouts[arg] is reordered
/// into that layout first (inputs), or computed in it and reordered back (DNNL_ARG_DST). A
/// oneDNN failure becomes a kiln::Error naming op.
///
/// With `weights` (the storage DNNL_ARG_WEIGHTS lies in, a model parameter), the reordered
/// weights are kept, keyed by that storage and its version counter, and reused until the
/// storage is written through kiln (an in-place op bumps the version) or freed.
void onednn_execute(const char* op, const CachedPrimitive& p,
                    std::unordered_map<int, dnnl::memory> args,
                    const std::shared_ptr<Storage>* weights = nullptr);

/// Runs call() (which runs one library call through onednn_execute and says whether it did)
/// and returns that execution prepared to run again (runtime/epilogue.h, PreparedLibraryCall):
/// each memory of the caller's it used must be exactly one of `addresses` (the data pointers
/// of the call's operands, then its result, as a rerun gives them). Null when call() made no
/// execution or several, or a memory is none of the addresses (an operand copied first).
std::unique_ptr<PreparedLibraryCall> record_library_call(std::span<const void* const> addresses,
                                                         const std::function<bool()>& call);

/// Reordered parameter copies held for onednn_execute (for tests and `kiln bench`).
size_t onednn_packed_weights();

/// The post-ops of an epilogue for a primitive whose destination has dims `dst_dims`, a
/// reshape of the logical result shape ep.sizes (matmul folds leading dims into rows).
/// Appends to `key` what identifies them (for the primitive cache) and to `args` the binary
/// operands' memories. False when an op has no post-op form for these shapes.
bool onednn_post_ops(const Epilogue& ep, std::span<const Tensor> operands,
                     const dnnl::memory::dims& dst_dims, dnnl::post_ops& po,
                     std::vector<int64_t>& key, std::unordered_map<int, dnnl::memory>& args);

/// The operands with each binary post-op's tensor made contiguous (a strided one, such as a
/// gate's column, is copied) unless it lies in the result's chosen layout (ep.strides):
/// onednn_post_ops reads them in plain layouts or in that one. Keep the result
/// alive until the primitive has run.
std::vector<Tensor> dense_post_operands(std::span<const Tensor> operands, const Epilogue& ep);

/// Throws dnnl::error when pd's implementation is oneDNN's reference code: slower than the
/// unfused path, so cached_primitive caches "no primitive" for it.
void reject_reference_impl(const dnnl::primitive_desc_base& pd);

/// t's strides for a oneDNN memory desc of its sizes: a dim of size 1 may carry any stride
/// in kiln; it gets one oneDNN accepts.
dnnl::memory::dims onednn_strides(const Tensor& t);

/// matmul plus an epilogue through one primitive with post-ops into `out` (f32, of
/// ep.sizes; contiguous, or strided when it has the primitive's rank, as attention's blocks
/// of scores are rows of a wider matrix); false when oneDNN does not take these shapes (the caller
/// runs the ops one by one). The weights are packed once when ep.weights_are_parameters.
bool matmul_with_post_ops(std::span<const Tensor> operands, const Epilogue& ep, Tensor& out);

/// conv2d (with `attrs`; operands x, w[, bias]) plus an epilogue, the same way.
bool conv2d_with_post_ops(std::span<const Tensor> operands, const Attrs& attrs, const Epilogue& ep,
                          Tensor& out);
#endif

} // namespace kiln::kernels
