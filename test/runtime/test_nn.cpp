// nn modules: registration and names, state dicts, train/eval, to(), every layer's forward.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <kiln/kiln.h>

using namespace kiln;

namespace {

struct MLP : nn::Module {
  nn::Linear fc1{4, 3}, fc2{3, 2};
  MLP() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

struct Block : nn::Module {
  nn::Linear qkv{2, 6};
  nn::LayerNorm ln1{std::vector<int64_t>{2}};
  Block() {
    register_module("qkv", qkv);
    register_module("ln1", ln1);
  }
};

struct Stack : nn::Module {
  Tensor scale;
  nn::ModuleList blocks;
  nn::BatchNorm1d bn{2};
  Stack() {
    scale = ones({1});
    register_parameter("scale", scale);
    blocks.push_back(std::make_shared<Block>());
    blocks.push_back(std::make_shared<Block>());
    register_module("blocks", blocks);
    register_module("bn", bn);
  }
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v)
    out.push_back(n);
  return out;
}

std::vector<std::string> keys_of(const nn::StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& [k, v] : sd)
    out.push_back(k);
  return out;
}

void check_close(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  REQUIRE(a.sizes() == b.sizes());
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    CHECK(x[i] == Approx(y[i]).margin(tol));
  }
}

Tensor f32(std::vector<float> v, Shape shape) { return tensor(v, shape); }

template <typename T> std::string repr(const T& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

} // namespace

// ---- Module machinery ----

