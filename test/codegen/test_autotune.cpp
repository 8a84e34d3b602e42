// The schedule autotuner (codegen/autotune.h): its candidates are valid and distinct, each
// computes what the heuristic's schedule computes (by the f64 reference rule: the same graph
// in f64 is the reference), its database answers a second search without timing and treats
// corrupt or foreign entries as misses, and a spent budget leaves the heuristic's schedules.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "codegen/autotune.h"
#include "codegen/cache.h"
#include "codegen/counting_target.h"
#include "codegen/graph_choices.h"
#include "codegen/lower.h"
#include "codegen/lower_group.h"
#include "frontend/frontend_testing.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/fusion.h"
#include "temp_dir.h"

using namespace kiln;
using codegen::Schedule;
using ir::kernel::Kernel;

namespace {

// Row reductions (softmax, a variance), an argmax, a reduction over the leading dim,
// transposes, a GEMM in reduction form with an epilogue and a broadcast pointwise chain: each kind
// of kernel the candidates vary differently. `DT` is replaced by the dtype.
constexpr const char* kPrograms[] = {
    R"(graph @softmax {
  %x : DT[37,67] = input "x"
  %m : DT[37,1] = amax(%x) {dims = [1], keepdim = true}
  %d : DT[37,67] = sub(%x, %m)
  %e : DT[37,67] = exp(%d)
  %s : DT[37,1] = sum(%e) {dims = [1], keepdim = true, dtype = DT}
  %p : DT[37,67] = div(%e, %s)
  return %p
})",
    R"(graph @variance {
  %x : DT[9,300] = input "x"
  %s : DT[9,1] = sum(%x) {dims = [1], keepdim = true, dtype = DT}
  %n : DT[] = full() {sizes = [], value = 300.0, dtype = DT}
  %m : DT[9,1] = div(%s, %n)
  %d : DT[9,300] = sub(%x, %m)
  %q : DT[9,300] = mul(%d, %d)
  %v : DT[9] = sum(%q) {dims = [1], keepdim = false, dtype = DT}
  return %v
})",
    R"(graph @argmax {
  %x : DT[13,70] = input "x"
  %i : i64[13] = argmax(%x) {dim = 1, keepdim = false}
  return %i
})",
    R"(graph @columns {
  %x : DT[129,83] = input "x"
  %s : DT[83] = sum(%x) {dims = [0], keepdim = false, dtype = DT}
  return %s
})",
    R"(graph @transpose {
  %x : DT[45,67] = input "x"
  %t : DT[67,45]{1,67} = permute(%x) {dims = [1, 0]}
  %y : DT[67,45] = tanh(%t)
  return %y
})",
    R"(graph @batched_transpose {
  %x : DT[3,29,33] = input "x"
  %t : DT[3,33,29]{957,1,33} = permute(%x) {dims = [0, 2, 1]}
  %s : DT[3,33,1] = sum(%t) {dims = [2], keepdim = true, dtype = DT}
  %y : DT[3,33,29] = mul(%t, %s)
  return %y
})",
    R"(graph @gemm_bias_relu {
  %a : DT[37,29] = input "a"
  %b : DT[29,83] = input "b"
  %c : DT[83] = input "c"
  %a3 : DT[37,29,1] = view(%a) {sizes = [37, 29, 1]}
  %b3 : DT[1,29,83] = view(%b) {sizes = [1, 29, 83]}
  %p : DT[37,29,83] = mul(%a3, %b3)
  %s : DT[37,83] = sum(%p) {dims = [1], keepdim = false, dtype = DT}
  %y : DT[37,83] = add(%s, %c)
  %r : DT[37,83] = relu(%y)
  return %r
})",
    R"(graph @pointwise {
  %x : DT[3,5,129] = input "x"
  %y : DT[5,1] = input "y"
  %a : DT[3,5,129] = mul(%x, %y)
  %b : DT[3,5,129] = tanh(%a)
  %c : DT[3,5,129] = add(%b, %x)
  return %c
})",
};

std::unique_ptr<ir::Graph> parse(const std::string& text) {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(text);
  INFO((g ? std::string() : g.error().message()));
  REQUIRE(g);
  return std::move(*g);
}

