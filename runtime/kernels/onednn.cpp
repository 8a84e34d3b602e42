// The oneDNN engine, primitive cache and on/off switch (see onednn.h).
#include "runtime/kernels/onednn.h"

#include <algorithm>
#include <atomic>
#include <cstring>
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

namespace {

/// Parameters reordered into a primitive's weights layout (see onednn_execute).
struct PackedWeights {
  std::weak_ptr<Storage> storage; // the parameter's: expired once it is freed
  uint64_t version = 0;
  dnnl::memory::desc user, packed;
  std::shared_ptr<Storage> buffer;
};
std::mutex g_packed_mu;
std::unordered_map<const void*, std::vector<PackedWeights>> g_packed; // by user data pointer

/// The packed copy of `user` (in `storage`) in layout `md`, cached or reordered now; its
/// buffer goes into `keep` (a concurrent update may drop the cache's entry meanwhile).
dnnl::memory packed_weights(const std::shared_ptr<Storage>& storage, const dnnl::memory& user,
                            const dnnl::memory::desc& md, dnnl::stream& stream,
                            std::vector<std::shared_ptr<Storage>>& keep) {
  const dnnl::engine& eng = onednn_engine();
  const void* data = user.get_data_handle();
  const uint64_t version = storage->version();
  {
    std::lock_guard<std::mutex> lock(g_packed_mu);
    auto it = g_packed.find(data);
    if (it != g_packed.end())
      for (const PackedWeights& p : it->second)
        if (p.storage.lock() == storage && p.version == version && p.user == user.get_desc() &&
            p.packed == md) {
          keep.push_back(p.buffer);
          return dnnl::memory(md, eng, p.buffer->data());
        }
  }
  auto buffer = std::make_shared<Storage>(std::max<size_t>(md.get_size(), 1), Device::cpu());
  keep.push_back(buffer);
  dnnl::memory mine(md, eng, buffer->data());
  dnnl::reorder(user, mine).execute(stream, const_cast<dnnl::memory&>(user), mine);
  stream.wait();
  std::lock_guard<std::mutex> lock(g_packed_mu);
  // Entries of freed storages, and older versions of this one, go now.
  for (auto it = g_packed.begin(); it != g_packed.end();) {
    auto& v = it->second;
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const PackedWeights& p) {
                             auto st = p.storage.lock();
                             return st == nullptr ||
                                    (st == storage && p.user == user.get_desc() && p.packed == md);
                           }),
            v.end());
    it = v.empty() ? g_packed.erase(it) : std::next(it);
  }
  g_packed[data].push_back({storage, version, user.get_desc(), md, buffer});
  return mine;
}

/// Packs `user` again into `buffer`, its packed copy of an older version, when nothing but
/// the caller and the cache holds that buffer; false (nothing done) otherwise.
bool repack_in_place(const std::shared_ptr<Storage>& storage, const dnnl::memory& user,
                     const dnnl::memory::desc& md, dnnl::stream& stream,
                     const std::shared_ptr<Storage>& buffer) {
  std::lock_guard<std::mutex> lock(g_packed_mu);
  auto it = g_packed.find(user.get_data_handle());
  if (it == g_packed.end() || buffer.use_count() != 2) return false;
  for (PackedWeights& p : it->second)
    if (p.buffer == buffer && p.storage.lock() == storage && p.user == user.get_desc() &&
        p.packed == md) {
      dnnl::memory mine(md, onednn_engine(), buffer->data());
      dnnl::reorder(user, mine).execute(stream, const_cast<dnnl::memory&>(user), mine);
      stream.wait();
      p.version = storage->version();
      return true;
    }
  return false;
}

} // namespace

size_t onednn_packed_weights() {
  std::lock_guard<std::mutex> lock(g_packed_mu);
  size_t n = 0;
  for (const auto& [data, v] : g_packed)
    n += v.size();
  return n;
}

