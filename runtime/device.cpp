// Device names.
#include "runtime/device.h"

#include <ostream>

#include "runtime/error.h"

namespace kiln {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5) {
    int idx = 0;
    for (size_t i = 5; i < s.size(); ++i) {
      KILN_CHECK(s[i] >= '0' && s[i] <= '9' && idx < 1000, "device: bad device string '", s, "'");
      idx = idx * 10 + (s[i] - '0');
    }
    return cuda(idx);
  }
  throw Error("device: unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

} // namespace kiln
