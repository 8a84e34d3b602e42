// `kiln aot` libraries, built by the kiln command of this build and loaded as a user would:
// their outputs against eager by the f64 reference rule, the C ABI's errors for every kind of
// bad input and bad weights file, models of one library on several threads, embedded
// weights, kiln::aot::load; and the manifest's reader on malformed text.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "frontend_testing.h"
#include "include/kiln/kiln_aot.h"
#include "models/zoo.h"
#include "runtime/aot/model.h"
#include "temp_dir.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

/// `kiln aot ARGS` into dir; the command's output on failure.
void build_library(const std::string& args, const fs::path& dir) {
  const std::string log = (dir.parent_path() / (dir.filename().string() + ".log")).string();
  const std::string cmd =
      std::string(KILN_CLI) + " aot " + args + " -o " + dir.string() + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
}

/// The libraries every test here uses, built once per process.
struct Libraries {
  testing::TempDir tmp{"kiln_aot"};
  fs::path mlp, mlp_embedded;
  Libraries() {
    build_library("mlp", tmp.dir / "mlp");
    build_library("mlp --embed-weights --name mlp_embedded", tmp.dir / "embedded");
    mlp = tmp.dir / "mlp" / "libmlp.so";
    mlp_embedded = tmp.dir / "embedded" / "libmlp_embedded.so";
  }
};

const Libraries& libraries() {
  static Libraries libs;
  return libs;
}

/// A library opened with dlopen and its table.
struct Opened {
  void* handle = nullptr;
  const kiln_aot_api* api = nullptr;
  explicit Opened(const fs::path& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    INFO(path << ": " << (handle ? "" : dlerror()));
    REQUIRE(handle != nullptr);
    auto entry = reinterpret_cast<const kiln_aot_api* (*)()>(dlsym(handle, "kiln_aot_entry"));
    REQUIRE(entry != nullptr);
    api = entry();
  }
  ~Opened() { dlclose(handle); }
};

/// The mlp of `kiln aot mlp` (seed 0) and its input, in process: the eager reference.
struct Reference {
  ModelSpec spec = zoo::mlp_spec();
  std::shared_ptr<nn::Module> module = spec.make(0);
  std::shared_ptr<nn::Module> module64 = spec.make(0);
  Reference() { module64->to(DType::f64); }
  Tensor input(uint64_t seed) const {
    return spec.make_input(spec.input_shape, spec.input_dtype, seed);
  }
  void require_accurate(const Tensor& got, const Tensor& x) const {
    NoGradGuard no_grad;
    Tensor want = run_model(spec, *module, x);
    Tensor want64 = run_model(spec, *module64, to_f64(std::span<const Tensor>(&x, 1))[0]);
    KILN_REQUIRE_ACCURATE(got, want, want64);
  }
};

kiln_tensor c_tensor(Tensor& t) {
  return {t.raw_data(), static_cast<kiln_dtype>(t.dtype()), static_cast<int32_t>(t.dim()),
          t.sizes().data()};
}

/// What run() says for these inputs (non-zero and a message), into a fresh [1, 10] output.
std::string run_error(const Opened& lib, kiln_model* m, kiln_tensor* in, size_t n_in) {
  Tensor out = zeros({1, 10});
  kiln_tensor o = c_tensor(out);
  char err[512] = {};
  const int rc = lib.api->run(m, in, n_in, &o, 1, err, sizeof err);
  REQUIRE(rc != 0);
  return err;
}

std::string create_error(const Opened& lib, const std::string& weights) {
  char err[1024] = {};
  kiln_model* m = lib.api->create(weights.c_str(), err, sizeof err);
  if (m != nullptr) lib.api->destroy(m);
  REQUIRE(m == nullptr);
  return err;
}

} // namespace