void require_valid(const ir::Graph& g) {
  Expected<void> ok = ir::verify(g);
  INFO((ok ? std::string() : ok.error().message()));
  REQUIRE(ok);
}

std::vector<Kernel> kernels_of(std::string text, const char* dtype) {
  for (size_t p = text.find("DT"); p != std::string::npos; p = text.find("DT", p))
    text.replace(p, 2, dtype);
  const std::unique_ptr<ir::Graph> g = parse(text); // the fusion points into it
  passes::FusionResult fusion = passes::fuse(*g);
  std::vector<Kernel> out;
  for (const passes::FusionGroup& group : fusion.groups) {
    std::string name = "k"; // (a concatenation here trips GCC 12's -Wstringop-overflow)
    name += std::to_string(out.size());
    out.push_back(codegen::lower_group(group, name).kernel);
  }
  return out;
}

/// Deterministic inputs in [-4, 4] for every input buffer of k (in its dtype), as tensors.
std::vector<Tensor> inputs_of(const Kernel& k) {
  std::vector<Tensor> v;
  manual_seed(7);
  for (const ir::kernel::Buffer& b : k.buffers)
    v.push_back(b.output ? Tensor() : (rand({std::max<int64_t>(b.extent, 1)}) * 8 - 4).to(b.dtype));
  return v;
}

/// Runs k's entry under schedule s on the inputs (converted to k's dtypes) and returns its
/// outputs.
std::vector<Tensor> run(const Kernel& k, KernelEntry entry, const Schedule& s,
                        const std::vector<Tensor>& inputs) {
  std::vector<Tensor> buffers;
  std::vector<char*> pointers;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const ir::kernel::Buffer& buf = k.buffers[b];
    buffers.push_back(buf.output ? zeros({std::max<int64_t>(buf.extent, 1)}, buf.dtype)
                                 : inputs[b].to(buf.dtype).contiguous());
    pointers.push_back(static_cast<char*>(buffers.back().raw_data()));
  }
  Plan::KernelCall call;
  call.entry = entry;
  call.rows = s.rows(k);
  call.grain = s.grain;
  call.threads = s.threads;
  call.run(pointers.data());
  std::vector<Tensor> out;
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].output) out.push_back(buffers[b]);
  return out;
}

const codegen::Target& host() { return codegen::cpu::jit_target(); }

} // namespace

TEST_CASE("autotune candidates are valid, distinct, the heuristic's first", "[autotune]") {
  bool tiled = false, jammed = false, outer_unrolled = false;
  for (const char* program : kPrograms)
    for (const Kernel& k : kernels_of(program, "f32")) {
      INFO(k.str());
      const Schedule h = codegen::choose_schedule(k, host().vector_bytes());
      std::vector<Schedule> c = codegen::schedule_candidates(k, h);
      REQUIRE(c.size() >= 2);
      REQUIRE(c.front().str() == h.str());
      for (size_t i = 0; i < c.size(); ++i) {
        REQUIRE(codegen::check_schedule(c[i], k));
        tiled = tiled || c[i].tile > 1;
        jammed = jammed || c[i].jam > 1;
        outer_unrolled =
            outer_unrolled || (c[i].vector == Schedule::Vector::outer && c[i].unroll > 1);
        for (size_t j = 0; j < i; ++j)
          REQUIRE(c[i].str() != c[j].str());
      }
    }
  REQUIRE(tiled);          // the transposes get tiled candidates
  REQUIRE(jammed);         // the GEMM register tiles
  REQUIRE(outer_unrolled); // the column sum several vectors per step
}

