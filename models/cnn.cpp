// The `cnn` zoo model: a small ResNet for 3x32x32 images (a conv-bn-relu stem, two
// BasicBlocks, the second downsampling 16 -> 32 channels, pooling, a linear classifier).
// Parameter and buffer names follow torchvision's ResNet (conv1, bn1, layer1.0.conv1,
// layer2.0.downsample.0, fc), so its state dicts load.
#include <memory>

#include "models/zoo.h"
#include "runtime/nn/container.h"
#include "runtime/nn/conv.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/norm.h"
#include "runtime/ops.h"

namespace kiln::zoo {
namespace {

/// torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), where the
/// shortcut is a 1x1 conv + batch norm ("downsample") when the shape changes. The 3x3 convs
/// have padding 1 and no bias, as torchvision's conv3x3.
class BasicBlock : public nn::Module {
public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1(in, out, 3, stride, /*padding=*/1, /*dilation=*/1, /*groups=*/1, /*bias=*/false),
        bn1(out), conv2(out, out, 3, 1, /*padding=*/1, /*dilation=*/1, /*groups=*/1,
                        /*bias=*/false),
        bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      downsample = std::make_shared<nn::Sequential>();
      downsample->push_back(std::make_shared<nn::Conv2d>(in, out, 1, stride, /*padding=*/0,
                                                         /*dilation=*/1, /*groups=*/1,
                                                         /*bias=*/false));
      downsample->push_back(std::make_shared<nn::BatchNorm2d>(out));
      register_module("downsample", downsample);
    }
  }

  Tensor forward(const Tensor& x) override {
    Tensor identity = downsample ? downsample->forward(x) : x;
    Tensor out = relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    return relu(out + identity);
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  std::shared_ptr<nn::Sequential> downsample; // null when the block keeps its input's shape
};

class ResNet : public nn::Module {
public:
  ResNet() {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    layer1->push_back(std::make_shared<BasicBlock>(16, 16, 1));
    register_module("layer1", layer1);
    layer2->push_back(std::make_shared<BasicBlock>(16, 32, 2));
    register_module("layer2", layer2);
    register_module("fc", fc);
  }

  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn1(conv1(x)));          // [N, 16, 32, 32]
    h = layer2->forward(layer1->forward(h)); // [N, 32, 16, 16]
    h = max_pool2d(h, {2, 2});               // [N, 32, 8, 8]
    h = adaptive_avg_pool2d(h, {1, 1});      // [N, 32, 1, 1]
    return fc(h.flatten(1));                 // [N, 10]
  }

  nn::Conv2d conv1{3, 16, 3, 1, /*padding=*/1, /*dilation=*/1, /*groups=*/1, /*bias=*/false};
  nn::BatchNorm2d bn1{16};
  std::shared_ptr<nn::Sequential> layer1 = std::make_shared<nn::Sequential>();
  std::shared_ptr<nn::Sequential> layer2 = std::make_shared<nn::Sequential>();
  nn::Linear fc{32, 10};
};

} // namespace

ModelSpec cnn_spec() {
  ModelSpec spec;
  spec.name = "cnn";
  spec.summary = "small ResNet for 3x32x32 images: stem, two BasicBlocks (16 -> 32), pooling, fc";
  spec.input_shape = {2, 3, 32, 32};
  spec.input_dtype = DType::f32;
  spec.make = build_in_eval<ResNet>;
  spec.make_input = normal_input;
  return spec;
}

} // namespace kiln::zoo