TEST_CASE("aot: the library's output equals eager by the f64 rule, through C and kiln::aot::load",
          "[llvm]") {
  const Libraries& libs = libraries();
  Reference ref;
  aot::LoadedModel model = aot::load(libs.mlp.string());
  REQUIRE(model.num_inputs() == 1);
  REQUIRE(model.num_outputs() == 1);
  CHECK(model.input(0) == std::pair<DType, Shape>{DType::f32, {1, 784}});
  CHECK(model.output(0) == std::pair<DType, Shape>{DType::f32, {1, 10}});
  for (uint64_t seed : {1, 2, 3}) {
    Tensor x = ref.input(seed);
    ref.require_accurate(model(x), x);
  }
  // A strided input is made contiguous for the library.
  Tensor wide = ref.input(4).expand({2, 1, 784}).contiguous().transpose(0, 1);
  Tensor x = wide.select(1, 0);
  ref.require_accurate(model(x), x.contiguous());
  // Embedded weights: the library alone, no safetensors beside it.
  REQUIRE_FALSE(fs::exists(libs.mlp_embedded.parent_path() / "mlp_embedded.safetensors"));
  aot::LoadedModel embedded = aot::load(libs.mlp_embedded.string());
  Tensor y = ref.input(5);
  ref.require_accurate(embedded(y), y);
  KILN_REQUIRE_BITWISE(embedded(y), model(y));
  // The describe JSON reads back as the manifest, with the weights' graph hash.
  aot::Manifest m = aot::Manifest::parse(model.describe());
  CHECK(m.name == "mlp");
  CHECK(m.cpu == "x86-64-v3");
  CHECK(m.graph_hash.size() == 16);
  CHECK(
      load_metadata((libs.mlp.parent_path() / "mlp.safetensors").string()).at(aot::kGraphHashKey) ==
      m.graph_hash);
}

TEST_CASE("aot: bad input to run is an error with a message, never a crash", "[llvm]") {
  Opened lib(libraries().mlp);
  char err[512] = {};
  kiln_model* m = lib.api->create(nullptr, err, sizeof err);
  INFO(err);
  REQUIRE(m != nullptr);
  Tensor x = Reference().input(1);
  kiln_tensor good = c_tensor(x);
  CHECK_THAT(run_error(lib, m, &good, 0), Catch::Contains("takes 1 inputs, got 0"));
  kiln_tensor two[2] = {good, good};
  CHECK_THAT(run_error(lib, m, two, 2), Catch::Contains("takes 1 inputs, got 2"));
  CHECK_THAT(run_error(lib, m, nullptr, 1), Catch::Contains("NULL array"));
  Tensor x64 = x.to(DType::f64);
  kiln_tensor wrong_dtype = c_tensor(x64);
  CHECK_THAT(run_error(lib, m, &wrong_dtype, 1),
             Catch::Contains("input 0: expected f32 [1, 784], got f64 [1, 784]"));
  Tensor flat = x.reshape({784});
  kiln_tensor wrong_rank = c_tensor(flat);
  CHECK_THAT(run_error(lib, m, &wrong_rank, 1), Catch::Contains("got f32 [784]"));
  Tensor bigger = zeros({1, 785});
  kiln_tensor wrong_size = c_tensor(bigger);
  CHECK_THAT(run_error(lib, m, &wrong_size, 1), Catch::Contains("got f32 [1, 785]"));
  kiln_tensor no_data = good;
  no_data.data = nullptr;
  CHECK_THAT(run_error(lib, m, &no_data, 1), Catch::Contains("input 0: NULL data"));
  kiln_tensor no_sizes = good;
  no_sizes.sizes = nullptr;
  CHECK_THAT(run_error(lib, m, &no_sizes, 1), Catch::Contains("NULL sizes"));
  kiln_tensor bad_rank = good;
  bad_rank.rank = 99;
  CHECK_THAT(run_error(lib, m, &bad_rank, 1), Catch::Contains("rank 99"));
  kiln_tensor bad_dtype = good; // a caller's value that is no enumerator, set as C would
  const std::underlying_type_t<kiln_dtype> not_a_dtype = 42;
  std::memcpy(&bad_dtype.dtype, &not_a_dtype, sizeof not_a_dtype);
  CHECK_THAT(run_error(lib, m, &bad_dtype, 1), Catch::Contains("dtype 42 is not a kiln_dtype"));
  // Outputs are checked as inputs are.
  Tensor small = zeros({1, 9});
  kiln_tensor bad_out = c_tensor(small);
  REQUIRE(lib.api->run(m, &good, 1, &bad_out, 1, err, sizeof err) != 0);
  CHECK_THAT(std::string(err), Catch::Contains("output 0: expected f32 [1, 10], got f32 [1, 9]"));
  REQUIRE(lib.api->run(m, &good, 1, nullptr, 0, err, sizeof err) != 0);
  CHECK_THAT(std::string(err), Catch::Contains("has 1 outputs, got 0"));
  REQUIRE(lib.api->run(nullptr, &good, 1, &bad_out, 1, err, sizeof err) != 0);
  CHECK_THAT(std::string(err), Catch::Contains("NULL model"));
  // A NULL error buffer is allowed; info for an index out of range is non-zero.
  CHECK(lib.api->run(m, nullptr, 1, nullptr, 0, nullptr, 0) != 0);
  kiln_dtype dt;
  int32_t rank;
  int64_t sizes[KILN_AOT_MAX_RANK];
  CHECK(lib.api->input_info(m, 1, &dt, &rank, sizes) != 0);
  CHECK(lib.api->output_info(m, 0, nullptr, &rank, sizes) != 0);
  CHECK(lib.api->input_info(nullptr, 0, &dt, &rank, sizes) != 0);
  REQUIRE(lib.api->input_info(m, 0, &dt, &rank, sizes) == 0);
  CHECK((dt == KILN_F32 && rank == 2 && sizes[0] == 1 && sizes[1] == 784));
  // After all that, the model still runs right.
  Tensor out = zeros({1, 10});
  kiln_tensor o = c_tensor(out);
  REQUIRE(lib.api->run(m, &good, 1, &o, 1, err, sizeof err) == 0);
  Reference().require_accurate(out, x);
  lib.api->destroy(m);
  lib.api->destroy(nullptr);
}

