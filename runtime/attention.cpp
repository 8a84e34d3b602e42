// Attention as one plan step, block by block (runtime/attention.h).
#include "runtime/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/error.h"
#include "runtime/kernels/loops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/parallel.h"

namespace kiln {

namespace {

/// The two products of a block, prepared once per workspace and geometry.
enum Product : int64_t { kScoresProduct = 0, kOutProduct = 1 };

struct Prepared {
  Epilogue epilogue; // the block's: its sizes
  bool tried = false;
  std::unique_ptr<PreparedLibraryCall> call; // null once tried: not preparable
};

/// Whether rows [from, to) of a [S, E] matrix at `v` (strides s0, s1) are all finite.
bool finite_rows(const float* v, int64_t s0, int64_t s1, int64_t from, int64_t to, int64_t e) {
  bool finite = true;
  for (int64_t j = from; j < to; ++j) {
    const float* row = v + j * s0;
    for (int64_t c = 0; c < e; ++c)
      finite = finite && std::isfinite(row[c * s1]);
    if (!finite) return false;
  }
  return true;
}

} // namespace

struct AttentionCall::Workspaces {
  struct Workspace {
    Tensor scores, probs; // [block, S] each, zeroed once
    std::map<std::array<int64_t, 3>, Prepared> calls;
  };
  std::mutex mu;
  std::vector<std::unique_ptr<Workspace>> free;

  std::unique_ptr<Workspace> acquire(int64_t block, int64_t s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free.empty()) {
        std::unique_ptr<Workspace> w = std::move(free.back());
        free.pop_back();
        return w;
      }
    }
    auto w = std::make_unique<Workspace>();
    // Zeroed: the softmax kernel reads a block's whole rows, also the masked keys' columns
    // that the scores' product skips (their values are selected away, never used).
    for (Tensor* t : {&w->scores, &w->probs}) {
      *t = empty_with_layout({block, s}, {}, DType::f32);
      std::memset(t->raw_data(), 0, static_cast<size_t>(block * s) * sizeof(float));
    }
    return w;
  }
  void release(std::unique_ptr<Workspace> w) {
    std::lock_guard<std::mutex> lock(mu);
    free.push_back(std::move(w));
  }
};

AttentionCall::AttentionCall() : workspaces_(std::make_unique<Workspaces>()) {}
AttentionCall::~AttentionCall() = default;
AttentionCall::AttentionCall(AttentionCall&&) noexcept = default;
AttentionCall& AttentionCall::operator=(AttentionCall&&) noexcept = default;

double AttentionCall::skipped_fraction() const {
  if (key_end.empty() || scores.sizes.size() < 2) return 0;
  const int64_t l = scores.sizes[scores.sizes.size() - 2], s = scores.sizes.back();
  if (l * s == 0) return 0;
  int64_t skipped = 0;
  for (size_t b = 0; b < key_end.size(); ++b) {
    const int64_t rows = std::min(block, l - static_cast<int64_t>(b) * block);
    skipped += rows * (s - key_end[b]);
  }
  return static_cast<double>(skipped) / static_cast<double>(l * s);
}

std::string AttentionCall::str() const {
  char skipped[32];
  std::snprintf(skipped, sizeof skipped, "%.0f%%", 100 * skipped_fraction());
  std::string s = "attention: scores + " + scores.str() + ", softmax kernel " +
                  std::to_string(kernel) +
                  (narrow.empty() ? "" : " (" + std::to_string(narrow.size()) + " narrowed)") +
                  ", out + " + out.str() + "; blocks of " + std::to_string(block) +
                  " query rows, " + skipped + " of the keys skipped";
  return s;
}

