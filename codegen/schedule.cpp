// The schedule heuristic.
#include "codegen/schedule.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "runtime/error.h"
#include "runtime/parallel.h"

namespace kiln::codegen {

using ir::kernel::Instr;
using ir::kernel::Kernel;

int64_t Schedule::rows(const Kernel& k) const {
  if (!k.parts.empty()) {
    // A foreach kernel's rows: its parts', one after another.
    int64_t r = 0;
    for (const ir::kernel::Part& p : k.parts)
      r += rows(p.kernel);
    return r;
  }
  if (k.outer.empty()) return 1;
  const size_t n = k.outer.size();
  int64_t r = 1;
  for (size_t d = 0; d + 1 < n; ++d)
    r *= d + 2 == n ? (k.outer[d] + tile - 1) / tile : k.outer[d];
  int64_t last = k.outer.back();
  return r * ((last + block - 1) / block);
}

std::string Schedule::str() const {
  const char* v = vector == Vector::none ? "none" : vector == Vector::outer ? "outer" : "inner";
  std::string s = std::string("vector=") + v + " lanes=" + std::to_string(lanes) +
                  " unroll=" + std::to_string(unroll) + " block=" + std::to_string(block) +
                  " grain=" + std::to_string(grain);
  if (tile != 1) s += " tile=" + std::to_string(tile);
  if (jam != 1) s += " jam=" + std::to_string(jam);
  if (threads > 0) s += " threads=" + std::to_string(threads);
  if (stream) s += " stream=1";
  return s;
}

Expected<Schedule> parse_schedule(std::string_view text) {
  Schedule s;
  const std::string whole(text);
  auto bad = [&](std::string_view item, const std::string& why) {
    return Error::without_location("schedule '" + whole + "': '" + std::string(item) + "' " + why);
  };
  std::vector<std::string_view> seen;
  while (!text.empty()) {
    const size_t space = text.find_first_of(" \t");
    const std::string_view item = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return bad(item, "is not KEY=VALUE");
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return bad(item, "repeats a key");
    seen.push_back(key);
    if (key == "vector") {
      if (value == "none")
        s.vector = Schedule::Vector::none;
      else if (value == "outer")
        s.vector = Schedule::Vector::outer;
      else if (value == "inner")
        s.vector = Schedule::Vector::inner;
      else
        return bad(item, "is not none, outer or inner");
      continue;
    }
    int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < 0 || n > (int64_t{1} << 40))
      return bad(item, "does not give a number in [0, 2^40]");
    if (key == "lanes") {
      if (n < 1 || n > 16 || (n & (n - 1)) != 0) return bad(item, "is not 1, 2, 4, 8 or 16");
      s.lanes = static_cast<int>(n);
    } else if (key == "unroll" || key == "jam") {
      if (n < 1 || n > 16) return bad(item, "is not in 1..16");
      (key == "unroll" ? s.unroll : s.jam) = static_cast<int>(n);
    } else if (key == "block" || key == "grain" || key == "tile") {
      if (n < 1) return bad(item, "is not at least 1");
      (key == "block" ? s.block : key == "grain" ? s.grain : s.tile) = n;
    } else if (key == "threads") {
      if (n > 1024) return bad(item, "is more than 1024");
      s.threads = static_cast<int>(n);
    } else if (key == "stream") {
      if (n > 1) return bad(item, "is not 0 or 1");
      s.stream = n == 1;
    } else {
      return bad(item, "has an unknown key (keys: vector, lanes, unroll, block, grain, tile, jam, "
                       "threads, stream)");
    }
  }
  return s;
}

Expected<void> check_schedule(const Schedule& s, const Kernel& k) {
  if (s.tile != 1 && k.outer.size() < 2)
    return Error::without_location("schedule " + s.str() + ": a tile needs two outer " +
                                   "variables, and kernel " + k.name + " has " +
                                   std::to_string(k.outer.size()));
  if (s.jam > s.tile)
    return Error::without_location("schedule " + s.str() + ": a jam of " + std::to_string(s.jam) +
                                   " needs a tile at least as large");
  if (s.vector == Schedule::Vector::outer && k.outer.empty())
    return Error::without_location("schedule " + s.str() + ": vector=outer needs an outer " +
                                   "variable, and kernel " + k.name + " has none");
  if (s.vector != Schedule::Vector::inner) return {};
  if (k.inner.empty())
    return Error::without_location("schedule " + s.str() + ": vector=inner needs an inner " +
                                   "variable, and kernel " + k.name + " has none");
  for (const Instr& in : k.instrs)
    if (in.kind == Instr::Kind::reduce && op_traits(in.op).arg)
      return Error::without_location("schedule " + s.str() + ": vector=inner cannot run the " +
                                     std::string(op_name(in.op)) + " of kernel " + k.name);
  return {};
}