TEST_CASE("aot: a weights file that is missing, truncated, renamed, reshaped, retyped or of "
          "another graph is refused",
          "[llvm]") {
  const Libraries& libs = libraries();
  Opened lib(libs.mlp);
  testing::TempDir tmp("kiln_aot_weights");
  const std::string good = (libs.mlp.parent_path() / "mlp.safetensors").string();
  const std::map<std::string, std::string> meta = load_metadata(good);
  std::map<std::string, Tensor> w = load(good);

  CHECK_THAT(create_error(lib, tmp.file("none.safetensors")), Catch::Contains("none.safetensors"));
  {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(tmp.file("short.safetensors"), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  CHECK_THAT(create_error(lib, tmp.file("short.safetensors")),
             Catch::Contains("short.safetensors"));
  {
    auto renamed = w;
    renamed["fc1.weights"] = renamed.at("fc1.weight");
    renamed.erase("fc1.weight");
    save(renamed, tmp.file("renamed.safetensors"), meta);
  }
  CHECK_THAT(create_error(lib, tmp.file("renamed.safetensors")),
             Catch::Contains("no tensor 'fc1.weight'"));
  {
    auto reshaped = w;
    reshaped["fc2.bias"] = zeros({127});
    save(reshaped, tmp.file("reshaped.safetensors"), meta);
  }
  CHECK_THAT(create_error(lib, tmp.file("reshaped.safetensors")),
             Catch::Contains("tensor 'fc2.bias' is f32 [127], the model needs f32 [128]"));
  {
    auto retyped = w;
    retyped["fc3.bias"] = retyped.at("fc3.bias").to(DType::f64);
    save(retyped, tmp.file("retyped.safetensors"), meta);
  }
  CHECK_THAT(create_error(lib, tmp.file("retyped.safetensors")),
             Catch::Contains("tensor 'fc3.bias' is f64 [10], the model needs f32 [10]"));
  {
    auto other = meta;
    other[aot::kGraphHashKey] = "0123456789abcdef";
    save(w, tmp.file("other.safetensors"), other);
    save(w, tmp.file("nohash.safetensors"));
  }
  CHECK_THAT(create_error(lib, tmp.file("other.safetensors")),
             Catch::Contains("belong to graph 0123456789abcdef"));
  CHECK_THAT(create_error(lib, tmp.file("nohash.safetensors")),
             Catch::Contains(aot::kGraphHashKey));
  // Other values of the right names, shapes and graph are what a weights file is for.
  {
    auto scaled = w;
    scaled["fc3.bias"] = scaled.at("fc3.bias") + 1.0;
    save(scaled, tmp.file("scaled.safetensors"), meta);
  }
  aot::LoadedModel a = aot::load(libs.mlp.string());
  aot::LoadedModel b = aot::load(libs.mlp.string(), tmp.file("scaled.safetensors"));
  Tensor x = Reference().input(7);
  KILN_REQUIRE_CLOSE(
      b(x) - a(x), [](const Tensor& t) { return t; }, ones({1, 10}));
  CHECK_THROWS_WITH(aot::load((tmp.dir / "missing.so").string()), Catch::Contains("can't load"));
  CHECK_THROWS_WITH(aot::load("libm.so.6"), Catch::Contains("not a kiln aot library"));
}

TEST_CASE("aot: models of one library run at once on several threads", "[llvm]") {
  const Libraries& libs = libraries();
  std::vector<aot::LoadedModel> models;
  for (int k = 0; k < 3; ++k)
    models.push_back(aot::load(libs.mlp.string()));
  Reference ref;
  std::vector<Tensor> inputs, alone;
  for (uint64_t k = 0; k < 3; ++k) {
    inputs.push_back(ref.input(10 + k));
    alone.push_back(models[0](inputs.back()));
  }
  std::vector<std::vector<Tensor>> got(3);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        got[t].push_back(models[t](inputs[t]));
    });
  for (std::thread& t : threads)
    t.join();
  for (size_t t = 0; t < 3; ++t)
    for (const Tensor& g : got[t])
      KILN_REQUIRE_BITWISE(g, alone[t]);
}

