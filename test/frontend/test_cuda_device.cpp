// Tensors, eager ops and compiled graphs on a CUDA device (tag [cuda]): against the CPU by the
// f64 reference rule, bit for bit where the numbers are the CPU's (random ops, integers).
// Without a device each test says so and passes; `ctest -L cuda` runs them on the emulated
// device ($KILN_CUDA_EMULATE=1, runtime/cuda/device.h), and scripts/gpu-check on a GPU.
#include <limits>

#include "codegen/cuda/eager.h"
#include "frontend_testing.h"
#include "models/zoo.h"
#include "runtime/cuda/blas.h"
#include "runtime/cuda/device.h"
#include "runtime/grad_mode.h"
#include "runtime/optim/optim.h"
#include "runtime/random.h"

using namespace kiln;

namespace {

/// Whether a CUDA device is there; if not, a visible warning (the test then passes).
bool have_device() {
  if (cuda::is_available()) return true;
  WARN("no CUDA device, the [cuda] test is skipped: " << cuda::unavailable_reason());
  return false;
}

const Device kCuda = Device::cuda(0);

Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

void check_model_on_cuda(const ModelSpec& spec, const std::string& backend, bool train, Mode mode) {
  INFO(spec.name << " on backend " << backend << (train ? " (train)" : " (eval)") << " in mode "
                 << mode_name(mode));
  // Three copies with the same weights: on the device (compiled), on the CPU, in f64.
  std::shared_ptr<nn::Module> m = spec.make(0), ref = spec.make(0), ref64 = spec.make(0);
  ref64->to(DType::f64);
  for (nn::Module* mod : {m.get(), ref.get(), ref64.get()})
    mod->train(train);
  m->to(kCuda);
  CompileOptions o;
  o.backend = backend;
  o.mode = mode;
  nn::Module* mp = m.get();
  auto f = compile([&spec, mp](const Tensor& x) { return run_model(spec, *mp, x); }, o);
  for (uint64_t call = 0; call < 2; ++call) {
    Tensor x = spec.make_input(spec.input_shape, spec.input_dtype, 100 + call);
    Tensor want = run_model(spec, *ref, x);
    Tensor want64 = run_model(spec, *ref64, to_f64(std::span<const Tensor>(&x, 1))[0]);
    Tensor got = f(x.to(kCuda));
    CHECK(got.device() == kCuda);
    KILN_REQUIRE_ACCURATE(host(got), want, want64);
    for (auto& [name, b] : ref->named_buffers()) {
      INFO("buffer " << name);
      KILN_REQUIRE_ACCURATE(host(m->state_dict().at(name)), b, ref64->state_dict().at(name));
    }
  }
  if (backend == "kiln") CHECK(f.stats().kernels > 0);
}

} // namespace

TEST_CASE("cuda device: every zoo model compiled on CUDA equals CPU eager", "[cuda]") {
  if (!have_device()) return;
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models()) {
    check_model_on_cuda(spec, "kiln", false, Mode::default_);
    check_model_on_cuda(spec, "interpreter", false, Mode::default_);
    check_model_on_cuda(spec, "kiln", true, Mode::reduce_overhead);
  }
}

TEST_CASE("cuda device: every zoo model eagerly on CUDA equals CPU eager", "[cuda]") {
  if (!have_device()) return;
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models()) {
    INFO(spec.name);
    std::shared_ptr<nn::Module> m = spec.make(0), ref = spec.make(0), ref64 = spec.make(0);
    ref64->to(DType::f64);
    m->to(kCuda);
    NoGradGuard no_grad;
    Tensor x = spec.make_input(spec.input_shape, spec.input_dtype, 7);
    Tensor got = run_model(spec, *m, x.to(kCuda));
    CHECK(got.device() == kCuda);
    KILN_REQUIRE_ACCURATE(host(got), run_model(spec, *ref, x),
                          run_model(spec, *ref64, to_f64(std::span<const Tensor>(&x, 1))[0]));
    // A second call compiles nothing more: every op's single-op graph is kept.
    const codegen::cuda::EagerCounters after = codegen::cuda::eager_counters();
    (void)run_model(spec, *m, x.to(kCuda));
    CHECK(codegen::cuda::eager_counters().compiled == after.compiled);
  }
}