TEST_CASE("nn: named_parameters walks registration order with dotted names", "[nn]") {
  MLP m;
  auto params = m.named_parameters();
  CHECK(names_of(params) ==
        std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  for (auto& [name, p] : params) {
    INFO(name);
    CHECK(p.requires_grad());
    CHECK(p.dtype() == DType::f32);
  }
  CHECK(params[0].second.sizes() == Shape{3, 4});
  CHECK(params[1].second.sizes() == Shape{3});
  CHECK(params[0].second.is_same(m.fc1.weight)); // handles to the members, not copies
  CHECK(m.parameters().size() == 4);
  CHECK(names_of(m.named_parameters(/*recurse=*/false)).empty());
  auto kids = m.named_children();
  REQUIRE(kids.size() == 2);
  CHECK(kids[0].first == "fc1");
  CHECK(kids[0].second == &m.fc1);
  CHECK(m.children()[1] == &m.fc2);
  std::vector<std::string> mods;
  for (auto& [n, mod] : m.named_modules())
    mods.push_back(n);
  CHECK(mods == std::vector<std::string>{"", "fc1", "fc2"});
}

TEST_CASE("nn: containers name children by index, as PyTorch", "[nn]") {
  Stack s;
  CHECK(names_of(s.named_parameters()) ==
        std::vector<std::string>{"scale", "blocks.0.qkv.weight", "blocks.0.qkv.bias",
                                 "blocks.0.ln1.weight", "blocks.0.ln1.bias", "blocks.1.qkv.weight",
                                 "blocks.1.qkv.bias", "blocks.1.ln1.weight", "blocks.1.ln1.bias",
                                 "bn.weight", "bn.bias"});
  CHECK(names_of(s.named_buffers()) ==
        std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  CHECK(keys_of(s.state_dict()) ==
        std::vector<std::string>{"blocks.0.ln1.bias", "blocks.0.ln1.weight", "blocks.0.qkv.bias",
                                 "blocks.0.qkv.weight", "blocks.1.ln1.bias", "blocks.1.ln1.weight",
                                 "blocks.1.qkv.bias", "blocks.1.qkv.weight", "bn.bias",
                                 "bn.num_batches_tracked", "bn.running_mean", "bn.running_var",
                                 "bn.weight", "scale"});
  CHECK(s.blocks.size() == 2);
  int n = 0;
  for (auto& b : s.blocks) {
    CHECK(b->as<Block>()->qkv.out_features == 6);
    ++n;
  }
  CHECK(n == 2);
  CHECK(s.blocks[-1].get() == s.blocks[1].get());
  CHECK_THROWS_WITH(s.blocks[2], Catch::Contains("ModuleList: index 2 is out of range for 2"));
  CHECK_THROWS_WITH(s.blocks[0]->as<nn::Linear>(), Catch::Contains("as: the module is a") &&
                                                       Catch::Contains("Block") &&
                                                       Catch::Contains("not a kiln::nn::Linear"));
  CHECK_THROWS_WITH(s.blocks.forward(ones({1})),
                    Catch::Contains("ModuleList does not define forward"));
}

TEST_CASE("nn: registration errors", "[nn]") {
  struct Bad : nn::Module {
    Tensor w = zeros({1}), v = zeros({1});
    nn::ReLU act;
  };
  Bad b;
  b.register_parameter("w", b.w);
  CHECK_THROWS_WITH(b.register_parameter("w", b.v), Catch::Contains("\"w\" is already registered"));
  CHECK_THROWS_WITH(b.register_module("w", b.act), Catch::Contains("\"w\" is already registered"));
  CHECK_THROWS_WITH(b.register_buffer("a.b", b.v), Catch::Contains("contains \".\""));
  CHECK_THROWS_WITH(b.register_buffer("", b.v), Catch::Contains("the name is empty"));
  CHECK_THROWS_WITH(b.register_module("self", b), Catch::Contains("cannot be its own child"));
  CHECK_THROWS_WITH(b.register_module("null", std::shared_ptr<nn::ReLU>()),
                    Catch::Contains("is null"));
  CHECK_THROWS_WITH(b(ones({1})), Catch::Contains("forward: Bad does not define forward"));
}

TEST_CASE("nn: tied parameters are listed once but saved under both names", "[nn]") {
  struct Tied : nn::Module {
    nn::Embedding emb{5, 3};
    nn::Linear head{3, 5, false};
    Tied() {
      head.weight = emb.weight; // before registration: the member now shares emb's tensor
      register_module("emb", emb);
      register_module("head", head);
    }
  };
  Tied t;
  CHECK(names_of(t.named_parameters()) == std::vector<std::string>{"emb.weight"});
  CHECK(keys_of(t.state_dict()) == std::vector<std::string>{"emb.weight", "head.weight"});
  t.to(DType::f64); // converted once: still tied
  CHECK(t.head.weight.dtype() == DType::f64);
  CHECK(t.head.weight.is_same(t.emb.weight));
  CHECK(t.parameters().size() == 1);
}

TEST_CASE("nn: load_state_dict copies in place and reports keys", "[nn]") {
  MLP a, b;
  Tensor held = b.fc1.weight; // a handle taken before loading
  uint64_t v0 = held.version();
  auto report = b.load_state_dict(a.state_dict());
  CHECK(report.ok());
  CHECK(held.is_same(b.fc1.weight));
  CHECK(held.version() > v0);
  CHECK(held.to_vector<float>() == a.fc1.weight.to_vector<float>());
  CHECK_FALSE(held.is_same(a.fc1.weight)); // copied, not aliased
  CHECK(b.fc2.bias.to_vector<float>() == a.fc2.bias.to_vector<float>());
  Tensor x = randn({5, 4});
  check_close(b(x), a(x), 0);
  auto own = a.fc1.weight.to_vector<float>();
  CHECK(a.load_state_dict(a.state_dict()).ok()); // loading a module's own state is a no-op
  CHECK(a.fc1.weight.to_vector<float>() == own);

  // A missing and an unexpected key: strict throws listing both and writes nothing.
  nn::StateDict sd = a.state_dict();
  sd.erase("fc2.bias");
  sd["extra"] = zeros({1});
  MLP c;
  auto before = c.fc1.weight.to_vector<float>();
  CHECK_THROWS_WITH(c.load_state_dict(sd),
                    Catch::Contains("load_state_dict: error(s) loading the state dict of MLP") &&
                        Catch::Contains("missing keys: \"fc2.bias\"") &&
                        Catch::Contains("unexpected keys: \"extra\""));
  CHECK(c.fc1.weight.to_vector<float>() == before);
  auto r = c.load_state_dict(sd, /*strict=*/false);
  CHECK(r.missing_keys == std::vector<std::string>{"fc2.bias"});
  CHECK(r.unexpected_keys == std::vector<std::string>{"extra"});
  CHECK(c.fc1.weight.to_vector<float>() == a.fc1.weight.to_vector<float>());

  // A shape mismatch is an error even when not strict, naming the key and both shapes.
  nn::StateDict wrong = a.state_dict();
  wrong["fc1.weight"] = zeros({4, 3});
  CHECK_THROWS_WITH(c.load_state_dict(wrong, false),
                    Catch::Contains("size mismatch for fc1.weight: copying a tensor of shape "
                                    "[4, 3] from the state dict, the shape in the model is "
                                    "[3, 4]"));
}

TEST_CASE("nn: load_state_dict casts to the member's dtype", "[nn]") {
  nn::BatchNorm2d bn(2);
  nn::StateDict sd{{"weight", tensor(std::vector<double>{2.0, 3.0})},
                   {"bias", tensor(std::vector<double>{0.5, 0.25})},
                   {"running_mean", zeros({2})},
                   {"running_var", ones({2})},
                   {"num_batches_tracked", scalar_tensor(int64_t{7})}};
  CHECK(bn.load_state_dict(sd).ok());
  CHECK(bn.weight.dtype() == DType::f32);
  CHECK(bn.weight.to_vector<float>() == std::vector<float>{2.0f, 3.0f});
  CHECK(bn.num_batches_tracked.item<int64_t>() == 7);
}

TEST_CASE("nn: train and eval reach every descendant", "[nn]") {
  Stack s;
  CHECK(s.is_training());
  s.eval();
  CHECK_FALSE(s.is_training());
  CHECK_FALSE(s.blocks[1]->is_training());
  CHECK_FALSE(s.bn.is_training());
  s.train();
  CHECK(s.blocks[0]->as<Block>()->ln1.is_training());
}

TEST_CASE("nn: to(dtype) converts floating state only and re-binds members", "[nn]") {
  nn::BatchNorm2d bn(3);
  Tensor old = bn.weight;
  bn.to(DType::f64);
  CHECK(bn.weight.dtype() == DType::f64);
  CHECK(bn.weight.requires_grad());
  CHECK(bn.running_var.dtype() == DType::f64);
  CHECK(bn.num_batches_tracked.dtype() == DType::i64);
  CHECK(old.dtype() == DType::f32);
  CHECK(bn.state_dict().at("running_mean").dtype() == DType::f64);
  CHECK(bn.parameters()[0].is_same(bn.weight));
  bn.to(Device::cpu()); // same device: nothing to move
  CHECK(bn.weight.dtype() == DType::f64);
}

TEST_CASE("nn: zero_grad drops gradients", "[nn]") {
  nn::Linear l(2, 2);
  l.weight.set_grad(ones({2, 2}));
  CHECK(l.weight.grad().defined());
  l.zero_grad();
  CHECK_FALSE(l.weight.grad().defined());
}

TEST_CASE("nn: module repr", "[nn]") {
  MLP m;
  CHECK(repr(m) == "MLP(\n"
                   "  (fc1): Linear(in_features=4, out_features=3, bias=True)\n"
                   "  (fc2): Linear(in_features=3, out_features=2, bias=True)\n"
                   ")");
  nn::Sequential seq{std::make_shared<nn::Conv2d>(1, 2, 3, 1, 1),
                     std::make_shared<nn::BatchNorm2d>(2), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>()};
  CHECK(repr(seq) ==
        "Sequential(\n"
        "  (0): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): BatchNorm2d(2, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (2): ReLU()\n"
        "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
        "  (4): Flatten(start_dim=1, end_dim=-1)\n"
        ")");
}

// ---- layers ----

TEST_CASE("nn: Linear initialisation and forward", "[nn]") {
  manual_seed(1);
  nn::Linear l(16, 8);
  CHECK(l.weight.sizes() == Shape{8, 16});
  CHECK(l.bias.sizes() == Shape{8});
  double bound = 1.0 / std::sqrt(16.0);
  auto w = l.weight.to_vector<float>();
  float lo = 1, hi = -1;
  for (float v : w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(hi - lo > bound); // spread over the range, not constant
  for (float v : l.bias.to_vector<float>())
    CHECK(std::abs(v) <= bound);

  nn::Linear small(2, 2);
  // Parameters require grad: written through detach(), as under torch.no_grad().
  small.weight.detach().copy_(f32({1, 2, 3, 4}, {2, 2}));
  small.bias.detach().copy_(f32({10, 20}, {2}));
  CHECK(small(f32({1, 1, 0, 2}, {2, 2})).to_vector<float>() == std::vector<float>{13, 27, 14, 28});
  // Leading batch dims pass through.
  CHECK(small(zeros({3, 5, 2})).sizes() == Shape{3, 5, 2});

  nn::Linear nobias(3, 2, false);
  CHECK_FALSE(nobias.bias.defined());
  CHECK(names_of(nobias.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(keys_of(nobias.state_dict()) == std::vector<std::string>{"weight"});
  CHECK_THROWS_WITH(nn::Linear(-1, 2), Catch::Contains("must be non-negative"));
}

TEST_CASE("nn: Conv2d parameters, forward and argument checks", "[nn]") {
  nn::Conv2d c(4, 6, {3, 1}, 1, {1, 0}, 1, 2);
  CHECK(c.weight.sizes() == Shape{6, 2, 3, 1});
  CHECK(c.bias.sizes() == Shape{6});
  double bound = 1.0 / std::sqrt(2.0 * 3.0);
  for (float v : c.weight.to_vector<float>())
    CHECK(std::abs(v) <= bound);
  Tensor x = randn({2, 4, 5, 5});
  check_close(c(x), conv2d(x, c.weight, c.bias, {1, 1}, {1, 0}, {1, 1}, 2));
  CHECK(c(x).sizes() == Shape{2, 6, 5, 5});

  nn::Conv2d one(1, 1, 2, 2, 0, 1, 1, false);
  one.weight.detach().fill_(1);
  CHECK(one(arange(0, 16).to(DType::f32).view({1, 1, 4, 4})).to_vector<float>() ==
        std::vector<float>{10, 18, 42, 50});
  CHECK_THROWS_WITH(nn::Conv2d(3, 4, 3, 1, 0, 1, 2), Catch::Contains("in_channels (3) must be "
                                                                     "divisible by groups (2)"));
  CHECK_THROWS_WITH(nn::Conv2d(2, 3, 3, 1, 0, 1, 2), Catch::Contains("out_channels (3)"));
  CHECK_THROWS_WITH(nn::Conv2d(2, 2, 0), Catch::Contains("kernel_size must be positive"));
  CHECK_THROWS_WITH(nn::Conv2d(2, 2, 3, 0), Catch::Contains("stride must be positive"));
}

TEST_CASE("nn: BatchNorm2d trains running statistics and evaluates with them", "[nn]") {
  nn::BatchNorm2d bn(2, 1e-5, 0.5);
  CHECK(names_of(bn.named_buffers()) ==
        std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  CHECK(bn.num_batches_tracked.dim() == 0);
  // Channel 0 holds 1, 3; channel 1 holds 10, 10.
  Tensor x = f32({1, 10, 3, 10}, {2, 2, 1, 1});
  Tensor y = bn(x);
  check_close(y, f32({-1, 0, 1, 0}, {2, 2, 1, 1}), 1e-4);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
  // running = 0.5 * old + 0.5 * batch; the variance is unbiased (2 for channel 0).
  check_close(bn.running_mean, f32({1, 5}, {2}));
  check_close(bn.running_var, f32({1.5f, 0.5f}, {2}));
  bn.eval();
  Tensor e = bn(f32({1, 5}, {1, 2, 1, 1}));
  check_close(e, f32({0, 0}, {1, 2, 1, 1}), 1e-4);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1); // not counted in eval
  CHECK_THROWS_WITH(bn(zeros({2, 2})), Catch::Contains("BatchNorm2d: expected 4D input (got 2D"));
  CHECK_THROWS_WITH(bn(zeros({1, 3, 1, 1})), Catch::Contains("expected 2 channels"));

  nn::BatchNorm1d plain(2, 1e-5, 0.1, /*affine=*/false);
  CHECK(plain.named_parameters().empty());
  check_close(plain(f32({0, 4, 2, 8}, {2, 2})), f32({-1, -1, 1, 1}, {2, 2}), 1e-4);
}

TEST_CASE("nn: LayerNorm normalises the trailing dims", "[nn]") {
  nn::LayerNorm ln{std::vector<int64_t>{2}};
  CHECK(ln.weight.sizes() == Shape{2});
  CHECK(ln.bias.to_vector<float>() == std::vector<float>{0, 0});
  ln.weight.detach().fill_(2);
  ln.bias.detach().fill_(1);
  check_close(ln(f32({1, 3, -5, 5}, {2, 2})), f32({-1, 3, -1, 3}, {2, 2}), 1e-4);
  nn::LayerNorm plain(std::vector<int64_t>{2, 2}, 1e-5, false);
  CHECK(plain.named_parameters().empty());
  check_close(plain(f32({1, 1, 3, 3}, {1, 2, 2})), f32({-1, -1, 1, 1}, {1, 2, 2}), 1e-4);
}

TEST_CASE("nn: Embedding, Dropout, activations, Flatten, pooling", "[nn]") {
  nn::Embedding emb(4, 2);
  emb.weight.detach().copy_(f32({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}));
  Tensor idx = tensor(std::vector<int64_t>{3, 0, 1, 3}, {2, 2});
  CHECK(emb(idx).sizes() == Shape{2, 2, 2});
  CHECK(emb(idx).to_vector<float>() == std::vector<float>{6, 7, 0, 1, 2, 3, 6, 7});

  nn::Dropout drop(0.5);
  Tensor x = ones({1000});
  Tensor d = drop(x);
  auto v = d.to_vector<float>();
  int zeros_seen = 0;
  for (float e : v) {
    CHECK((e == 0.0f || e == 2.0f));
    zeros_seen += e == 0.0f;
  }
  CHECK(zeros_seen > 400);
  CHECK(zeros_seen < 600);
  drop.eval();
  CHECK(drop(x).to_vector<float>() == x.to_vector<float>());
  CHECK_THROWS_WITH(nn::Dropout(1.5), Catch::Contains("between 0 and 1, but got 1.5"));

  Tensor a = f32({-1, 0, 2}, {3});
  CHECK(nn::ReLU()(a).to_vector<float>() == std::vector<float>{0, 0, 2});
  check_close(nn::SiLU()(a), f32({-0.268941f, 0, 1.761594f}, {3}));
  check_close(nn::GELU()(a), f32({-0.158655f, 0, 1.954500f}, {3}));
  check_close(nn::GELU("tanh")(a), f32({-0.158808f, 0, 1.954598f}, {3}));
  check_close(nn::Tanh()(a), f32({-0.761594f, 0, 0.964028f}, {3}));
  check_close(nn::Sigmoid()(a), f32({0.268941f, 0.5f, 0.880797f}, {3}));
  check_close(nn::Softmax(0)(f32({0, 0}, {2})), f32({0.5f, 0.5f}, {2}));
  CHECK_THROWS_WITH(nn::GELU("fast"), Catch::Contains("approximate must be"));
  CHECK(nn::Identity()(a).is_same(a));

  CHECK(nn::Flatten()(zeros({2, 3, 4})).sizes() == Shape{2, 12});
  CHECK(nn::Flatten(0, 1)(zeros({2, 3, 4})).sizes() == Shape{6, 4});

  Tensor img = arange(0, 16).to(DType::f32).view({1, 1, 4, 4});
  CHECK(nn::MaxPool2d(2)(img).to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  CHECK(nn::AvgPool2d(2)(img).to_vector<float>() == std::vector<float>{2.5, 4.5, 10.5, 12.5});
  CHECK(nn::MaxPool2d(3, 1)(img).to_vector<float>() == std::vector<float>{10, 11, 14, 15});
  CHECK(nn::AvgPool2d({1, 2}, std::nullopt)(img).sizes() == Shape{1, 1, 4, 2});
}

TEST_CASE("nn: Sequential chains single-input modules", "[nn]") {
  manual_seed(3);
  auto l1 = std::make_shared<nn::Linear>(4, 3);
  auto l2 = std::make_shared<nn::Linear>(3, 2);
  nn::Sequential seq;
  seq.push_back(l1);
  seq.push_back(std::make_shared<nn::ReLU>());
  seq.push_back(l2);
  CHECK(seq.size() == 3);
  CHECK(names_of(seq.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  Tensor x = randn({5, 4});
  check_close(seq.forward(x), (*l2)(relu((*l1)(x))), 0);
  check_close(seq(x), seq.forward(x), 0);
  nn::Sequential nested{std::make_shared<nn::ModuleList>()};
  CHECK_THROWS_WITH(nested(x), Catch::Contains("ModuleList does not define forward"));
  CHECK_THROWS_WITH(seq.push_back(nullptr), Catch::Contains("the module is null"));
}

namespace {

/// Multi-head attention computed with plain loops: q/k/v projections, softmax per head, out.
std::vector<float> reference_mha(const nn::MultiheadAttention& m, const std::vector<float>& q,
                                 const std::vector<float>& kv, int64_t n, int64_t l, int64_t s,
                                 const std::vector<float>& mask /* [l, s] additive or empty */) {
  const int64_t e = m.embed_dim, h = m.num_heads, dh = e / h;
  auto w = m.in_proj_weight.to_vector<float>();
  auto b = m.in_proj_bias.to_vector<float>();
  auto ow = m.out_proj.weight.to_vector<float>();
  auto ob = m.out_proj.bias.to_vector<float>();
  auto proj = [&](const std::vector<float>& x, int64_t len, int64_t which) {
    std::vector<float> out(static_cast<size_t>(n * len * e));
    for (int64_t r = 0; r < n * len; ++r)
      for (int64_t o = 0; o < e; ++o) {
        double acc = b[static_cast<size_t>(which * e + o)];
        for (int64_t i = 0; i < e; ++i)
          acc +=
              x[static_cast<size_t>(r * e + i)] * w[static_cast<size_t>((which * e + o) * e + i)];
        out[static_cast<size_t>(r * e + o)] = static_cast<float>(acc);
      }
    return out;
  };
  auto pq = proj(q, l, 0), pk = proj(kv, s, 1), pv = proj(kv, s, 2);
  std::vector<float> ctx(static_cast<size_t>(n * l * e));
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < l; ++i) {
        std::vector<double> sc(static_cast<size_t>(s));
        double mx = -INFINITY;
        for (int64_t j = 0; j < s; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < dh; ++d)
            acc += pq[static_cast<size_t>((bi * l + i) * e + hi * dh + d)] *
                   pk[static_cast<size_t>((bi * s + j) * e + hi * dh + d)];
          acc /= std::sqrt(static_cast<double>(dh));
          if (!mask.empty()) acc += mask[static_cast<size_t>(i * s + j)];
          sc[static_cast<size_t>(j)] = acc;
          mx = std::max(mx, acc);
        }
        double total = 0;
        for (double& v : sc)
          total += (v = std::exp(v - mx));
        for (int64_t d = 0; d < dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < s; ++j)
            acc += sc[static_cast<size_t>(j)] / total *
                   pv[static_cast<size_t>((bi * s + j) * e + hi * dh + d)];
          ctx[static_cast<size_t>((bi * l + i) * e + hi * dh + d)] = static_cast<float>(acc);
        }
      }
  std::vector<float> out(static_cast<size_t>(n * l * e));
  for (int64_t r = 0; r < n * l; ++r)
    for (int64_t o = 0; o < e; ++o) {
      double acc = ob[static_cast<size_t>(o)];
      for (int64_t i = 0; i < e; ++i)
        acc += ctx[static_cast<size_t>(r * e + i)] * ow[static_cast<size_t>(o * e + i)];
      out[static_cast<size_t>(r * e + o)] = static_cast<float>(acc);
    }
  return out;
}

} // namespace

TEST_CASE("nn: MultiheadAttention names, shapes and values", "[nn]") {
  manual_seed(7);
  nn::MultiheadAttention mha(4, 2);
  CHECK(names_of(mha.named_parameters()) ==
        std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                 "out_proj.bias"});
  CHECK(mha.in_proj_weight.sizes() == Shape{12, 4});
  CHECK(mha.in_proj_bias.to_vector<float>() == std::vector<float>(12, 0.0f));
  CHECK(mha.out_proj.bias.to_vector<float>() == std::vector<float>(4, 0.0f));
  double xavier = std::sqrt(6.0 / (12 + 4));
  for (float v : mha.in_proj_weight.to_vector<float>())
    CHECK(std::abs(v) <= xavier);
  // Non-zero biases so a mix-up of the q/k/v slices shows.
  mha.in_proj_bias.detach().copy_(randn({12}));
  mha.out_proj.bias.detach().copy_(randn({4}));

  const int64_t n = 2, l = 3, s = 5, e = 4;
  Tensor q = randn({n, l, e}), kv = randn({n, s, e});
  auto qv = q.to_vector<float>(), kvv = kv.to_vector<float>();
  Tensor out = mha(q, kv, kv);
  CHECK(out.sizes() == Shape{n, l, e});
  check_close(out, tensor(reference_mha(mha, qv, kvv, n, l, s, {}), {n, l, e}), 1e-4);

  // Self-attention through the single-input forward.
  check_close(mha(q), mha(q, q, q), 0);

  // A bool mask (true = blocked) equals the additive -inf mask.
  std::vector<bool> blocked(static_cast<size_t>(l * s));
  std::vector<float> additive(static_cast<size_t>(l * s));
  for (int64_t i = 0; i < l; ++i)
    for (int64_t j = 0; j < s; ++j) {
      bool b = (i + j) % 3 == 0;
      blocked[static_cast<size_t>(i * s + j)] = b;
      additive[static_cast<size_t>(i * s + j)] = b ? -INFINITY : 0.0f;
    }
  Tensor bool_mask = tensor(blocked, {l, s});
  Tensor masked = mha(q, kv, kv, bool_mask);
  check_close(masked, tensor(reference_mha(mha, qv, kvv, n, l, s, additive), {n, l, e}), 1e-4);
  check_close(mha(q, kv, kv, tensor(additive, {l, s})), masked, 1e-5);
  // A 3-D mask [N * H, L, S] repeating the 2-D one gives the same result.
  check_close(mha(q, kv, kv, bool_mask.unsqueeze(0).expand({n * 2, l, s}).contiguous()), masked,
              1e-5);

  // is_causal is the lower-triangular mask.
  Tensor causal_blocked = logical_not(tril(ones({l, s}, DType::bool_)));
  check_close(mha(q, kv, kv, {}, true), mha(q, kv, kv, causal_blocked), 1e-6);

  // key_padding_mask blocks keys per batch element.
  Tensor kpm = zeros({n, s}, DType::bool_);
  kpm.slice(0, 1, 2).slice(1, 3, 5).fill_(true);
  Tensor padded = mha(q, kv, kv, {}, false, kpm);
  check_close(padded.slice(0, 0, 1), mha(q.slice(0, 0, 1), kv.slice(0, 0, 1), kv.slice(0, 0, 1)),
              1e-5);
  Tensor kv1 = kv.slice(0, 1, 2).slice(1, 0, 3);
  check_close(padded.slice(0, 1, 2), mha(q.slice(0, 1, 2), kv1, kv1), 1e-5);

  // Unbatched [L, E] input.
  check_close(mha(q.select(0, 1), kv.select(0, 1), kv.select(0, 1)), out.select(0, 1), 1e-5);

  CHECK_THROWS_WITH(mha(randn({2, 3, 5})), Catch::Contains("expected embedding size 4"));
  CHECK_THROWS_WITH(mha(q, kv, kv, zeros({l, l}, DType::bool_)),
                    Catch::Contains("2-D attn_mask should have shape [3, 5]"));
  CHECK_THROWS_WITH(nn::MultiheadAttention(6, 4),
                    Catch::Contains("must be divisible by num_heads"));
  nn::MultiheadAttention nobias(4, 1, false);
  CHECK(names_of(nobias.named_parameters()) ==
        std::vector<std::string>{"in_proj_weight", "out_proj.weight"});
}

TEST_CASE("nn: TransformerEncoderLayer has PyTorch's names and wiring", "[nn]") {
  manual_seed(11);
  nn::TransformerEncoderLayer layer(8, 2, 16, 0.1);
  CHECK(keys_of(layer.state_dict()) ==
        std::vector<std::string>{"linear1.bias", "linear1.weight", "linear2.bias", "linear2.weight",
                                 "norm1.bias", "norm1.weight", "norm2.bias", "norm2.weight",
                                 "self_attn.in_proj_bias", "self_attn.in_proj_weight",
                                 "self_attn.out_proj.bias", "self_attn.out_proj.weight"});
  std::vector<std::string> kids;
  for (auto& [name, m] : layer.named_children())
    kids.push_back(name);
  CHECK(kids == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1",
                                         "norm2", "dropout1", "dropout2"});
  CHECK(layer.linear1.weight.sizes() == Shape{16, 8});
  CHECK(layer.self_attn.dropout == 0.1);

  layer.eval();
  Tensor x = randn({2, 3, 8});
  Tensor sa = layer.self_attn(x, x, x);
  Tensor h = layer.norm1(x + sa);
  Tensor want = layer.norm2(h + layer.linear2(relu(layer.linear1(h))));
  check_close(layer(x), want, 1e-5);
  // Causal masking reaches the attention.
  Tensor causal_sa = layer.self_attn(x, x, x, {}, true);
  Tensor hc = layer.norm1(x + causal_sa);
  check_close(layer(x, {}, true), layer.norm2(hc + layer.linear2(relu(layer.linear1(hc)))), 1e-5);

  nn::TransformerEncoderLayer pre(8, 2, 16, 0.0, "gelu", /*norm_first=*/true);
  pre.eval();
  Tensor n1 = pre.norm1(x);
  Tensor y = x + pre.self_attn(n1, n1, n1);
  Tensor want_pre = y + pre.linear2(gelu(pre.linear1(pre.norm2(y))));
  check_close(pre(x), want_pre, 1e-5);

  // In training mode dropout changes the output.
  layer.train();
  CHECK_FALSE(layer(x).to_vector<float>() == layer(x).to_vector<float>());
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"),
                    Catch::Contains("activation should be \"relu\" or \"gelu\""));
}

TEST_CASE("nn: a state dict round-trips through safetensors", "[nn][safetensors]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_nn_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "mlp.safetensors").string();
  Stack a, b;
  a.bn.running_mean.fill_(0.25);
  a.bn.num_batches_tracked.fill_(3);
  save(a.state_dict(), path);
  auto report = b.load_state_dict(load(path), /*strict=*/false);
  CHECK(report.ok());
  for (auto& [name, t] : a.state_dict()) {
    INFO(name);
    CHECK(b.state_dict().at(name).to_vector<double>() == t.to_vector<double>());
  }
  CHECK(b.bn.num_batches_tracked.dtype() == DType::i64);
  CHECK(b.bn.num_batches_tracked.item<int64_t>() == 3);
  fs::remove_all(dir);
}

namespace {

// The module example of the public API (an MLP saved and loaded as safetensors), as written
// there apart from the sizes.
struct ApiMLP : nn::Module {
  nn::Linear fc1{8, 6}, fc2{6, 3};
  ApiMLP() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) { return fc2(relu(fc1(x))); }
};

} // namespace

TEST_CASE("nn: the API's module example works as written", "[nn]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_api_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "mlp.safetensors").string();
  ApiMLP m;
  m.train();
  m.eval();
  m.to(Device::cpu());
  int count = 0;
  for (auto& [name, p] : m.named_parameters()) {
    CHECK(p.defined());
    CHECK_FALSE(name.empty());
    ++count;
  }
  CHECK(count == 4);
  save(m.state_dict(), path);
  ApiMLP other;
  auto report = other.load_state_dict(load(path), /*strict=*/false);
  CHECK(report.missing_keys.empty());
  CHECK(report.unexpected_keys.empty());
  Tensor x = randn({2, 8});
  check_close(other(x), m(x), 0); // m(x) reaches the non-virtual-looking forward
  nn::Module& base = m;
  check_close(base(x), m.forward(x), 0);
  fs::remove_all(dir);
}
