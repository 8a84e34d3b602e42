// The graph choices of max_autotune: library or generated GEMM, split reductions (see
// graph_choices.h).
#include "codegen/graph_choices.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <vector>

#include "codegen/cache.h"
#include "codegen/lower.h"
#include "codegen/target.h"
#include "ir/builder.h"
#include "ir/node.h"
#include "runtime/epilogue.h"
#include "runtime/ops.h"
#include "runtime/parallel.h"
#include "runtime/static_plan.h"

namespace kiln::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

bool eligible(const ir::Node& n) {
  if (n.op() != Op::matmul || n.num_inputs() != 2) return false;
  const ir::Type& a = n.input(0)->type();
  const ir::Type& b = n.input(1)->type();
  if (a.dtype() != DType::f32 || b.dtype() != DType::f32 || a.sizes().size() != 2 ||
      b.sizes().size() != 2 || !a.device().is_cpu())
    return false;
  const int64_t m = a.sizes()[0], k = a.sizes()[1], n_ = b.sizes()[1];
  return m > 0 && k > 0 && n_ > 0 && m * k * n_ <= kMaxGemmWork;
}

/// sum over k of a[m,k,1] * b[1,k,n]: the form the generated kernel computes.
ir::Value* reduction_form(ir::Builder& b, ir::Value* a, ir::Value* w) {
  const int64_t m = a->type().sizes()[0], k = a->type().sizes()[1], n = w->type().sizes()[1];
  ir::Value* a3 = b.create(Op::view, {a}, Attrs{Shape{m, k, 1}});
  ir::Value* w3 = b.create(Op::view, {w}, Attrs{Shape{1, k, n}});
  ir::Value* p = b.create(Op::mul, {a3, w3});
  return b.create(Op::sum, {p}, Attrs{Shape{1}, false, DType::f32});
}

/// The reduction form of one matmul alone, on inputs of a's and b's types.
std::unique_ptr<ir::Graph> gemm_graph(const ir::Type& a, const ir::Type& b) {
  auto g = std::make_unique<ir::Graph>("gemm");
  ir::Value* va = g->add_input(a, ir::InputKind::user, "a");
  ir::Value* vb = g->add_input(b, ir::InputKind::user, "b");
  ir::Builder builder(*g);
  g->add_output(reduction_form(builder, va, vb));
  return g;
}

/// Normal values in a tensor of t's sizes and strides.
Tensor random_of(const ir::Type& t) {
  const Shape strides = t.full_strides();
  int64_t extent = 1;
  for (size_t d = 0; d < t.sizes().size(); ++d)
    extent += (t.sizes()[d] - 1) * strides[d];
  Tensor base = randn({extent});
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = t.sizes();
  impl->strides = strides;
  impl->dtype = DType::f32;
  impl->device = Device::cpu();
  impl->storage = base.impl().storage;
  impl->offset = base.impl().offset;
  return Tensor(std::move(impl));
}

/// Median times of two ways of computing one product, sampled in turns.
std::pair<double, double> time_both(const std::function<void()>& library,
                                    const std::function<void()>& generated) {
  const std::function<void()>* forms[2] = {&library, &generated};
  double each = 0;
  for (const std::function<void()>* f : forms) {
    (*f)(); // warm-up: first touch
    Clock::time_point t = Clock::now();
    (*f)();
    each = std::max(each, ms_since(t));
  }
  const int reps = static_cast<int>(std::clamp(std::ceil(0.2 / std::max(each, 1e-6)), 1.0, 1000.0));
  std::vector<double> samples[2];
  for (int s = 0; s < 5; ++s)
    for (int f = 0; f < 2; ++f) {
      Clock::time_point t = Clock::now();
      for (int r = 0; r < reps; ++r)
        (*forms[f])();
      samples[f].push_back(ms_since(t) / reps);
    }
  for (std::vector<double>& v : samples)
    std::sort(v.begin(), v.end());
  return {samples[0][2], samples[1][2]};
}

/// Whether b is a view of a parameter of the graph (the library keeps such weights packed).
bool parameter_weights(const ir::Value* b) {
  while (b->producer() && b->producer()->schema().kind == OpKind::view)
    b = b->producer()->input(0);
  return b->is_input() && b->input_kind() == ir::InputKind::parameter;
}