TEST_CASE("every autotune candidate computes what the heuristic's schedule computes",
          "[autotune][llvm]") {
  for (const char* program : kPrograms) {
    const std::vector<Kernel> f32 = kernels_of(program, "f32");
    const std::vector<Kernel> f64 = kernels_of(program, "f64");
    REQUIRE(f32.size() == f64.size());
    for (size_t i = 0; i < f32.size(); ++i) {
      const Kernel& k = f32[i];
      INFO(k.str());
      const std::vector<Tensor> in = inputs_of(k);
      // The reference: the same kernel in f64 under its own heuristic schedule.
      const Schedule h64 = codegen::choose_schedule(f64[i], host().vector_bytes());
      Expected<std::string> o64 = host().compile({&f64[i], 1}, {&h64, 1});
      REQUIRE(o64);
      Expected<codegen::LoadedCode> l64 = host().load(*o64, {&f64[i], 1});
      REQUIRE(l64);
      const std::vector<Tensor> reference = run(f64[i], l64->entries[0], h64, in);

      const Schedule h = codegen::choose_schedule(k, host().vector_bytes());
      const std::vector<Schedule> cands = codegen::schedule_candidates(k, h);
      std::vector<Kernel> variants(cands.size(), k);
      for (size_t c = 0; c < cands.size(); ++c) {
        variants[c].name += "_c";
        variants[c].name += std::to_string(c);
      }
      Expected<std::string> object = host().compile(variants, cands);
      REQUIRE(object);
      Expected<codegen::LoadedCode> code = host().load(*object, variants);
      REQUIRE(code);
      const std::vector<Tensor> heuristic = run(k, code->entries[0], cands[0], in);
      for (size_t c = 1; c < cands.size(); ++c) {
        INFO("candidate " << cands[c].str());
        const std::vector<Tensor> got = run(k, code->entries[c], cands[c], in);
        for (size_t o = 0; o < got.size(); ++o) {
          if (!is_floating(got[o].dtype())) {
            REQUIRE(std::memcmp(got[o].raw_data(), heuristic[o].raw_data(),
                                static_cast<size_t>(got[o].numel()) * got[o].itemsize()) == 0);
            continue;
          }
          KILN_REQUIRE_ACCURATE(got[o], heuristic[o], reference[o]);
        }
      }
    }
  }
}

TEST_CASE("streamed stores compute the bits plain stores do, on aligned and unaligned outputs",
          "[autotune][stream][llvm]") {
  for (const char* program : kPrograms)
    for (const Kernel& k : kernels_of(program, "f32")) {
      INFO(k.str());
      const std::vector<Tensor> in = inputs_of(k);
      Schedule plain = codegen::choose_schedule(k, host().vector_bytes());
      plain.stream = false;
      Schedule streamed = plain;
      streamed.stream = true;
      Kernel a = k, b = k;
      a.name += "_plain";
      b.name += "_stream";
      const std::vector<Kernel> both{a, b};
      const std::vector<Schedule> schedules{plain, streamed};
      Expected<std::string> object = host().compile(both, schedules);
      REQUIRE(object);
      Expected<codegen::LoadedCode> code = host().load(*object, both);
      REQUIRE(code);
      const std::vector<Tensor> want = run(k, code->entries[0], plain, in);
      // Outputs from a 64-byte aligned start (non-temporal stores), then from 4 bytes past
      // one (every vector store unaligned: the plain path).
      for (int64_t shift : {0, 1}) {
        INFO("output shifted by " << shift << " elements");
        std::vector<Tensor> buffers;
        std::vector<char*> pointers;
        for (size_t i = 0; i < k.buffers.size(); ++i) {
          const ir::kernel::Buffer& buf = k.buffers[i];
          buffers.push_back(buf.output
                                ? zeros({std::max<int64_t>(buf.extent, 1) + shift}, buf.dtype)
                                : in[i].to(buf.dtype).contiguous());
          pointers.push_back(static_cast<char*>(buffers.back().raw_data()) +
                             (buf.output ? shift * itemsize(buf.dtype) : 0));
        }
        Plan::KernelCall call;
        call.entry = code->entries[1];
        call.rows = streamed.rows(k);
        call.grain = streamed.grain;
        call.run(pointers.data());
        size_t o = 0;
        for (size_t i = 0; i < k.buffers.size(); ++i) {
          if (!k.buffers[i].output) continue;
          const Tensor got = buffers[i].slice(0, shift, shift + want[o].numel());
          REQUIRE(std::memcmp(got.contiguous().raw_data(), want[o].raw_data(),
                              static_cast<size_t>(want[o].numel()) * want[o].itemsize()) == 0);
          ++o;
        }
      }
    }
  // The heuristic streams only outputs of kStreamBytes or more.
  const std::vector<Kernel> small = kernels_of(kPrograms[0], "f32");
  CHECK_FALSE(codegen::choose_schedule(small[0], host().vector_bytes()).stream);
}

