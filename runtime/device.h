// Device: where a tensor's data lives (the CPU, or CUDA device N).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(Device, Device) = default;
  /// "cpu" or "cuda:0".
  std::string str() const;
  /// Parses "cpu", "cuda", "cuda:N"; throws kiln::Error otherwise.
  static Device parse(const std::string& s);
};

std::ostream& operator<<(std::ostream& os, Device d);

} // namespace kiln
