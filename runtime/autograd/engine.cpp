// The autograd graph's recording and its execution (runtime/autograd/autograd.h).
#include <algorithm>
#include <atomic>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "runtime/autograd/autograd.h"
#include "runtime/autograd/node.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tracing.h"

namespace kiln::autograd {
namespace {

std::atomic<uint64_t> g_sequence{0};
thread_local bool t_inference = false;

/// A recorded op: its attributes, what its backward reads, and its inputs' metadata.
class OpNode final : public Node {
public:
  OpNode(Op op, Attrs attrs) : op_(op), attrs_(std::move(attrs)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    KILN_CHECK(!released_,
               "autograd: trying to backward through the graph a second time (or to "
               "read its saved tensors after they were freed): ",
               name(), "'s saved tensors are gone; pass retain_graph=true to the first backward");
    const std::shared_ptr<Node> self = shared_from_this();
    std::vector<Tensor> in, out;
    for (const SavedTensor& s : inputs_)
      in.push_back(s.defined() ? s.unpack(self) : Tensor());
    for (const SavedTensor& s : outputs_)
      out.push_back(s.defined() ? s.unpack(self) : Tensor());
    std::vector<bool> needed;
    for (const Edge& e : next)
      needed.push_back(e.valid());
    return op_backward(op_, attrs_, in, input_meta_, out, grads, needed);
  }
  std::string name() const override {
    std::string n(op_name(op_));
    bool up = true;
    std::string camel;
    for (char c : n) {
      if (c == '_') {
        up = true;
        continue;
      }
      camel += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    return camel + "Backward";
  }
  void release() override {
    for (SavedTensor& s : inputs_)
      s.reset();
    for (SavedTensor& s : outputs_)
      s.reset();
    released_ = saved_any_;
  }
  bool released() const override { return released_; }
  void saved(std::vector<Tensor>& out) const override {
    for (const std::vector<SavedTensor>* v : {&inputs_, &outputs_})
      for (const SavedTensor& s : *v)
        if (s.defined()) out.push_back(s.data());
  }

  Op op_;
  Attrs attrs_;
  std::vector<SavedTensor> inputs_, outputs_;
  std::vector<TensorMeta> input_meta_;
  bool saved_any_ = false, released_ = false;
};

/// The view ops of a view's way from its base, applied to t (recorded when grad mode is on).
Tensor replay_views(const std::vector<ViewStep>& steps, Tensor t) {
  for (const ViewStep& s : steps)
    t = dispatch1(s.op, {t}, s.attrs);
  return t;
}

/// The adjoint of replay_views: a gradient of the view as one of the base (zeros elsewhere),
/// by the view ops' own derivatives.
Tensor unview(const std::vector<ViewStep>& steps, Tensor g) {
  for (size_t k = steps.size(); k-- > 0;) {
    const ViewStep& s = steps[k];
    const Tensor in[] = {Tensor()};
    g = op_backward(s.op, s.attrs, in, std::span<const TensorMeta>(&s.input, 1), {},
                    std::span<const Tensor>(&g, 1), {true})[0];
  }
  return g;
}

/// An in-place write through a view, as the base's history (PyTorch's CopySlices): the base's
/// gradient goes to the write's node for the view's elements, and on to the base's old
/// history for the others.
class CopySlices final : public Node {
public:
  CopySlices(TensorMeta base, std::shared_ptr<const std::vector<ViewStep>> steps,
             std::shared_ptr<Node> fn)
      : base_(std::move(base)), steps_(std::move(steps)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    Tensor g = grads.at(0);
    if (!g.defined()) g = zeros(base_.sizes, TensorOptions(base_.dtype).device(base_.device));
    const Tensor view_grad = replay_views(*steps_, g);
    std::vector<Tensor> out = fn_->apply({view_grad});
    // The written elements' old values reach the base's old history only through the write.
    const Tensor written =
        unview(*steps_, ones(view_grad.sizes(), TensorOptions(g.dtype()).device(g.device())));
    out.insert(out.begin(), where(written > 0.0, 0.0, g));
    return out;
  }
  std::string name() const override { return "CopySlices"; }
  void release() override { fn_->release(); }
  bool released() const override { return fn_->released(); }
  void saved(std::vector<Tensor>& out) const override { fn_->saved(out); }

private:
  TensorMeta base_;
  std::shared_ptr<const std::vector<ViewStep>> steps_;
  std::shared_ptr<Node> fn_; // the write's node; its edges are this node's, after the base's
};

} // namespace

// ---- saved tensors ----

namespace {

/// A copy of t's metadata without its history; a traced tensor's copy is made concrete with it.
std::shared_ptr<TensorImpl> copy_impl(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(t.impl());
  if (impl->is_traced()) active_tracer()->track(impl);
  return impl;
}

} // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  KILN_CHECK(!t.impl().inference, "autograd: an inference tensor (made under InferenceMode) "
                                  "can't be saved for backward; make it outside InferenceMode");
  if (Tracer* tracer = active_tracer()) {
    version_ = tracer->version(t.impl());
    segment_ = tracer->segment_id();
  } else {
    version_ = t.version();
  }
  if (is_output) {
    // The same elements without the history (the node that saves it is that history).
    std::shared_ptr<TensorImpl> impl = copy_impl(t);
    impl->autograd = nullptr;
    impl->grad = nullptr;
    output_nr_ = find_meta(t) != nullptr ? find_meta(t)->output_nr : 0;
    data_ = Tensor(std::move(impl));
  } else {
    data_ = t;
  }
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner) const {
  // Versions compare within one pending graph, or eagerly: a tensor saved in a traced graph
  // that has run since (a graph break) is not checked.
  Tracer* tracer = active_tracer();
  const bool comparable =
      tracer != nullptr ? segment_ < 0 || segment_ == tracer->segment_id() : segment_ < 0;
  const uint64_t now = tracer != nullptr ? tracer->version(data_.impl()) : data_.version();
  KILN_CHECK(!comparable || now == version_,
             "autograd: one of the variables needed for gradient computation has been modified by "
             "an inplace operation: ",
             dtype_name(data_.dtype()), shape_str(data_.sizes()), ", saved by ", owner->name(),
             ", is at version ", now, "; expected version ", version_, " instead");
  if (!is_output_) return data_;
  std::shared_ptr<TensorImpl> impl = copy_impl(data_);
  auto m = std::make_shared<AutogradMeta>();
  m->grad_fn = owner;
  m->output_nr = output_nr_;
  impl->autograd = std::move(m);
  impl->requires_grad = true;
  return Tensor(std::move(impl));
}