TEST_CASE("aot: a malformed manifest is an error naming what is wrong") {
  aot::Manifest m;
  m.name = "m";
  m.graph_hash = "00";
  m.inputs = {{"", DType::f32, {2, 3}}};
  m.outputs = {{"", DType::f32, {2}}};
  m.parameters = {{"w", DType::f32, {3}}};
  m.plan_inputs = {{aot::Manifest::PlanInput::Kind::input, 0},
                   {aot::Manifest::PlanInput::Kind::parameter, 0}};
  m.results = {0};
  aot::Manifest back = aot::Manifest::parse(m.json());
  CHECK(back.json() == m.json());
  auto bad = [&](const std::string& from, const std::string& to, const std::string& message) {
    std::string text = m.json();
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    CHECK_THROWS_WITH(aot::Manifest::parse(text), Catch::Contains(message));
  };
  bad("{\"parameter\": 0}", "{\"parameter\": 1}", "names nothing");
  bad("{\"input\": 0}", "{\"input\": 3}", "names nothing");
  bad("\"results\": [0]", "\"results\": []", "0 results for 1 outputs");
  bad("\"dtype\": \"f32\"", "\"dtype\": \"f33\"", "is not a dtype");
  bad("[2, 3]", "[2, -3]", "not a non-negative integer");
  bad("kiln.aot/1", "kiln.aot/9", "another kiln version");
  bad("\"cpu\": ", "\"cpx\": ", "no \"cpu\"");
  bad("\"device\": \"cpu\"", "\"device\": \"tpu\"", "device \"tpu\" is not one this kiln runs");
  CHECK_THROWS_WITH(aot::Manifest::parse("{"), Catch::Contains("bad JSON"));
}

TEST_CASE("aot: a library compiled for a CPU with features this one lacks refuses to create",
          "[llvm]") {
  aot::Manifest m;
  m.cpu = "x86-64-v4";
  m.cpu_features = {"avx2", "avx512f", "avx512bw", "cx16"};
  auto lacks_avx512 = [](std::string_view f) { return !f.starts_with("avx512"); };
  CHECK_THROWS_WITH(aot::check_cpu(m, lacks_avx512),
                    Catch::Contains("this CPU lacks avx512f, avx512bw, which the library's kernels "
                                    "(compiled for x86-64-v4) use"));
  CHECK_NOTHROW(aot::check_cpu(m, [](std::string_view) { return true; }));
  // The library's own list: x86-64-v3's features, which this host (it built the library) has.
  aot::Manifest lib = aot::Manifest::parse(aot::load(libraries().mlp.string()).describe());
  CHECK(std::find(lib.cpu_features.begin(), lib.cpu_features.end(), "avx2") !=
        lib.cpu_features.end());
  CHECK(std::find(lib.cpu_features.begin(), lib.cpu_features.end(), "avx512f") ==
        lib.cpu_features.end());
  CHECK_NOTHROW(aot::check_cpu(lib, aot::cpu_has));
  CHECK(aot::cpu_has("avx2"));
  CHECK(aot::cpu_has("no-such-feature"));
}
