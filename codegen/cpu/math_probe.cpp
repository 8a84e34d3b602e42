// compile_math_probe: a vector loop plus a scalar tail around emit_math, JIT-compiled.
#include "codegen/cpu/math_probe.h"

#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <string>

#include "codegen/cpu/llvm_target.h"
#include "codegen/cpu/vector_math.h"
#include "runtime/error.h"

namespace kiln::codegen::cpu {
namespace {

constexpr const char* kSymbol = "kiln_math_probe";

/// Emits `for (; i < end; i += step) out[i..] = op(x[i..], y[i..])` over values of type vty
/// (a vector of `step` elements or a scalar) and returns the final i.
llvm::Value* emit_loop(llvm::IRBuilder<>& b, kiln::Op op, llvm::Type* elem, llvm::Type* vty,
                       int64_t step, llvm::Value* start, llvm::Value* end, llvm::Value* x,
                       llvm::Value* y, llvm::Value* out, const char* name) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx, std::string(name) + ".head", fn);
  auto* body = llvm::BasicBlock::Create(ctx, std::string(name) + ".body", fn);
  auto* done = llvm::BasicBlock::Create(ctx, std::string(name) + ".done", fn);
  b.CreateBr(head);

  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(start, pre);
  // i + step <= end, written so that it cannot overflow.
  llvm::Value* more = b.CreateICmpSLE(i, b.CreateSub(end, b.getInt64(step)));
  b.CreateCondBr(more, body, done);

  b.SetInsertPoint(body);
  llvm::Align align(elem->getPrimitiveSizeInBits() / 8);
  llvm::Value* xv = b.CreateAlignedLoad(vty, b.CreateGEP(elem, x, i), align);
  llvm::Value* yv =
      op == kiln::Op::pow ? b.CreateAlignedLoad(vty, b.CreateGEP(elem, y, i), align) : nullptr;
  llvm::Value* r = emit_math(b, op, xv, yv);
  b.CreateAlignedStore(r, b.CreateGEP(elem, out, i), align);
  llvm::Value* next = b.CreateAdd(i, b.getInt64(step));
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateBr(head);

  b.SetInsertPoint(done);
  return i;
}

/// emit_math must not call out (no libm) on its main path: the only calls it may emit there
/// are intrinsics that the x86 backend lowers to instructions (llvm.fma given the host's FMA).
/// sin/cos call libm in their "libm" blocks, taken for huge arguments only.
void check_no_calls(const llvm::Function& fn) {
  for (const llvm::BasicBlock& block : fn)
    for (const llvm::Instruction& inst : block) {
      const auto* call = llvm::dyn_cast<llvm::CallBase>(&inst);
      if (!call) continue;
      if (block.getName().starts_with("libm")) continue;
      llvm::Intrinsic::ID id = call->getIntrinsicID();
      KILN_ASSERT(id == llvm::Intrinsic::fma || id == llvm::Intrinsic::fabs ||
                      id == llvm::Intrinsic::copysign || id == llvm::Intrinsic::sqrt ||
                      id == llvm::Intrinsic::vector_reduce_or ||
                      id == llvm::Intrinsic::x86_avx512_mask_scalef_ps_512 ||
                      id == llvm::Intrinsic::x86_avx512_mask_scalef_pd_512,
                  "vector math emitted a call: ", call->getCalledOperand()->getName().str());
    }
}

} // namespace

MathProbe compile_math_probe(kiln::Op op, kiln::DType dtype, int lanes) {
  KILN_ASSERT(dtype == DType::f32 || dtype == DType::f64, "math probe: f32 or f64 only");
  KILN_ASSERT(lanes >= 1, "math probe: lanes must be positive");
  KILN_ASSERT(has_vector_math(op), "math probe: op without vector math");
  llvm::LLVMContext ctx;
  llvm::Module m("kiln_math_probe", ctx);
  prepare_module(m);
  llvm::IRBuilder<> b(ctx);
  llvm::Type* elem = dtype == DType::f32 ? b.getFloatTy() : b.getDoubleTy();
  llvm::Type* ptr = b.getPtrTy();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, b.getInt64Ty()}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, kSymbol, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  // The host's CPU and features, as a kernel has them (vector math picks instructions by them).
  const HostTarget& host = host_target();
  fn->addFnAttr("target-cpu", host.cpu);
  if (!host.features.empty()) fn->addFnAttr("target-features", host.features);
  llvm::Value* x = fn->getArg(0);
  llvm::Value* y = fn->getArg(1);
  llvm::Value* out = fn->getArg(2);
  llvm::Value* n = fn->getArg(3);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* i = b.getInt64(0);
  if (lanes > 1) {
    auto* vty = llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes));
    i = emit_loop(b, op, elem, vty, lanes, i, n, x, y, out, "vec");
  }
  emit_loop(b, op, elem, elem, 1, i, n, x, y, out, "tail");
  b.CreateRetVoid();
  check_no_calls(*fn);

  std::string object = compile_module(m, host_target());
  MathProbe probe;
  probe.library = load_object(object, kSymbol);
  probe.fn = reinterpret_cast<MathKernel>(probe.library->lookup(kSymbol));
  return probe;
}

} // namespace kiln::codegen::cpu
