// The oneDNN engine, primitive cache and on/off switch (see onednn.h).
#include "runtime/kernels/onednn.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "runtime/allocator.h"
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
    const dnnl::engine& eng = onednn_engine();
    dnnl::stream stream(eng);
    // Kept alive until the stream is done: scratchpad and reordered copies.
    std::vector<std::shared_ptr<Storage>> buffers;
    auto scratch_memory = [&](const dnnl::memory::desc& md) {
      buffers.push_back(
          std::make_shared<Storage>(std::max<size_t>(md.get_size(), 1), Device::cpu()));
      return dnnl::memory(md, eng, buffers.back()->data());
    };
    std::optional<std::pair<dnnl::memory, dnnl::memory>> dst_back; // (computed, user)
    for (const auto& [arg, md] : p.layouts) {
      auto it = args.find(arg);
      if (it == args.end() || it->second.get_desc() == md) continue;
      dnnl::memory user = it->second;
      dnnl::memory mine = scratch_memory(md);
      if (arg == DNNL_ARG_DST)
        dst_back.emplace(mine, user);
      else
        dnnl::reorder(user, mine).execute(stream, user, mine);
      it->second = mine;
    }
    if (p.scratchpad_bytes > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   scratch_memory(dnnl::memory::desc(
                       {static_cast<dnnl::memory::dim>(p.scratchpad_bytes)},
                       dnnl::memory::data_type::u8, dnnl::memory::format_tag::a)));
    p.primitive.execute(stream, args);
    if (dst_back)
      dnnl::reorder(dst_back->first, dst_back->second)
          .execute(stream, dst_back->first, dst_back->second);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(detail::str(op, ": oneDNN failed: ", e.what()));
  }
}

#endif

} // namespace kiln::kernels