std::string ScheduleOverride::str() const {
  std::string s;
  auto field = [&](const char* name, int64_t v) {
    if (v != 0) s += (s.empty() ? "" : ",") + std::string(name) + "=" + std::to_string(v);
  };
  field("lanes", lanes);
  field("threads", threads);
  field("grain", grain);
  return s;
}

ScheduleOverride parse_schedule_override(std::string_view text) {
  ScheduleOverride o;
  const std::string_view whole = text;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    KILN_CHECK(eq != std::string_view::npos && ec == std::errc() &&
                   end == value.data() + value.size() && n > 0 && n <= (int64_t{1} << 40),
               "schedule override '", whole, "': '", item,
               "' is not KEY=N with a positive N (keys: lanes, threads, grain)");
    if (key == "lanes") {
      KILN_CHECK(n <= 16 && (n & (n - 1)) == 0, "schedule override '", whole,
                 "': lanes must be 1, 2, 4, 8 or 16, got ", n);
      o.lanes = static_cast<int>(n);
    } else if (key == "threads") {
      KILN_CHECK(n <= 1024, "schedule override '", whole, "': threads must be at most 1024");
      o.threads = static_cast<int>(n);
    } else if (key == "grain") {
      o.grain = n;
    } else {
      KILN_CHECK(false, "schedule override '", whole, "': unknown key '", key,
                 "' (keys: lanes, threads, grain)");
    }
  }
  return o;
}

std::string schedule_override_env() {
  const char* env = std::getenv("KILN_SCHEDULE");
  return env != nullptr ? env : "";
}

bool unit_stride_inner_loads(const Kernel& k) {
  if (k.inner.empty()) return false;
  const int last = k.num_vars() - 1;
  int unit = 0, other = 0;
  for (const auto& l : k.loops)
    for (int id : l.body) {
      const Instr& in = k.instrs[static_cast<size_t>(id)];
      if (in.kind != Instr::Kind::load || !in.index.uses(last)) continue;
      (in.index.affine_in(last) && in.index.coefficient(last) == 1 ? unit : other)++;
    }
  return unit > 0 && other == 0;
}

bool transposed_loads(const Kernel& k) {
  const int n = static_cast<int>(k.outer.size());
  if (n < 2) return false;
  for (const Instr& in : k.instrs)
    if (in.kind == Instr::Kind::load && in.index.uses(n - 1) && in.index.affine_in(n - 2) &&
        in.index.coefficient(n - 2) == 1 &&
        !(in.index.affine_in(n - 1) && in.index.coefficient(n - 1) == 1))
      return true;
  return false;
}

bool shared_row_loads(const Kernel& k) {
  const int n = static_cast<int>(k.outer.size());
  if (n < 2) return false;
  bool shared = false, own = false;
  for (const ir::kernel::Loop& l : k.loops)
    for (int id : l.body) {
      const Instr& in = k.instrs[static_cast<size_t>(id)];
      if (in.kind != Instr::Kind::load) continue;
      if (in.index.uses(n - 2))
        own = true;
      else if (in.index.uses(n - 1) && in.index.affine_in(n - 1) &&
               in.index.coefficient(n - 1) == 1)
        shared = true;
    }
  return shared && own;
}

namespace {

/// Whether a load inside an inner loop is unit-stride along the last outer variable: the
/// kernel reduces over a dim ahead of its outer points' (a column sum).
bool leading_reduction(const Kernel& k) {
  const int last = static_cast<int>(k.outer.size()) - 1;
  for (const auto& l : k.loops)
    for (int id : l.body) {
      const Instr& in = k.instrs[static_cast<size_t>(id)];
      if (in.kind == Instr::Kind::load && in.index.uses(last) && in.index.affine_in(last) &&
          in.index.coefficient(last) == 1)
        return true;
    }
  return false;
}

} // namespace