TEST_CASE("the autotune database answers a second search, and corrupt or foreign entries miss",
          "[autotune][llvm]") {
  kiln::testing::TempDir dir("kiln_autotune");
  codegen::DiskCache db(dir.dir);
  codegen::AutotuneOptions o;
  o.database = &db;
  std::vector<Kernel> kernels;
  for (const char* program : {kPrograms[0], kPrograms[4]})
    for (const Kernel& k : kernels_of(program, "f32")) {
      kernels.push_back(k);
      kernels.back().name += "_";
      kernels.back().name += std::to_string(kernels.size());
    }
  std::vector<Schedule> heuristic;
  for (const Kernel& k : kernels)
    heuristic.push_back(codegen::choose_schedule(k, host().vector_bytes()));

  codegen::AutotuneResult first = codegen::autotune(host(), kernels, heuristic, o);
  REQUIRE(first.tuned == static_cast<int64_t>(kernels.size()));
  REQUIRE(first.timings >= 2 * first.tuned);
  REQUIRE(first.database_hits == 0);
  REQUIRE(db.stats().entries == static_cast<int64_t>(kernels.size()));

  codegen::AutotuneResult second = codegen::autotune(host(), kernels, heuristic, o);
  REQUIRE(second.timings == 0);
  REQUIRE(second.database_hits == static_cast<int64_t>(kernels.size()));
  for (size_t i = 0; i < kernels.size(); ++i)
    REQUIRE(second.schedules[i].str() == first.schedules[i].str());

  // A corrupt entry (a schedule that does not parse) is a miss, tuned again and replaced.
  db.store(codegen::autotune_key(host(), kernels[0], heuristic[0]), "vector=sideways lanes=3");
  codegen::AutotuneResult third = codegen::autotune(host(), kernels, heuristic, o);
  REQUIRE(third.tuned == 1);
  REQUIRE(third.database_hits == static_cast<int64_t>(kernels.size()) - 1);
  REQUIRE(codegen::autotune(host(), kernels, heuristic, o).timings == 0);

  // Another target (another CPU or compiler: another identity) finds nothing of this one's.
  kiln::testing::CountingTarget other("elsewhere");
  codegen::AutotuneResult foreign = codegen::autotune(other, kernels, heuristic, o);
  REQUIRE(foreign.database_hits == 0);
  REQUIRE(foreign.tuned == static_cast<int64_t>(kernels.size()));
  REQUIRE(other.compiles == 1); // the candidates of every kernel in one compile
}

TEST_CASE("a spent autotune budget leaves the heuristic's schedules", "[autotune]") {
  kiln::testing::TempDir dir("kiln_autotune_budget");
  codegen::DiskCache db(dir.dir);
  codegen::AutotuneOptions o;
  o.database = &db;
  o.budget_ms = 0;
  std::vector<Kernel> kernels = kernels_of(kPrograms[0], "f32");
  std::vector<Schedule> heuristic;
  for (const Kernel& k : kernels)
    heuristic.push_back(codegen::choose_schedule(k, host().vector_bytes()));
  codegen::AutotuneResult r = codegen::autotune(host(), kernels, heuristic, o);
  REQUIRE(r.timings == 0);
  REQUIRE(r.tuned == 0);
  REQUIRE(r.left == static_cast<int64_t>(kernels.size()));
  REQUIRE(r.changed == 0);
  for (size_t i = 0; i < kernels.size(); ++i)
    REQUIRE(r.schedules[i].str() == heuristic[i].str());
  REQUIRE(db.stats().entries == 0); // nothing tuned, nothing stored
}

namespace {

// A thin product (a batch-1 layer, its weights a transposed parameter), a batched layer
// (3-D input, the same kind of weights), a batch of products of a permuted operand (attention
// scores) and one too large to be timed both ways.
constexpr const char* kGemms = R"(graph @gemms {
  %x : f32[1,96] = input "x"
  %w : f32[40,96] = param "w"
  %b : f32[2048,512] = input "b"
  %c : f32[512,1025] = input "c"
  %h : f32[3,7,96] = input "h"
  %q : f32[2,9,3,8] = input "q"
  %k : f32[2,3,8,11] = input "k"
  %t : f32[96,40]{1,96} = permute(%w) {dims = [1, 0]}
  %y : f32[1,40] = matmul(%x, %t)
  %r : f32[1,40] = relu(%y)
  %z : f32[2048,1025] = matmul(%b, %c)
  %l : f32[3,7,40] = matmul(%h, %t)
  %qp : f32[2,3,9,8]{216,8,24,1} = permute(%q) {dims = [0, 2, 1, 3]}
  %s : f32[2,3,9,11] = matmul(%qp, %k)
  return %r, %z, %l, %s
})";