TEST_CASE("cuda device: eager ops on views, dtypes, reductions and in-place writes", "[cuda]") {
  if (!have_device()) return;
  Tensor a = randn({5, 37}), b = randn({37}), i = randint(-4, 5, {5, 37}, DType::i32);
  Tensor ad = a.to(kCuda), bd = b.to(kCuda), id = i.to(kCuda);
  // Broadcast over a transposed view, a scalar operand, and the result's device.
  Tensor t = ad.transpose(0, 1);
  CHECK(t.device() == kCuda);
  KILN_REQUIRE_CLOSE(
      host(t * 2.5 + bd.unsqueeze(1)),
      [](const Tensor& x, const Tensor& y) { return x.transpose(0, 1) * 2.5 + y.unsqueeze(1); }, a,
      b);
  KILN_REQUIRE_CLOSE(
      host(exp(ad).sum({1})), [](const Tensor& x) { return exp(x).sum({1}); }, a);
  KILN_REQUIRE_CLOSE(
      host(softmax(ad, 1)), [](const Tensor& x) { return softmax(x, 1); }, a);
  KILN_REQUIRE_BITWISE(host(argmax(id, 1)), argmax(i, 1));
  KILN_REQUIRE_BITWISE(host(id * id - id), i * i - i);
  KILN_REQUIRE_BITWISE(host(ad.to(DType::f16)), a.to(DType::f16));
  KILN_REQUIRE_BITWISE(host(ad > 0.5), a > 0.5);
  // In place: a contiguous destination, a cast into it, and a strided one (a column).
  Tensor c = a.clone(), cd = ad.clone();
  c.add_(b);
  cd.add_(bd);
  KILN_REQUIRE_BITWISE(host(cd), c);
  Tensor h = zeros({5, 37}, DType::f16),
         hd = zeros({5, 37}, TensorOptions(DType::f16).device(kCuda));
  h.copy_(a);
  hd.copy_(ad);
  KILN_REQUIRE_BITWISE(host(hd), h);
  Tensor col = c.select(1, 3), cold = cd.select(1, 3);
  col.mul_(-1.0);
  cold.mul_(-1.0);
  KILN_REQUIRE_BITWISE(host(cd), c);
  // A contiguous destination of the result's dtype is the kernel's output: no tensor is
  // allocated for the result (the signature compiled above, so nothing else allocates).
  const uint64_t allocations = cuda::memory_stats().allocations;
  cd.add_(bd);
  c.add_(b);
  CHECK(cuda::memory_stats().allocations == allocations);
  KILN_REQUIRE_BITWISE(host(cd), c);
  // In place over the operand's own elements in another order: not written in place.
  Tensor sq = randn({6, 6}), sqd = sq.to(kCuda);
  sq.add_(sq.t());
  sqd.add_(sqd.t());
  KILN_REQUIRE_BITWISE(host(sqd), sq);
  KILN_REQUIRE_BITWISE(host(sqd), host(sqd.t())); // symmetric
  // copy_ across devices, both ways.
  Tensor back = zeros({5, 37});
  back.copy_(cd);
  KILN_REQUIRE_BITWISE(back, c);
  cd.copy_(a);
  KILN_REQUIRE_BITWISE(host(cd), a);
}

TEST_CASE("cuda device: a move between devices passes the gradient back", "[cuda]") {
  if (!have_device()) return;
  manual_seed(3);
  const Tensor x0 = randn({4, 6}), w0 = randn({6, 3});
  // A CPU input through a model on the device, and a device parameter read on the CPU.
  Tensor x = x0.clone().requires_grad_(), w = w0.to(kCuda).requires_grad_();
  Tensor y = matmul(x.to(kCuda), w);
  CHECK(autograd::grad_fn_name(x.to(kCuda)) == "ToCopyBackward");
  Tensor loss = (host(y) * host(y)).sum() + host(w).sum();
  loss.backward();
  REQUIRE(x.grad().defined());
  REQUIRE(w.grad().defined());
  CHECK(x.grad().device() == Device::cpu());
  CHECK(w.grad().device() == kCuda);
  Tensor xe = x0.clone().requires_grad_(), we = w0.clone().requires_grad_();
  Tensor ye = matmul(xe, we);
  ((ye * ye).sum() + we.sum()).backward();
  const Tensor xr = x0.to(DType::f64).requires_grad_(), wr = w0.to(DType::f64).requires_grad_();
  Tensor yr = matmul(xr, wr);
  ((yr * yr).sum() + wr.sum()).backward();
  for (auto [got, eager, ref] : {std::tuple{x.grad(), xe.grad(), xr.grad()},
                                 std::tuple{host(w.grad()), we.grad(), wr.grad()}}) {
    const auto why = check_accuracy(got, eager, ref);
    INFO(why.value_or(""));
    CHECK_FALSE(why.has_value());
  }
  // Under NoGradGuard a move records nothing.
  const NoGradGuard no_grad;
  CHECK_FALSE(x.to(kCuda).requires_grad());
}