Schedule choose_schedule(const Kernel& k, int vector_bytes, const ScheduleOverride& fixed) {
  if (fixed.lanes > 0) vector_bytes = fixed.lanes * 4;
  Schedule s;
  int64_t widest = 4;
  bool arg_reduction = false;
  for (const Instr& in : k.instrs) {
    // Constants are splat once; argmax indices are i64 beside the values they track.
    if (in.kind != Instr::Kind::constant && (in.dtype == DType::f64 || in.dtype == DType::i64))
      widest = 8;
    if (in.kind == Instr::Kind::reduce && op_traits(in.op).arg) arg_reduction = true;
  }
  int lanes = static_cast<int>(std::clamp<int64_t>(vector_bytes / widest, 1, 16));
  int64_t inner = 1;
  for (int64_t e : k.inner)
    inner *= e;
  if (lanes < 2) {
    // One lane is scalar code (an override of 1 f32 lane, or 2 over f64 values).
  } else if (!k.inner.empty()) {
    // Inner vector code pays when the loads along the last inner variable are unit-stride.
    if (!arg_reduction && unit_stride_inner_loads(k) && k.inner.back() >= lanes) {
      s.vector = Schedule::Vector::inner;
      s.lanes = lanes;
      // Up to 4 vectors per step while the scalar tail (under lanes x unroll points) stays
      // small beside the row.
      while (s.unroll < 4 && k.inner.back() >= int64_t{8} * lanes * s.unroll)
        s.unroll *= 2;
    } else if (!k.outer.empty() && k.outer.back() >= lanes) {
      s.vector = Schedule::Vector::outer;
      s.lanes = lanes;
    }
  } else if (!k.outer.empty() && k.outer.back() >= 2) {
    s.vector = Schedule::Vector::outer;
    s.lanes = lanes;
  }
  if (s.vector == Schedule::Vector::outer && !k.outer.empty()) {
    int64_t last = k.outer.back();
    int64_t b = std::max<int64_t>(4096 / std::max<int64_t>(inner, 1), s.lanes);
    b = (b + s.lanes - 1) / s.lanes * s.lanes;
    s.block = std::min(last, b);
    // A reduction over a leading dim (a column sum) reads a vector of neighbouring outer
    // points per inner point, a stride apart: 4 (or 2) such vectors per step make each
    // read a run of lines, as long as the rows stay many enough to share among threads.
    if (!k.inner.empty() && leading_reduction(k))
      for (int unroll : {4, 2}) {
        const int64_t step = int64_t{s.lanes} * unroll;
        Schedule t = s;
        t.unroll = unroll;
        t.block = std::max(s.block, step);
        if (last < step || t.rows(k) < std::min<int64_t>(s.rows(k), 16)) continue;
        s = t;
        break;
      }
    // A contraction (a GEMM in reduction form) gets a register tile: 4 rows of o_{n-2} by 2
    // vectors of o_{n-1} (8 accumulators, each B vector loaded once for 4 rows), in cache
    // tiles of 32 x 64 f32 points (a B panel of 64 columns serves 8 jammed steps).
    if (shared_row_loads(k) && k.outer[k.outer.size() - 2] >= 4 && last >= 2 * int64_t{s.lanes}) {
      Schedule t = s;
      t.jam = 4;
      t.unroll = 2;
      t.tile = 32;
      t.block = std::min<int64_t>(4 * s.lanes, (last + s.lanes - 1) / s.lanes * s.lanes);
      s = t;
    }
  }
  // A pointwise kernel that reads a transpose: each row a tile of 64 x 64 points, so the
  // lines one column of the tile brings in serve the next 15 columns (a 4096x4096 f32
  // transpose: 103.6 ms with rows along the last dim, 11.9 ms tiled).
  if (s.vector == Schedule::Vector::outer && k.inner.empty() && transposed_loads(k) &&
      k.outer[k.outer.size() - 2] >= 8 && k.outer.back() >= 2 * int64_t{s.lanes}) {
    s.tile = 64;
    s.block = std::min<int64_t>(64, (k.outer.back() + s.lanes - 1) / s.lanes * s.lanes);
  }
  int64_t out_bytes = 0;
  for (const auto& b : k.buffers)
    if (b.output) out_bytes += b.extent * itemsize(b.dtype);
  s.stream = s.vector != Schedule::Vector::none && out_bytes >= kStreamBytes;
  int64_t work = s.tile * s.block * std::max<int64_t>(inner, 1);
  s.grain = std::max<int64_t>(1, (kParallelGrain + work - 1) / std::max<int64_t>(work, 1));
  if (fixed.grain > 0) s.grain = fixed.grain;
  s.threads = fixed.threads;
  return s;
}

} // namespace kiln::codegen
