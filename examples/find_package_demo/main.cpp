// The smallest kiln program: built against an installed kiln by the install test.
#include <iostream>

#include <kiln/kiln.h>

int main() {
  kiln::Tensor t = kiln::tensor({1.0f, 2.0f, 3.0f});
  std::cout << "sum = " << t.sum().item<float>() << "\n";
  return 0;
}
