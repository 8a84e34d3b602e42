// The `gpt` zoo model: a GPT-2-style decoder (2 layers, 4 heads, 128 wide, 512 tokens, 64
// positions) with nanoGPT's parameter names (transformer.wte, transformer.h.0.attn.c_attn,
// ...), causal attention, tanh-approximated GELU and an lm_head tied to the token embedding.
#include <cmath>
#include <memory>
#include <vector>

#include "models/zoo.h"
#include "runtime/nn/container.h"
#include "runtime/nn/embedding.h"
#include "runtime/nn/init.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/norm.h"
#include "runtime/ops.h"

namespace kiln::zoo {
namespace {

constexpr GptConfig kZooGpt{};

/// Multi-head causal self-attention; q, k and v come from one projection (c_attn).
class CausalSelfAttention : public nn::Module {
public:
  explicit CausalSelfAttention(const GptConfig& cfg)
      : heads_(cfg.heads), embed_(cfg.embed), c_attn(cfg.embed, 3 * cfg.embed),
        c_proj(cfg.embed, cfg.embed) {
    register_module("c_attn", c_attn);
    register_module("c_proj", c_proj);
  }

  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
    std::vector<Tensor> qkv = split(c_attn(x), embed_, 2);
    // [B, T, C] -> [B, heads, T, C / heads]
    auto heads = [&](const Tensor& y) {
      return y.reshape({b, t, heads_, c / heads_}).transpose(1, 2);
    };
    Tensor y = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {},
                                            /*dropout_p=*/0.0, /*is_causal=*/true);
    return c_proj(y.transpose(1, 2).contiguous().reshape({b, t, c}));
  }

private:
  int64_t heads_, embed_;

public:
  nn::Linear c_attn;
  nn::Linear c_proj;
};

class MLP : public nn::Module {
public:
  explicit MLP(const GptConfig& cfg)
      : c_fc(cfg.embed, 4 * cfg.embed), c_proj(4 * cfg.embed, cfg.embed) {
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
  }

  Tensor forward(const Tensor& x) override { return c_proj(gelu(c_fc(x), "tanh")); }

  nn::Linear c_fc;
  nn::Linear c_proj;
};

/// A pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)).
class Block : public nn::Module {
public:
  explicit Block(const GptConfig& cfg)
      : ln_1(std::vector<int64_t>{cfg.embed}), attn(cfg), ln_2(std::vector<int64_t>{cfg.embed}),
        mlp(cfg) {
    register_module("ln_1", ln_1);
    register_module("attn", attn);
    register_module("ln_2", ln_2);
    register_module("mlp", mlp);
  }

  Tensor forward(const Tensor& x) override {
    Tensor h = x + attn(ln_1(x));
    return h + mlp(ln_2(h));
  }

  nn::LayerNorm ln_1;
  CausalSelfAttention attn;
  nn::LayerNorm ln_2;
  MLP mlp;
};

/// nanoGPT's `transformer` ModuleDict: the embeddings, the blocks and the final norm.
class Transformer : public nn::Module {
public:
  explicit Transformer(const GptConfig& cfg)
      : wte(cfg.vocab, cfg.embed), wpe(cfg.block, cfg.embed),
        ln_f(std::vector<int64_t>{cfg.embed}) {
    register_module("wte", wte);
    register_module("wpe", wpe);
    for (int64_t i = 0; i < cfg.layers; ++i)
      h->push_back(std::make_shared<Block>(cfg));
    register_module("h", h);
    register_module("ln_f", ln_f);
  }

  nn::Embedding wte;
  nn::Embedding wpe;
  std::shared_ptr<nn::ModuleList> h = std::make_shared<nn::ModuleList>();
  nn::LayerNorm ln_f;
};

class GPT : public nn::Module {
public:
  explicit GPT(const GptConfig& cfg = kZooGpt) : cfg_(cfg), transformer(cfg) {
    register_module("transformer", transformer);
    init_weights();
  }

  /// Token ids [B, T] (T <= block) to next-token logits [B, T, vocab] at every position.
  Tensor forward(const Tensor& idx) override {
    KILN_CHECK(idx.dim() == 2, "gpt: expected token ids of shape [batch, time], got ",
               shape_str(idx.sizes()));
    const int64_t t = idx.size(1);
    KILN_CHECK(t <= cfg_.block, "gpt: cannot run a sequence of length ", t, " (input ",
               shape_str(idx.sizes()), "): the block size (rows of transformer.wpe) is only ",
               cfg_.block);
    Tensor pos = arange(Scalar(int64_t{0}), Scalar(t), Scalar(int64_t{1}),
                        TensorOptions(DType::i64).device(idx.device()));
    Tensor x = transformer.wte(idx) + transformer.wpe(pos);
    for (const std::shared_ptr<nn::Module>& block : *transformer.h)
      x = block->forward(x);
    x = transformer.ln_f(x);
    // The lm_head is tied to the token embedding (weight tying, as GPT-2): no second copy.
    return linear(x, transformer.wte.weight);
  }

private:
  GptConfig cfg_;

public:
  Transformer transformer;

private:
  /// nanoGPT's _init_weights: linear and embedding weights ~ N(0, 0.02), biases zero, and
  /// the residual projections (c_proj) scaled by 1 / sqrt(2 * layers), as GPT-2.
  void init_weights() {
    for (auto& [name, module] : named_modules()) {
      if (auto* lin = dynamic_cast<nn::Linear*>(module)) {
        const bool residual = name.ends_with(".c_proj");
        nn::init::normal_(lin->weight, 0.0,
                          residual ? 0.02 / std::sqrt(2.0 * double(cfg_.layers)) : 0.02);
        if (lin->bias.defined()) nn::init::zeros_(lin->bias);
      } else if (auto* emb = dynamic_cast<nn::Embedding*>(module)) {
        nn::init::normal_(emb->weight, 0.0, 0.02);
      }
    }
  }
};

} // namespace

ModelSpec gpt_spec() {
  ModelSpec spec;
  spec.name = "gpt";
  spec.summary = "GPT-2-style decoder (nanoGPT names): 2 layers, 4 heads, 128 wide, vocab 512";
  spec.input_shape = {1, 32};
  spec.input_dtype = DType::i64;
  spec.make = [](uint64_t seed) { return make_gpt(kZooGpt, seed); };
  spec.make_input = [](const Shape& shape, DType dtype, uint64_t seed) {
    KILN_CHECK(is_integral(dtype), "gpt: the input holds token ids, so its dtype must be an ",
               "integer type, got ", dtype);
    manual_seed(seed);
    return randint(0, kZooGpt.vocab, shape, dtype);
  };
  return spec;
}

std::shared_ptr<nn::Module> make_gpt(const GptConfig& cfg, uint64_t seed) {
  manual_seed(seed);
  auto model = std::make_shared<GPT>(cfg);
  model->eval();
  return model;
}

std::shared_ptr<nn::Module> make_gpt_block(const GptConfig& cfg, uint64_t seed) {
  manual_seed(seed);
  auto block = std::make_shared<Block>(cfg);
  for (auto& [name, module] : block->named_modules())
    if (auto* lin = dynamic_cast<nn::Linear*>(module)) {
      nn::init::normal_(lin->weight, 0.0, 0.02);
      if (lin->bias.defined()) nn::init::zeros_(lin->bias);
    }
  block->eval();
  return block;
}

} // namespace kiln::zoo