namespace {

thread_local bool t_in_library = false;

/// Marks the thread as inside a library execution (in_library_call) for its lifetime.
struct InLibrary {
  InLibrary() { t_in_library = true; }
  ~InLibrary() { t_in_library = false; }
  InLibrary(const InLibrary&) = delete;
  InLibrary& operator=(const InLibrary&) = delete;
};

/// One execution of a primitive, set up: the memories of its arguments (the caller's, or
/// copies in the layouts the primitive chose), the reorders around it, its scratchpad. A
/// plain call builds one, runs it once and drops it; a prepared call (PreparedLibraryCall)
/// keeps it and runs it again with the caller's memories pointed at new addresses.
class Execution {
public:
  Execution(const char* op, const CachedPrimitive& p, std::unordered_map<int, dnnl::memory> args,
            const std::shared_ptr<Storage>* weights)
      : op_(op), primitive_(p.primitive), stream_(onednn_engine()) {
    const dnnl::engine& eng = onednn_engine();
    // Memory used only during a run (reordered copies, the scratchpad): its own buffers
    // now, laid out at offsets of one block a prepared call may share (bind_scratch).
    auto scratch_memory = [&](const dnnl::memory::desc& md) {
      const size_t bytes = std::max<size_t>(md.get_size(), 1);
      transient_storage_.push_back(std::make_shared<Storage>(bytes, Device::cpu()));
      dnnl::memory m(md, eng, transient_storage_.back()->data());
      transient_.emplace_back(m, scratch_bytes_);
      scratch_bytes_ += (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
      return m;
    };
    for (const auto& [arg, memory] : args)
      users_.emplace_back(arg, memory);
    for (const auto& [arg, md] : p.layouts) {
      auto it = args.find(arg);
      if (it == args.end() || it->second.get_desc() == md) continue;
      dnnl::memory user = it->second;
      if (arg == DNNL_ARG_WEIGHTS && weights != nullptr && *weights != nullptr) {
        weights_ = *weights;
        weights_user_ = user;
        weights_md_ = md;
        it->second = packed_weights(weights_, user, md, stream_, buffers_);
        weights_buffer_ = buffers_.size() - 1;
        weights_version_ = weights_->version();
        continue;
      }
      dnnl::memory mine = scratch_memory(md);
      if (arg == DNNL_ARG_DST)
        after_.push_back({dnnl::reorder(mine, user), mine, user});
      else
        before_.push_back({dnnl::reorder(user, mine), user, mine});
      it->second = mine;
    }
    if (p.scratchpad_bytes > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   scratch_memory(dnnl::memory::desc(
                       {static_cast<dnnl::memory::dim>(p.scratchpad_bytes)},
                       dnnl::memory::data_type::u8, dnnl::memory::format_tag::a)));
    for (const auto& [arg, memory] : args)
      args_.emplace_back(arg, memory);
    for (const auto& [arg, memory] : args_)
      c_args_.push_back({arg, memory.get()});
  }

  void run() {
    if (weights_ != nullptr && weights_->version() != weights_version_) {
      // The parameter was written in place since it was packed (a training step's update):
      // pack it again, into the same buffer when no one else uses that copy, else into a new
      // one that replaces it here (kept too, the copies would grow by one per update).
      weights_version_ = weights_->version();
      if (!repack_in_place(weights_, weights_user_, weights_md_, stream_,
                           buffers_[weights_buffer_])) {
        std::vector<std::shared_ptr<Storage>> repacked;
        dnnl::memory packed =
            packed_weights(weights_, weights_user_, weights_md_, stream_, repacked);
        buffers_[weights_buffer_] = std::move(repacked.back());
        for (size_t k = 0; k < args_.size(); ++k)
          if (args_[k].first == DNNL_ARG_WEIGHTS) {
            args_[k].second = packed;
            c_args_[k].memory = packed.get();
          }
      }
    }
    InLibrary inside;
    for (Reorder& r : before_)
      r.run(stream_);
    check(dnnl_primitive_execute(primitive_.get(), stream_.get(), static_cast<int>(c_args_.size()),
                                 c_args_.data()));
    for (Reorder& r : after_)
      r.run(stream_);
    check(dnnl_stream_wait(stream_.get()));
  }

  /// The caller's memories, by argument: what a prepared call points at new addresses.
  std::vector<std::pair<int, dnnl::memory>>& users() { return users_; }
  /// Bytes of the memory a run uses only while it runs.
  size_t scratch_bytes() const { return scratch_bytes_; }
  /// Points that memory into `base` (scratch_bytes() of it, 64-byte aligned), which other
  /// executions that never run at the same time may share, and frees its own buffers.
  void bind_scratch(char* base) {
    for (auto& [memory, offset] : transient_)
      memory.set_data_handle(base + offset);
    transient_storage_.clear();
  }
  const char* op() const { return op_; }

private:
  struct Reorder {
    dnnl::reorder primitive;
    dnnl::memory src, dst;
    void run(dnnl::stream& stream) {
      const dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, dst.get()}};
      check(dnnl_primitive_execute(primitive.get(), stream.get(), 2, a));
    }
  };
  static void check(dnnl_status_t status) {
    if (status != dnnl_success) throw dnnl::error(status, "execution failed");
  }