std::unique_ptr<ir::Graph> gemm_graph() { return parse(kGemms); }

int64_t count(const ir::Graph& g, Op op) {
  int64_t n = 0;
  for (const ir::Node* node : g.nodes())
    n += node->op() == op;
  return n;
}

} // namespace

TEST_CASE("matmuls are timed as library calls and generated kernels, the choice kept",
          "[autotune][llvm][onednn]") {
  kiln::testing::TempDir dir("kiln_autotune_gemm");
  codegen::DiskCache db(dir.dir);
  codegen::AutotuneOptions o;
  o.database = &db;
  std::unique_ptr<ir::Graph> g = gemm_graph();
  codegen::GemmChoices first = codegen::choose_gemms(*g, host(), o);
  REQUIRE(first.considered == 3); // the 2048x512x1025 product (over 2^30) is never timed
  REQUIRE(first.timings == 6);
  require_valid(*g);
  REQUIRE(count(*g, Op::matmul) == 4 - first.generated);

  std::unique_ptr<ir::Graph> again = gemm_graph();
  codegen::GemmChoices second = codegen::choose_gemms(*again, host(), o);
  REQUIRE(second.timings == 0);
  REQUIRE(second.database_hits == 3);
  REQUIRE(second.generated == first.generated);

  // Either choice gives a valid graph that computes the products (by the f64 rule).
  manual_seed(11);
  const Tensor x = randn({1, 96}), w = randn({40, 96}), b = randn({2048, 512}),
               c = randn({512, 1025}), h3 = randn({3, 7, 96}), q = randn({2, 9, 3, 8}),
               k = randn({2, 3, 8, 11});
  auto products = [](const Tensor& x, const Tensor& w, const Tensor& h3, const Tensor& q,
                     const Tensor& k) {
    return std::vector<Tensor>{relu(matmul(x, w.t())), matmul(h3, w.t()),
                               matmul(q.permute({0, 2, 1, 3}), k)};
  };
  const std::vector<Tensor> want = products(x, w, h3, q, k);
  const std::vector<Tensor> want64 = products(x.to(DType::f64), w.to(DType::f64), h3.to(DType::f64),
                                              q.to(DType::f64), k.to(DType::f64));
  for (const char* choice : {"generated", "library"}) {
    INFO(choice);
    kiln::testing::TempDir d2("kiln_autotune_gemm_choice");
    codegen::DiskCache forced(d2.dir);
    codegen::AutotuneOptions fo;
    fo.database = &forced;
    std::unique_ptr<ir::Graph> h = gemm_graph();
    for (const ir::Node* node : h->nodes())
      if (node->op() == Op::matmul)
        forced.store(codegen::gemm_key(host(), node->input(0)->type(), node->input(1)->type()),
                     choice);
    codegen::GemmChoices gc = codegen::choose_gemms(*h, host(), fo);
    REQUIRE(gc.timings == 0);
    REQUIRE(gc.generated == (std::string(choice) == "generated" ? 3 : 0));
    REQUIRE(count(*h, Op::matmul) == 4 - gc.generated);
    require_valid(*h);
    Expected<codegen::CompiledGraph> cg = codegen::lower(std::move(h), codegen::LowerOptions{});
    REQUIRE(cg);
    REQUIRE(cg->fallback.empty());
    const std::vector<Tensor> out = cg->run(std::vector<Tensor>{x, w, b, c, h3, q, k});
    KILN_REQUIRE_ACCURATE(out[0], want[0], want64[0]);
    KILN_REQUIRE_ACCURATE(out[2], want[1], want64[1]);
    KILN_REQUIRE_ACCURATE(out[3], want[2], want64[2]);
  }
}

