// The oneDNN engine, the primitive cache and the switch the matmul and conv kernels share.
//
// Without KILN_HAVE_ONEDNN only the switch exists (and reports oneDNN unavailable), so tests
// can include this header in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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
void onednn_execute(const char* op, const CachedPrimitive& p,
                    std::unordered_map<int, dnnl::memory> args);
#endif

} // namespace kiln::kernels