TEST_CASE("cuda device: factories and random ops on CUDA (random draws the CPU's numbers)",
          "[cuda]") {
  if (!have_device()) return;
  const TensorOptions on_cuda = TensorOptions().device(kCuda);
  KILN_REQUIRE_BITWISE(host(zeros({3, 4}, on_cuda)), zeros({3, 4}));
  KILN_REQUIRE_BITWISE(host(full({7}, 1.5, on_cuda)), full({7}, 1.5));
  KILN_REQUIRE_BITWISE(host(arange(11, TensorOptions(DType::i64).device(kCuda))), arange(11));
  // *_like: the tensor's device too.
  Tensor d = ones({2, 3}, on_cuda);
  for (const Tensor& t :
       {zeros_like(d), ones_like(d), empty_like(d), full_like(d, 2.0), rand_like(d), randn_like(d)})
    CHECK(t.device() == kCuda);
  KILN_REQUIRE_BITWISE(host(full_like(d, 2.0)), full({2, 3}, 2.0));
  manual_seed(5);
  Tensor r = randn({64}, on_cuda);
  const uint64_t offset = default_generator().offset();
  manual_seed(5);
  KILN_REQUIRE_BITWISE(host(r), randn({64}));
  CHECK(default_generator().offset() == offset);
}

TEST_CASE("cuda device: operands on two devices are an error naming both", "[cuda]") {
  if (!have_device()) return;
  Tensor a = ones({3}), ad = a.to(kCuda);
  CHECK_THROWS_WITH(ad + ones({3}),
                    Catch::Contains("add") && Catch::Contains("cuda:0") && Catch::Contains("cpu"));
  // A CPU scalar goes with any device.
  KILN_REQUIRE_BITWISE(host(ad * full({}, 3.0)), a * 3.0);
  auto f = compile([](const Tensor& x) { return x + 1.0; });
  Tensor y = f(ad);
  CHECK(y.device() == kCuda);
  KILN_REQUIRE_BITWISE(host(y), a + 1.0);
  CHECK(cuda::memory_stats().allocated > 0);
}

TEST_CASE("cuda device: matmul in every layout, batched, and with its epilogue compiled",
          "[cuda]") {
  if (!have_device()) return;
  INFO("cuBLASLt: " << (cuda::blas_available() ? std::string("yes")
                                               : "no, " + cuda::blas_unavailable_reason()));
  Tensor a = randn({6, 40}), b = randn({40, 24}), bt = randn({24, 40}), bias = randn({24});
  Tensor a3 = randn({3, 6, 40}), b3 = randn({3, 40, 24});
  auto mm = [](const Tensor& x, const Tensor& y) { return matmul(x, y); };
  // Row-major, a transposed view on either side, a batch, a batch over one matrix.
  KILN_REQUIRE_CLOSE(host(matmul(a.to(kCuda), b.to(kCuda))), mm, a, b);
  KILN_REQUIRE_CLOSE(
      host(matmul(a.to(kCuda), bt.to(kCuda).t())),
      [](const Tensor& x, const Tensor& y) { return matmul(x, y.t()); }, a, bt);
  KILN_REQUIRE_CLOSE(
      host(matmul(b.to(kCuda).t(), a.to(kCuda).t())),
      [](const Tensor& x, const Tensor& y) { return matmul(x.t(), y.t()); }, b, a);
  KILN_REQUIRE_CLOSE(host(matmul(a3.to(kCuda), b3.to(kCuda))), mm, a3, b3);
  KILN_REQUIRE_CLOSE(host(matmul(a3.to(kCuda), b.to(kCuda))), mm, a3, b);
  // f16 operands compute in f32 and round once.
  Tensor h = a.to(DType::f16), hb = b.to(DType::f16);
  KILN_REQUIRE_CLOSE(host(matmul(h.to(kCuda), hb.to(kCuda))), mm, h, hb);
  // Compiled: linear + bias + relu, and a scale and tanh-gelu: library epilogues.
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& c) {
    return relu(matmul(x, w.t()) + c) + gelu(matmul(x, w.t()) * 0.5, "tanh");
  };
  auto cf = compile(f);
  KILN_REQUIRE_CLOSE(host(cf(a.to(kCuda), bt.to(kCuda), bias.to(kCuda))), f, a, bt, bias);
}