/// op over the last dim of x, split into `chunks`: op(op(view(x, [..., C, N/C]), [-1]), [-1]),
/// with n's keepdim (and dtype, for a sum).
ir::Value* split_form(ir::Builder& b, const ir::Node& n, ir::Value* x, int64_t chunks) {
  Shape sizes = x->type().sizes();
  const int64_t row = sizes.back();
  sizes.back() = chunks;
  sizes.push_back(row / chunks);
  const int64_t rank = static_cast<int64_t>(sizes.size());
  ir::Value* v = b.create(Op::view, {x}, Attrs{sizes});
  const bool keepdim = n.attrs().b(1);
  auto attrs = [&](int64_t dim, bool keep) {
    std::vector<AttrValue> a{std::vector<int64_t>{dim}, keep};
    if (n.op() == Op::sum) a.emplace_back(n.attrs().dtype(2));
    return Attrs(std::move(a));
  };
  ir::Value* partial = b.create(n.op(), {v}, attrs(rank - 1, false));
  return b.create(n.op(), {partial}, attrs(rank - 2, keepdim));
}

/// n alone (its op and attributes) on an input of x's type, whole or split.
std::unique_ptr<ir::Graph> reduction_graph(const ir::Node& n, const ir::Type& x, int64_t chunks) {
  auto g = std::make_unique<ir::Graph>("reduction");
  ir::Value* in = g->add_input(x, ir::InputKind::user, "x");
  ir::Builder builder(*g);
  g->add_output(chunks > 0 ? split_form(builder, n, in, chunks)
                           : builder.create(n.op(), {in}, n.attrs()));
  return g;
}

} // namespace

int64_t split_chunks(const ir::Node& n) {
  if ((n.op() != Op::sum && n.op() != Op::amax && n.op() != Op::amin) || n.num_inputs() != 1)
    return 0;
  const ir::Type& x = n.input(0)->type();
  const int64_t rank = static_cast<int64_t>(x.sizes().size());
  if (x.dtype() != DType::f32 || rank == 0 || !x.device().is_cpu()) return 0;
  const std::vector<int64_t>& dims = n.attrs().ints(0);
  const bool last_only =
      (dims.size() == 1 && (dims[0] == rank - 1 || dims[0] == -1)) || (dims.empty() && rank == 1);
  if (!last_only) return 0;
  const int64_t row = x.sizes().back();
  const int64_t rows = row == 0 ? 0 : numel_of(x.sizes()) / row;
  const int64_t threads = get_num_threads();
  if (rows == 0 || rows >= 2 * threads || row < kMinSplitRow) return 0;
  // The fewest chunks that give every thread two, as a divisor of the row.
  for (int64_t c = (2 * threads + rows - 1) / rows; c <= 64 * threads; ++c)
    if (row % c == 0 && row / c >= 1024) return c;
  return 0;
}

std::string split_key(const Target& target, Op op, const ir::Type& x, int64_t chunks) {
  return cache_key_header("split") + target.identity() + std::string(op_name(op)) + " " + x.str() +
         " chunks " + std::to_string(chunks) + "\n";
}

SplitChoices choose_splits(ir::Graph& g, const Target& target, const AutotuneOptions& options) {
  SplitChoices r;
  const DiskCache& db = options.database ? *options.database : DiskCache::global();
  const Clock::time_point start = Clock::now();
  std::vector<std::pair<ir::Node*, int64_t>> chosen;
  for (ir::Node* n : g.nodes()) {
    const int64_t chunks = split_chunks(*n);
    if (chunks == 0) continue;
    const ir::Type& x = n->input(0)->type();
    const std::string key = split_key(target, n->op(), x, chunks);
    bool split = false;
    if (std::optional<std::string> hit = db.load(key);
        hit && (*hit == "split" || *hit == "whole")) {
      split = *hit == "split";
      ++r.database_hits;
    } else if (ms_since(start) < options.budget_ms) {
      LowerOptions lo;
      lo.target = &target;
      Expected<CompiledGraph> whole = lower(reduction_graph(*n, x, 0), lo);
      Expected<CompiledGraph> parts = lower(reduction_graph(*n, x, chunks), lo);
      if (!whole || !parts || !whole->fallback.empty() || !parts->fallback.empty()) continue;
      const std::vector<Tensor> inputs{random_of(x)};
      std::vector<Tensor> outputs;
      std::unique_ptr<StaticPlan> a = StaticPlan::build(whole->plan, inputs, {}, outputs);
      std::unique_ptr<StaticPlan> b = StaticPlan::build(parts->plan, inputs, {}, outputs);
      if (!a || !b) continue;
      const auto [whole_ms, split_ms] =
          time_both([&] { (void)a->run(inputs); }, [&] { (void)b->run(inputs); });
      r.timings += 2;
      split = split_ms < whole_ms * (1 - 0.03);
      db.store(key, split ? "split" : "whole");
      if (options.log) {
        char line[160];
        std::snprintf(line, sizeof line, "whole %.3f us, split in %lld %.3f us: ", whole_ms * 1000,
                      static_cast<long long>(chunks), split_ms * 1000);
        std::cerr << "[kiln autotune] " << op_name(n->op()) << " over the rows of " << x.str()
                  << ": " << line << (split ? "split" : "whole") << "\n";
      }
    } else {
      continue;
    }
    ++r.considered;
    if (split) chosen.emplace_back(n, chunks);
  }
  for (auto [n, chunks] : chosen) {
    ir::Builder b(g);
    b.set_insertion_point(n);
    ir::Value* y = split_form(b, *n, n->input(0), chunks);
    n->output(0)->replace_all_uses_with(y);
    g.erase(n);
  }
  r.split = static_cast<int64_t>(chosen.size());
  return r;
}