// ---- tensors' autograd state ----

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (!impl.autograd) impl.autograd = std::make_shared<AutogradMeta>();
  return *impl.autograd;
}

AutogradMeta* find_meta(const Tensor& t) { return t.defined() ? t.impl().autograd.get() : nullptr; }

void record_view(Op op, const Tensor& input, const Attrs& attrs, const Tensor& view) {
  if (t_inference || !view.defined() || !input.defined() || input.impl().inference) return;
  if (input.impl().no_grad_view) { // a view of such a view is one too
    view.impl().no_grad_view = true;
    return;
  }
  const AutogradMeta* in = find_meta(input);
  auto steps = std::make_shared<std::vector<ViewStep>>();
  std::shared_ptr<TensorImpl> base = input.impl_ptr();
  if (in != nullptr && in->view_base) {
    base = in->view_base;
    *steps = *in->view_steps;
  }
  steps->push_back({op, attrs, TensorMeta::of(input)});
  AutogradMeta& m = meta_of(view);
  const AutogradMeta* b = base->autograd.get();
  m.view_of_fn = b != nullptr ? b->grad_fn : nullptr;
  m.view_base = std::move(base);
  m.view_steps = std::move(steps);
}

void refresh_view(const Tensor& t) {
  if (!t.defined()) return;
  AutogradMeta* m = t.impl().autograd.get();
  if (m == nullptr || !m->view_base) return;
  const AutogradMeta* b = m->view_base->autograd.get();
  std::shared_ptr<Node> now = b != nullptr ? b->grad_fn : nullptr;
  if (now == m->view_of_fn) return;
  m->view_of_fn = now;
  if (!now) return;
  const AutoGradMode recorded(true);
  const Tensor replayed = replay_views(*m->view_steps, Tensor(m->view_base));
  const AutogradMeta* r = find_meta(replayed);
  KILN_ASSERT(r != nullptr && r->grad_fn, "a view replayed on a base with history has none");
  m->grad_fn = r->grad_fn;
  m->output_nr = r->output_nr;
  t.impl().requires_grad = true;
}

Edge gradient_edge(const Tensor& t) {
  refresh_view(t);
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& m = meta_of(t);
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  std::shared_ptr<Node> acc = m.accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->outputs.push_back(TensorMeta::of(t));
    acc->sequence = g_sequence++;
    m.accumulator = acc;
  }
  return {acc, 0};
}