TEST_CASE("cuda device: a second device has its own memory, kernels and compiled graphs",
          "[cuda]") {
  if (!have_device()) return;
  if (cuda::device_count() < 2) {
    WARN("one CUDA device: the second-device checks are skipped");
    return;
  }
  const Device second = Device::cuda(1);
  Tensor a = randn({4, 33});
  Tensor d1 = a.to(second);
  CHECK(d1.device() == second);
  const size_t before = cuda::memory_stats(1).allocated;
  Tensor e = exp(d1) * 2.0;
  CHECK(e.device() == second);
  CHECK(cuda::memory_stats(1).allocated > before);
  KILN_REQUIRE_CLOSE(
      host(e), [](const Tensor& x) { return exp(x) * 2.0; }, a);
  auto f = compile([](const Tensor& x) { return softmax(x, 1); });
  Tensor y = f(d1);
  CHECK(y.device() == second);
  KILN_REQUIRE_CLOSE(
      host(y), [](const Tensor& x) { return softmax(x, 1); }, a);
  // From one device to the other (through the host), and mixing them is an error.
  Tensor d0 = d1.to(kCuda);
  CHECK(d0.device() == kCuda);
  KILN_REQUIRE_BITWISE(host(d0), a);
  CHECK_THROWS_WITH(d0 + d1, Catch::Contains("cuda:0") && Catch::Contains("cuda:1"));
  CHECK_THROWS_WITH(zeros({2}, TensorOptions().device(Device::cuda(cuda::device_count()))),
                    Catch::Contains("does not exist"));
}

TEST_CASE("cuda device: streams, events and pinned memory", "[cuda]") {
  if (!have_device()) return;
  cuda::Stream s = cuda::Stream::create();
  CHECK(s.device() == 0);
  CHECK_FALSE(s == cuda::Stream::default_stream());
  CHECK(cuda::current_stream() == cuda::Stream::default_stream());
  Tensor a = randn({1000});
  Tensor pinned = cuda::pin_memory(a);
  CHECK(cuda::is_pinned(pinned));
  CHECK_FALSE(cuda::is_pinned(a));
  KILN_REQUIRE_BITWISE(pinned, a);
  CHECK_THROWS_WITH(cuda::pin_memory(a.to(kCuda)), Catch::Contains("only CPU tensors pin"));
  cuda::Event start, end;
  Tensor y;
  {
    cuda::StreamGuard guard(s);
    CHECK(cuda::current_stream() == s);
    start.record();
    y = exp(pinned.to(kCuda)) + 1.0; // queued on s
    end.record();
  }
  CHECK(cuda::current_stream() == cuda::Stream::default_stream());
  end.synchronize();
  CHECK(end.query());
  CHECK(start.elapsed_ms(end) >= 0);
  s.synchronize();
  KILN_REQUIRE_CLOSE(
      host(y), [](const Tensor& x) { return exp(x) + 1.0; }, a);
  // record_stream: a default-stream tensor read on s stays reserved until s's work is done
  // (the allocator's side is tested in test_cuda_allocator.cpp); not for CPU tensors.
  Tensor z = ones({64}, TensorOptions().device(kCuda));
  {
    cuda::StreamGuard guard(s);
    y = z * 2.0;
  }
  cuda::record_stream(z, s);
  z = Tensor();
  s.synchronize();
  KILN_REQUIRE_BITWISE(host(y), full({64}, 2.0));
  CHECK_THROWS_WITH(cuda::record_stream(ones({2}), s), Catch::Contains("record_stream"));
}

