// Counter-based random numbers: Philox 4x32-10 and the global generator.
//
// Stream layout (compiled kernels reproduce it bit for bit):
// - A generator holds a 64-bit seed and a 64-bit offset, counted in Philox blocks. Each
//   random op reserves the blocks it needs and advances the offset by that many, so the
//   n-th op after manual_seed(s) always sees the same blocks.
// - Block b of an op whose reservation starts at offset o is philox4x32_10(counter = o + b,
//   key = seed): four 32-bit words w0..w3. The 128-bit counter is (lo = o + b, hi = 0).
// - rand, f32/f16/bf16: element i uses block i / 4, word i % 4; u = (w >> 8) * 2^-24, in [0, 1),
//   then rounded to the dtype (f16/bf16 round to nearest even; a value that rounds to 1 is
//   replaced by the largest value below 1). f64: element i uses block i / 2, words
//   2(i%2) and 2(i%2)+1 as the high and low halves of a 64-bit w; u = (w >> 11) * 2^-53.
// - randn: element i uses block i / 4; words (w0, w1) give normals 0 and 1, (w2, w3) give 2
//   and 3, by Box-Muller: u1 = (w_even >> 8 + 1) * 2^-24 in (0, 1], u2 = (w_odd >> 8) * 2^-24,
//   r = sqrt(-2 ln u1), normal 2k = r cos(2 pi u2), normal 2k+1 = r sin(2 pi u2), computed in
//   f64 with kiln's own ln, sin and cos (runtime/kernels/normal_math.h, shared with CUDA), then
//   rounded to the dtype.
// - randint(low, high): element i uses block i / 4, word i % 4: low + (w mod (high - low))
//   for ranges below 2^32; 64-bit ranges use two words like f64.
// - Blocks reserved = ceil(numel / 4), or ceil(numel / 2) for f64 rand and 64-bit randint.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace kiln {

/// One Philox 4x32-10 block: counter (lo, hi) under a 64-bit key.
std::array<uint32_t, 4> philox4x32_10(uint64_t counter_lo, uint64_t counter_hi, uint64_t key);

/// Where an op's random numbers start: its blocks are counter = offset + b under key = seed.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Generator {
public:
  explicit Generator(uint64_t seed = 0x853c49e6748fea9bULL) : seed_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  uint64_t offset() const;
  /// Reserves `blocks` consecutive Philox blocks and returns where they start.
  PhiloxState reserve(uint64_t blocks);

private:
  mutable std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The process-wide generator used by rand/randn/randint/dropout.
Generator& default_generator();

} // namespace kiln