namespace {

/// Whether gradient g, about to become leaf's first .grad(), may be taken as it is rather
/// than copied (PyTorch's AccumulateGrad steals it the same way): nothing else holds it or
/// its memory (no view, no saved or retained copy), and it is dense and of the leaf's kind.
bool may_steal(const Tensor& g, const Tensor& leaf) {
  const TensorImpl& t = g.impl();
  return !t.is_traced() && g.impl_ptr().use_count() == 1 && t.storage != nullptr &&
         t.storage.use_count() == 1 && t.offset == 0 && g.is_contiguous() &&
         t.storage->nbytes() == static_cast<size_t>(g.numel() * g.itemsize()) &&
         g.sizes() == leaf.sizes() && g.dtype() == leaf.dtype() && g.device() == leaf.device();
}

} // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads) {
  const Tensor& g = grads.at(0);
  if (!g.defined()) return {};
  Tensor leaf(leaf_);
  const Tensor old = leaf.grad();
  // Under create_graph the sum stays in the graph; otherwise it is a plain tensor.
  if (is_grad_enabled()) {
    leaf.set_grad(old.defined() ? old + g : g);
  } else if (old.defined()) {
    leaf.set_grad(old + g.detach());
  } else {
    leaf.set_grad(may_steal(g, leaf) ? g.detach() : g.detach().clone());
  }
  return {};
}

uint64_t new_sequence() { return g_sequence++; }

std::string grad_fn_name(const Tensor& t) {
  refresh_view(t);
  const AutogradMeta* m = find_meta(t);
  return m != nullptr && m->grad_fn ? m->grad_fn->name() : "";
}

bool is_inference(const Tensor& t) { return t.defined() && t.impl().inference; }

void mark_inference(std::span<const Tensor> results) {
  for (const Tensor& r : results)
    if (r.defined()) r.impl().inference = true;
}

// ---- recording ----

namespace {

/// Makes `node` (its edges set) t's history, t its one output.
void make_history(std::shared_ptr<Node> node, const Tensor& t) {
  node->outputs.push_back(TensorMeta::of(t));
  node->sequence = g_sequence++;
  AutogradMeta& m = meta_of(t);
  m.grad_fn = std::move(node);
  m.output_nr = 0;
  t.impl().requires_grad = true;
}

/// shares_storage, for traced tensors too (the tracer knows which alias).
bool aliases(const Tensor& a, const Tensor& b) {
  Tracer* tracer = active_tracer();
  if (tracer != nullptr && (a.impl().is_traced() || b.impl().is_traced()))
    return tracer->aliases(a.impl(), b.impl());
  return shares_storage(a, b);
}

} // namespace

Recording record_before(Op op, std::span<const Tensor> inputs, std::span<Tensor> out) {
  Recording rec;
  if (t_inference) return rec;
  if (!is_grad_enabled()) return rec;
  bool any = false;
  for (const Tensor& t : inputs) {
    refresh_view(t);
    any = any || (t.defined() && t.requires_grad());
  }
  for (const Tensor& o : out) {
    refresh_view(o);
    KILN_CHECK(!o.defined() || !o.impl().no_grad_view || !(any || o.requires_grad()), op_name(op),
               ": a view made with grad mode off (under NoGradGuard) is being written in place "
               "with grad mode on: the tensor it views would not record the write. Make the "
               "view with grad mode on, or write under NoGradGuard (PyTorch raises this too)");
    const AutogradMeta* m = find_meta(o);
    if (m != nullptr && m->view_base && m->view_base->requires_grad) {
      // A write through a view becomes the base's history (CopySlices in record_after).
      KILN_CHECK(m->view_base->autograd != nullptr && m->view_base->autograd->grad_fn, op_name(op),
                 ": a view of a leaf tensor that requires grad is being used in an in-place "
                 "operation (wrap it in NoGradGuard, as optimizers and weight loading do)");
      for (size_t d = 0; d < o.sizes().size(); ++d)
        KILN_CHECK(o.sizes()[d] <= 1 || o.strides()[d] != 0, op_name(op),
                   ": unsupported operation: more than one element of the written-to tensor "
                   "refers to a single memory location (an expanded view ",
                   shape_str(o.sizes()), " with strides ", shape_str(o.strides()),
                   "); clone() it before writing in place");
      any = true;
      continue;
    }
    if (!o.defined() || !o.requires_grad()) continue;
    KILN_CHECK(m != nullptr && m->grad_fn, op_name(op),
               ": a leaf tensor that requires grad is being used in an in-place operation (wrap "
               "it in NoGradGuard, as optimizers and weight loading do)");
    any = true;
  }
  // A write into a tensor with history is recorded even by an op without a derivative (fill_,
  // a random op): the written values no longer depend on the old history.
  if (!any || (!differentiable(op) && out.empty())) return rec;
  rec.active = true;
  // Inputs that the write overwrites, and that the backward reads: keep their values.
  if (!out.empty() && save_plan(op).inputs) {
    rec.originals.resize(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k)
      for (const Tensor& o : out)
        if (inputs[k].defined() && o.defined() && aliases(inputs[k], o)) {
          const NoGradGuard no_grad;
          rec.originals[k] = inputs[k].clone();
        }
  }
  return rec;
}