TEST_CASE("cuda device: a reduction of few long rows is split to fill the device", "[cuda]") {
  if (!have_device()) return;
  Tensor x = randn({2, int64_t{1} << 16});
  auto f = [](const Tensor& t) { return t.sum({1}); };
  auto g = [](const Tensor& t) { return amax(t, {1}); };
  auto cf = compile(f);
  auto cg = compile(g);
  KILN_REQUIRE_CLOSE(host(cf(x.to(kCuda))), f, x);
  KILN_REQUIRE_CLOSE(host(cg(x.to(kCuda))), g, x);
  // Two kernels each: the chunks' reductions, then the rows'.
  CHECK(cf.stats().kernels == 2);
  CHECK(cg.stats().kernels == 2);
}

TEST_CASE("cuda device: ops without a lowering run as library kernels, giving the CPU's results",
          "[cuda]") {
  if (!have_device()) return;
  const TensorOptions on_cuda = TensorOptions().device(kCuda);
  const codegen::cuda::EagerCounters before = codegen::cuda::eager_counters();
  // None of it ran on host copies: the library kernels did it.
  auto on_device = [&before] {
    const codegen::cuda::EagerCounters after = codegen::cuda::eager_counters();
    CHECK(after.library > before.library);
    CHECK(after.host_fallbacks == before.host_fallbacks);
  };
  SECTION("factories and random ops: the CPU's numbers, bit for bit") {
    KILN_REQUIRE_BITWISE(host(arange(-3, 40, 3, on_cuda.dtype(DType::i32))),
                         arange(-3, 40, 3, TensorOptions(DType::i32)));
    KILN_REQUIRE_BITWISE(host(arange(0.1, 5.3, 0.7, on_cuda.dtype(DType::f16))),
                         arange(0.1, 5.3, 0.7, TensorOptions(DType::f16)));
    KILN_REQUIRE_BITWISE(host(arange(-1.5, 900.0, 0.37, on_cuda.dtype(DType::f64))),
                         arange(-1.5, 900.0, 0.37, TensorOptions(DType::f64)));
    CHECK(empty({3, 5}, on_cuda).device() == kCuda);
    for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      INFO(dtype_name(d));
      manual_seed(11);
      Tensor r = rand({1001}, on_cuda.dtype(d)); // 1001: the last block half used
      const uint64_t offset = default_generator().offset();
      manual_seed(11);
      KILN_REQUIRE_BITWISE(host(r), rand({1001}, TensorOptions(d)));
      CHECK(default_generator().offset() == offset);
      manual_seed(12);
      Tensor n = randn({1001}, on_cuda.dtype(d));
      manual_seed(12);
      KILN_REQUIRE_BITWISE(host(n), randn({1001}, TensorOptions(d)));
    }
    for (auto [low, high] : {std::pair<int64_t, int64_t>{-7, 9}, {0, int64_t{1} << 40}}) {
      manual_seed(3);
      Tensor r = randint(low, high, {257}, on_cuda.dtype(DType::i64));
      manual_seed(3);
      KILN_REQUIRE_BITWISE(host(r), randint(low, high, {257}));
    }
    manual_seed(4);
    Tensor x = ones({300}, on_cuda);
    Tensor dropped = dropout(x, 0.3, true);
    manual_seed(4);
    KILN_REQUIRE_BITWISE(host(dropped), dropout(ones({300}), 0.3, true));
    on_device();
  }
  SECTION("data movement over views and dtypes: bit for bit") {
    Tensor a = randn({6, 9, 5}), ad = a.to(kCuda);
    Tensor idx = tensor(std::vector<int64_t>{4, 0, 4, 8, 2}), idxd = idx.to(kCuda);
    Tensor idx32 = idx.to(DType::i32), idx32d = idx32.to(kCuda);
    KILN_REQUIRE_BITWISE(host(index_select(ad, 1, idxd)), index_select(a, 1, idx));
    KILN_REQUIRE_BITWISE(host(index_select(ad.transpose(0, 2), 1, idx32d)),
                         index_select(a.transpose(0, 2), 1, idx32));
    Tensor w = randn({50, 16}, TensorOptions(DType::f16)), tok = randint(0, 50, {3, 7});
    KILN_REQUIRE_BITWISE(host(embedding(w.to(kCuda), tok.to(kCuda))), embedding(w, tok));
    Tensor g = randint(0, 9, {6, 4, 5});
    KILN_REQUIRE_BITWISE(host(gather(ad, 1, g.to(kCuda))), gather(a, 1, g));
    Tensor bi = randint(-100, 100, {6, 2, 5}, DType::i32);
    KILN_REQUIRE_BITWISE(host(cat({ad, bi.to(kCuda), ad.slice(1, 2, 4)}, 1)),
                         cat({a, bi, a.slice(1, 2, 4)}, 1));
    KILN_REQUIRE_BITWISE(host(pad(ad.transpose(1, 2), {2, -1, 0, 3}, -0.5)),
                         pad(a.transpose(1, 2), {2, -1, 0, 3}, -0.5));
    Tensor u = randint(0, 200, {4, 33}, DType::u8);
    KILN_REQUIRE_BITWISE(host(pad(u.to(kCuda), {1, 1}, 7)), pad(u, {1, 1}, 7));
    KILN_REQUIRE_BITWISE(host(cumsum(bi.to(kCuda), 2)), cumsum(bi, 2));
    // scatter: a repeated target keeps the last write of its line.
    Tensor si = tensor(std::vector<int64_t>{2, 0, 2, 1, 1, 1}).view({2, 3});
    Tensor src = randn({2, 3}), dst = randn({3, 3});
    KILN_REQUIRE_BITWISE(host(scatter(dst.to(kCuda), 0, si.to(kCuda), src.to(kCuda))),
                         scatter(dst, 0, si, src));
    KILN_REQUIRE_BITWISE(host(scatter(dst.to(kCuda).t(), 1, si.to(kCuda), src.to(kCuda))),
                         scatter(dst.t(), 1, si, src));
    // floor_divide and remainder: Python's rules, broadcast, floats and integers, a CPU
    // scalar.
    Tensor fx = tensor(std::vector<float>{1.0f, -7.5f, 7.5f, -0.0f, 3.0f, 5.0f, -1.0f, 0.0f});
    Tensor fy = tensor(std::vector<float>{0.1f, 2.0f, -2.0f, 3.0f, 0.0f, -0.0f, 0.25f, 0.0f});
    for (DType d : {DType::f32, DType::f64, DType::f16}) {
      const Tensor x = fx.to(d), y = fy.to(d);
      KILN_REQUIRE_BITWISE(host(floor_divide(x.to(kCuda), y.to(kCuda))), floor_divide(x, y));
      KILN_REQUIRE_BITWISE(host(remainder(x.to(kCuda), y.to(kCuda))), remainder(x, y));
    }
    Tensor ix = randint(-50, 50, {4, 9}), iy = randint(1, 7, {9}) * (randint(0, 2, {9}) * 2 - 1);
    ix.view({-1}).slice(0, 0, 1).fill_(std::numeric_limits<int64_t>::min());
    iy.slice(0, 0, 1).fill_(-1);
    KILN_REQUIRE_BITWISE(host(floor_divide(ix.to(kCuda), iy.to(kCuda))), floor_divide(ix, iy));
    KILN_REQUIRE_BITWISE(host(remainder(ix.to(kCuda), iy.to(kCuda))), remainder(ix, iy));
    Tensor i8 = randint(-128, 128, {33}, DType::i8), five = full({}, 5, DType::i8);
    KILN_REQUIRE_BITWISE(host(remainder(i8.to(kCuda), five)), remainder(i8, five));
    KILN_REQUIRE_BITWISE(host(cumsum(u.to(kCuda).t(), 0, DType::i32)),
                         cumsum(u.t(), 0, DType::i32));
    on_device();
  }
  SECTION("cumsum, conv2d and pooling in floating point: by the f64 rule") {
    Tensor a = randn({6, 9, 5});
    KILN_REQUIRE_CLOSE(
        host(cumsum(a.to(kCuda), 1)), [](const Tensor& x) { return cumsum(x, 1); }, a);
    Tensor x = randn({2, 6, 11, 9}), w = randn({4, 3, 3, 2}), b = randn({4});
    auto conv = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return conv2d(x, w, b, {2, 1}, {1, 2}, {1, 2}, 2);
    };
    KILN_REQUIRE_CLOSE(host(conv(x.to(kCuda), w.to(kCuda), b.to(kCuda))), conv, x, w, b);
    // f16 in, f32 sums, f16 out: against the CPU's f16 kernel and an f64 run.
    Tensor xh = x.to(DType::f16), wh = randn({2, 6, 3, 2}).to(DType::f16);
    KILN_REQUIRE_ACCURATE(host(conv2d(xh.to(kCuda), wh.to(kCuda))), conv2d(xh, wh),
                          conv2d(xh.to(DType::f64), wh.to(DType::f64)));
    Tensor p = randn({2, 3, 10, 7});
    static_cast<float*>(p.raw_data())[1 * 70 + 4 * 7 + 4] = std::nanf(""); // wins its windows
    KILN_REQUIRE_BITWISE(host(max_pool2d(p.to(kCuda), {3, 2}, {2, 2}, {1, 1}, {1, 2}, true)),
                         max_pool2d(p, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true));
    Tensor pi = randint(-50, 50, {3, 8, 8}, DType::i32);
    KILN_REQUIRE_BITWISE(host(max_pool2d(pi.to(kCuda), {2, 2})), max_pool2d(pi, {2, 2}));
    KILN_REQUIRE_BITWISE(host(avg_pool2d(pi.to(kCuda), {3, 3}, {2, 2}, {1, 1}, true, false)),
                         avg_pool2d(pi, {3, 3}, {2, 2}, {1, 1}, true, false));
    for (bool include_pad : {true, false})
      KILN_REQUIRE_CLOSE(
          host(avg_pool2d(p.abs().to(kCuda), {3, 3}, {2, 2}, {1, 1}, true, include_pad)),
          [include_pad](const Tensor& x) {
            return avg_pool2d(x.abs(), {3, 3}, {2, 2}, {1, 1}, true, include_pad);
          },
          p);
    on_device();
  }
  SECTION("matmul where cuBLASLt does not take it: f64, integers, broadcast batches") {
    Tensor a = randn({3, 1, 37, 20}, DType::f64), b = randn({4, 19, 20}, DType::f64);
    KILN_REQUIRE_CLOSE(
        host(matmul(a.to(kCuda), b.to(kCuda).transpose(1, 2))),
        [](const Tensor& x, const Tensor& y) { return matmul(x, y.transpose(1, 2)); }, a, b);
    Tensor i = randint(-9, 9, {5, 17, 33}, DType::i32), j = randint(-9, 9, {33, 18}, DType::i32);
    KILN_REQUIRE_BITWISE(host(matmul(i.to(kCuda), j.to(kCuda))), matmul(i, j));
    Tensor k0 = randn({4, 0}), k1 = randn({0, 3}); // an empty sum: zeros
    KILN_REQUIRE_BITWISE(host(matmul(k0.to(kCuda), k1.to(kCuda))), matmul(k0, k1));
    on_device();
  }
  SECTION("an index out of range is an error naming it, as on the CPU") {
    Tensor a = randn({4, 3}).to(kCuda);
    Tensor bad = tensor(std::vector<int64_t>{1, 4}).to(kCuda);
    CHECK_THROWS_WITH(index_select(a, 0, bad), Catch::Contains("index_select") &&
                                                   Catch::Contains("index 4 is out of range"));
    CHECK_THROWS_WITH(
        scatter(a, 0, tensor(std::vector<int64_t>{0, 9}).view({1, 2}).to(kCuda), a.slice(0, 0, 1)),
        Catch::Contains("scatter") && Catch::Contains("index 9 is out of range"));
    Tensor i = tensor(std::vector<int64_t>{4, 5}).to(kCuda);
    CHECK_THROWS_WITH(floor_divide(i, tensor(std::vector<int64_t>{1, 0}).to(kCuda)),
                      Catch::Contains("floor_divide: integer division by zero"));
    CHECK_THROWS_WITH(
        gather(a, 1, tensor(std::vector<int64_t>{0, -1, 2, 0}).view({4, 1}).to(kCuda)),
        Catch::Contains("gather") && Catch::Contains("index -1 is out of range"));
  }
}

