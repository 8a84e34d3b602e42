// The schedule autotuner (see autotune.h).
#include "codegen/autotune.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>

#include "codegen/cache.h"
#include "codegen/target.h"
#include "runtime/ops.h"
#include "runtime/plan.h"

namespace kiln::codegen {

using ir::kernel::Kernel;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Kernels whose candidates one target compile takes: the budget is checked between batches.
constexpr size_t kBatch = 8;
/// Samples per form, and the least time one sample takes (a sample repeats the form).
constexpr int kSamples = 5;
constexpr double kSampleMs = 0.2;

std::string describe(const Kernel& k) {
  auto dims = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  return k.name + " outer" + dims(k.outer) + " inner" + dims(k.inner);
}

/// The database's schedule for k, if it has a valid one.
std::optional<Schedule> database_schedule(const DiskCache& db, const std::string& key,
                                          const Kernel& k) {
  std::optional<std::string> text = db.load(key);
  if (!text) return std::nullopt;
  Expected<Schedule> s = parse_schedule(*text);
  if (!s || !check_schedule(*s, k)) return std::nullopt; // a corrupt entry is a miss
  return *s;
}

/// Times each candidate's entry on k, on zeroed buffers of k's extents (loads are affine in
/// the loop variables, so every address the kernel forms lies inside them).
std::vector<double> time_candidates(const Kernel& k, std::span<const Schedule> candidates,
                                    std::span<const KernelEntry> entries) {
  std::vector<Tensor> buffers;
  std::vector<char*> pointers;
  for (const ir::kernel::Buffer& buf : k.buffers) {
    buffers.push_back(zeros({std::max<int64_t>(buf.extent, 1)}, buf.dtype));
    pointers.push_back(static_cast<char*>(buffers.back().raw_data()));
  }
  std::vector<std::function<void()>> forms;
  for (size_t c = 0; c < candidates.size(); ++c) {
    Plan::KernelCall call;
    call.entry = entries[c];
    call.rows = candidates[c].rows(k);
    call.grain = candidates[c].grain;
    call.threads = candidates[c].threads;
    forms.emplace_back([call, &pointers] {
      if (call.rows > 0) call.run(pointers.data());
    });
  }
  return median_times(forms);
}

class ProgressLine {
public:
  explicit ProgressLine(bool on) : on_(on) {}
  ~ProgressLine() {
    if (on_ && shown_) std::fprintf(stderr, "\r%*s\r", 72, "");
  }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void show(size_t done, size_t total, const Kernel& k, size_t candidates) {
    if (!on_) return;
    shown_ = true;
    std::fprintf(stderr, "\rautotuning kernel %zu/%zu (%s, %zu candidates)%10s", done, total,
                 k.name.c_str(), candidates, "");
    std::fflush(stderr);
  }

private:
  bool on_, shown_ = false;
};

} // namespace

std::vector<double> median_times(std::span<const std::function<void()>> forms) {
  Clock::time_point t0 = Clock::now();
  for (const std::function<void()>& f : forms)
    f(); // warm-up: first touch, caches
  const double each = ms_since(t0) / static_cast<double>(std::max<size_t>(forms.size(), 1));
  const int reps =
      static_cast<int>(std::clamp(std::ceil(kSampleMs / std::max(each, 1e-6)), 1.0, 1000.0));
  std::vector<std::vector<double>> samples(forms.size());
  for (int s = 0; s < kSamples; ++s)
    for (size_t f = 0; f < forms.size(); ++f) {
      t0 = Clock::now();
      for (int r = 0; r < reps; ++r)
        forms[f]();
      samples[f].push_back(ms_since(t0) / reps);
    }
  std::vector<double> median;
  for (std::vector<double>& v : samples) {
    std::sort(v.begin(), v.end());
    median.push_back(v[v.size() / 2]);
  }
  return median;
}

std::string AutotuneResult::str() const {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%lld kernels tuned (%lld candidates timed), %lld from the database, %lld left "
                "to the heuristic, %lld changed, %.1f ms",
                static_cast<long long>(tuned), static_cast<long long>(timings),
                static_cast<long long>(database_hits), static_cast<long long>(left),
                static_cast<long long>(changed), ms);
  return buf;
}

std::string autotune_key(const Target& target, const Kernel& k, const Schedule& h) {
  Kernel unnamed = k; // the same kernel in another graph has another name
  unnamed.name = "kernel";
  return cache_key_header("autotune") + target.identity() + "heuristic " + h.str() + "\n" +
         unnamed.str();
}