void AttentionCall::run(const Plan::KernelCall& softmax, std::span<const Tensor> operands,
                        const Tensor& result) const {
  const Tensor& q = operands[scores_operands[0]];
  const Tensor& kt = operands[scores_operands[1]];
  const Tensor& v = operands[out_operands[1]];
  const size_t rank = scores.sizes.size();
  KILN_ASSERT(rank >= 2 && q.dim() == static_cast<int64_t>(rank) &&
                  kt.dim() == static_cast<int64_t>(rank) && v.dim() == static_cast<int64_t>(rank),
              "attention: operands of rank ", q.dim(), ", ", kt.dim(), ", ", v.dim(),
              " for scores ", shape_str(scores.sizes));
  const int64_t l = scores.sizes[rank - 2], s = scores.sizes[rank - 1];
  const int64_t d = q.size(-1), e = v.size(-1);
  const Shape batch(scores.sizes.begin(), scores.sizes.end() - 2);
  const int64_t items = numel_of(batch);
  const int64_t blocks = (l + block - 1) / block;
  if (items * l * e == 0) return;
  KILN_ASSERT(kernel_rows_per >= 1 && block % kernel_rows_per == 0, "attention: blocks of ", block,
              " query rows, the softmax kernel's rows of ", kernel_rows_per);
  using kernels::batch_offsets;
  const std::vector<int64_t> qo = batch_offsets(q, batch), ko = batch_offsets(kt, batch),
                             vo = batch_offsets(v, batch), ro = batch_offsets(result, batch);
  auto* qd = static_cast<char*>(q.raw_data());
  auto* kd = static_cast<char*>(kt.raw_data());
  auto* vd = static_cast<char*>(v.raw_data());
  auto* rd = static_cast<char*>(result.raw_data());
  constexpr int64_t f = sizeof(float);
  const std::vector<int64_t>& bufs = kernel_buffers;

  auto run_block = [&](Workspaces::Workspace& w, int64_t n, int64_t b) {
    const int64_t l0 = b * block, rows = std::min(block, l - l0);
    int64_t kend = key_end.empty() ? s : key_end[static_cast<size_t>(b)];
    if (kend < s && !finite_rows(reinterpret_cast<const float*>(vd) + vo[static_cast<size_t>(n)],
                                 v.stride(-2), v.stride(-1), kend, s, e))
      kend = s;
    auto* sc = static_cast<char*>(w.scores.raw_data());
    auto* pr = static_cast<char*>(w.probs.raw_data());
    // One product of the block: through its prepared call, else prepared now, else (the
    // library does not take it) run_with_epilogue on views.
    auto product = [&](Product which, const Epilogue& full, const std::vector<size_t>& ops,
                       std::array<char*, 3> data, std::array<Shape, 3> sizes,
                       std::array<Shape, 3> strides) {
      Prepared& p = w.calls[{which, rows, kend}];
      std::vector<char*> addresses{data[0], data[1]};
      for (size_t i = 2; i < ops.size(); ++i)
        addresses.push_back(static_cast<char*>(operands[ops[i]].raw_data()));
      addresses.push_back(data[2]);
      if (p.call) {
        p.call->run(addresses);
        return;
      }
      if (!p.tried) {
        p.epilogue = full;
        p.epilogue.sizes = sizes[2];
        p.epilogue.strides = {};
        p.epilogue.weights_are_parameters = false;
      }
      // Views over the very bytes the addresses name (their storages' base pointers).
      auto view = [&](size_t k, const Tensor& base, char* at) {
        const auto off = (at - static_cast<char*>(base.impl().storage->data())) / f;
        return make_view(base, sizes[k], strides[k], off);
      };
      const Tensor& a_base = which == kScoresProduct ? q : w.probs;
      const Tensor& b_base = which == kScoresProduct ? kt : v;
      const Tensor& c_base = which == kScoresProduct ? w.scores : result;
      std::vector<Tensor> in{view(0, a_base, data[0]), view(1, b_base, data[1])};
      for (size_t i = 2; i < ops.size(); ++i)
        in.push_back(operands[ops[i]]);
      const Tensor c = view(2, c_base, data[2]);
      static const Attrs kNone;
      if (!p.tried) {
        p.tried = true;
        p.call = run_and_prepare(Op::matmul, kNone, in, p.epilogue, c);
      } else {
        run_with_epilogue(Op::matmul, kNone, in, p.epilogue, &c);
      }
    };
    const auto nn = static_cast<size_t>(n);
    // Scores: Q[n, l0:l0+rows, :] Kᵀ[n, :, 0:kend] into the block's rows (row stride s).
    product(kScoresProduct, scores, scores_operands,
            {qd + (qo[nn] + l0 * q.stride(-2)) * f, kd + ko[nn] * f, sc},
            {Shape{rows, d}, Shape{d, kend}, Shape{rows, kend}},
            {Shape{q.stride(-2), q.stride(-1)}, Shape{kt.stride(-2), kt.stride(-1)}, Shape{s, 1}});
    // The softmax kernel on the block's rows: it indexes the full [..., L, S] scores and
    // probabilities by row, so their buffers are the block's, shifted back by its first row.
    const int64_t r0 = n * l + l0;
    std::array<char*, 16> small{};
    std::vector<char*> large;
    char** buffers = small.data();
    if (bufs.size() > small.size()) {
      large.resize(bufs.size());
      buffers = large.data();
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
      const int64_t bnd = bufs[i];
      if (bnd == kScores || bnd == kProbs) {
        const auto base = reinterpret_cast<uintptr_t>(bnd == kScores ? sc : pr);
        buffers[i] = reinterpret_cast<char*>(base - static_cast<uintptr_t>(r0 * s * f));
      } else {
        const Tensor& t = operands[static_cast<size_t>(bnd)];
        buffers[i] = t.numel() == 0 ? nullptr : static_cast<char*>(t.raw_data());
      }
    }
    KernelEntry entry = softmax.entry;
    int64_t per = kernel_rows_per;
    for (const Narrowed& nk : narrow)
      if (nk.width == kend && block % nk.rows_per == 0) {
        entry = nk.entry;
        per = nk.rows_per;
      }
    const int64_t first = n * ((l + per - 1) / per);
    entry(buffers, first + l0 / per, first + (l0 + rows + per - 1) / per);
    // Out: P[:, 0:kend] V[n, 0:kend, :] into the result's rows.
    product(kOutProduct, out, out_operands,
            {pr, vd + vo[nn] * f, rd + (ro[nn] + l0 * result.stride(-2)) * f},
            {Shape{rows, kend}, Shape{kend, e}, Shape{rows, e}},
            {Shape{s, 1}, Shape{v.stride(-2), v.stride(-1)},
             Shape{result.stride(-2), result.stride(-1)}});
  };

  // Batch items outermost: each thread's contiguous share holds whole items, every block of
  // them, so causal blocks (later ones see more keys) balance.
  parallel_for(0, items * blocks, 1, [&](int64_t begin, int64_t end) {
    std::unique_ptr<Workspaces::Workspace> w = workspaces_->acquire(block, s);
    struct Return {
      Workspaces& pool;
      std::unique_ptr<Workspaces::Workspace>& w;
      ~Return() { pool.release(std::move(w)); }
    } back{*workspaces_, w};
    for (int64_t t = begin; t < end; ++t)
      run_block(*w, t / blocks, t % blocks);
  });
}

} // namespace kiln