TEST_CASE("cuda device: a compiled AdamW step follows CPU eager step by step", "[cuda]") {
  if (!have_device()) return;
  // Adam's step counts stay CPU scalars (as in torch.optim): a replay on the device reads a
  // moved copy, and its increment must reach the CPU tensor, or every later step would apply
  // the second step's bias corrections.
  struct Net {
    std::vector<Tensor> params; // w1 [12, 24], b1 [24], w2 [24, 5], b2 [5]
    Net(DType dtype, Device device) {
      manual_seed(9);
      for (const Shape& s : {Shape{12, 24}, Shape{24}, Shape{24, 5}, Shape{5}})
        params.push_back((randn(s) * 0.3).to(dtype).to(device).requires_grad_());
    }
    Tensor forward(const Tensor& x) const {
      return matmul(relu(matmul(x, params[0]) + params[1]), params[2]) + params[3];
    }
  };
  auto train_step = [](Net& net, optim::AdamW& opt, const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net.forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  const optim::AdamWOptions opts{.lr = 2e-2, .weight_decay = 0.1};
  Net net(DType::f32, kCuda), eager(DType::f32, Device::cpu()), ref(DType::f64, Device::cpu());
  optim::AdamW opt(net.params, opts), eager_opt(eager.params, opts), ref_opt(ref.params, opts);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return train_step(net, opt, x, y); });
  const AutoGradMode grad(true);
  for (int s = 0; s < 6; ++s) {
    INFO("step " << s);
    manual_seed(200 + static_cast<uint64_t>(s));
    const Tensor x = randn({10, 12}), y = randint(0, 5, {10});
    const Tensor loss = step(x.to(kCuda), y.to(kCuda));
    const Tensor want = train_step(eager, eager_opt, x, y);
    const Tensor want64 = train_step(ref, ref_opt, x.to(DType::f64), y);
    KILN_REQUIRE_ACCURATE(host(loss), want, want64);
    for (size_t k = 0; k < net.params.size(); ++k) {
      INFO("parameter " << k);
      CHECK(net.params[k].device() == kCuda);
      KILN_REQUIRE_ACCURATE(host(net.params[k]), eager.params[k], ref.params[k]);
    }
  }
  CHECK(step.stats().replays >= 3);
  CHECK(step.stats().breaks == 0);
}