namespace {

// Reductions over one long row: a sum of a fused product (keepdim), an amax over dim -1, and
// a one-dimensional sum over all; and one over many rows, never split.
constexpr const char* kSplits = R"(graph @splits {
  %x : f32[1,65536] = input "x"
  %v : f32[65536] = input "v"
  %m : f32[64,65536] = input "m"
  %two : f32[] = const 2.0
  %p : f32[1,65536] = mul(%x, %two)
  %s : f32[1,1] = sum(%p) {dims = [1], keepdim = true, dtype = f32}
  %a : f32[1] = amax(%x) {dims = [-1], keepdim = false}
  %t : f32[] = sum(%v) {dims = [], keepdim = false, dtype = f32}
  %r : f32[64] = sum(%m) {dims = [1], keepdim = false, dtype = f32}
  return %s, %a, %t, %r
})";

std::unique_ptr<ir::Graph> split_graph() { return parse(kSplits); }

} // namespace

TEST_CASE("reductions over long rows are timed whole and split, and either form is exact enough",
          "[autotune][llvm]") {
  kiln::testing::TempDir dir("kiln_autotune_split");
  codegen::DiskCache db(dir.dir);
  codegen::AutotuneOptions o;
  o.database = &db;
  std::unique_ptr<ir::Graph> g = split_graph();
  codegen::SplitChoices first = codegen::choose_splits(*g, host(), o);
  // The 64-row sum has rows for every thread already (on hosts of up to 32 threads).
  const int64_t eligible = 64 >= 2 * get_num_threads() ? 3 : 4;
  REQUIRE(first.considered == eligible);
  REQUIRE(first.timings == 2 * eligible);
  require_valid(*g);
  std::unique_ptr<ir::Graph> again = split_graph();
  codegen::SplitChoices second = codegen::choose_splits(*again, host(), o);
  REQUIRE(second.timings == 0);
  REQUIRE(second.database_hits == eligible);
  REQUIRE(second.split == first.split);

  manual_seed(12);
  const Tensor x = randn({1, 65536}), v = randn({65536}), m = randn({64, 65536});
  const Tensor x64 = x.to(DType::f64), v64 = v.to(DType::f64);
  for (const char* choice : {"split", "whole"}) {
    INFO(choice);
    kiln::testing::TempDir d2("kiln_autotune_split_forced");
    codegen::DiskCache forced(d2.dir);
    codegen::AutotuneOptions fo;
    fo.database = &forced;
    std::unique_ptr<ir::Graph> h = split_graph();
    for (const ir::Node* n : h->nodes())
      if (int64_t chunks = codegen::split_chunks(*n); chunks > 0)
        forced.store(codegen::split_key(host(), n->op(), n->input(0)->type(), chunks), choice);
    codegen::SplitChoices c = codegen::choose_splits(*h, host(), fo);
    REQUIRE(c.timings == 0);
    REQUIRE(c.split == (std::string(choice) == "split" ? eligible : 0));
    Expected<codegen::CompiledGraph> cg = codegen::lower(std::move(h), codegen::LowerOptions{});
    REQUIRE(cg);
    REQUIRE(cg->fallback.empty());
    const std::vector<Tensor> out = cg->run(std::vector<Tensor>{x, v, m});
    // Sums of 65536 terms that cancel: the rule's floor scales with Σ|terms| (the magnitude
    // option), as a reordered sum's honest error does.
    auto require_sum = [](const Tensor& got, const Tensor& eager, const Tensor& ref,
                          const Tensor& magnitude) {
      AccuracyOptions opts;
      opts.magnitude = magnitude;
      const std::optional<std::string> bad = check_accuracy(got, eager, ref, opts);
      INFO(bad.value_or(""));
      REQUIRE_FALSE(bad);
    };
    require_sum(out[0], sum(x * 2, {1}, true), sum(x64 * 2, {1}, true),
                sum(abs(x64 * 2), {1}, true));
    REQUIRE(out[1].sizes() == Shape{1});
    REQUIRE(out[1].item<float>() == amax(x, {-1}).item<float>()); // a maximum is exact
    require_sum(out[2], sum(v), sum(v64), sum(abs(v64)));
    require_sum(out[3], sum(m, {1}), sum(m.to(DType::f64), {1}), sum(abs(m.to(DType::f64)), {1}));
  }
}
