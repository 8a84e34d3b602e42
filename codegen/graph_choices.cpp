// The graph choices of max_autotune: library or generated GEMM, split reductions (see
// graph_choices.h).
#include "codegen/graph_choices.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "codegen/cache.h"
#include "codegen/lower.h"
#include "codegen/target.h"
#include "ir/builder.h"
#include "ir/node.h"
#include "runtime/epilogue.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/random.h"
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
  const Shape& as = a.sizes();
  const Shape& bs = b.sizes();
  if (a.dtype() != DType::f32 || b.dtype() != DType::f32 || !a.device().is_cpu() || as.size() < 2)
    return false;
  // b: a matrix, or a batch of them with a's batch dims.
  if (bs.size() != 2 &&
      (bs.size() != as.size() || !std::equal(as.begin(), as.end() - 2, bs.begin())))
    return false;
  const int64_t work = numel_of(as) * bs.back();
  return work > 0 && work <= kMaxGemmWork;
}

/// sum over k of a[..., m, k, 1] * b[..., 1, k, n]: the form the generated kernel computes.
/// A b that is not unit-stride along n (a linear's transposed weight) is first copied
/// row-major, so that the kernel's vector loop over n loads whole B vectors.
ir::Value* reduction_form(ir::Builder& b, ir::Value* a, ir::Value* w) {
  if (w->type().full_strides().back() != 1 && w->type().sizes().back() > 1)
    w = b.create(Op::copy, {w});
  Shape a_sizes = a->type().sizes();
  a_sizes.push_back(1);
  Shape w_sizes = w->type().sizes();
  w_sizes.insert(w_sizes.end() - 2, 1);
  ir::Value* a3 = b.create(Op::view, {a}, Attrs{a_sizes});
  ir::Value* w3 = b.create(Op::view, {w}, Attrs{w_sizes});
  ir::Value* p = b.create(Op::mul, {a3, w3});
  const auto k_dim = static_cast<int64_t>(a_sizes.size()) - 2;
  return b.create(Op::sum, {p}, Attrs{Shape{k_dim}, false, DType::f32});
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

/// Values in [-1, 1) in a tensor of t's sizes and strides, from a Philox stream of their own:
/// timing at compile time leaves the user's random stream (default_generator) where it was.
Tensor random_of(const ir::Type& t) {
  const Shape strides = t.full_strides();
  int64_t extent = 1;
  for (size_t d = 0; d < t.sizes().size(); ++d)
    extent += (t.sizes()[d] - 1) * strides[d];
  Tensor values = empty({extent});
  float* p = values.data_ptr<float>();
  for (int64_t i = 0; i < extent; i += 4) {
    const std::array<uint32_t, 4> r =
        philox4x32_10(static_cast<uint64_t>(i / 4), 0, /*key=*/0x6b696c6e74756e65ULL);
    for (int64_t j = 0; j < 4 && i + j < extent; ++j)
      p[i + j] = static_cast<float>(r[static_cast<size_t>(j)] >> 8) * 0x1p-23f - 1.0f;
  }
  if (t.dtype() != DType::f32) values = values.to(t.dtype());
  return make_view(values, t.sizes(), strides, 0);
}

/// g lowered for `target` and run from a static plan on `inputs`, as max_autotune runs it;
/// empty when g gets no generated code or no static plan.
std::function<void()> static_run(std::unique_ptr<ir::Graph> g, const Target& target,
                                 std::vector<Tensor> inputs) {
  LowerOptions lo;
  lo.target = &target;
  Expected<CompiledGraph> cg = lower(std::move(g), lo);
  if (!cg || !cg->fallback.empty()) return {};
  auto compiled = std::make_shared<const CompiledGraph>(std::move(*cg));
  std::vector<Tensor> outputs;
  std::shared_ptr<StaticPlan> plan = StaticPlan::build(compiled->plan, inputs, {}, outputs);
  if (!plan) return {};
  return [compiled, plan, inputs] { (void)plan->run(inputs); };
}

/// The two forms of one node max_autotune chooses between: as it is, and rewritten.
struct Forms {
  std::function<void()> as_is, rewritten;
};

/// Answers, per node, whether its rewritten form is the faster: from the database, else (while
/// the budget lasts) by timing the two forms (the rewrite must win by more than kNoiseGuard)
/// and storing the answer. One per graph: the budget counts from its construction.
class Decider {
public:
  explicit Decider(const AutotuneOptions& options)
      : options_(options), db_(options.database ? *options.database : DiskCache::global()),
        start_(Clock::now()) {}

  /// `names` are the stored answers (as is, rewritten); make() builds the forms, or nullopt.
  /// nullopt: no answer (budget spent, or no forms), and the node stays as it is.
  std::optional<bool> rewrite(const std::string& key, std::pair<const char*, const char*> names,
                              const std::string& what,
                              const std::function<std::optional<Forms>()>& make,
                              int64_t& database_hits, int64_t& timings) {
    if (std::optional<std::string> hit = db_.load(key);
        hit && (*hit == names.first || *hit == names.second)) {
      ++database_hits;
      return *hit == names.second;
    }
    if (ms_since(start_) >= options_.budget_ms) return std::nullopt;
    std::optional<Forms> forms = make();
    if (!forms || !forms->as_is || !forms->rewritten) return std::nullopt;
    const std::function<void()> both[2] = {forms->as_is, forms->rewritten};
    const std::vector<double> ms = median_times(both);
    timings += 2;
    const bool rewrite = ms[1] < ms[0] * (1 - kNoiseGuard);
    db_.store(key, rewrite ? names.second : names.first);
    if (options_.log) {
      char line[160];
      std::snprintf(line, sizeof line, "%s %.3f us, %s %.3f us: %s", names.first, ms[0] * 1000,
                    names.second, ms[1] * 1000, rewrite ? names.second : names.first);
      std::cerr << "[kiln autotune] " << what << ": " << line << "\n";
    }
    return rewrite;
  }

private:
  const AutotuneOptions& options_;
  const DiskCache& db_;
  Clock::time_point start_;
};

/// Replaces node n of g by the value form() builds in its place.
void replace(ir::Graph& g, ir::Node* n, const std::function<ir::Value*(ir::Builder&)>& form) {
  ir::Builder b(g);
  b.set_insertion_point(n);
  n->output(0)->replace_all_uses_with(form(b));
  g.erase(n);
}

/// Whether b is a view of a parameter of the graph (the library keeps such weights packed).
bool parameter_weights(const ir::Value* b) {
  while (b->producer() && b->producer()->schema().kind == OpKind::view)
    b = b->producer()->input(0);
  return b->is_input() && b->input_kind() == ir::InputKind::parameter;
}

/// matmul n run as a static plan runs it: the library call prepared once (parameter weights
/// packed), on `inputs`.
std::function<void()> library_run(const ir::Node& n, std::vector<Tensor> inputs) {
  struct Call {
    std::vector<Tensor> inputs;
    Attrs attrs;
    Epilogue none;
    Tensor out;
    std::unique_ptr<PreparedLibraryCall> prepared;
    char* addresses[3] = {};
  };
  auto c = std::make_shared<Call>();
  c->inputs = std::move(inputs);
  c->attrs = n.attrs();
  c->none.contraction_operands = 2;
  c->none.sizes = n.output(0)->type().sizes();
  c->none.weights_are_parameters = parameter_weights(n.input(1));
  c->out = kiln::empty(c->none.sizes);
  c->prepared = run_and_prepare(Op::matmul, c->attrs, c->inputs, c->none, c->out);
  c->addresses[0] = static_cast<char*>(c->inputs[0].raw_data());
  c->addresses[1] = static_cast<char*>(c->inputs[1].raw_data());
  c->addresses[2] = static_cast<char*>(c->out.raw_data());
  return [c] {
    if (c->prepared)
      c->prepared->run(c->addresses);
    else
      run_with_epilogue(Op::matmul, c->attrs, c->inputs, c->none, &c->out);
  };
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

namespace {

/// A sum, amax or amin over the last dim of its one input: (rows, row length); else nothing.
std::optional<std::pair<int64_t, int64_t>> last_dim_rows(const ir::Node& n) {
  if ((n.op() != Op::sum && n.op() != Op::amax && n.op() != Op::amin) || n.num_inputs() != 1)
    return std::nullopt;
  const ir::Type& x = n.input(0)->type();
  const int64_t rank = static_cast<int64_t>(x.sizes().size());
  if (rank == 0) return std::nullopt;
  const std::vector<int64_t>& dims = n.attrs().ints(0);
  const bool last_only =
      (dims.size() == 1 && (dims[0] == rank - 1 || dims[0] == -1)) || (dims.empty() && rank == 1);
  if (!last_only) return std::nullopt;
  const int64_t row = x.sizes().back();
  return std::pair<int64_t, int64_t>{row == 0 ? 0 : numel_of(x.sizes()) / row, row};
}

} // namespace

int64_t split_chunks(const ir::Node& n) {
  const std::optional<std::pair<int64_t, int64_t>> geometry = last_dim_rows(n);
  if (!geometry) return 0;
  const ir::Type& x = n.input(0)->type();
  if (x.dtype() != DType::f32 || !x.device().is_cpu()) return 0;
  const auto [rows, row] = *geometry;
  const int64_t threads = get_num_threads();
  if (rows == 0 || rows >= 2 * threads || row < kMinSplitRow) return 0;
  // The fewest chunks that give every thread two, as a divisor of the row.
  for (int64_t c = (2 * threads + rows - 1) / rows; c <= 64 * threads; ++c)
    if (row % c == 0 && row / c >= 1024) return c;
  return 0;
}

int64_t device_split_chunks(const ir::Node& n) {
  const std::optional<std::pair<int64_t, int64_t>> geometry = last_dim_rows(n);
  if (!geometry) return 0;
  const ir::Type& x = n.input(0)->type();
  if (x.device().is_cpu() || !is_floating(x.dtype()) || !x.is_contiguous()) return 0;
  const auto [rows, row] = *geometry;
  if (rows == 0 || rows >= kDeviceSplitGroups || row < kMinSplitRow) return 0;
  // Chunks of at least 1024 (four points per thread of a block), as many as make
  // kDeviceSplitGroups groups if the row has them: the largest divisor of the row up to that.
  const int64_t want = std::min((kDeviceSplitGroups + rows - 1) / rows, row / 1024);
  for (int64_t c = want; c >= 2; --c)
    if (row % c == 0) return c;
  return 0;
}

SplitChoices split_for_device(ir::Graph& g) {
  SplitChoices r;
  std::vector<std::pair<ir::Node*, int64_t>> chosen;
  for (ir::Node* n : g.nodes())
    if (const int64_t chunks = device_split_chunks(*n); chunks > 0) chosen.emplace_back(n, chunks);
  for (auto [n, chunks] : chosen)
    replace(g, n, [&](ir::Builder& b) { return split_form(b, *n, n->input(0), chunks); });
  r.considered = r.split = static_cast<int64_t>(chosen.size());
  return r;
}

std::string split_key(const Target& target, Op op, const ir::Type& x, int64_t chunks) {
  return cache_key_header("split") + target.identity() + std::string(op_name(op)) + " " + x.str() +
         " chunks " + std::to_string(chunks) + "\n";
}

SplitChoices choose_splits(ir::Graph& g, const Target& target, const AutotuneOptions& options) {
  SplitChoices r;
  Decider decide(options);
  std::vector<std::pair<ir::Node*, int64_t>> chosen;
  for (ir::Node* n : g.nodes()) {
    const int64_t chunks = split_chunks(*n);
    if (chunks == 0) continue;
    const ir::Type& x = n->input(0)->type();
    std::optional<bool> split = decide.rewrite(
        split_key(target, n->op(), x, chunks), {"whole", "split"},
        std::string(op_name(n->op())) + " over the rows of " + x.str() + " in " +
            std::to_string(chunks) + " chunks",
        [&]() -> std::optional<Forms> {
          const std::vector<Tensor> inputs{random_of(x)};
          return Forms{static_run(reduction_graph(*n, x, 0), target, inputs),
                       static_run(reduction_graph(*n, x, chunks), target, inputs)};
        },
        r.database_hits, r.timings);
    if (!split) continue;
    ++r.considered;
    if (*split) chosen.emplace_back(n, chunks);
  }
  for (auto [n, chunks] : chosen)
    replace(g, n, [&](ir::Builder& b) { return split_form(b, *n, n->input(0), chunks); });
  r.split = static_cast<int64_t>(chosen.size());
  return r;
}

std::string gemm_key(const Target& target, const ir::Type& a, const ir::Type& b) {
  return cache_key_header("gemm") + target.identity() + "a " + a.str() + "\nb " + b.str() + "\n";
}

GemmChoices choose_gemms(ir::Graph& g, const Target& target, const AutotuneOptions& options) {
  GemmChoices r;
  Decider decide(options);
  std::vector<ir::Node*> chosen;
  for (ir::Node* n : g.nodes()) {
    if (!eligible(*n)) continue;
    const ir::Type& a = n->input(0)->type();
    const ir::Type& b = n->input(1)->type();
    std::optional<bool> generated = decide.rewrite(
        gemm_key(target, a, b), {"library", "generated"}, "matmul " + a.str() + " x " + b.str(),
        [&]() -> std::optional<Forms> {
          const std::vector<Tensor> inputs{random_of(a), random_of(b)};
          return Forms{library_run(*n, inputs), static_run(gemm_graph(a, b), target, inputs)};
        },
        r.database_hits, r.timings);
    if (!generated) continue;
    ++r.considered;
    if (*generated) chosen.push_back(n);
  }
  for (ir::Node* n : chosen)
    replace(g, n, [&](ir::Builder& b) { return reduction_form(b, n->input(0), n->input(1)); });
  r.generated = static_cast<int64_t>(chosen.size());
  return r;
}

} // namespace kiln::codegen
