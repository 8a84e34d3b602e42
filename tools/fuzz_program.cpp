// Programs of `kiln fuzz`: text form, input data from a seed, and running one.
#include "tools/fuzz_program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "tools/fuzz_rules.h"

namespace kiln::tools {
namespace {

std::string ref_text(ValueRef r) {
  std::string s(1, r.input ? 'i' : 's');
  s += std::to_string(r.index);
  return s;
}

template <typename T> std::string list_text(const std::vector<T>& v, auto&& fmt) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += ',';
    s += fmt(v[k]);
  }
  s += ']';
  return s;
}

std::string sizes_text(const Shape& s) {
  return list_text(s, [](int64_t d) { return std::to_string(d); });
}

/// Splits "[a,b,c]" into its items.
std::vector<std::string> list_items(const std::string& text, int line) {
  KILN_CHECK(text.size() >= 2 && text.front() == '[' && text.back() == ']', "fuzz program line ",
             line, ": expected a [list], got '", text, "'");
  std::vector<std::string> items;
  std::stringstream ss(text.substr(1, text.size() - 2));
  for (std::string item; std::getline(ss, item, ',');)
    items.push_back(item);
  return items;
}

Shape parse_ints(const std::string& text, int line) {
  Shape out;
  for (const std::string& s : list_items(text, line))
    out.push_back(std::stoll(s));
  return out;
}

ValueRef parse_ref(const std::string& s, int line) {
  KILN_CHECK(s.size() >= 2 && (s[0] == 'i' || s[0] == 's'), "fuzz program line ", line,
             ": expected a value (i3, s5), got '", s, "'");
  return {s[0] == 'i', std::stoi(s.substr(1))};
}

std::vector<ValueRef> parse_refs(const std::string& text, int line) {
  std::vector<ValueRef> out;
  for (const std::string& s : list_items(text, line))
    out.push_back(parse_ref(s, line));
  return out;
}

DType parse_dtype_or_throw(const std::string& s, int line) {
  DType t;
  KILN_CHECK(parse_dtype(s, t), "fuzz program line ", line, ": unknown dtype '", s, "'");
  return t;
}

/// One element of make_input's floating data.
double draw_float(std::mt19937_64& rng, bool specials) {
  if (specials && std::uniform_int_distribution<int>(0, 7)(rng) == 0) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const double kSpecials[] = {std::numeric_limits<double>::quiet_NaN(), kInf, -kInf, -0.0, 0.0};
    return kSpecials[std::uniform_int_distribution<int>(0, 4)(rng)];
  }
  if (std::uniform_int_distribution<int>(0, 3)(rng) == 0)
    return std::uniform_real_distribution<double>(-3, 3)(rng);
  return static_cast<double>(std::uniform_int_distribution<int>(-32, 32)(rng)) / 8;
}

} // namespace

std::string program_text(const Program& p) {
  std::ostringstream os;
  os << "kiln-fuzz-program seed " << p.input_seed << " specials " << (p.specials ? 1 : 0) << "\n";
  for (const ProgramInput& in : p.inputs)
    os << "input " << dtype_name(in.dtype) << " " << sizes_text(in.sizes) << " "
       << static_cast<int>(in.layout) << "\n";
  for (const Step& s : p.steps) {
    char number[64];
    std::snprintf(number, sizeof number, "%.17g", s.number);
    os << "step " << s.rule << " " << list_text(s.operands, ref_text) << " " << sizes_text(s.ints)
       << " " << number << " " << dtype_name(s.dtype) << " " << sizes_text(s.sizes) << "\n";
  }
  os << "output " << list_text(p.outputs, ref_text) << "\n";
  return os.str();
}

Program parse_program(std::string_view text) {
  Program p;
  std::istringstream is{std::string(text)};
  int line = 0;
  for (std::string l; std::getline(is, l);) {
    ++line;
    std::istringstream ls(l);
    std::string kind;
    ls >> kind;
    if (kind.empty()) continue;
    if (kind == "kiln-fuzz-program") {
      std::string seed_word, specials_word;
      int specials = 0;
      ls >> seed_word >> p.input_seed >> specials_word >> specials;
      p.specials = specials != 0;
    } else if (kind == "input") {
      std::string dtype, sizes;
      int layout = 0;
      ls >> dtype >> sizes >> layout;
      KILN_CHECK(layout >= 0 && layout <= 2, "fuzz program line ", line, ": bad layout ", layout);
      p.inputs.push_back({parse_ints(sizes, line), parse_dtype_or_throw(dtype, line),
                          static_cast<Layout>(layout)});
    } else if (kind == "step") {
      Step s;
      std::string operands, ints, dtype, sizes;
      ls >> s.rule >> operands >> ints >> s.number >> dtype >> sizes;
      KILN_CHECK(find_rule(s.rule), "fuzz program line ", line, ": unknown rule '", s.rule, "'");
      s.operands = parse_refs(operands, line);
      s.ints = parse_ints(ints, line);
      s.dtype = parse_dtype_or_throw(dtype, line);
      s.sizes = parse_ints(sizes, line);
      p.steps.push_back(std::move(s));
    } else if (kind == "output") {
      std::string refs;
      ls >> refs;
      p.outputs = parse_refs(refs, line);
    } else {
      KILN_CHECK(false, "fuzz program line ", line, ": unknown item '", kind, "'");
    }
  }
  return p;
}

