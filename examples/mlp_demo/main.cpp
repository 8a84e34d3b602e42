// The README's demo: a small MLP classifier built from nn modules, run eagerly on a batch of
// random inputs; prints its output, its predictions and its timing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include <kiln/kiln.h>

using namespace kiln;

struct MLP : nn::Module {
  nn::Linear fc1{784, 256}, fc2{256, 128}, fc3{128, 10};
  nn::LayerNorm norm{std::vector<int64_t>{256}};
  MLP() {
    register_module("fc1", fc1);
    register_module("norm", norm);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  Tensor forward(const Tensor& x) { return fc3(gelu(fc2(relu(norm(fc1(x)))))).log_softmax(-1); }
};

int main() {
  manual_seed(0);
  MLP model;
  model.eval();
  int64_t params = 0;
  for (auto& [name, p] : model.named_parameters())
    params += p.numel();
  std::printf("kiln %s: MLP 784-256-128-10 with LayerNorm, %lld parameters, %d threads\n",
              version(), static_cast<long long>(params), get_num_threads());

  Tensor x = randn({64, 784});
  Tensor y = model.forward(x);
  std::cout << "log-probabilities of the first 2 samples:\n" << y.slice(0, 0, 2) << "\n";
  std::cout << "predicted classes of the first 16 samples:\n"
            << y.argmax(1).slice(0, 0, 16) << "\n";

  constexpr int kReps = 50;
  std::vector<double> ms;
  for (int r = 0; r < kReps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor out = model.forward(x);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "eager forward, batch 64: median %.3f ms, min %.3f ms over %d runs (%.0f samples/s)\n",
      ms[kReps / 2], ms[0], kReps, 64.0 / (ms[kReps / 2] / 1e3));
  return 0;
}