std::string gemm_key(const Target& target, const ir::Type& a, const ir::Type& b) {
  return cache_key_header("gemm") + target.identity() + "a " + a.str() + "\nb " + b.str() + "\n";
}

GemmChoices choose_gemms(ir::Graph& g, const Target& target, const AutotuneOptions& options) {
  GemmChoices r;
  const DiskCache& db = options.database ? *options.database : DiskCache::global();
  const Clock::time_point start = Clock::now();
  std::vector<ir::Node*> chosen;
  for (ir::Node* n : g.nodes()) {
    if (!eligible(*n)) continue;
    const ir::Type& a = n->input(0)->type();
    const ir::Type& b = n->input(1)->type();
    const std::string key = gemm_key(target, a, b);
    bool generated = false;
    if (std::optional<std::string> hit = db.load(key);
        hit && (*hit == "generated" || *hit == "library")) {
      generated = *hit == "generated";
      ++r.database_hits;
    } else if (ms_since(start) < options.budget_ms) {
      // The library call as a static plan runs it (prepared once, parameter weights packed);
      // the generated kernel from a static plan of the reduction form alone.
      const std::vector<Tensor> inputs{random_of(a), random_of(b)};
      Epilogue none;
      none.contraction_operands = 2;
      none.sizes = n->output(0)->type().sizes();
      none.weights_are_parameters = parameter_weights(n->input(1));
      Tensor out = kiln::empty(none.sizes);
      std::unique_ptr<PreparedLibraryCall> lib =
          run_and_prepare(Op::matmul, n->attrs(), inputs, none, out);
      char* addresses[3] = {static_cast<char*>(inputs[0].raw_data()),
                            static_cast<char*>(inputs[1].raw_data()),
                            static_cast<char*>(out.raw_data())};
      LowerOptions lo;
      lo.target = &target;
      Expected<CompiledGraph> gen = lower(gemm_graph(a, b), lo);
      if (!gen || !gen->fallback.empty()) continue;
      std::vector<Tensor> outputs;
      std::unique_ptr<StaticPlan> plan = StaticPlan::build(gen->plan, inputs, {}, outputs);
      const auto [lib_ms, gen_ms] = time_both(
          [&] {
            if (lib)
              lib->run(addresses);
            else
              run_with_epilogue(Op::matmul, n->attrs(), inputs, none, &out);
          },
          [&] { (void)plan->run(inputs); });
      r.timings += 2;
      generated = gen_ms < lib_ms * (1 - 0.03);
      db.store(key, generated ? "generated" : "library");
      if (options.log) {
        char line[160];
        std::snprintf(line, sizeof line, "library %.3f us, generated %.3f us: ", lib_ms * 1000,
                      gen_ms * 1000);
        std::cerr << "[kiln autotune] matmul " << a.str() << " x " << b.str() << ": " << line
                  << (generated ? "generated" : "library") << "\n";
      }
    } else {
      continue;
    }
    ++r.considered;
    if (generated) chosen.push_back(n);
  }
  for (ir::Node* n : chosen) {
    ir::Builder b(g);
    b.set_insertion_point(n);
    ir::Value* y = reduction_form(b, n->input(0), n->input(1));
    n->output(0)->replace_all_uses_with(y);
    g.erase(n);
  }
  r.generated = static_cast<int64_t>(chosen.size());
  return r;
}

} // namespace kiln::codegen
