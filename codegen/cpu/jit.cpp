// The LLJIT instance, the host target machine, the O3 pipeline and object emission.
#include "codegen/cpu/jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "codegen/cpu/llvm_target.h"
#include "codegen/cpu/object_check.h"
#include "runtime/error.h"

namespace kiln::codegen::cpu {
namespace {

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return s;
}

template <typename T> T take(llvm::Expected<T> v, std::string_view what) {
  if (!v) KILN_CHECK(false, "LLVM JIT: ", what, ": ", to_string(v.takeError()));
  if constexpr (std::is_reference_v<T>)
    return *v;
  else
    return std::move(*v);
}

/// The target machine, the JIT and the lock serialising LLVM code generation.
struct Backend {
  std::mutex mutex;
  HostTarget target;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<llvm::orc::LLJIT> jit;

  Backend() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::orc::JITTargetMachineBuilder jtmb =
        take(llvm::orc::JITTargetMachineBuilder::detectHost(), "host target");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    target.triple = jtmb.getTargetTriple().str();
    target.cpu = jtmb.getCPU();
    target.features = jtmb.getFeatures().getString();
    target.vector_bytes = target.features.find("+avx512f") != std::string::npos ? 64
                          : target.features.find("+avx") != std::string::npos   ? 32
                                                                                : 16;
    machine = take(jtmb.createTargetMachine(), "target machine");
    jit = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
               "LLJIT");
  }
};

Backend& backend() {
  static Backend* b = new Backend(); // never destroyed: JIT code may run during exit
  return *b;
}

std::atomic<uint64_t> g_library_counter{0};

} // namespace

const HostTarget& host_target() { return backend().target; }

HostTarget cpu_target(std::string_view cpu) {
  const HostTarget& host = host_target();
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(llvm::Triple(host.triple), error);
  KILN_CHECK(t != nullptr, "LLVM: no target for ", host.triple, ": ", error);
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      t->createMCSubtargetInfo(llvm::Triple(host.triple), "", ""));
  KILN_CHECK(info && info->isCPUStringValid(llvm::StringRef(cpu.data(), cpu.size())),
             "LLVM: unknown CPU '", cpu, "' for ", host.triple);
  std::unique_ptr<llvm::MCSubtargetInfo> of_cpu(t->createMCSubtargetInfo(
      llvm::Triple(host.triple), llvm::StringRef(cpu.data(), cpu.size()), ""));
  HostTarget target;
  target.triple = host.triple;
  target.cpu = std::string(cpu);
  target.vector_bytes = of_cpu->checkFeatures("+avx512f") ? 64
                        : of_cpu->checkFeatures("+avx")   ? 32
                                                          : 16;
  return target;
}

std::vector<std::string> cpu_features(const HostTarget& target) {
  std::vector<std::string> out;
  if (!llvm::Triple(target.triple).isX86()) return out;
  llvm::SmallVector<llvm::StringRef, 64> of_cpu;
  llvm::X86::getFeaturesForCPU(target.cpu, of_cpu, /*NeedPlus=*/false);
  for (llvm::StringRef f : of_cpu)
    out.push_back(f.str());
  const llvm::SubtargetFeatures extra(target.features);
  for (const std::string& f : extra.getFeatures())
    if (f.size() > 1 && f[0] == '+' && std::find(out.begin(), out.end(), f.substr(1)) == out.end())
      out.push_back(f.substr(1));
  return out;
}

bool host_runs(const HostTarget& target) {
  const HostTarget& host = host_target();
  if (target.triple != host.triple) return false;
  if (target.cpu == host.cpu && target.features == host.features) return true;
  if (!llvm::Triple(host.triple).isX86()) return false;
  // The host must not turn any feature of the target off. (Host detection lists each feature it
  // knows as on or off; one it does not list, such as x87, every CPU of the triple has.)
  const llvm::SubtargetFeatures have(host.features);
  const std::vector<std::string>& host_features = have.getFeatures();
  for (const std::string& f : cpu_features(target))
    if (std::find(host_features.begin(), host_features.end(), "-" + f) != host_features.end())
      return false;
  return true;
}

const char* llvm_version() { return KILN_LLVM_VERSION; }

struct JitLibrary::Impl {
  llvm::orc::JITDylib* dylib = nullptr;
  std::string name;
};

JitLibrary::~JitLibrary() {
  if (!impl_ || !impl_->dylib) return;
  Backend& b = backend();
  std::lock_guard lock(b.mutex);
  if (llvm::Error e = b.jit->getExecutionSession().removeJITDylib(*impl_->dylib))
    llvm::consumeError(std::move(e));
}

void* JitLibrary::lookup(std::string_view symbol) const {
  Backend& b = backend();
  std::lock_guard lock(b.mutex);
  llvm::orc::ExecutorAddr addr =
      take(b.jit->lookup(*impl_->dylib, llvm::StringRef(symbol.data(), symbol.size())),
           "lookup of " + std::string(symbol) + " in " + impl_->name);
  return addr.toPtr<void*>();
}

