// The data object of an ahead-of-time compiled library.
#include "codegen/cpu/aot_object.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <vector>

#include "codegen/cpu/llvm_target.h"

namespace kiln::codegen::cpu {
namespace {

/// A hidden constant global named `name` holding `init`, aligned to `align` bytes.
void define(llvm::Module& m, const std::string& name, llvm::Constant* init, unsigned align) {
  auto* g = new llvm::GlobalVariable(m, init->getType(), /*isConstant=*/true,
                                     llvm::GlobalValue::ExternalLinkage, init, name);
  g->setVisibility(llvm::GlobalValue::HiddenVisibility);
  g->setAlignment(llvm::Align(align));
}

/// Bytes as a constant array, with `nul` zero bytes appended.
llvm::Constant* bytes(llvm::LLVMContext& ctx, std::string_view data, bool nul) {
  std::string copy(data);
  if (nul) copy.push_back('\0');
  return llvm::ConstantDataArray::getRaw(copy, copy.size(), llvm::Type::getInt8Ty(ctx));
}

void define_blob(llvm::Module& m, const std::string& name, std::string_view data, unsigned align) {
  llvm::LLVMContext& ctx = m.getContext();
  define(m, name, bytes(ctx, data, /*nul=*/false), align);
  define(m, name + "_size", llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), data.size()), 8);
}

} // namespace

std::string aot_data_object(const HostTarget& target, const AotData& data) {
  llvm::LLVMContext ctx;
  llvm::Module m("kiln_aot_data", ctx);
  prepare_module(m);
  auto* ptr = llvm::PointerType::get(ctx, 0);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  auto* entry_type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64}, false);
  auto* row_type = llvm::StructType::get(ctx, {ptr, ptr});

  std::vector<llvm::Constant*> rows;
  for (const std::string& name : data.kernel_names) {
    auto* text = new llvm::GlobalVariable(
        m, llvm::ArrayType::get(llvm::Type::getInt8Ty(ctx), name.size() + 1), true,
        llvm::GlobalValue::PrivateLinkage, bytes(ctx, name, /*nul=*/true), "kiln_aot_name");
    llvm::FunctionCallee fn = m.getOrInsertFunction(name, entry_type);
    rows.push_back(
        llvm::ConstantStruct::get(row_type, {text, llvm::cast<llvm::Constant>(fn.getCallee())}));
  }
  define(m, "kiln_aot_kernels",
         llvm::ConstantArray::get(llvm::ArrayType::get(row_type, rows.size()), rows), 16);
  define(m, "kiln_aot_num_kernels", llvm::ConstantInt::get(i64, rows.size()), 8);
  define_blob(m, "kiln_aot_plan", data.plan, 16);
  define(m, "kiln_aot_manifest", bytes(ctx, data.manifest, /*nul=*/true), 16);
  define_blob(m, "kiln_aot_weights", data.weights, 64);
  // The model's own entry: returns what the library's hidden table function returns.
  auto* table_type = llvm::FunctionType::get(ptr, {}, false);
  auto* table = llvm::Function::Create(table_type, llvm::GlobalValue::ExternalLinkage,
                                       "kiln_aot_api_table", m);
  table->setVisibility(llvm::GlobalValue::HiddenVisibility);
  auto* alias =
      llvm::Function::Create(table_type, llvm::GlobalValue::ExternalLinkage, data.entry_alias, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", alias));
  b.CreateRet(b.CreateCall(table));
  HostTarget pic = target;
  pic.pic = true;
  return compile_module(m, pic);
}

} // namespace kiln::codegen::cpu
