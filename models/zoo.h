// The built-in model zoo: the models `kiln run`, `kiln breaks` and `kiln bench` know by name.
#pragma once

#include <cstdint>
#include <memory>

#include "frontend/model_registry.h"
#include "runtime/dtype.h"
#include "runtime/ops.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace kiln::zoo {

/// Adds every zoo model (mlp, cnn, gpt, breaky, moe) to `registry`.
void register_models(ModelRegistry& registry);
/// A fresh registry holding the zoo.
ModelRegistry registry();

// ---- the models, one spec each (models/<name>.cpp) ----
/// 784-256-128-10 MLP with a LayerNorm after the first layer; input 1x784 f32.
ModelSpec mlp_spec();
/// A small ResNet (two BasicBlocks) for 3x32x32 images, torchvision names; input 2x3x32x32 f32.
ModelSpec cnn_spec();
/// A 2-layer GPT-2 decoder with nanoGPT names, tied lm_head; input 1x32 i64 token ids.
ModelSpec gpt_spec();
/// The shape of a GPT-2-style decoder. The defaults are the zoo's `gpt`; the benchmark's gpt
/// is {vocab 4096, block 256, layers 4, heads 12, embed 768}.
struct GptConfig {
  int64_t vocab = 512;
  int64_t block = 64; // the longest sequence: rows of transformer.wpe
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t embed = 128;
};
/// A GPT of that shape in eval mode, weights drawn after manual_seed(seed); forward takes
/// token ids [B, T] (i64) and returns logits [B, T, vocab].
std::shared_ptr<nn::Module> make_gpt(const GptConfig& cfg, uint64_t seed);
/// One of its decoder blocks alone (pre-norm attention and MLP); forward takes [B, T, embed].
std::shared_ptr<nn::Module> make_gpt_block(const GptConfig& cfg, uint64_t seed);
/// A model with data-dependent control flow (item, nonzero, if (t)); input 4x32 f32.
ModelSpec breaky_spec();
/// A dense top-2 mixture of four experts, with no data-dependent shapes; input 8x64 f32.
ModelSpec moe_spec();

/// The make() of a zoo model: seeds the global generator, builds M, puts it in eval mode.
template <typename M> std::shared_ptr<nn::Module> build_in_eval(uint64_t seed) {
  manual_seed(seed);
  auto model = std::make_shared<M>();
  model->eval();
  return model;
}

/// The make_input of the models that take real-valued input: N(0, 1) of the given shape and
/// dtype, drawn after manual_seed(seed).
Tensor normal_input(const Shape& shape, DType dtype, uint64_t seed);

} // namespace kiln::zoo