void record_after(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                  std::span<const Tensor> results, std::span<Tensor> out, Recording& rec) {
  if (!rec.active) return;
  auto node = std::make_shared<OpNode>(op, attrs);
  node->sequence = g_sequence++;
  const SavePlan plan = save_plan(op);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    node->next.push_back(t.defined() && is_floating(t.dtype()) ? gradient_edge(t) : Edge{});
    node->input_meta_.push_back(t.defined() ? TensorMeta::of(t) : TensorMeta{});
    const Tensor& saved =
        !rec.originals.empty() && rec.originals[k].defined() ? rec.originals[k] : t;
    node->inputs_.emplace_back(plan.inputs ? saved : Tensor(), false);
  }
  const std::span<const Tensor> made = out.empty() ? results : std::span<const Tensor>(out);
  for (size_t k = 0; k < made.size(); ++k) {
    const Tensor& r = made[k];
    node->outputs.push_back(TensorMeta::of(r));
    if (!is_floating(r.dtype())) continue;
    // The result's history is this node (an in-place write rebases it here).
    AutogradMeta& m = meta_of(r);
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(k);
    r.impl().requires_grad = true;
  }
  for (size_t k = 0; k < made.size(); ++k)
    node->outputs_.emplace_back(plan.outputs && is_floating(made[k].dtype()) ? made[k] : Tensor(),
                                true);
  node->saved_any_ = plan.inputs || plan.outputs;
  // A write through a view: the base's history becomes the write (CopySlices), and the view's
  // own is derived from it again.
  for (const Tensor& o : out) {
    const AutogradMeta* m = find_meta(o);
    if (m == nullptr || !m->view_base || !is_floating(o.dtype())) continue;
    KILN_CHECK(out.size() == 1, op_name(op), ": an in-place write of ", out.size(),
               " tensors through views is not supported");
    const Tensor base(m->view_base);
    auto copy = std::make_shared<CopySlices>(TensorMeta::of(base), m->view_steps, node);
    copy->next.push_back(gradient_edge(base));
    copy->next.insert(copy->next.end(), node->next.begin(), node->next.end());
    make_history(std::move(copy), base);
    refresh_view(o);
  }
}

namespace {

/// Tensor::to(device)'s backward: the gradient moved back.
class ToDeviceBackward final : public Node {
public:
  explicit ToDeviceBackward(Device from) : from_(from) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    return {grads.at(0).defined() ? grads[0].to(from_) : Tensor()};
  }
  std::string name() const override { return "ToCopyBackward"; }

private:
  Device from_;
};

} // namespace

void record_move(const Tensor& t, const Tensor& moved) {
  if (t_inference || !is_floating(moved.dtype())) return;
  auto node = std::make_shared<ToDeviceBackward>(t.device());
  node->next.push_back(gradient_edge(t));
  make_history(std::move(node), moved);
}

// ---- execution ----