std::vector<Schedule> schedule_candidates(const Kernel& k, const Schedule& h) {
  std::vector<Schedule> out;
  auto add = [&](Schedule s) {
    if (!check_schedule(s, k)) return;
    for (const Schedule& o : out)
      if (o.str() == s.str()) return;
    out.push_back(s);
  };
  add(h);
  const int64_t rows = h.rows(k);
  // Vector width: half and twice the heuristic's.
  if (h.vector != Schedule::Vector::none) {
    for (int lanes : {h.lanes / 2, h.lanes * 2}) {
      if (lanes < 2 || lanes > 16) continue;
      Schedule s = h;
      s.lanes = lanes;
      add(s);
    }
    Schedule scalar = h;
    scalar.vector = Schedule::Vector::none;
    scalar.lanes = 1;
    scalar.unroll = 1;
    add(scalar);
  }
  // The other vector loop, at the heuristic's width (or 8 lanes from scalar code).
  for (Schedule::Vector v : {Schedule::Vector::outer, Schedule::Vector::inner}) {
    if (v == h.vector) continue;
    Schedule s = h;
    s.vector = v;
    s.lanes = h.lanes > 1 ? h.lanes : 8;
    s.unroll = v == Schedule::Vector::inner ? std::max(h.unroll, 2) : 1;
    add(s);
  }
  // Accumulators of an inner vector loop.
  if (h.vector == Schedule::Vector::inner)
    for (int unroll : {1, 4, 8}) {
      Schedule s = h;
      s.unroll = unroll;
      add(s);
    }
  // Vectors per step of an outer vector loop over a reduction (a column sum's register
  // tile): the block grows to hold at least one step.
  if (h.vector == Schedule::Vector::outer && h.lanes > 1 && !k.inner.empty())
    for (int unroll : {2, 4, 8}) {
      Schedule s = h;
      s.unroll = unroll;
      const int64_t step = int64_t{h.lanes} * unroll;
      s.block =
          std::max(h.block, (std::min(h.block * unroll, k.outer.back()) + step - 1) / step * step);
      add(s);
    }
  // Register tiles of a contraction (a GEMM in reduction form): `jam` rows of o_{n-2} by
  // lanes x unroll points of o_{n-1}, in cache tiles of `tile` x `block` points.
  if (h.vector == Schedule::Vector::outer && h.lanes > 1 && shared_row_loads(k))
    for (auto [jam, unroll, tile, block] : {std::array<int64_t, 4>{4, 4, 64, 256},
                                            {6, 2, 48, 128},
                                            {8, 2, 64, 128},
                                            {4, 2, 32, 64}}) {
      Schedule s = h;
      s.jam = static_cast<int>(jam);
      s.unroll = static_cast<int>(unroll);
      s.tile = tile;
      s.block = std::min(block * h.lanes / 16, (k.outer.back() + h.lanes - 1) / h.lanes * h.lanes);
      add(s);
    }
  // Threads and chunks: one thread; chunks four times larger and smaller.
  if (rows > h.grain) {
    Schedule one = h;
    one.threads = 1;
    add(one);
  }
  for (int64_t grain : {h.grain * 4, h.grain / 4}) {
    if (grain < 1 || (grain >= rows && h.grain >= rows)) continue;
    Schedule s = h;
    s.grain = grain;
    add(s);
  }
  // Tiles for loads strided along the last outer dim and unit-stride along the one before (a
  // transpose): a row covers tile x block points, so the lines a tile loads are reused.
  if (transposed_loads(k))
    for (auto [tile, block] : {std::pair<int64_t, int64_t>{16, 256}, {32, 128}, {64, 64}}) {
      Schedule s = h;
      s.tile = std::max<int64_t>(tile, h.jam);
      s.block = std::min<int64_t>(block, std::max<int64_t>(k.outer.back(), 1));
      add(s);
    }
  // Blocks of a one-dimensional kernel's last dim.
  if (h.block > 1)
    for (int64_t block : {h.block * 4, h.block / 4}) {
      if (block < 1) continue;
      Schedule s = h;
      s.block = block;
      add(s);
    }
  return out;
}

bool timeable(const Kernel& k) {
  for (const ir::kernel::Instr& in : k.instrs)
    if (in.kind == ir::kernel::Instr::Kind::op && !is_floating(in.dtype) &&
        (in.op == Op::div || in.op == Op::floor_divide || in.op == Op::remainder))
      return false;
  return true;
}

