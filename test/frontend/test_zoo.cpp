// Every zoo model: compiled (each backend) equals eager by the f64 reference rule; gpt and moe
// capture in one graph; breaky breaks where its source says.
#include <fstream>

#include "frontend_testing.h"
#include "models/zoo.h"

using namespace kiln;

namespace {

void check_model(const ModelSpec& spec, const std::string& backend, bool train,
                 Mode mode = Mode::default_) {
  INFO(spec.name << " on backend " << backend << (train ? " (train)" : " (eval)") << " in mode "
                 << mode_name(mode));
  std::shared_ptr<nn::Module> m = spec.make(0);
  m->train(train);
  // Two copies with the same weights: buffers written in train mode must evolve alike.
  std::shared_ptr<nn::Module> ref = spec.make(0);
  ref->train(train);
  // The f64 reference: the same weights in f64, in the same mode. The zoo models draw no
  // random numbers in train mode (gpt's dropout p is 0; an f64 run would draw other masks),
  // so an f64 run bounds what reordered sums may change there too: batch norm's statistics
  // over a conv result stored channels-last add in another order than eager's.
  std::shared_ptr<nn::Module> ref64 = spec.make(0);
  ref64->to(DType::f64);
  ref64->train(train);
  CompileOptions o;
  o.backend = backend;
  o.mode = mode;
  nn::Module* mp = m.get();
  auto f = compile([&spec, mp](const Tensor& x) { return run_model(spec, *mp, x); }, o);
  // Call 0 traces, call 1 replays (building a static plan in the static modes), call 2 runs
  // that plan.
  for (uint64_t call = 0; call < 3; ++call) {
    Tensor x = spec.make_input(spec.input_shape, spec.input_dtype, 100 + call);
    manual_seed(200 + call);
    Tensor want = run_model(spec, *ref, x);
    Tensor want64 =
        ref64 ? run_model(spec, *ref64, to_f64(std::span<const Tensor>(&x, 1))[0]) : Tensor();
    manual_seed(200 + call);
    KILN_REQUIRE_ACCURATE(f(x), want, want64);
    for (auto& [name, b] : ref->named_buffers()) {
      INFO("buffer " << name);
      KILN_REQUIRE_ACCURATE(m->state_dict().at(name), b,
                            ref64 ? ref64->state_dict().at(name) : Tensor());
    }
  }
}

} // namespace

TEST_CASE("zoo: compiled equals eager on every model and backend") {
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models())
    for (const char* backend : {"kiln", "interpreter", "eager"})
      check_model(spec, backend, false);
}

TEST_CASE("zoo: compiled equals eager in train mode (dropout, batch norm statistics)") {
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models())
    check_model(spec, "kiln", true);
}

TEST_CASE("zoo: compiled equals eager in the modes with static plans, eval and train") {
  ModelRegistry zoo = zoo::registry();
  for (const ModelSpec& spec : zoo.models())
    for (Mode mode : {Mode::reduce_overhead, Mode::max_autotune})
      for (bool train : {false, true})
        check_model(spec, "kiln", train, mode);
}

TEST_CASE("zoo: gpt mlp cnn and moe capture in one graph and replay") {
  ModelRegistry zoo = zoo::registry();
  for (const char* name : {"gpt", "mlp", "cnn", "moe"}) {
    INFO(name);
    const ModelSpec& spec = zoo.get(name);
    std::shared_ptr<nn::Module> m = spec.make(0);
    Tensor x = spec.make_input(spec.input_shape, spec.input_dtype, 1);
    auto cm = compile(*m);
    ExplainReport rep = explain(cm, x);
    CHECK(rep.break_count() == 0);
    REQUIRE(rep.graph_count() == 1);
    CHECK(rep.graphs[0].outputs == 1);      // the logits only: arguments are not extra outputs
    for (const std::string& g : rep.guards) // scalar operands are constants, not host reads
      CHECK_THAT(g, !Catch::Contains("read on the host"));
    cm(x);
    cm(x);
    CompileStats st = cm.stats();
    CHECK(st.traces == 1);
    CHECK(st.replays == 1);
    CHECK(st.ops > 10);
  }
}

TEST_CASE("zoo: breaky breaks at its item, nonzero and condition lines") {
  ModelRegistry zoo = zoo::registry();
  const ModelSpec& spec = zoo.get("breaky");
  std::shared_ptr<nn::Module> m = spec.make(0);
  Tensor x = spec.make_input(spec.input_shape, spec.input_dtype, 0);
  ExplainReport rep = explain(*m, x);
  REQUIRE(rep.break_count() == 3);
  CHECK(rep.graph_count() == 4);
  const char* codes[] = {"KB001", "KB006", "KB003"};
  const char* needles[] = {".item<float>()", "nonzero(", "if (positive)"};
  std::ifstream src(std::string(KILN_SOURCE_DIR) + "/models/breaky.cpp");
  std::vector<std::string> lines;
  for (std::string l; std::getline(src, l);)
    lines.push_back(l);
  for (size_t i = 0; i < 3; ++i) {
    INFO(rep.breaks[i].str());
    CHECK(rep.breaks[i].code == codes[i]);
    const std::string& loc = rep.breaks[i].location;
    auto colon = loc.rfind(':');
    REQUIRE(colon != std::string::npos);
    CHECK_THAT(loc.substr(0, colon), Catch::EndsWith("models/breaky.cpp"));
    size_t line = std::stoul(loc.substr(colon + 1));
    REQUIRE(line >= 1);
    REQUIRE(line <= lines.size());
    CHECK_THAT(lines[line - 1], Catch::Contains(needles[i]));
  }
}

TEST_CASE("zoo: the registry refuses duplicates and names the known models") {
  ModelRegistry zoo = zoo::registry();
  CHECK(zoo.models().size() == 5);
  REQUIRE_THROWS_WITH(zoo.add(zoo.get("mlp")), Catch::Contains("already registered"));
  REQUIRE_THROWS_WITH(zoo.get("resnet152"), Catch::Contains("known models: mlp, cnn, gpt"));
}
