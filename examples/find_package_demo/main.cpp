// The smallest kiln program: built against an installed kiln by the install test. It runs
// an op eagerly and the same function compiled (traced, then replayed).
#include <iostream>

#include <kiln/kiln.h>

int main() {
  kiln::Tensor t = kiln::tensor({1.0f, 2.0f, 3.0f});
  std::cout << "sum = " << t.sum().item<float>() << "\n";
  auto f = kiln::compile([](const kiln::Tensor& x) { return (x * 2 + 1).sum(); });
  f(t);
  float compiled = f(t).item<float>();
  std::cout << "compiled = " << compiled << " (replays: " << f.stats().replays << ")\n";
  return compiled == 15.0f ? 0 : 1;
}