AutotuneResult autotune(const Target& target, std::span<const Kernel> kernels,
                        std::span<const Schedule> heuristic, const AutotuneOptions& options) {
  const Clock::time_point start = Clock::now();
  const DiskCache& db = options.database ? *options.database : DiskCache::global();
  AutotuneResult r;
  r.schedules.assign(heuristic.begin(), heuristic.end());
  std::vector<std::string> keys(kernels.size());
  std::vector<size_t> todo; // kernels to tune: database misses that can be timed
  for (size_t i = 0; i < kernels.size(); ++i) {
    keys[i] = autotune_key(target, kernels[i], heuristic[i]);
    if (std::optional<Schedule> s = database_schedule(db, keys[i], kernels[i])) {
      r.schedules[i] = *s;
      ++r.database_hits;
      if (options.log)
        std::cerr << "[kiln autotune] " << describe(kernels[i])
                  << ": from the database: " << s->str() << "\n";
    } else if (timeable(kernels[i])) {
      todo.push_back(i);
    } else {
      ++r.left;
      if (options.log)
        std::cerr << "[kiln autotune] " << describe(kernels[i])
                  << ": divides integers (not timed on zeros): the heuristic's "
                  << heuristic[i].str() << "\n";
    }
  }
  ProgressLine progress(options.progress && !todo.empty());
  size_t done = 0;
  for (size_t b = 0; b < todo.size(); b += kBatch) {
    const std::span<const size_t> batch(todo.data() + b, std::min(kBatch, todo.size() - b));
    if (ms_since(start) >= options.budget_ms) {
      r.left += static_cast<int64_t>(todo.size() - b);
      if (options.log)
        std::cerr << "[kiln autotune] budget of " << options.budget_ms
                  << " ms spent: " << todo.size() - b
                  << " kernels keep the heuristic's schedules\n";
      break;
    }
    // Every candidate of the batch, renamed apart, in one compile.
    std::vector<Kernel> variants;
    std::vector<Schedule> schedules;
    std::vector<std::pair<size_t, size_t>> range; // per kernel of the batch: first, count
    for (size_t i : batch) {
      std::vector<Schedule> cands = schedule_candidates(kernels[i], heuristic[i]);
      range.emplace_back(variants.size(), cands.size());
      for (size_t c = 0; c < cands.size(); ++c) {
        Kernel v = kernels[i];
        v.name = kernels[i].name + "_at" + std::to_string(c);
        variants.push_back(std::move(v));
        schedules.push_back(cands[c]);
      }
    }
    Expected<std::string> object = target.compile(variants, schedules);
    Expected<LoadedCode> code =
        object ? target.load(*object, variants) : Expected<LoadedCode>(object.error());
    if (!code) {
      r.left += static_cast<int64_t>(batch.size());
      if (options.log)
        std::cerr << "[kiln autotune] the candidates did not compile (" << code.error().message()
                  << "): the heuristic's schedules\n";
      continue;
    }
    for (size_t j = 0; j < batch.size(); ++j) {
      const size_t i = batch[j];
      const auto [first, count] = range[j];
      progress.show(++done, todo.size(), kernels[i], count);
      if (ms_since(start) >= options.budget_ms) {
        ++r.left;
        continue;
      }
      const std::span<const Schedule> cands(schedules.data() + first, count);
      const std::vector<double> ms = time_candidates(
          kernels[i], cands, std::span<const KernelEntry>(code->entries.data() + first, count));
      r.timings += static_cast<int64_t>(count);
      size_t best = 0;
      for (size_t c = 1; c < count; ++c)
        if (ms[c] < ms[best]) best = c;
      if (best != 0 && ms[best] > ms[0] * (1 - kNoiseGuard)) best = 0; // within noise
      r.schedules[i] = cands[best];
      ++r.tuned;
      db.store(keys[i], cands[best].str());
      if (options.log) {
        std::cerr << "[kiln autotune] " << describe(kernels[i]) << ":\n";
        for (size_t c = 0; c < count; ++c) {
          char line[48];
          std::snprintf(line, sizeof line, "  %12.3f us  ", ms[c] * 1000);
          std::cerr << line << cands[c].str() << (c == 0 ? "  (heuristic)" : "")
                    << (c == best ? "  <- chosen" : "") << "\n";
        }
      }
    }
  }
  for (size_t i = 0; i < kernels.size(); ++i)
    if (r.schedules[i].str() != heuristic[i].str()) ++r.changed;
  r.ms = ms_since(start);
  return r;
}

} // namespace kiln::codegen