Tensor make_input(IntList sizes, IntList strides, DType dtype, uint64_t seed, size_t index,
                  bool specials) {
  Shape full_strides =
      strides.empty() ? contiguous_strides(sizes) : Shape(strides.begin(), strides.end());
  // The storage a strided layout spans (negative strides start from the end).
  int64_t lo = 0, hi = 0;
  bool empty = false;
  for (size_t k = 0; k < sizes.size(); ++k) {
    empty = empty || sizes[k] == 0;
    int64_t reach = (sizes[k] - 1) * full_strides[k];
    (reach < 0 ? lo : hi) += reach;
  }
  int64_t span = empty ? 0 : hi - lo + 1;
  std::mt19937_64 rng(seed * 1000003u + index);
  std::vector<double> values(static_cast<size_t>(span));
  for (double& v : values) {
    if (is_floating(dtype))
      v = draw_float(rng, specials);
    else if (dtype == DType::bool_)
      v = static_cast<double>(rng() & 1);
    else
      v = static_cast<double>(std::uniform_int_distribution<int>(-8, 8)(rng));
  }
  Tensor base = tensor(values, {span}).to(dtype);
  if (strides.empty()) return base.view(sizes);
  return make_view(base, sizes, full_strides, -lo);
}

Shape layout_strides(IntList sizes, Layout layout) {
  if (layout == Layout::contiguous) return {};
  if (layout == Layout::stepped) {
    Shape strides = contiguous_strides(sizes);
    for (int64_t& s : strides)
      s *= 2;
    return strides;
  }
  // Reversed: the first dim is the fastest.
  Shape strides(sizes.size());
  int64_t step = 1;
  for (size_t k = 0; k < sizes.size(); ++k) {
    strides[k] = step;
    step *= std::max<int64_t>(sizes[k], 1);
  }
  return strides;
}

std::vector<Tensor> make_inputs(const Program& p) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const ProgramInput& in = p.inputs[k];
    out.push_back(make_input(in.sizes, layout_strides(in.sizes, in.layout), in.dtype, p.input_seed,
                             k, p.specials));
  }
  return out;
}

Tensor run_operand(const Tensor& t, RunMode mode, bool sums) {
  if (mode == RunMode::as_written || !is_floating(t.dtype())) return t;
  Tensor wide = t.dtype() == DType::f64 ? t : t.to(DType::f64);
  return mode == RunMode::magnitude && sums ? abs(wide) : wide;
}

std::vector<Tensor> run_program(const Program& p, std::span<const Tensor> inputs, RunMode mode) {
  KILN_CHECK(inputs.size() == p.inputs.size(), "fuzz program: expected ", p.inputs.size(),
             " inputs, got ", inputs.size());
  std::vector<Tensor> steps;
  auto value = [&](ValueRef r) -> const Tensor& {
    const size_t k = static_cast<size_t>(r.index);
    KILN_CHECK(r.index >= 0 && (r.input ? k < inputs.size() : k < steps.size()),
               "fuzz program: ", r.input ? "input " : "step ", r.index, " is not defined there");
    return r.input ? inputs[k] : steps[k];
  };
  for (const Step& s : p.steps) {
    const Rule* rule = find_rule(s.rule);
    KILN_CHECK(rule != nullptr, "fuzz program: unknown rule '", s.rule, "'");
    std::vector<Tensor> x;
    // An in-place step's target is written as it is: widening it would write a copy.
    for (ValueRef r : s.operands)
      x.push_back(rule->traits.in_place && x.empty()
                      ? value(r)
                      : run_operand(value(r), mode, rule->traits.sums));
    steps.push_back(rule->apply(x, s));
  }
  std::vector<Tensor> out;
  for (ValueRef r : p.outputs)
    out.push_back(value(r));
  return out;
}

bool has_reordered_sums(const Program& p) {
  for (const Step& s : p.steps)
    if (const Rule* r = find_rule(s.rule); r && r->traits.sums) return true;
  return false;
}

double longest_sum(const Program& p) {
  auto numel = [](const Shape& s) {
    double n = 1;
    for (int64_t d : s)
      n *= static_cast<double>(d);
    return n;
  };
  auto sizes = [&](ValueRef r) -> const Shape& {
    return r.input ? p.inputs[static_cast<size_t>(r.index)].sizes
                   : p.steps[static_cast<size_t>(r.index)].sizes;
  };
  double longest = 1;
  for (const Step& s : p.steps) {
    const Rule* r = find_rule(s.rule);
    if (!r || !r->traits.sums || s.operands.empty()) continue;
    const Shape& in = sizes(s.operands[0]);
    double out = std::max(numel(s.sizes), 1.0);
    longest = std::max(longest, numel(in) / out);
    if (!in.empty()) longest = std::max(longest, static_cast<double>(in.back()));
  }
  return longest;
}

} // namespace kiln::tools
