// The oneDNN engine, primitive cache and on/off switch (see onednn.h).
#include "runtime/kernels/onednn.h"

#include <atomic>
#include <map>
#include <mutex>

#include "runtime/error.h"

namespace kiln::kernels {

namespace {
std::atomic<bool> g_enabled{true};
} // namespace

bool onednn_available() {
#ifdef KILN_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

bool onednn_enabled() { return onednn_available() && g_enabled.load(std::memory_order_relaxed); }

bool set_onednn_enabled(bool on) { return g_enabled.exchange(on); }

#ifdef KILN_HAVE_ONEDNN

const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::primitive_attr onednn_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

std::shared_ptr<const CachedPrimitive>
cached_primitive(const std::vector<int64_t>& key, const std::function<CachedPrimitive()>& make) {
  // Shapes in a training loop repeat, so a few thousand entries cover a model; the bound only
  // stops a shape-churning program from growing the map forever.
  constexpr size_t kMaxEntries = 4096;
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<const CachedPrimitive>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  // Built outside the lock: primitive creation can take milliseconds (JIT code generation).
  std::shared_ptr<const CachedPrimitive> built;
  try {
    built = std::make_shared<const CachedPrimitive>(make());
  } catch (const dnnl::error&) {
    built = nullptr;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMaxEntries) cache.clear();
  return cache.emplace(key, built).first->second;
}

void onednn_execute(const char* op, const CachedPrimitive& p,
                    std::unordered_map<int, dnnl::memory> args) {
  try {
    std::vector<uint8_t> scratch(p.scratchpad_bytes);
    if (p.scratchpad_bytes > 0)
      args.emplace(
          DNNL_ARG_SCRATCHPAD,
          dnnl::memory(dnnl::memory::desc({static_cast<dnnl::memory::dim>(p.scratchpad_bytes)},
                                          dnnl::memory::data_type::u8, dnnl::memory::format_tag::a),
                       onednn_engine(), scratch.data()));
    dnnl::stream stream(onednn_engine());
    p.primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(detail::str(op, ": oneDNN failed: ", e.what()));
  }
}

#endif

} // namespace kiln::kernels
