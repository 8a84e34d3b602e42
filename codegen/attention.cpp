// Attention sites (codegen/attention.h).
#include "codegen/attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "codegen/build_plan.h"
#include "runtime/epilogue.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tracing.h"

namespace kiln::codegen {
namespace {

/// A matmul step of the fused order: its anchor node and, for a library call, the call.
struct Product {
  const ir::Node* anchor = nullptr;
  const passes::LibraryCall* call = nullptr;
  const ir::Value* output() const { return call ? call->output : anchor->output(); }
};

/// Whether every post-op of a library call leaves the blocks independent: eltwise ops and
/// one-element operands (a block cannot take a slice of a tensor operand).
bool blockable_epilogue(const passes::LibraryCall* call) {
  if (!call) return true;
  return std::all_of(call->epilogue.ops.begin(), call->epilogue.ops.end(),
                     [](const PostOp& p) { return p.kind != PostOp::Kind::binary || p.is_scalar; });
}

bool f32_dense(const ir::Value* v) {
  return v->type().dtype() == DType::f32 && v->type().is_contiguous();
}

/// The values a mask's condition is computed from, evaluated now: only constants and
/// deterministic ops of them (no graph input, parameter or random op).
class ConstantEvaluator {
public:
  std::optional<Tensor> eval(const ir::Value* v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    std::optional<Tensor> r = compute(v);
    memo_.emplace(v, r);
    return r;
  }

private:
  std::optional<Tensor> compute(const ir::Value* v) {
    if (v->is_constant()) return v->constant();
    const ir::Node* n = v->producer();
    if (!n || n->num_outputs() != 1 || numel_of(v->type().sizes()) > kMaxElements)
      return std::nullopt;
    const OpKind kind = schema(n->op()).kind;
    if (kind == OpKind::random || kind == OpKind::contraction) return std::nullopt;
    std::vector<Tensor> in;
    for (const ir::Value* x : n->inputs()) {
      std::optional<Tensor> t = eval(x);
      if (!t) return std::nullopt;
      in.push_back(*t);
    }
    TracerScope untraced(nullptr);
    return dispatch1(n->op(), in, n->attrs());
  }
  static constexpr int64_t kMaxElements = int64_t{1} << 24;
  std::unordered_map<const ir::Value*, std::optional<Tensor>> memo_;
};

/// Per block of query rows, the keys [0, end) that some row keeps, when the group reads X
/// only through where(c, -inf, X) or where(c, X, -inf) with c known now; empty otherwise.
std::vector<int64_t> masked_key_ends(const ir::Value* x, int64_t block) {
  const Shape& xs = x->type().sizes();
  const size_t rank = xs.size();
  const int64_t l = xs[rank - 2], s = xs[rank - 1];
  const int64_t blocks = (l + block - 1) / block;
  std::vector<int64_t> need(static_cast<size_t>(blocks), 0); // largest kept key + 1
  ConstantEvaluator eval;
  for (const ir::Use& u : x->uses()) {
    const ir::Node* w = u.user;
    if (u.kind != ir::Use::Kind::operand || w->op() != Op::where || u.slot == 0 ||
        w->output()->type().sizes() != xs)
      return {};
    const ir::Value* other = w->input(u.slot == 1 ? 2 : 1);
    if (other == x) return {};
    std::optional<Tensor> fill = eval.eval(other);
    if (!fill || fill->numel() != 1 ||
        fill->contiguous().to(DType::f64).item<double>() !=
            -std::numeric_limits<double>::infinity())
      return {};
    std::optional<Tensor> cond = eval.eval(w->input(0));
    if (!cond || cond->dtype() != DType::bool_ || cond->dim() > static_cast<int64_t>(rank))
      return {};
    // Kept where the select picks X: c on the true side, !c on the false side.
    const bool keep_if = u.slot == 1;
    const Tensor c = cond->contiguous();
    const Shape& cs = c.sizes();
    const auto cr = static_cast<int64_t>(cs.size());
    const int64_t cl = cr >= 2 ? cs[static_cast<size_t>(cr - 2)] : 1;
    const int64_t cj = cr >= 1 ? cs[static_cast<size_t>(cr - 1)] : 1;
    const bool* data = c.data_ptr<bool>();
    const int64_t count = c.numel();
    for (int64_t i = 0; i < count; ++i) {
      if (data[i] != keep_if) continue;
      const int64_t j = cj == 1 ? s - 1 : i % cj;
      if (cl == 1) {
        for (int64_t& nd : need)
          nd = std::max(nd, j + 1);
      } else {
        const int64_t row = (i / cj) % cl;
        int64_t& nd = need[static_cast<size_t>(row / block)];
        nd = std::max(nd, j + 1);
      }
    }
  }
  // A block whose rows keep no key still takes one: its rows are NaN (0/0) either way, and
  // a product over no keys would give zeros.
  for (int64_t& nd : need)
    nd = std::max<int64_t>(nd, 1);
  return need;
}

} // namespace

int64_t attention_block(int64_t keys) {
  // Bytes of a core's L2 (1-2 MiB on the AVX-512 hosts kiln runs on): the block's scores and
  // probabilities are written once and read once each, so they may fill it. Measured on the
  // bench's causal attention (a 2 MiB L2): 256 keys, 128 rows 3.6 ms against 64 rows 4.5 ms
  // and 256 rows 3.8 ms; 1024 keys, 128 rows 138 ms against 32 rows 181 ms.
  constexpr int64_t kBudget = 1024 * 1024;
  const int64_t rows =
      kBudget / (2 * static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(keys, 1));
  // A multiple of 16 rows (the products' register tiles), 16 to 128.
  return std::clamp<int64_t>(rows / 16 * 16, 16, 128);
}

std::vector<AttentionSite> find_attention(const passes::FusionResult& fusion) {
  std::vector<AttentionSite> sites;
  if (!library_epilogues_available()) return sites;
  // Where each value is computed: the step of the fused order, and matmuls as products.
  std::unordered_map<const ir::Value*, size_t> step_of;
  std::unordered_map<const ir::Value*, Product> product_of;
  std::unordered_map<const ir::Node*, size_t> step_of_node;
  for (size_t k = 0; k < fusion.order.size(); ++k) {
    const passes::FusionStep& fs = fusion.order[k];
    if (fs.group >= 0) {
      for (const ir::Value* v : fusion.groups[static_cast<size_t>(fs.group)].outputs)
        step_of[v] = k;
    } else if (fs.library >= 0) {
      const passes::LibraryCall& call = fusion.library_calls[static_cast<size_t>(fs.library)];
      if (call.anchor->op() == Op::matmul) {
        product_of[call.output] = {call.anchor, &call};
        step_of[call.output] = k;
        step_of_node[call.anchor] = k;
      }
    } else if (fs.node->op() == Op::matmul) {
      product_of[fs.node->output()] = {fs.node, nullptr};
      step_of[fs.node->output()] = k;
      step_of_node[fs.node] = k;
    }
  }
  // A step belongs to one site at most: one site's output product may be the next one's
  // scores (a fuzz finding: the steps of both were dropped from the plan).
  std::vector<bool> claimed(fusion.order.size(), false);
  for (size_t k = 0; k < fusion.order.size(); ++k) {
    const passes::FusionStep& fs = fusion.order[k];
    if (fs.group < 0) continue;
    const passes::FusionGroup& grp = fusion.groups[static_cast<size_t>(fs.group)];
    const size_t rank = grp.shape.size();
    if (!grp.reduction || rank < 2 ||
        grp.dims != std::vector<int64_t>{static_cast<int64_t>(rank) - 1} || grp.outputs.size() != 1)
      continue;
    const ir::Value* p = grp.outputs[0];
    if (!f32_dense(p) || p->type().sizes() != grp.shape || p->uses().size() != 1) continue;
    const ir::Use pu = p->uses()[0];
    if (pu.kind != ir::Use::Kind::operand || pu.user->op() != Op::matmul || pu.slot != 0) continue;
    // The output's product: an eager matmul or a library call anchored on it.
    auto out_step = step_of_node.find(pu.user);
    if (out_step == step_of_node.end()) continue;
    const passes::FusionStep& os = fusion.order[out_step->second];
    const Product out =
        product_of.at(os.library >= 0 ? fusion.library_calls[static_cast<size_t>(os.library)].output
                                      : os.node->output());
    if (!blockable_epilogue(out.call)) continue;
    // The scores: one input of the group from a matmul, read only by the group's nodes.
    const ir::Value* x = nullptr;
    for (const ir::Value* in : grp.inputs)
      if (product_of.count(in) && in->type().sizes() == grp.shape) x = in;
    if (!x || !f32_dense(x)) continue;
    const Product scores = product_of.at(x);
    if (!blockable_epilogue(scores.call)) continue;
    const bool only_group = std::all_of(x->uses().begin(), x->uses().end(), [&](const ir::Use& u) {
      return u.kind == ir::Use::Kind::operand &&
             std::find(grp.nodes.begin(), grp.nodes.end(), u.user) != grp.nodes.end();
    });
    if (!only_group) continue;
    // Geometry: Q [..., L, D], Kᵀ [..., D, S], V [..., S, E], all of the scores' batch dims.
    const Shape& xs = grp.shape;
    const ir::Value* q = scores.anchor->input(0);
    const ir::Value* kt = scores.anchor->input(1);
    const ir::Value* v = pu.user->input(1);
    const ir::Value* o = out.output();
    auto batch_matches = [&](const ir::Value* t) {
      const Shape& ts = t->type().sizes();
      return t->type().dtype() == DType::f32 && ts.size() == rank &&
             std::equal(xs.begin(), xs.end() - 2, ts.begin());
    };
    if (!batch_matches(q) || !batch_matches(kt) || !batch_matches(v) || !batch_matches(o) ||
        q->type().sizes()[rank - 2] != xs[rank - 2] ||
        kt->type().sizes()[rank - 1] != xs[rank - 1] || v->type().sizes()[rank - 2] != xs[rank - 1])
      continue;
    if (numel_of(xs) == 0 || numel_of(o->type().sizes()) == 0) continue;
    const size_t sk = step_of.at(x), ok = out_step->second;
    if (!(sk < k && k < ok) || claimed[sk] || claimed[k] || claimed[ok]) continue;
    claimed[sk] = claimed[k] = claimed[ok] = true;
    AttentionSite site;
    site.scores = sk;
    site.softmax = k;
    site.out = ok;
    site.x = x;
    site.p = p;
    site.block = attention_block(xs[rank - 1]);
    if (const char* e = std::getenv("KILN_ATTENTION_BLOCK"); e && std::atoll(e) > 0)
      site.block = std::atoll(e);
    site.key_end = masked_key_ends(x, site.block);
    sites.push_back(std::move(site));
  }
  return sites;
}

namespace {

/// b rounded up to a multiple of per.
int64_t round_up(int64_t b, int64_t per) {
  per = std::max<int64_t>(per, 1);
  return (b + per - 1) / per * per;
}

} // namespace

std::vector<int64_t> attention_blocks(const AttentionSite& site) {
  auto rounded = [&site](int64_t b) { return round_up(b, site.rows_per); };
  if (std::getenv("KILN_ATTENTION_BLOCK")) return {rounded(site.block)};
  const Shape& xs = site.x->type().sizes();
  const int64_t l = xs[xs.size() - 2];
  std::vector<int64_t> blocks;
  for (int64_t c : {site.block / 2, site.block, site.block * 2}) {
    c = rounded(c);
    if (c >= 16 && c <= 256 && (blocks.empty() || (blocks.back() < l && blocks.back() < c)))
      blocks.push_back(c);
  }
  if (blocks.empty()) blocks.push_back(rounded(site.block));
  return blocks;
}

namespace {

/// The site in blocks of `block` query rows, its key ends for them.
AttentionSite in_blocks(const AttentionSite& site, int64_t block) {
  AttentionSite s = site;
  s.block = block;
  s.key_end = masked_key_ends(site.x, block);
  return s;
}

} // namespace

std::vector<int64_t> narrow_widths(const AttentionSite& site) {
  const int64_t s = site.x->type().sizes().back();
  std::vector<int64_t> widths;
  for (int64_t block : attention_blocks(site))
    for (int64_t w : masked_key_ends(site.x, block))
      if (w < s) widths.push_back(w);
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
  return widths;
}

std::string narrow_name(const std::string& name, int64_t width) {
  return name + "_w" + std::to_string(width);
}

ir::kernel::Kernel narrow_kernel(const ir::kernel::Kernel& k, int64_t width) {
  KILN_ASSERT(k.inner.size() == 1 && width >= 1 && width <= k.inner[0],
              "narrowing a kernel of inner extents ", shape_str(k.inner), " to ", width);
  ir::kernel::Kernel n = k;
  n.name = narrow_name(k.name, width);
  n.inner[0] = width;
  return n;
}

AttentionBuild make_attention_call(const AttentionSite& site, const passes::FusionResult& fusion,
                                   const LoweredGroup& lg, std::span<const Schedule> schedules,
                                   std::span<const KernelEntry> entries) {
  AttentionBuild b;
  b.call = std::make_unique<AttentionCall>();
  auto operand = [&](const ir::Value* v) {
    auto it = std::find(b.operands.begin(), b.operands.end(), v);
    if (it != b.operands.end()) return static_cast<size_t>(it - b.operands.begin());
    b.operands.push_back(v);
    return b.operands.size() - 1;
  };
  // A product's operands and epilogue: a library call's own, or an eager matmul's (none).
  // The probabilities are no operand (index 0 stands in; the step reads its own block).
  auto product = [&](size_t step, std::vector<size_t>& ops, Epilogue& ep) {
    const passes::FusionStep& fs = fusion.order[step];
    if (fs.library >= 0) {
      const passes::LibraryCall& lc = fusion.library_calls[static_cast<size_t>(fs.library)];
      for (const ir::Value* v : lc.operands)
        ops.push_back(v == site.p ? 0 : operand(v));
      ep = lc.epilogue;
      b.anchor = lc.anchor;
      return lc.output;
    }
    for (const ir::Value* v : fs.node->inputs())
      ops.push_back(v == site.p ? 0 : operand(v));
    const ir::Value* r = fs.node->output();
    ep.contraction_operands = 2;
    ep.sizes = r->type().sizes();
    ep.dtype = r->type().dtype();
    b.anchor = fs.node;
    return r;
  };
  AttentionCall& call = *b.call;
  product(site.scores, call.scores_operands, call.scores);
  for (const ir::Value* v : lg.buffers)
    call.kernel_buffers.push_back(v == site.x   ? AttentionCall::kScores
                                  : v == site.p ? AttentionCall::kProbs
                                                : static_cast<int64_t>(operand(v)));
  b.result = product(site.out, call.out_operands, call.out);
  call.block = site.block;
  call.kernel_rows_per = site.rows_per;
  call.key_end = site.key_end;
  // A narrowed kernel scheduled in tiles of rows has no row range a block maps to.
  for (auto [width, kernel] : site.narrow)
    if (schedules[kernel].tile == 1)
      call.narrow.push_back(
          {width, entries[kernel], narrow_name(lg.kernel.name, width), schedules[kernel].block});
  return b;
}

namespace {

/// A tensor of v's type (sizes, strides: a view's too), zero-filled (timing inputs).
Tensor zeros_of(const ir::Value* v) {
  const ir::Type& t = v->type();
  const Shape strides = t.is_contiguous() ? contiguous_strides(t.sizes()) : t.strides();
  int64_t extent = 1;
  for (size_t d = 0; d < t.sizes().size(); ++d)
    extent += (t.sizes()[d] - 1) * strides[d];
  if (numel_of(t.sizes()) == 0) extent = 0;
  Tensor base = empty_with_layout({extent}, {}, t.dtype());
  if (extent > 0)
    std::memset(base.raw_data(), 0, static_cast<size_t>(extent * itemsize(t.dtype())));
  return make_view(base, t.sizes(), strides, 0);
}

/// The geometry a decision holds for: everything either way's time depends on.
std::string decision_key(const AttentionBuild& b, const ir::kernel::Kernel& k, const Schedule& s) {
  std::string key = b.call->str() + "\n" + s.str() + "\n" + k.str();
  for (const ir::Value* v : b.operands)
    key += v->type().str() + ";";
  return key;
}

/// Above this, the three steps are not timed: their scores alone would take this much.
constexpr double kMaxTimedScoreBytes = 256.0 * (1 << 20);

double best_ms(const std::function<void()>& run) {
  run(); // warm: the prepared calls, the caches
  double best = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct Decision {
  bool tiled = false;
  int64_t block = 0; // tiled: query rows per block
  std::string times; // for the log
};

/// Times a site both ways on zero-filled buffers of its operands' types: its three steps, and
/// the one step with blocks of half, once and twice the default rows (16 to 256; not past the
/// first size that holds every query row).
Decision measure(const AttentionSite& site, const AttentionBuild& b,
                 const passes::FusionResult& fusion, const LoweredGroup& lg,
                 const Plan::KernelCall& softmax, std::span<const Schedule> schedules,
                 std::span<const KernelEntry> entries) {
  TracerScope untraced(nullptr);
  std::vector<Tensor> ops;
  for (const ir::Value* v : b.operands)
    ops.push_back(zeros_of(v));
  const Tensor out = zeros_of(b.result);
  const Tensor x = zeros_of(site.x), p = zeros_of(site.p);
  const AttentionCall& call = *b.call;
  auto gather = [&](const std::vector<size_t>& idx, const Tensor& first) {
    std::vector<Tensor> in{first};
    for (size_t i = 1; i < idx.size(); ++i)
      in.push_back(ops[idx[i]]);
    return in;
  };
  static const Attrs kNone;
  std::vector<char*> buffers;
  for (int64_t bnd : call.kernel_buffers)
    buffers.push_back(
        static_cast<char*>((bnd == AttentionCall::kScores  ? x
                            : bnd == AttentionCall::kProbs ? p
                                                           : ops[static_cast<size_t>(bnd)])
                               .raw_data()));
  const std::vector<Tensor> in1 = gather(call.scores_operands, ops[call.scores_operands[0]]);
  const std::vector<Tensor> in2 = gather(call.out_operands, p);
  const double unfused = best_ms([&] {
    run_with_epilogue(Op::matmul, kNone, in1, call.scores, &x);
    softmax.run(buffers.data());
    run_with_epilogue(Op::matmul, kNone, in2, call.out, &out);
  });
  const std::vector<int64_t> blocks = attention_blocks(site);
  Decision d{false, site.block, ""};
  double best = std::numeric_limits<double>::infinity();
  char part[96];
  for (int64_t block : blocks) {
    const AttentionBuild candidate =
        make_attention_call(in_blocks(site, block), fusion, lg, schedules, entries);
    const double ms = best_ms([&] { candidate.call->run(softmax, ops, out); });
    std::snprintf(part, sizeof part, "%s%.3f ms in blocks of %lld", d.times.empty() ? "" : ", ", ms,
                  static_cast<long long>(block));
    d.times += part;
    if (ms < best) {
      best = ms;
      d.block = block;
    }
  }
  std::snprintf(part, sizeof part, " against %.3f ms as three steps", unfused);
  d.times += part;
  d.tiled = best < unfused;
  return d;
}

} // namespace

std::vector<AttentionSite>
choose_attention(std::span<const AttentionSite> sites, const passes::FusionResult& fusion,
                 std::span<const LoweredGroup> groups, std::span<const Schedule> schedules,
                 std::span<const KernelEntry> entries, std::vector<std::string>& log) {
  static std::mutex mu;
  static std::map<std::string, Decision> decided; // per geometry
  const char* forced = std::getenv("KILN_ATTENTION");
  const std::string force = forced ? forced : "";
  std::vector<AttentionSite> chosen;
  for (const AttentionSite& unscheduled : sites) {
    const auto g = static_cast<size_t>(fusion.order[unscheduled.softmax].group);
    const std::string where = "attention at " + unscheduled.x->type().str() + " scores";
    // The step runs the softmax kernel on a block's rows: a kernel scheduled in tiles of two
    // dims has no such range; one in blocks of the last dim takes blocks of whole ones.
    if (schedules[g].tile != 1) {
      log.push_back(where + ": three steps (the softmax kernel runs in tiles)");
      continue;
    }
    AttentionSite scheduled = unscheduled;
    scheduled.rows_per = schedules[g].block;
    const AttentionSite site = in_blocks(scheduled, round_up(scheduled.block, scheduled.rows_per));
    if (force == "tiled" || force == "unfused") {
      log.push_back(where + ": " + (force == "tiled" ? "one step, block by block" : "three steps") +
                    " (KILN_ATTENTION=" + force + ")");
      if (force == "tiled") chosen.push_back(site);
      continue;
    }
    // Scores too large to time the three steps on (their buffers alone): one step, unmeasured.
    const auto score_bytes = static_cast<double>(numel_of(site.x->type().sizes())) * 4;
    if (score_bytes > kMaxTimedScoreBytes) {
      log.push_back(where + ": one step, block by block, untimed (the three steps would write " +
                    mib_str(static_cast<size_t>(2 * score_bytes)) +
                    " of scores and probabilities)");
      chosen.push_back(site);
      continue;
    }
    const AttentionBuild b = make_attention_call(site, fusion, groups[g], schedules, entries);
    const std::string key = decision_key(b, groups[g].kernel, schedules[g]);
    Decision d;
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = decided.find(key); it != decided.end()) {
        d = it->second;
        known = true;
      }
    }
    if (!known) {
      d = measure(site, b, fusion, groups[g], kernel_call(groups[g], schedules[g], entries[g]),
                  schedules, entries);
      std::lock_guard<std::mutex> lock(mu);
      decided.emplace(key, d);
    }
    log.push_back(where + ": " +
                  (d.tiled ? "one step, blocks of " + std::to_string(d.block) + " rows, "
                           : std::string("three steps, ")) +
                  d.times + (known ? " (decided earlier)" : ""));
    if (!d.tiled) continue;
    chosen.push_back(d.block == site.block ? site : in_blocks(site, d.block));
  }
  return chosen;
}

} // namespace kiln::codegen