std::shared_ptr<JitLibrary> load_object(std::string_view object, std::string_view name) {
  // JITLink trusts the object's structure (offsets, indices, sizes): a corrupt one could make
  // it read or write outside the buffer, so it never sees one.
  if (Expected<void> ok = check_object(object); !ok)
    throw Error::without_location(
        detail::str("LLVM JIT: can't load object ", name, ": ", ok.error().message()));
  std::vector<std::string_view> parts;
  if (Expected<std::vector<std::string_view>> split = split_objects(object))
    parts = std::move(*split); // well formed: check_object split it already
  Backend& b = backend();
  std::shared_ptr<JitLibrary> lib(new JitLibrary());
  lib->impl_ = std::make_unique<JitLibrary::Impl>();
  lib->impl_->name = std::string(name) + "#" + std::to_string(g_library_counter.fetch_add(1));
  std::string failure;
  {
    std::lock_guard lock(b.mutex);
    llvm::orc::JITDylib& dylib =
        take(b.jit->createJITDylib(lib->impl_->name), "library " + lib->impl_->name);
    // memset/memcpy and friends, which LLVM may emit, come from the process.
    dylib.addGenerator(take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                                b.jit->getDataLayout().getGlobalPrefix()),
                            "process symbols"));
    // A bundle's objects (kernels compiled on several threads) all go into this library.
    for (std::string_view part : parts) {
      auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(part.data(), part.size()),
                                                         lib->impl_->name);
      if (llvm::Error e = b.jit->addObjectFile(dylib, std::move(buffer))) {
        failure = to_string(std::move(e));
        break;
      }
    }
    if (failure.empty()) {
      lib->impl_->dylib = &dylib;
    } else if (llvm::Error r = b.jit->getExecutionSession().removeJITDylib(dylib)) {
      llvm::consumeError(std::move(r));
    }
  }
  // Thrown outside the lock: the library's destructor takes it.
  KILN_CHECK(failure.empty(), "LLVM JIT: can't load object ", lib->impl_->name, ": ", failure);
  return lib;
}

void prepare_module(llvm::Module& m) {
  Backend& b = backend();
  m.setTargetTriple(b.machine->getTargetTriple());
  m.setDataLayout(b.machine->createDataLayout());
}

std::string compile_module(llvm::Module& m, const HostTarget& target, int64_t large_module,
                           bool own_machine) {
  Backend& b = backend();
  // Another CPU than the host's gets a machine of its own (same triple and data layout), as
  // does a compile that runs beside others.
  std::unique_ptr<llvm::TargetMachine> other;
  if (own_machine || target.pic || target.cpu != b.target.cpu ||
      target.features != b.target.features) {
    llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(target.triple)};
    jtmb.setCPU(target.cpu);
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    if (target.pic) {
      // A shared library's code: position-independent, in the small code model.
      jtmb.setRelocationModel(llvm::Reloc::PIC_);
      jtmb.setCodeModel(llvm::CodeModel::Small);
    }
    if (!target.features.empty()) {
      llvm::SubtargetFeatures features(target.features);
      jtmb.addFeatures(features.getFeatures());
    }
    other = take(jtmb.createTargetMachine(), "target machine for " + target.cpu);
  }
  llvm::TargetMachine* machine = other ? other.get() : b.machine.get();
  std::string problems;
  llvm::raw_string_ostream err(problems);
  if (llvm::verifyModule(m, &err)) {
    std::string text;
    llvm::raw_string_ostream os(text);
    m.print(os, nullptr);
    KILN_UNREACHABLE("generated LLVM module fails verification: " + problems + "\n" + text);
  }
  const bool large =
      large_module >= 0 && static_cast<int64_t>(m.getInstructionCount()) > large_module;
  // The host's machine serves one compile at a time; one of our own needs no lock.
  std::unique_lock<std::mutex> lock(b.mutex, std::defer_lock);
  if (!other) lock.lock();
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    // The schedule decides vector code; LLVM's loop vectorizer is off, so it never
    // re-vectorizes a loop the schedule left scalar (and its VPlan analysis can take
    // exponential time on the select chains of NaN-propagating min/max).
    llvm::PipelineTuningOptions tuning;
    tuning.LoopVectorization = false;
    tuning.SLPVectorization = true;
    llvm::PassBuilder pb(machine, tuning);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm;
    if (large) {
      // The kernels' loops are already in the form code generation wants and vectorized by
      // the schedule; what a large kernel needs is its accumulators in registers and its
      // redundancies folded. Loop passes cost time superlinear in the loops of one function
      // (ScalarEvolution's forgetLoop), the SLP vectorizer most of the rest.
      llvm::FunctionPassManager fpm;
      fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
      fpm.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/false));
      fpm.addPass(llvm::InstCombinePass());
      fpm.addPass(llvm::SimplifyCFGPass());
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
    } else {
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    }
    mpm.run(m, mam);
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  KILN_CHECK(!machine->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile),
             "LLVM: the target ", target.cpu, " can't emit object files");
  pm.run(m);
  return std::string(buffer.begin(), buffer.end());
}

} // namespace kiln::codegen::cpu
