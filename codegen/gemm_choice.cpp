// Library or generated GEMM, per shape (see gemm_choice.h).
#include "codegen/gemm_choice.h"

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

} // namespace

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