  const char* op_;
  dnnl::primitive primitive_;
  dnnl::stream stream_;
  std::vector<std::pair<int, dnnl::memory>> users_;
  std::vector<std::pair<int, dnnl::memory>> args_;
  std::vector<dnnl_exec_arg_t> c_args_;
  std::vector<Reorder> before_, after_;
  std::vector<std::shared_ptr<Storage>> buffers_;          // packed weights kept for this execution
  std::vector<std::pair<dnnl::memory, size_t>> transient_; // with offsets into the scratch
  std::vector<std::shared_ptr<Storage>> transient_storage_;
  size_t scratch_bytes_ = 0;
  std::shared_ptr<Storage> weights_; // a parameter kept packed
  dnnl::memory weights_user_;
  dnnl::memory::desc weights_md_;
  uint64_t weights_version_ = 0;
  size_t weights_buffer_ = 0; // the packed copy's place in buffers_
};

/// Where onednn_execute hands its executions while a library call is recorded.
struct Recording {
  std::unique_ptr<Execution> execution;
  int executions = 0;
};
thread_local Recording* t_record = nullptr;

/// A recorded Execution whose caller memories follow the addresses a run is given.
class PreparedOnednnCall final : public PreparedLibraryCall {
public:
  PreparedOnednnCall(std::unique_ptr<Execution> e, std::vector<size_t> address_of)
      : e_(std::move(e)), address_of_(std::move(address_of)) {}
  size_t scratch_bytes() const override { return e_->scratch_bytes(); }
  void bind_scratch(char* base) override { e_->bind_scratch(base); }
  void run(std::span<char* const> addresses) override {
    auto& users = e_->users();
    for (size_t k = 0; k < users.size(); ++k)
      users[k].second.set_data_handle(addresses[address_of_[k]]);
    try {
      e_->run();
    } catch (const dnnl::error& err) {
      throw Error(detail::str(e_->op(), ": oneDNN failed: ", err.what()));
    }
  }

private:
  std::unique_ptr<Execution> e_;
  std::vector<size_t> address_of_; // per caller memory: its index among the addresses
};

} // namespace

void onednn_execute(const char* op, const CachedPrimitive& p,
                    std::unordered_map<int, dnnl::memory> args,
                    const std::shared_ptr<Storage>* weights) {
  try {
    auto e = std::make_unique<Execution>(op, p, std::move(args), weights);
    e->run();
    if (t_record != nullptr) {
      t_record->execution = std::move(e);
      ++t_record->executions;
    }
  } catch (const dnnl::error& e) {
    throw Error(detail::str(op, ": oneDNN failed: ", e.what()));
  }
}