namespace {

struct Run {
  // What the caller of grad() collects: per (node, output), the slot of an input.
  std::map<std::pair<Node*, uint32_t>, size_t> capture;
  std::vector<Tensor> captured;
  bool accumulate = true; // backward(): leaves accumulate; grad(): they do not
};

Tensor add_grads(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a + b;
}

void execute(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool keep_graph,
             bool create_graph, Run& run) {
  // Dependencies: how many edges lead into each node from the part of the graph reached.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::set<Node*> seen;
  for (const Edge& e : roots)
    if (e.valid() && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.valid()) continue;
      ++deps[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }
  // Gradients gathered per node output, and the ready nodes, latest first.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;
  auto later = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence < b->sequence;
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later)>
      ready(later);
  auto deliver = [&](const Edge& e, const Tensor& g) {
    std::vector<Tensor>& buf = buffers[e.fn.get()];
    buf.resize(e.fn->outputs.size());
    buf[e.output_nr] = add_grads(buf[e.output_nr], g);
    owners[e.fn.get()] = e.fn;
  };
  for (size_t k = 0; k < roots.size(); ++k)
    if (roots[k].valid()) deliver(roots[k], root_grads[k]);
  for (const Edge& e : roots)
    if (e.valid() && deps[e.fn.get()] == 0 && owners.count(e.fn.get()) != 0) {
      ready.push(e.fn);
      deps[e.fn.get()] = -1; // queued
    }
  std::vector<std::shared_ptr<Node>> executed;
  const bool grad_mode = create_graph;
  while (!ready.empty()) {
    std::shared_ptr<Node> n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n.get()]);
    buffers.erase(n.get());
    grads.resize(n->outputs.size());
    for (uint32_t k = 0; k < grads.size(); ++k) {
      auto it = run.capture.find({n.get(), k});
      if (it != run.capture.end()) run.captured[it->second] = grads[k];
    }
    for (auto& [k, weak] : n->retained)
      if (std::shared_ptr<TensorImpl> impl = weak.lock(); impl && grads[k].defined())
        Tensor(impl).set_grad(create_graph ? grads[k] : grads[k].detach());
    const bool is_leaf = dynamic_cast<AccumulateGrad*>(n.get()) != nullptr;
    std::vector<Tensor> in_grads;
    if (!is_leaf || run.accumulate) {
      const bool saved = is_grad_enabled();
      set_grad_enabled(grad_mode);
      try {
        in_grads = n->apply(std::move(grads));
      } catch (...) {
        set_grad_enabled(saved);
        throw;
      }
      set_grad_enabled(saved);
    }
    executed.push_back(n);
    for (size_t k = 0; k < n->next.size(); ++k) {
      const Edge& e = n->next[k];
      if (!e.valid()) continue;
      if (k < in_grads.size() && in_grads[k].defined()) deliver(e, in_grads[k]);
      owners[e.fn.get()] = e.fn;
      if (--deps[e.fn.get()] == 0) {
        ready.push(e.fn);
        deps[e.fn.get()] = -1;
      }
    }
  }
  if (!keep_graph)
    for (const std::shared_ptr<Node>& n : executed)
      n->release();
}

/// The roots' edges and their gradients (ones for one-element outputs without one).
void roots_of(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              const char* what, std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), what, ": ",
             grad_outputs.size(), " gradients for ", outputs.size(), " outputs");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    refresh_view(o);
    KILN_CHECK(o.defined() && o.requires_grad(), what, ": output ", k,
               " does not require grad and has no grad_fn (was it made under NoGradGuard, or "
               "from tensors that do not require grad?)");
    Tensor g = k < grad_outputs.size() ? grad_outputs[k] : Tensor();
    if (!g.defined()) {
      KILN_CHECK(o.numel() == 1, what,
                 ": a gradient can be implied only for a one-element "
                 "output, got ",
                 shape_str(o.sizes()), "; pass the output's gradient");
      g = ones_like(o);
    }
    KILN_CHECK(g.sizes() == o.sizes(), what, ": the gradient of output ", k, " has shape ",
               shape_str(g.sizes()), ", the output ", shape_str(o.sizes()));
    edges.push_back(gradient_edge(o));
    grads.push_back(g);
  }
}

} // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  roots_of(tensors, grad_tensors, "backward", edges, grads);
  Run run;
  execute(edges, grads, retain_graph.value_or(create_graph), create_graph, run);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  roots_of(outputs, grad_outputs, "autograd::grad", edges, grads);
  Run run;
  run.accumulate = false;
  run.captured.resize(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    KILN_CHECK(inputs[k].defined() && inputs[k].requires_grad(), "autograd::grad: input ", k,
               " does not require grad");
    const Edge e = gradient_edge(inputs[k]);
    run.capture[{e.fn.get(), e.output_nr}] = k;
  }
  execute(edges, grads, retain_graph.value_or(create_graph), create_graph, run);
  for (size_t k = 0; k < inputs.size(); ++k)
    KILN_CHECK(allow_unused || run.captured[k].defined(), "autograd::grad: input ", k,
               " is not used by the outputs (pass allow_unused=true to get an undefined gradient)");
  if (!create_graph)
    for (Tensor& g : run.captured)
      if (g.defined()) g = g.detach();
  return run.captured;
}

} // namespace kiln::autograd

namespace kiln {

InferenceMode::InferenceMode(bool enabled)
    : saved_grad_(is_grad_enabled()), saved_inference_(autograd::t_inference) {
  if (!enabled) return;
  set_grad_enabled(false);
  autograd::t_inference = true;
}
InferenceMode::~InferenceMode() {
  set_grad_enabled(saved_grad_);
  autograd::t_inference = saved_inference_;
}
bool InferenceMode::is_enabled() { return autograd::t_inference; }

namespace autograd {
bool inference_mode() { return t_inference; }
} // namespace autograd

} // namespace kiln