TEST_CASE("cuda device: a module compiled for training has a compiled backward on the device",
          "[cuda]") {
  if (!have_device()) return;
  // Its forward keeps what the min-cut partition says; the backward recomputes GELU's and
  // LayerNorm's pointwise values on the device.
  auto make = [](DType dtype, Device device) {
    manual_seed(6);
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Linear>(8, 24));
    m->push_back(std::make_shared<nn::GELU>());
    m->push_back(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{24}));
    m->push_back(std::make_shared<nn::Linear>(24, 5));
    m->to(dtype);
    m->to(device);
    m->train();
    return m;
  };
  auto net = make(DType::f32, kCuda), eager = make(DType::f32, Device::cpu()),
       ref = make(DType::f64, Device::cpu());
  auto f = compile(*net);
  const AutoGradMode grad(true);
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    manual_seed(50 + static_cast<uint64_t>(call));
    const Tensor x = randn({6, 8}), w = randn({6, 5});
    (f(x.to(kCuda)) * w.to(kCuda)).sum().backward();
    (eager->forward(x) * w).sum().backward();
    (ref->forward(x.to(DType::f64)) * w.to(DType::f64)).sum().backward();
    const std::vector<Tensor> p = net->parameters(), pe = eager->parameters(),
                              pr = ref->parameters();
    for (size_t k = 0; k < p.size(); ++k) {
      INFO("parameter " << k);
      CHECK(p[k].grad().device() == kCuda);
      KILN_REQUIRE_ACCURATE(host(p[k].grad()), pe[k].grad(), pr[k].grad());
    }
    net->zero_grad();
    eager->zero_grad();
    ref->zero_grad();
  }
  CHECK(f.stats().replays == 2);
  CHECK(f.stats().backward_recomputed_ops > 0);
}