std::unique_ptr<PreparedLibraryCall> record_library_call(std::span<const void* const> addresses,
                                                         const std::function<bool()>& call) {
  Recording recording;
  Recording* saved = t_record;
  t_record = &recording;
  bool ran = false;
  try {
    ran = call();
  } catch (...) {
    t_record = saved;
    throw;
  }
  t_record = saved;
  if (!ran || recording.executions != 1) return nullptr;
  std::unique_ptr<Execution>& recorded = recording.execution;
  // Each caller memory must be exactly one of the addresses: one the call copied first (a
  // strided post-op operand made dense) or two addresses that coincide cannot be followed.
  for (size_t i = 0; i < addresses.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (addresses[i] != nullptr && addresses[i] == addresses[j]) return nullptr;
  std::vector<size_t> address_of;
  for (const auto& [arg, memory] : recorded->users()) {
    const void* data = memory.get_data_handle();
    auto it = std::find(addresses.begin(), addresses.end(), data);
    if (data == nullptr || it == addresses.end()) return nullptr;
    address_of.push_back(static_cast<size_t>(it - addresses.begin()));
  }
  return std::make_unique<PreparedOnednnCall>(std::move(recorded), std::move(address_of));
}

namespace {

/// The memory desc of a binary post-op operand t for a destination of dims `dst` that holds
/// the logical result `shape` (dst is shape itself, or shape with its leading dims folded
/// into rows); nullopt when t does not broadcast to it in a form oneDNN reads. A strided t
/// is read as it lies when it is the whole result in `layout` (the destination's chosen
/// dense strides: a residual stored channels-last beside a channels-last conv result).
std::optional<dnnl::memory::desc> binary_desc(const Tensor& t, const Shape& shape,
                                              const Shape& layout, const dnnl::memory::dims& dst) {
  if (t.dtype() != DType::f32 || t.dim() > static_cast<int64_t>(shape.size())) return std::nullopt;
  if (!t.is_contiguous()) {
    if (layout.empty() || t.sizes() != shape || t.strides() != layout || dst.size() != shape.size())
      return std::nullopt;
    return dnnl::memory::desc(dst, dnnl::memory::data_type::f32, onednn_strides(t));
  }
  const size_t rank = shape.size();
  Shape ts(rank, 1); // t's sizes, right-aligned to shape
  for (int64_t d = 0; d < t.dim(); ++d)
    ts[rank - static_cast<size_t>(t.dim()) + static_cast<size_t>(d)] = t.size(d);
  for (size_t d = 0; d < rank; ++d)
    if (ts[d] != 1 && ts[d] != shape[d]) return std::nullopt;
  using dt = dnnl::memory::data_type;
  auto plain = [](dnnl::memory::dims dims) {
    dnnl::memory::dims strides(dims.size(), 1);
    for (size_t d = dims.size(); d-- > 1;)
      strides[d - 1] = strides[d] * std::max<int64_t>(1, dims[d]);
    return dnnl::memory::desc(dims, dt::f32, strides);
  };
  if (dst.size() == rank) return plain(dnnl::memory::dims(ts.begin(), ts.end()));
  if (dst.size() != 2 || rank < 2) return std::nullopt;
  // Folded rows: t is the whole result, one row broadcast (a bias) or one column.
  bool lead_ones = true, lead_full = true;
  for (size_t d = 0; d + 1 < rank; ++d) {
    lead_ones = lead_ones && ts[d] == 1;
    lead_full = lead_full && ts[d] == shape[d];
  }
  if (lead_ones) return plain({1, ts[rank - 1]});
  if (lead_full) return plain({dst[0], ts[rank - 1]});
  return std::nullopt;
}

} // namespace

bool onednn_post_ops(const Epilogue& ep, std::span<const Tensor> operands,
                     const dnnl::memory::dims& dst_dims, dnnl::post_ops& po,
                     std::vector<int64_t>& key, std::unordered_map<int, dnnl::memory>& args) {
  using algo = dnnl::algorithm;
  auto float_bits = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<int64_t>(bits);
  };
  // The post-ops in order; scalar steps are eltwise_linear (alpha * y + beta), and
  // neighbouring ones are composed into one.
  struct Item {
    algo a = algo::undef;
    float alpha = 0, beta = 0;
    std::optional<dnnl::memory::desc> md; // binary: the operand's
    const Tensor* operand = nullptr;
  };
  std::vector<Item> items;
  auto linear = [&](float alpha, float beta) {
    if (!items.empty() && items.back().a == algo::eltwise_linear) {
      Item& l = items.back(); // alpha (l.alpha y + l.beta) + beta
      l.beta = alpha * l.beta + beta;
      l.alpha *= alpha;
    } else {
      items.push_back({algo::eltwise_linear, alpha, beta, std::nullopt, nullptr});
    }
  };
  for (const PostOp& op : ep.ops) {
    auto eltwise = [&](algo a, float alpha) {
      items.push_back({a, alpha, 0.f, std::nullopt, nullptr});
    };
    switch (op.kind) {
    case PostOp::Kind::relu: eltwise(algo::eltwise_relu, 0.f); break;
    case PostOp::Kind::gelu_erf: eltwise(algo::eltwise_gelu_erf, 0.f); break;
    case PostOp::Kind::gelu_tanh: eltwise(algo::eltwise_gelu_tanh, 0.f); break;
    case PostOp::Kind::silu: eltwise(algo::eltwise_swish, 1.f); break;
    case PostOp::Kind::sigmoid: eltwise(algo::eltwise_logistic, 0.f); break;
    case PostOp::Kind::tanh: eltwise(algo::eltwise_tanh, 0.f); break;
    case PostOp::Kind::binary: {
      if (op.is_scalar) {
        // y op s as alpha * y + beta; s / y has no such form.
        const float s = static_cast<float>(op.scalar);
        switch (op.op) {
        case Op::add: linear(1.f, s); break;
        case Op::mul: linear(s, 0.f); break;
        case Op::sub: linear(op.operand_first ? -1.f : 1.f, op.operand_first ? s : -s); break;
        case Op::div:
          if (op.operand_first) return false;
          linear(1.f / s, 0.f);
          break;
        default: return false;
        }
        break;
      }
      if (op.operand_first && (op.op == Op::sub || op.op == Op::div)) return false;
      algo a;
      switch (op.op) {
      case Op::add: a = algo::binary_add; break;
      case Op::sub: a = algo::binary_sub; break;
      case Op::mul: a = algo::binary_mul; break;
      case Op::div: a = algo::binary_div; break;
      default: return false;
      }
      auto md = binary_desc(operands[op.operand], ep.sizes, ep.strides, dst_dims);
      if (!md) return false;
      items.push_back({a, 0.f, 0.f, md, &operands[op.operand]});
      break;
    }
    }
  }
  // oneDNN 2.6's GEMM post-op kernel applies the first eltwise_linear's alpha and beta to a
  // second one after another op (a wrong answer the epilogue tests caught): such a chain
  // runs op by op.
  if (std::count_if(items.begin(), items.end(),
                    [](const Item& i) { return i.a == algo::eltwise_linear; }) > 1)
    return false;
  for (size_t index = 0; index < items.size(); ++index) {
    const Item& it = items[index];
    key.insert(key.end(), {static_cast<int64_t>(it.a), float_bits(it.alpha), float_bits(it.beta)});
    if (!it.md) {
      po.append_eltwise(1.f, it.a, it.alpha, it.beta);
      continue;
    }
    po.append_binary(it.a, *it.md);
    for (int64_t d : it.md->dims())
      key.push_back(d);
    key.push_back(it.operand->is_contiguous() ? 0 : 1); // else in the destination's layout
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(index)) | DNNL_ARG_SRC_1,
                 dnnl::memory(*it.md, onednn_engine(), it.operand->raw_data()));
  }
  return true;
}

std::vector<Tensor> dense_post_operands(std::span<const Tensor> operands, const Epilogue& ep) {
  std::vector<Tensor> dense(operands.begin(), operands.end());
  for (const PostOp& op : ep.ops)
    if (op.kind == PostOp::Kind::binary && !op.is_scalar && !dense[op.operand].is_contiguous() &&
        (ep.strides.empty() || dense[op.operand].strides() != ep.strides))
      dense[op.operand] = dense[op.operand].contiguous();
  return dense;
}

dnnl::memory::dims onednn_strides(const Tensor& t) {
  dnnl::memory::dims s(t.strides().begin(), t.strides().end());
  for (size_t d = s.size(); d-- > 0;)
    if (t.size(static_cast<int64_t>(d)) == 1)
      s[d] = d + 1 < s.size() ? s[d + 1] * std::max<int64_t>(1, t.size(static_cast<int64_t>(d) + 1))
                              : 1;
  return s;
}

void reject_reference_impl(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  if (impl.rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference implementation");
}

#endif

} // namespace kiln::kernels

#ifdef KILN_HAVE_ONEDNN
namespace kiln {
bool in_library_call() { return kernels::t_in_library; }
} // namespace kiln
#endif
