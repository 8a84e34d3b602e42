// Kernel + Schedule -> LLVM IR -> object code. The loop nest of a kernel:
//
//   for row in [begin, end):      rows = outer dims but the last two, x tiles of o_{n-2},
//                                 x blocks of o_{n-1}
//     o_0..o_{n-3} and the tile = digits of row / blocks; j range = the row's block of o_{n-1}
//     for o_{n-2} in the tile (one point without a tile):
//     for j in block, `lanes` x `unroll` at a time, then `lanes` (outer vector mode), then one:
//       the items: outer-level instructions, and inner loops over the inner domain
//       (vector code along the last inner variable in inner mode, with a scalar tail)
//
// Accumulators live in allocas that LLVM promotes to registers. f16/bf16 values are kept in
// float registers and rounded to their dtype after every operation, as eager code stores them.
#include "codegen/cpu/kernel_codegen.h"

#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/llvm_target.h"
#include "codegen/cpu/object_check.h"
#include "codegen/cpu/reuse_plan.h"
#include "codegen/cpu/vector_math.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/parallel.h"

namespace kiln::codegen::cpu {
namespace {

using ir::kernel::Index;
using ir::kernel::Instr;
using ir::kernel::Kernel;
using ir::kernel::Loop;
using ir::kernel::Term;

/// Stack bytes a kernel may take for its stashes (reuse_plan.h), per call.
constexpr int64_t kMaxStashBytes = 128 << 10;

bool is_float(DType t) { return is_floating(t); }
bool is_low(DType t) { return t == DType::f16 || t == DType::bf16; }
bool is_unsigned(DType t) { return t == DType::u8 || t == DType::bool_; }

/// The math ops (exp, tanh, ...) of a kernel that expand to polynomials (sqrt and rsqrt
/// are single instructions).
int polynomial_ops(const Kernel& k) {
  int n = 0;
  for (const Instr& in : k.instrs)
    if (in.kind == Instr::Kind::op && has_vector_math(in.op) && in.op != Op::sqrt &&
        in.op != Op::rsqrt)
      ++n;
  return n;
}

/// The LLVM value of each instruction emitted so far (by instruction id).
using Values = std::unordered_map<int, llvm::Value*>;

class KernelEmitter {
public:
  KernelEmitter(llvm::Module& m, const Kernel& k, const Schedule& s, const HostTarget& target,
                bool out_of_line_math, ReusePlan reuse)
      : m_(m), ctx_(m.getContext()), b_(ctx_), k_(k), s_(s), target_(target),
        out_of_line_math_(out_of_line_math), reuse_(std::move(reuse)) {}

  /// The function takes the points of its one outer dim as a fourth argument instead of
  /// k.outer's (a foreach kernel's parts of one body share it). Only for a kernel of one outer
  /// dim and no inner loops, whose indices are that dim's variable or constants.
  void runtime_length() {
    KILN_ASSERT(k_.outer.size() == 1 && k_.loops.empty() && s_.tile == 1 && !s_.stream,
                "a runtime length for kernel ", k_.name, " of outer rank ", k_.outer.size());
    runtime_length_ = true;
  }

  void run() {
    for (const auto& it : k_.items)
      if (it.instr < 0) {
        (first_loop_ ? second_loop_ : first_loop_) = &k_.loops[static_cast<size_t>(it.loop)];
        if (second_loop_) break;
      }
    auto* i64 = b_.getInt64Ty();
    auto* ptr = b_.getPtrTy();
    // A foreach part's function takes its points as a fourth argument (runtime_length).
    std::vector<llvm::Type*> params = {ptr, i64, i64};
    if (runtime_length_) params.push_back(i64);
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, k_.name, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addFnAttr("target-cpu", target_.cpu);
    if (!target_.features.empty()) fn_->addFnAttr("target-features", target_.features);
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    llvm::Value* bufs = fn_->getArg(0);
    for (size_t i = 0; i < k_.buffers.size(); ++i)
      base_.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, bufs, i), "buf"));
    alloca_point_ = b_.GetInsertBlock();
    make_stashes();
    vars_.assign(static_cast<size_t>(k_.num_vars()), nullptr);
    const int n_outer = static_cast<int>(k_.outer.size());
    const int64_t last = k_.outer.empty() ? 1 : k_.outer.back();
    const int64_t blocks = (last + s_.block - 1) / s_.block;
    // A tile covers `tile` points of the second-to-last outer dim (1 without a tile).
    const bool tiled = s_.tile > 1 && n_outer >= 2;
    // With a runtime length (one outer dim), a row is a block of it.
    llvm::Value* const end_of_last =
        runtime_length_ ? static_cast<llvm::Value*>(fn_->getArg(3)) : c64(last);
    loop(fn_->getArg(1), fn_->getArg(2), 1, [&](llvm::Value* row) {
      llvm::Value* q = runtime_length_ ? c64(0) : b_.CreateUDiv(row, c64(blocks));
      llvm::Value* blk = runtime_length_ ? row : b_.CreateURem(row, c64(blocks));
      llvm::Value* t0 = nullptr; // tiled: the tile's first point of o_{n-2}
      for (int d = n_outer - 2; d >= 0; --d) {
        const int64_t extent = k_.outer[static_cast<size_t>(d)];
        if (tiled && d == n_outer - 2) {
          const int64_t tiles = (extent + s_.tile - 1) / s_.tile;
          t0 = b_.CreateMul(b_.CreateURem(q, c64(tiles)), c64(s_.tile));
          q = b_.CreateUDiv(q, c64(tiles));
          continue;
        }
        vars_[static_cast<size_t>(d)] = b_.CreateURem(q, c64(extent));
        q = b_.CreateUDiv(q, c64(extent));
      }
      llvm::Value* j0 = b_.CreateMul(blk, c64(s_.block));
      llvm::Value* j1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                                 b_.CreateAdd(j0, c64(s_.block)), end_of_last);
      // Outer vector code steps `unroll` vectors of `lanes` outer points at once (a reduction
      // then keeps that many accumulators per inner point and loads `unroll` neighbouring
      // vectors), then single vectors, then the scalar tail.
      const bool outer_vec = s_.vector == Schedule::Vector::outer;
      const int L = outer_vec ? s_.lanes : 1;
      const int U = outer_vec && s_.lanes > 1 ? s_.unroll : 1;
      auto body = [&](int lanes) {
        return [&, lanes](llvm::Value* j) {
          if (n_outer > 0) vars_[static_cast<size_t>(n_outer - 1)] = j;
          vector_var_ = lanes > 1 ? n_outer - 1 : -1;
          emit_items(lanes);
        };
      };
      auto block_of_j = [&] {
        llvm::Value* j = j0;
        // Steps of `step` points while a whole one fits in the block.
        auto steps = [&](int step) {
          llvm::Value* span = b_.CreateSub(j1, j);
          llvm::Value* end =
              b_.CreateAdd(j, b_.CreateMul(b_.CreateUDiv(span, c64(step)), c64(step)));
          loop(j, end, step, body(step));
          j = end;
        };
        if (U > 1) steps(L * U);
        if (L > 1) steps(L);
        loop(j, j1, 1, body(1));
      };
      if (!tiled) {
        block_of_j();
        return;
      }
      const int64_t rows_dim = k_.outer[static_cast<size_t>(n_outer - 2)];
      llvm::Value* t1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                                 b_.CreateAdd(t0, c64(s_.tile)), c64(rows_dim));
      // Jammed steps of `jam` points of o_{n-2} while a whole step fits in the tile, then
      // one point at a time.
      llvm::Value* i = t0;
      if (s_.jam > 1) {
        llvm::Value* span = b_.CreateSub(t1, t0);
        llvm::Value* end =
            b_.CreateAdd(t0, b_.CreateMul(b_.CreateUDiv(span, c64(s_.jam)), c64(s_.jam)));
        loop(t0, end, s_.jam, [&](llvm::Value* i0) {
          vars_[static_cast<size_t>(n_outer - 2)] = i0;
          jam_base_ = i0;
          jam_ = s_.jam;
          block_of_j();
          jam_ = 1;
        });
        i = end;
      }
      loop(i, t1, 1, [&](llvm::Value* i1) {
        vars_[static_cast<size_t>(n_outer - 2)] = i1;
        block_of_j();
      });
    });
    // Non-temporal stores are weakly ordered: a full fence makes them visible before the
    // rows are reported done (another thread reads them next).
    if (streamed_) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
    b_.CreateRetVoid();
  }

private:
  bool runtime_length_ = false; // runtime_length()
  // ---- stashes (reuse_plan.h) ----
  /// One scratch array per slot, for a row's inner domain (times the lanes of an outer
  /// vector step); none, and the plan dropped, past kMaxStashBytes in all.
  void make_stashes() {
    if (!reuse_.enabled) return;
    int64_t points = 1;
    for (int64_t e : k_.inner)
      points *= e;
    const int64_t lanes = s_.vector == Schedule::Vector::outer ? s_.lanes * s_.unroll : 1;
    int64_t total = 0;
    for (DType t : reuse_.slots)
      total += points * lanes * register_bytes(t);
    if (total > kMaxStashBytes) {
      reuse_.enabled = false;
      return;
    }
    llvm::IRBuilder<> ab(alloca_point_);
    for (DType t : reuse_.slots) {
      auto* a = ab.CreateAlloca(llvm::ArrayType::get(
          b_.getInt8Ty(), static_cast<uint64_t>(points * lanes * register_bytes(t))));
      a->setAlignment(llvm::Align(64));
      stashes_.push_back(a);
    }
  }
  static int64_t register_bytes(DType t) {
    return t == DType::f16 || t == DType::bf16 ? 4 : static_cast<int64_t>(itemsize(t));
  }
  /// The address of slot's value at inner point `flat`, for a value of `lanes` lanes.
  llvm::Value* stash_address(int slot, DType t, int lanes, llvm::Value* flat) {
    llvm::Value* base = stashes_[static_cast<size_t>(slot)];
    // An outer vector step keeps a vector per inner point; an inner one a vector of
    // consecutive points.
    llvm::Type* et = s_.vector == Schedule::Vector::outer ? type(t, lanes) : scalar_type(t);
    return b_.CreateInBoundsGEP(et, base, flat);
  }
  void stash_store(int slot, DType t, int lanes, llvm::Value* flat, llvm::Value* v) {
    b_.CreateAlignedStore(v, stash_address(slot, t, lanes, flat),
                          llvm::Align(static_cast<uint64_t>(register_bytes(t))));
  }
  llvm::Value* stash_load(int slot, DType t, int lanes, llvm::Value* flat) {
    return b_.CreateAlignedLoad(type(t, lanes), stash_address(slot, t, lanes, flat),
                                llvm::Align(static_cast<uint64_t>(register_bytes(t))));
  }

  // ---- small helpers ----
  llvm::Constant* c64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  llvm::Type* scalar_type(DType t) {
    switch (t) {
    case DType::f64: return b_.getDoubleTy();
    case DType::f32:
    case DType::f16:
    case DType::bf16: return b_.getFloatTy();
    case DType::i8:
    case DType::u8: return b_.getInt8Ty();
    case DType::i32: return b_.getInt32Ty();
    case DType::i64: return b_.getInt64Ty();
    case DType::bool_: return b_.getInt1Ty();
    }
    return nullptr;
  }
  llvm::Type* type(DType t, int lanes) {
    llvm::Type* s = scalar_type(t);
    return lanes > 1 ? llvm::FixedVectorType::get(s, static_cast<unsigned>(lanes)) : s;
  }
  llvm::Value* splat(llvm::Value* v, int lanes) {
    if (lanes == 1 || v->getType()->isVectorTy()) return v;
    return b_.CreateVectorSplat(static_cast<unsigned>(lanes), v);
  }
  llvm::Value* lane_ids(int lanes) {
    std::vector<llvm::Constant*> c;
    for (int l = 0; l < lanes; ++l)
      c.push_back(c64(l));
    return llvm::ConstantVector::get(c);
  }

  /// for (iv = begin; iv < end; iv += step) body(iv)
  template <typename F> void loop(llvm::Value* begin, llvm::Value* end, int64_t step, F&& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* inside = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* after = llvm::BasicBlock::Create(ctx_, "after", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, "iv");
    iv->addIncoming(begin, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, end), inside, after);
    b_.SetInsertPoint(inside);
    body(static_cast<llvm::Value*>(iv));
    llvm::Value* next = b_.CreateAdd(iv, c64(step));
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(after);
  }

  llvm::AllocaInst* slot(llvm::Type* t) {
    llvm::IRBuilder<> ab(alloca_point_, alloca_point_->begin());
    return ab.CreateAlloca(t);
  }

  // ---- indices ----
  llvm::Value* index_scalar(const Index& ix) {
    llvm::Value* r = c64(ix.offset());
    for (const auto& [coef, t] : ix.terms()) {
      llvm::Value* tv;
      if (t.kind == Term::Kind::var) {
        tv = vars_[static_cast<size_t>(t.var)];
      } else {
        llvm::Value* in = index_scalar(*t.inner);
        tv = t.kind == Term::Kind::div ? b_.CreateUDiv(in, c64(t.divisor))
                                       : b_.CreateURem(in, c64(t.divisor));
      }
      r = b_.CreateAdd(r, coef == 1 ? tv : b_.CreateMul(tv, c64(coef)));
    }
    return r;
  }
  /// The index per lane, the vector variable taking base + lane.
  llvm::Value* index_lanes(const Index& ix, int lanes) {
    llvm::Value* saved = vars_[static_cast<size_t>(vector_var_)];
    llvm::Value* r = splat(c64(ix.offset()), lanes);
    for (const auto& [coef, t] : ix.terms()) {
      llvm::Value* tv;
      if (t.kind == Term::Kind::var) {
        tv = t.var == vector_var_ ? b_.CreateAdd(splat(saved, lanes), lane_ids(lanes))
                                  : splat(vars_[static_cast<size_t>(t.var)], lanes);
      } else {
        llvm::Value* in = index_lanes(*t.inner, lanes);
        tv = t.kind == Term::Kind::div ? b_.CreateUDiv(in, splat(c64(t.divisor), lanes))
                                       : b_.CreateURem(in, splat(c64(t.divisor), lanes));
      }
      r = b_.CreateAdd(r, coef == 1 ? tv : b_.CreateMul(tv, splat(c64(coef), lanes)));
    }
    return r;
  }

  llvm::Type* memory_type(DType t) {
    switch (t) {
    case DType::f16: return b_.getHalfTy();
    case DType::bf16: return b_.getInt16Ty();
    case DType::bool_: return b_.getInt8Ty();
    default: return scalar_type(t);
    }
  }
  llvm::Type* memory_type(DType t, int lanes) {
    llvm::Type* s = memory_type(t);
    return lanes > 1 ? llvm::FixedVectorType::get(s, static_cast<unsigned>(lanes)) : s;
  }

  /// Memory representation -> register representation.
  llvm::Value* from_memory(llvm::Value* v, DType t, int lanes) {
    switch (t) {
    case DType::f16: return b_.CreateFPExt(v, type(t, lanes));
    case DType::bf16:
      return b_.CreateBitCast(
          b_.CreateShl(b_.CreateZExt(v, type(DType::i32, lanes)), splat(b_.getInt32(16), lanes)),
          type(DType::f32, lanes));
    case DType::bool_: return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    default: return v;
    }
  }
  llvm::Value* to_memory(llvm::Value* v, DType t, int lanes) {
    switch (t) {
    case DType::f16: return b_.CreateFPTrunc(v, memory_type(t, lanes));
    case DType::bf16: {
      // Round to nearest even; a NaN stays a quiet NaN (runtime/half.h's rule).
      llvm::Type* i32 = type(DType::i32, lanes);
      llvm::Value* x = b_.CreateBitCast(v, i32);
      llvm::Value* rounding =
          b_.CreateAdd(splat(b_.getInt32(0x7fff), lanes),
                       b_.CreateAnd(b_.CreateLShr(x, splat(b_.getInt32(16), lanes)),
                                    splat(b_.getInt32(1), lanes)));
      llvm::Value* rounded =
          b_.CreateLShr(b_.CreateAdd(x, rounding), splat(b_.getInt32(16), lanes));
      llvm::Value* nan = b_.CreateOr(b_.CreateLShr(x, splat(b_.getInt32(16), lanes)),
                                     splat(b_.getInt32(0x40), lanes));
      llvm::Value* is_nan = b_.CreateICmpUGT(b_.CreateAnd(x, splat(b_.getInt32(0x7fffffff), lanes)),
                                             splat(b_.getInt32(0x7f800000), lanes));
      return b_.CreateTrunc(b_.CreateSelect(is_nan, nan, rounded), memory_type(t, lanes));
    }
    case DType::bool_: return b_.CreateZExt(v, memory_type(t, lanes));
    default: return v;
    }
  }
  /// Rounds a float register to f16/bf16 precision (a no-op for other dtypes).
  llvm::Value* round(llvm::Value* v, DType t, int lanes) {
    if (!is_low(t)) return v;
    return from_memory(to_memory(v, t, lanes), t, lanes);
  }

  llvm::Value* address(int buffer, llvm::Value* index, DType t) {
    return b_.CreateInBoundsGEP(memory_type(t), base_[static_cast<size_t>(buffer)], index);
  }

  llvm::Value* load(const Instr& in, int lanes) {
    llvm::Type* mt = memory_type(in.dtype);
    const int vv = vector_var_;
    if (lanes == 1 || !in.index.uses(vv)) {
      llvm::Value* v = b_.CreateLoad(mt, address(in.buffer, index_scalar(in.index), in.dtype));
      return splat(from_memory(v, in.dtype, 1), lanes);
    }
    if (in.index.affine_in(vv) && in.index.coefficient(vv) == 1) {
      llvm::Value* p = address(in.buffer, index_scalar(in.index), in.dtype);
      llvm::Value* v = b_.CreateAlignedLoad(memory_type(in.dtype, lanes), p,
                                            llvm::Align(itemsize_align(in.dtype)));
      return from_memory(v, in.dtype, lanes);
    }
    llvm::Value* ptrs = b_.CreateInBoundsGEP(mt, base_[static_cast<size_t>(in.buffer)],
                                             index_lanes(in.index, lanes));
    llvm::Value* v = b_.CreateMaskedGather(memory_type(in.dtype, lanes), ptrs,
                                           llvm::Align(itemsize_align(in.dtype)));
    return from_memory(v, in.dtype, lanes);
  }
  static uint64_t itemsize_align(DType t) { return static_cast<uint64_t>(itemsize(t)); }

  /// A non-temporal store of v (`bytes` wide) where `at` is aligned to the width of the
  /// stores it becomes (at most a 64-byte register each), as the instruction requires (a
  /// row's start need not be), else a plain one. The branch goes the same way along a row.
  void stream_store(llvm::Value* v, llvm::Value* at, uint64_t bytes, uint64_t align) {
    bytes = std::min<uint64_t>(bytes, 64);
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::LLVMContext& ctx = b_.getContext();
    auto* aligned_bb = llvm::BasicBlock::Create(ctx, "nt", f);
    auto* plain_bb = llvm::BasicBlock::Create(ctx, "plain", f);
    auto* done_bb = llvm::BasicBlock::Create(ctx, "stored", f);
    llvm::Value* low =
        b_.CreateAnd(b_.CreatePtrToInt(at, b_.getInt64Ty()), c64(static_cast<int64_t>(bytes - 1)));
    b_.CreateCondBr(b_.CreateICmpEQ(low, c64(0)), aligned_bb, plain_bb);
    b_.SetInsertPoint(aligned_bb);
    llvm::StoreInst* nt = b_.CreateAlignedStore(v, at, llvm::Align(bytes));
    nt->setMetadata(llvm::LLVMContext::MD_nontemporal,
                    llvm::MDNode::get(ctx, {llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
    b_.CreateBr(done_bb);
    b_.SetInsertPoint(plain_bb);
    b_.CreateAlignedStore(v, at, llvm::Align(align));
    b_.CreateBr(done_bb);
    b_.SetInsertPoint(done_bb);
    streamed_ = true;
  }

  void store(const Instr& in, llvm::Value* v, int lanes) {
    const int vv = vector_var_;
    v = to_memory(splat(v, lanes), in.dtype, lanes);
    if (lanes > 1 && in.index.uses(vv) && in.index.affine_in(vv) && in.index.coefficient(vv) == 1) {
      llvm::Value* at = address(in.buffer, index_scalar(in.index), in.dtype);
      const uint64_t bytes = itemsize_align(in.dtype) * static_cast<uint64_t>(lanes);
      if (s_.stream && bytes >= 16 && (bytes & (bytes - 1)) == 0) {
        stream_store(v, at, bytes, itemsize_align(in.dtype));
        return;
      }
      b_.CreateAlignedStore(v, at, llvm::Align(itemsize_align(in.dtype)));
      return;
    }
    if (lanes > 1 && in.index.uses(vv)) {
      llvm::Value* ptrs =
          b_.CreateInBoundsGEP(memory_type(in.dtype), base_[static_cast<size_t>(in.buffer)],
                               index_lanes(in.index, lanes));
      b_.CreateMaskedScatter(v, ptrs, llvm::Align(itemsize_align(in.dtype)));
      return;
    }
    // Every lane writes the same element: store the last lane (all equal).
    if (lanes > 1) v = b_.CreateExtractElement(v, static_cast<uint64_t>(lanes - 1));
    b_.CreateStore(v, address(in.buffer, index_scalar(in.index), in.dtype));
  }

  // ---- values ----
  llvm::Value* constant(const Instr& in, int lanes) {
    llvm::Value* c = nullptr;
    if (is_float(in.dtype))
      c = llvm::ConstantFP::get(scalar_type(in.dtype), in.value);
    else if (in.dtype == DType::bool_)
      c = b_.getInt1(in.ivalue != 0);
    else
      c = llvm::ConstantInt::get(scalar_type(in.dtype), static_cast<uint64_t>(in.ivalue), true);
    if (is_low(in.dtype)) c = round(c, in.dtype, 1);
    return splat(c, lanes);
  }

  llvm::Value* cast(llvm::Value* x, DType from, DType to, int lanes) {
    if (from == to) return x;
    llvm::Type* tt = type(to, lanes);
    if (to == DType::bool_) {
      if (is_float(from)) return b_.CreateFCmpUNE(x, llvm::Constant::getNullValue(x->getType()));
      return b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType()));
    }
    if (is_float(to)) {
      llvm::Value* f;
      if (is_float(from))
        f = b_.CreateFPCast(x, tt);
      else if (is_unsigned(from))
        f = b_.CreateUIToFP(x, tt);
      else
        f = b_.CreateSIToFP(x, tt);
      return round(f, to, lanes);
    }
    if (is_float(from)) {
      // NaN -> 0, saturate at the int64 bounds, then wrap (runtime/kernels/convert.h).
      llvm::Type* i64 = type(DType::i64, lanes);
      llvm::Value* i = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, x->getType()}, {x});
      return b_.CreateTrunc(i, tt);
    }
    return is_unsigned(from) ? b_.CreateZExtOrTrunc(x, tt) : b_.CreateSExtOrTrunc(x, tt);
  }

  llvm::Value* arg(const Instr& in, size_t k, int lanes) {
    return splat(vals_.at(in.args[k]), lanes);
  }

  llvm::Value* op(const Instr& in, int lanes) {
    const DType t = in.dtype;
    auto x = [&] { return arg(in, 0, lanes); };
    auto y = [&] { return arg(in, 1, lanes); };
    llvm::Value* r = nullptr;
    // Operand dtype of comparisons (the result is bool).
    DType at = k_.instrs[static_cast<size_t>(in.args[0])].dtype;
    bool fl = is_float(t);
    switch (in.op) {
    case Op::neg: r = fl ? b_.CreateFNeg(x()) : b_.CreateNeg(x()); break;
    case Op::abs:
      if (fl)
        r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x());
      else if (is_unsigned(t))
        r = x();
      else
        r = b_.CreateSelect(b_.CreateICmpSLT(x(), llvm::Constant::getNullValue(x()->getType())),
                            b_.CreateNeg(x()), x());
      break;
    case Op::relu: {
      llvm::Value* v = x();
      llvm::Value* zero = llvm::Constant::getNullValue(v->getType());
      if (fl) // NaN stays NaN; on the bits, as for maximum against 0 above.
        r = b_.CreateSelect(b_.CreateOr(positive_bits(v), b_.CreateFCmpUNO(v, v)), v, zero);
      else if (is_unsigned(t))
        r = v;
      else
        r = b_.CreateSelect(b_.CreateICmpSGT(v, zero), v, zero);
      break;
    }
    case Op::floor: r = fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x()) : x(); break;
    case Op::ceil: r = fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x()) : x(); break;
    case Op::round: r = fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x()) : x(); break;
    case Op::exp:
    case Op::log:
    case Op::sqrt:
    case Op::rsqrt:
    case Op::sin:
    case Op::cos:
    case Op::tanh:
    case Op::sigmoid:
    case Op::erf: r = math(in.op, x()); break;
    case Op::pow: r = math(in.op, x(), y()); break;
    case Op::logical_not: r = b_.CreateNot(x()); break;
    case Op::add:
      r = fl                  ? b_.CreateFAdd(x(), y())
          : t == DType::bool_ ? b_.CreateOr(x(), y())
                              : b_.CreateAdd(x(), y());
      break;
    case Op::sub: r = fl ? b_.CreateFSub(x(), y()) : b_.CreateSub(x(), y()); break;
    case Op::mul:
      r = fl                  ? b_.CreateFMul(x(), y())
          : t == DType::bool_ ? b_.CreateAnd(x(), y())
                              : b_.CreateMul(x(), y());
      break;
    case Op::div:
      if (copy_ < recips_.size())
        if (auto it = recips_[copy_].find(&in); it != recips_[copy_].end()) {
          r = b_.CreateFMul(x(), splat(it->second, lanes));
          break;
        }
      r = b_.CreateFDiv(x(), y());
      break;
    case Op::maximum:
    case Op::minimum: {
      llvm::Value *a = x(), *c = y();
      bool mx = in.op == Op::maximum;
      if (fl) {
        // Eager: NaN x wins, then NaN y, then x < y ? y : x (max) / y < x ? y : x (min).
        // Against a zero constant the comparison is made on the sign and magnitude bits:
        // LLVM 22's InstCombine turns select(fcmp ogt x, 0), 0, x) into a form that loses
        // the sign of x = -0.0 when the comparison is shared (a miscompile), and min/max
        // against 0 is the common case (clamp, relu-like chains).
        using llvm::PatternMatch::m_AnyZeroFP;
        llvm::Value* pick = nullptr;
        if (llvm::PatternMatch::match(c, m_AnyZeroFP()))
          pick = mx ? negative_bits(a) : positive_bits(a);
        else if (llvm::PatternMatch::match(a, m_AnyZeroFP()))
          pick = mx ? positive_bits(c) : negative_bits(c);
        else
          pick = mx ? b_.CreateFCmpOLT(a, c) : b_.CreateFCmpOLT(c, a);
        r = b_.CreateSelect(pick, c, a);
        r = b_.CreateSelect(b_.CreateFCmpUNO(c, c), c, r);
        r = b_.CreateSelect(b_.CreateFCmpUNO(a, a), a, r);
      } else {
        bool u = is_unsigned(t);
        llvm::Value* pick = mx ? (u ? b_.CreateICmpULT(a, c) : b_.CreateICmpSLT(a, c))
                               : (u ? b_.CreateICmpULT(c, a) : b_.CreateICmpSLT(c, a));
        r = b_.CreateSelect(pick, c, a);
      }
      break;
    }
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge: r = compare(in.op, x(), y(), at); break;
    case Op::logical_and: r = b_.CreateAnd(x(), y()); break;
    case Op::logical_or: r = b_.CreateOr(x(), y()); break;
    case Op::where: r = b_.CreateSelect(x(), y(), arg(in, 2, lanes)); break;
    default: KILN_UNREACHABLE("codegen: op " + std::string(op_name(in.op)) + " has no lowering");
    }
    return round(r, t, lanes);
  }

  /// A polynomial math op inline, or as a call of the module's shared function for it.
  llvm::Value* math(Op o, llvm::Value* x, llvm::Value* y = nullptr) {
    const bool call = out_of_line_math_ && o != Op::sqrt && o != Op::rsqrt;
    return call ? emit_math_call(b_, o, x, y) : emit_math(b_, o, x, y);
  }

  /// Whether float v > 0, and v < 0, from its bits (either answer for NaN).
  llvm::Value* positive_bits(llvm::Value* v) {
    unsigned w = v->getType()->getScalarType()->getPrimitiveSizeInBits();
    llvm::Type* ity = v->getType()->getWithNewType(b_.getIntNTy(w));
    return b_.CreateICmpSGT(b_.CreateBitCast(v, ity), llvm::Constant::getNullValue(ity));
  }
  llvm::Value* negative_bits(llvm::Value* v) {
    unsigned w = v->getType()->getScalarType()->getPrimitiveSizeInBits();
    llvm::Type* ity = v->getType()->getWithNewType(b_.getIntNTy(w));
    // Above the bits of -0.0 as unsigned: a negative number other than -0.0.
    return b_.CreateICmpUGT(b_.CreateBitCast(v, ity),
                            llvm::ConstantInt::get(ity, llvm::APInt::getSignMask(w)));
  }

  llvm::Value* compare(Op o, llvm::Value* a, llvm::Value* c, DType t) {
    using P = llvm::CmpInst::Predicate;
    bool u = is_unsigned(t);
    if (is_float(t)) {
      P p = o == Op::eq   ? P::FCMP_OEQ
            : o == Op::ne ? P::FCMP_UNE
            : o == Op::lt ? P::FCMP_OLT
            : o == Op::le ? P::FCMP_OLE
            : o == Op::gt ? P::FCMP_OGT
                          : P::FCMP_OGE;
      return b_.CreateFCmp(p, a, c);
    }
    P p = o == Op::eq   ? P::ICMP_EQ
          : o == Op::ne ? P::ICMP_NE
          : o == Op::lt ? (u ? P::ICMP_ULT : P::ICMP_SLT)
          : o == Op::le ? (u ? P::ICMP_ULE : P::ICMP_SLE)
          : o == Op::gt ? (u ? P::ICMP_UGT : P::ICMP_SGT)
                        : (u ? P::ICMP_UGE : P::ICMP_SGE);
    return b_.CreateICmp(p, a, c);
  }

  // ---- reductions ----
  llvm::Value* identity(Op o, DType t, int lanes) {
    llvm::Type* st = scalar_type(t);
    llvm::Value* c = nullptr;
    bool fl = is_float(t);
    // The fold's identity (ops.def's traits column): 0, 1, -inf (or the lowest), +inf.
    switch (op_traits(o).fold) {
    case OpTraits::Fold::sum: c = llvm::Constant::getNullValue(st); break;
    case OpTraits::Fold::prod:
      c = fl ? llvm::ConstantFP::get(st, 1.0) : llvm::ConstantInt::get(st, 1);
      break;
    case OpTraits::Fold::max:
      c = fl               ? llvm::ConstantFP::getInfinity(st, true)
          : is_unsigned(t) ? llvm::ConstantInt::get(st, 0)
                           : llvm::ConstantInt::get(
                                 st, llvm::APInt::getSignedMinValue(st->getIntegerBitWidth()));
      break;
    case OpTraits::Fold::min:
    case OpTraits::Fold::none: // not a fold: the verifier allows no such reduce
      c = fl ? llvm::ConstantFP::getInfinity(st, false)
          : is_unsigned(t)
              ? llvm::ConstantInt::get(st, llvm::APInt::getMaxValue(st->getIntegerBitWidth()))
              : llvm::ConstantInt::get(st,
                                       llvm::APInt::getSignedMaxValue(st->getIntegerBitWidth()));
      break;
    }
    return splat(c, lanes);
  }
  /// Whether x replaces acc in a max (min) fold: greater (less), or a NaN over a number.
  llvm::Value* better(bool max, llvm::Value* x, llvm::Value* acc, DType t) {
    if (is_float(t)) {
      // (x > acc or x is NaN) while acc is a number: the unordered comparison holds for a NaN
      // x, and an ordered acc keeps the first NaN. Two comparisons, the second under the
      // first's mask, where (x > acc) or (x NaN and acc a number) took three and an or.
      llvm::Value* cmp = max ? b_.CreateFCmpUGT(x, acc) : b_.CreateFCmpULT(x, acc);
      return b_.CreateAnd(cmp, b_.CreateFCmpORD(acc, acc));
    }
    bool u = is_unsigned(t);
    return max ? (u ? b_.CreateICmpUGT(x, acc) : b_.CreateICmpSGT(x, acc))
               : (u ? b_.CreateICmpULT(x, acc) : b_.CreateICmpSLT(x, acc));
  }
  llvm::Value* fold(Op o, llvm::Value* acc, llvm::Value* x, DType t) {
    bool fl = is_float(t);
    switch (o) {
    case Op::sum:
      return fl                  ? b_.CreateFAdd(acc, x)
             : t == DType::bool_ ? b_.CreateOr(acc, x)
                                 : b_.CreateAdd(acc, x);
    case Op::prod:
      return fl                  ? b_.CreateFMul(acc, x)
             : t == DType::bool_ ? b_.CreateAnd(acc, x)
                                 : b_.CreateMul(acc, x);
    case Op::amax: return b_.CreateSelect(better(true, x, acc, t), x, acc);
    case Op::amin: return b_.CreateSelect(better(false, x, acc, t), x, acc);
    default: KILN_UNREACHABLE("fold of an arg reduction");
    }
  }

  struct Acc {
    llvm::AllocaInst* value = nullptr;
    llvm::AllocaInst* index = nullptr; // argmax/argmin
    llvm::AllocaInst* tail_value = nullptr;
    int lanes = 1;
  };

  /// The items for `jam_` points of o_{n-2} at once (one without a jam): each copy has its
  /// own values and accumulators, and the copies' inner loops run as one.
  void emit_items(int lanes) {
    std::vector<Values> copies(static_cast<size_t>(jam_));
    for (const auto& it : k_.items) {
      if (it.instr < 0) {
        emit_loop(k_.loops[static_cast<size_t>(it.loop)], lanes, copies);
        continue;
      }
      for (int c = 0; c < jam_; ++c) {
        enter_copy(c);
        vals_.swap(copies[static_cast<size_t>(c)]);
        emit_instr(it.instr, lanes);
        vals_.swap(copies[static_cast<size_t>(c)]);
      }
    }
    vals_.clear();
  }
  /// Makes copy c the one emitted: o_{n-2} is its point of a jammed step.
  void enter_copy(int c) {
    copy_ = static_cast<size_t>(c);
    if (jam_ > 1) vars_[k_.outer.size() - 2] = c == 0 ? jam_base_ : b_.CreateAdd(jam_base_, c64(c));
  }

  void emit_instr(int id, int lanes, std::unordered_map<int, Acc>* accs = nullptr) {
    const Instr& in = k_.instrs[static_cast<size_t>(id)];
    switch (in.kind) {
    case Instr::Kind::load: vals_[id] = load(in, lanes); break;
    case Instr::Kind::constant: vals_[id] = constant(in, lanes); break;
    case Instr::Kind::op: vals_[id] = op(in, lanes); break;
    case Instr::Kind::cast: {
      DType from = k_.instrs[static_cast<size_t>(in.args[0])].dtype;
      vals_[id] = cast(arg(in, 0, lanes), from, in.dtype, lanes);
      break;
    }
    case Instr::Kind::store: store(in, vals_.at(in.args[0]), lanes); break;
    case Instr::Kind::reduce: {
      Acc& a = accs->at(id);
      llvm::Value* x = arg(in, 0, lanes);
      llvm::AllocaInst* slot_v = lanes == a.lanes ? a.value : a.tail_value;
      if (op_traits(in.op).arg) {
        DType xt = arg_dtype(in);
        llvm::Value* acc = b_.CreateLoad(type(xt, lanes), slot_v);
        llvm::Value* upd = better(op_traits(in.op).fold == OpTraits::Fold::max, x, acc, xt);
        b_.CreateStore(b_.CreateSelect(upd, x, acc), slot_v);
        llvm::Value* idx = splat(vars_[static_cast<size_t>(in.arg_var)], lanes);
        llvm::Value* old = b_.CreateLoad(type(DType::i64, lanes), a.index);
        b_.CreateStore(b_.CreateSelect(upd, idx, old), a.index);
      } else {
        llvm::Value* acc = b_.CreateLoad(type(in.dtype, lanes), slot_v);
        const Instr& product = k_.instrs[static_cast<size_t>(in.args[0])];
        if (in.op == Op::sum && product.kind == Instr::Kind::op && product.op == Op::mul &&
            (in.dtype == DType::f32 || in.dtype == DType::f64) && product.dtype == in.dtype) {
          // A sum of products (a contraction, a variance) accumulates with fused multiply-adds
          // where the target has them: one rounding per step instead of two, and twice the
          // arithmetic rate of a multiply then an add.
          x = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {acc->getType()},
                                 {arg(product, 0, lanes), arg(product, 1, lanes), acc});
          b_.CreateStore(x, slot_v);
          break;
        }
        b_.CreateStore(fold(in.op, acc, x, in.dtype), slot_v);
      }
      break;
    }
    }
  }
  DType arg_dtype(const Instr& in) { return k_.instrs[static_cast<size_t>(in.args[0])].dtype; }

  /// Streamed kernels (Schedule::stream) prefetch, in a row's second inner loop, what the
  /// first loads along the vector variable one row on: the first loop reads the row from
  /// memory, the later ones from L1 (softmax's exp, layer norm's normalising pass), and the
  /// memory would idle meanwhile. One prefetch per 64 bytes of the loop's step; past the
  /// last row it fetches nothing of use, and a prefetch never faults.
  void prefetch_next_row(int lanes) {
    if (!s_.stream) return;
    const int vv = vector_var_;
    const int row = static_cast<int>(k_.outer.size()) - 1;
    if (row < 0) return;
    for (int id : first_loop_->body) {
      const Instr& in = k_.instrs[static_cast<size_t>(id)];
      if (in.kind != Instr::Kind::load || !in.index.uses(vv) || !in.index.affine_in(vv) ||
          in.index.coefficient(vv) != 1 || !in.index.affine_in(row))
        continue;
      const int64_t step = in.index.coefficient(row);
      const int64_t bytes = static_cast<int64_t>(lanes) * itemsize(in.dtype);
      if (step == 0) continue;
      // Not an inbounds address: the next row of the last one lies past the buffer.
      llvm::Value* at = b_.CreateGEP(memory_type(in.dtype), base_[static_cast<size_t>(in.buffer)],
                                     b_.CreateAdd(index_scalar(in.index), c64(step)));
      for (int64_t off = 0; off < bytes; off += 64) {
        llvm::Value* p = b_.CreateGEP(b_.getInt8Ty(), at, c64(off));
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                           {p, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
      }
    }
  }

  void emit_loop(const Loop& l, int outer_lanes, std::vector<Values>& copies) {
    const int n_outer = static_cast<int>(k_.outer.size());
    const int m = static_cast<int>(k_.inner.size());
    const bool inner_vec = s_.vector == Schedule::Vector::inner && outer_lanes == 1;
    // Unrolled inner vector code is one vector of lanes x unroll: LLVM splits it into
    // `unroll` registers, so a reduction keeps that many independent accumulators, folded
    // lane by lane in a fixed order after the loop.
    const int L = inner_vec ? s_.lanes * s_.unroll : outer_lanes;
    // Accumulators, per copy.
    const size_t J = copies.size();
    std::vector<std::unordered_map<int, Acc>> copy_accs(J);
    for (size_t c = 0; c < J; ++c)
      for (int id : l.body) {
        const Instr& in = k_.instrs[static_cast<size_t>(id)];
        if (in.kind != Instr::Kind::reduce) continue;
        Acc a;
        a.lanes = L;
        const bool arg = op_traits(in.op).arg;
        DType vt = arg ? arg_dtype(in) : in.dtype;
        a.value = slot(type(vt, L));
        b_.CreateStore(identity(in.op, vt, L), a.value);
        if (inner_vec) {
          a.tail_value = slot(type(vt, 1));
          b_.CreateStore(identity(in.op, vt, 1), a.tail_value);
        }
        if (arg) {
          a.index = slot(type(DType::i64, L));
          b_.CreateStore(splat(c64(0), L), a.index);
        }
        copy_accs[c][id] = a;
      }
    int64_t rest = 1;
    for (int d = 0; d + 1 < m; ++d)
      rest *= k_.inner[static_cast<size_t>(d)];
    const int64_t last = m > 0 ? k_.inner.back() : 1;
    // Divisions by a value computed outside the loop (softmax's sum) multiply by its
    // reciprocal, computed once: a division costs several multiplies. x * (1/s) is within
    // 1.5 ulp of x / s while 1/s is a normal number, so the loop runs that way only when
    // every such divisor is in [2^-(emax-1), 2^(emax-1)]; otherwise (a subnormal or huge
    // divisor, zero, inf, NaN) the same loop runs with divisions.
    std::vector<int> divs;
    for (int id : l.body) {
      const Instr& in = k_.instrs[static_cast<size_t>(id)];
      if (in.kind == Instr::Kind::op && in.op == Op::div &&
          (in.dtype == DType::f32 || in.dtype == DType::f64) &&
          std::find(l.body.begin(), l.body.end(), in.args[1]) == l.body.end())
        divs.push_back(id);
    }
    llvm::BasicBlock* join = nullptr;
    llvm::BasicBlock* plain = nullptr;
    if (!divs.empty()) {
      recips_.assign(J, {});
      llvm::Value* all_normal = b_.getTrue();
      for (size_t c = 0; c < J; ++c)
        for (int id : divs) {
          const Instr& in = k_.instrs[static_cast<size_t>(id)];
          llvm::Value* d = copies[c].at(in.args[1]);
          llvm::Type* t = d->getType();
          const double limit = in.dtype == DType::f32 ? 0x1p126 : 0x1p1022;
          llvm::Value* mag = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d);
          llvm::Value* ok =
              b_.CreateAnd(b_.CreateFCmpOGE(mag, llvm::ConstantFP::get(t, 1.0 / limit)),
                           b_.CreateFCmpOLE(mag, llvm::ConstantFP::get(t, limit)));
          if (t->isVectorTy()) ok = b_.CreateAndReduce(ok);
          all_normal = b_.CreateAnd(all_normal, ok);
          recips_[c][&in] = b_.CreateFDiv(llvm::ConstantFP::get(t, 1.0), d);
        }
      auto* fast = llvm::BasicBlock::Create(ctx_, "reciprocal", fn_);
      plain = llvm::BasicBlock::Create(ctx_, "divide", fn_);
      join = llvm::BasicBlock::Create(ctx_, "divided", fn_);
      b_.CreateCondBr(all_normal, fast, plain);
      b_.SetInsertPoint(fast);
    }
    auto inner_loops = [&] {
      loop(c64(0), c64(rest), 1, [&](llvm::Value* t) {
        llvm::Value* q = t;
        for (int d = m - 2; d >= 0; --d) {
          vars_[static_cast<size_t>(n_outer + d)] =
              b_.CreateURem(q, c64(k_.inner[static_cast<size_t>(d)]));
          q = b_.CreateUDiv(q, c64(k_.inner[static_cast<size_t>(d)]));
        }
        auto body = [&](int lanes, int vv) {
          return [&, lanes, vv](llvm::Value* r) {
            if (m > 0) vars_[static_cast<size_t>(n_outer + m - 1)] = r; // m = 0: one point
            int saved_vv = vector_var_;
            if (inner_vec) vector_var_ = vv;
            for (size_t c = 0; c < J; ++c) {
              enter_copy(static_cast<int>(c));
              vals_ = copies[c];
              std::unordered_map<int, Acc>& accs = copy_accs[c];
              if (inner_vec && lanes == L && &l == second_loop_) prefetch_next_row(lanes);
              if (!reuse_.enabled) {
                for (int id : l.body)
                  emit_instr(id, lanes, &accs);
              } else {
                llvm::Value* flat = m > 0 ? b_.CreateAdd(b_.CreateMul(t, c64(last)), r) : c64(0);
                for (int id : l.body) {
                  const auto i = static_cast<size_t>(id);
                  const DType dt = k_.instrs[i].dtype;
                  if (int s = reuse_.load_slot[i]; s >= 0) {
                    vals_[id] = stash_load(s, dt, lanes, flat);
                    continue;
                  }
                  if (!reuse_.compute[i]) continue;
                  emit_instr(id, lanes, &accs);
                  if (int s = reuse_.store_slot[i]; s >= 0)
                    stash_store(s, dt, lanes, flat, vals_.at(id));
                }
              }
            }
            vector_var_ = saved_vv;
          };
        };
        if (inner_vec) {
          int64_t vec_end = last / L * L;
          loop(c64(0), c64(vec_end), L, body(L, n_outer + m - 1));
          loop(c64(vec_end), c64(last), 1, body(1, -1));
        } else {
          loop(c64(0), c64(last), 1, body(outer_lanes, vector_var_));
        }
      });
    };
    inner_loops();
    if (join != nullptr) {
      b_.CreateBr(join);
      b_.SetInsertPoint(plain);
      recips_.clear();
      inner_loops();
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
    }
    // Results: combine lanes (inner mode) in a fixed order, round f16/bf16 once.
    for (size_t c = 0; c < J; ++c)
      for (auto& [id, a] : copy_accs[c]) {
        const Instr& in = k_.instrs[static_cast<size_t>(id)];
        const bool arg = op_traits(in.op).arg;
        DType vt = arg ? arg_dtype(in) : in.dtype;
        llvm::Value* v;
        if (arg) {
          v = b_.CreateLoad(type(DType::i64, L), a.index);
        } else {
          v = b_.CreateLoad(type(vt, a.lanes), a.value);
          if (inner_vec) {
            llvm::Value* acc = b_.CreateExtractElement(v, uint64_t{0});
            for (int lane = 1; lane < a.lanes; ++lane)
              acc = fold(in.op, acc, b_.CreateExtractElement(v, static_cast<uint64_t>(lane)), vt);
            v = fold(in.op, acc, b_.CreateLoad(type(vt, 1), a.tail_value), vt);
          }
          v = round(v, in.dtype, inner_vec ? 1 : L);
        }
        copies[c][id] = v;
      }
    vals_.clear();
  }

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const Kernel& k_;
  const Schedule& s_;
  bool streamed_ = false;             // a non-temporal store was emitted
  const Loop* first_loop_ = nullptr;  // the kernel's first inner loop
  const Loop* second_loop_ = nullptr; // and its second (null: fewer)
  const HostTarget& target_;
  const bool out_of_line_math_;
  ReusePlan reuse_;
  std::vector<llvm::AllocaInst*> stashes_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* alloca_point_ = nullptr;
  std::vector<llvm::Value*> base_;
  std::vector<llvm::Value*> vars_;
  int vector_var_ = -1;
  /// Points of o_{n-2} emitted together (Schedule::jam) in the current step, from jam_base_.
  int jam_ = 1;
  llvm::Value* jam_base_ = nullptr;
  /// The copy being emitted, and per copy the reciprocal of each loop-invariant divisor of
  /// the loop being emitted (by its div); empty outside such a loop's fast path.
  size_t copy_ = 0;
  std::vector<std::unordered_map<const Instr*, llvm::Value*>> recips_;
  Values vals_;
};

/// A kernel's text without its names (the kernel's and its buffers'), and its schedule: two
/// kernels with the same key compile to the same code.
std::string body_key(const Kernel& k, const Schedule& s) {
  Kernel anon = k;
  anon.name.clear();
  for (size_t i = 0; i < anon.buffers.size(); ++i)
    anon.buffers[i].name = "b" + std::to_string(i);
  return s.str() + "\n" + anon.str();
}

/// A foreach kernel (Kernel::parts): each part a kernel function, internal to the module, that
/// takes its length (runtime_length; parts of one body share it, whatever their lengths), and
/// the kernel's function, which runs the
/// rows of [begin, end) that fall in each part (the parts' rows follow one another) on that
/// part's function, with the part's buffers gathered from the kernel's.
void emit_foreach(llvm::Module& m, const Kernel& k, const Schedule& s, const HostTarget& target,
                  const CodegenOptions& options) {
  std::vector<llvm::Function*> parts;
  std::unordered_map<std::string, llvm::Function*> bodies;
  std::vector<int64_t> start = {0};
  size_t most = 0;
  for (const ir::kernel::Part& p : k.parts) {
    Kernel body = p.kernel;
    body.outer = {0}; // its length is an argument
    auto [it, fresh] = bodies.try_emplace(body_key(body, s), nullptr);
    if (fresh) {
      const bool out_of_line =
          options.inline_math_limit >= 0 && polynomial_ops(p.kernel) > options.inline_math_limit;
      KernelEmitter e(m, p.kernel, s, target, out_of_line, ReusePlan{});
      e.runtime_length();
      e.run();
      it->second = m.getFunction(p.kernel.name);
      it->second->setLinkage(llvm::GlobalValue::InternalLinkage);
    }
    parts.push_back(it->second);
    start.push_back(start.back() + s.rows(p.kernel));
    most = std::max(most, p.buffers.size());
  }
  // The parts as tables (row starts, lengths, buffer numbers, functions) and one loop over
  // them: the entry stays a few instructions however many parts there are.
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* i64 = b.getInt64Ty();
  auto* ptr = b.getPtrTy();
  const size_t n = parts.size();
  std::vector<llvm::Constant*> lengths, args, fns;
  std::vector<llvm::Constant*> starts;
  for (int64_t v : start)
    starts.push_back(b.getInt64(static_cast<uint64_t>(v)));
  for (size_t p = 0; p < n; ++p) {
    lengths.push_back(b.getInt64(static_cast<uint64_t>(k.parts[p].kernel.outer[0])));
    fns.push_back(parts[p]);
    for (size_t j = 0; j < most; ++j) {
      const std::vector<int>& a = k.parts[p].buffers;
      args.push_back(b.getInt64(j < a.size() ? static_cast<uint64_t>(a[j]) : 0));
    }
  }
  auto table = [&](const std::vector<llvm::Constant*>& v, llvm::Type* t, const char* what) {
    auto* type = llvm::ArrayType::get(t, v.size());
    return new llvm::GlobalVariable(m, type, /*isConstant=*/true,
                                    llvm::GlobalValue::InternalLinkage,
                                    llvm::ConstantArray::get(type, v), k.name + "." + what);
  };
  llvm::GlobalVariable* starts_t = table(starts, i64, "starts");
  llvm::GlobalVariable* lengths_t = table(lengths, i64, "lengths");
  llvm::GlobalVariable* args_t = table(args, i64, "buffers");
  llvm::GlobalVariable* fns_t = table(fns, ptr, "parts");
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, k.name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr("target-cpu", target.cpu);
  if (!target.features.empty()) fn->addFnAttr("target-features", target.features);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* head = llvm::BasicBlock::Create(ctx, "part", fn);
  auto* gather = llvm::BasicBlock::Create(ctx, "gather", fn);
  auto* call = llvm::BasicBlock::Create(ctx, "call", fn);
  auto* latch = llvm::BasicBlock::Create(ctx, "latch", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  llvm::Value* bufs = fn->getArg(0);
  llvm::Value* begin = fn->getArg(1);
  llvm::Value* end = fn->getArg(2);
  auto at = [&](llvm::GlobalVariable* t, llvm::Type* e, llvm::Value* i) {
    return b.CreateLoad(e, b.CreateInBoundsGEP(t->getValueType(), t, {b.getInt64(0), i}));
  };
  b.SetInsertPoint(entry);
  llvm::Value* own = b.CreateAlloca(ptr, b.getInt64(most), "part_buffers");
  b.CreateBr(head);
  // head: part p's rows of [begin, end), if any.
  b.SetInsertPoint(head);
  llvm::PHINode* p = b.CreatePHI(i64, 2, "p");
  p->addIncoming(b.getInt64(0), entry);
  llvm::Value* first = at(starts_t, i64, p);
  llvm::Value* after = at(starts_t, i64, b.CreateAdd(p, b.getInt64(1)));
  llvm::Value* lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::umax, begin, first);
  llvm::Value* hi = b.CreateBinaryIntrinsic(llvm::Intrinsic::umin, end, after);
  b.CreateCondBr(b.CreateICmpULT(lo, hi), gather, latch);
  // gather: the part's buffers from the kernel's.
  b.SetInsertPoint(gather);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  j->addIncoming(b.getInt64(0), head);
  llvm::Value* arg = at(args_t, i64, b.CreateAdd(b.CreateMul(p, b.getInt64(most)), j));
  b.CreateStore(b.CreateLoad(ptr, b.CreateInBoundsGEP(ptr, bufs, arg)),
                b.CreateInBoundsGEP(ptr, own, j));
  llvm::Value* j1 = b.CreateAdd(j, b.getInt64(1));
  j->addIncoming(j1, gather);
  b.CreateCondBr(b.CreateICmpULT(j1, b.getInt64(most)), gather, call);
  // call: its function over its rows.
  b.SetInsertPoint(call);
  b.CreateCall(llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64, i64}, false),
               at(fns_t, ptr, p),
               {own, b.CreateSub(lo, first), b.CreateSub(hi, first), at(lengths_t, i64, p)});
  b.CreateBr(latch);
  b.SetInsertPoint(latch);
  llvm::Value* p1 = b.CreateAdd(p, b.getInt64(1));
  p->addIncoming(p1, latch);
  b.CreateCondBr(b.CreateICmpULT(p1, b.getInt64(n)), head, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
}

/// Instructions of a kernel; of a foreach kernel, its parts' of distinct bodies (emitted once).
size_t instruction_count(const Kernel& k, const Schedule& s) {
  size_t n = k.instrs.size();
  std::unordered_set<std::string> seen;
  for (const ir::kernel::Part& p : k.parts) {
    Kernel body = p.kernel;
    body.outer = {0};
    if (seen.insert(body_key(body, s)).second) n += p.kernel.instrs.size();
  }
  return n;
}

std::unique_ptr<llvm::Module> build(llvm::LLVMContext& ctx, std::span<const Kernel> kernels,
                                    std::span<const Schedule> schedules, std::string_view name,
                                    const HostTarget& target, const CodegenOptions& options) {
  auto m = std::make_unique<llvm::Module>(llvm::StringRef(name.data(), name.size()), ctx);
  prepare_module(*m);
  // Identical kernels (a repeated block of a model, a long chain's repeated segment) are
  // emitted once; the others are aliases of that function, so the object still defines every
  // kernel's name.
  std::unordered_map<std::string, llvm::Function*> emitted;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string key;
    if (options.dedupe) {
      key = body_key(kernels[i], schedules[i]);
      if (auto it = emitted.find(key); it != emitted.end()) {
        llvm::GlobalAlias::create(llvm::GlobalValue::ExternalLinkage, kernels[i].name, it->second);
        continue;
      }
    }
    if (!kernels[i].parts.empty()) {
      emit_foreach(*m, kernels[i], schedules[i], target, options);
      if (options.dedupe) emitted.emplace(std::move(key), m->getFunction(kernels[i].name));
      continue;
    }
    const bool out_of_line =
        options.inline_math_limit >= 0 && polynomial_ops(kernels[i]) > options.inline_math_limit;
    // A jam's copies would share the stashes: no reuse plan under one.
    ReusePlan reuse = options.reuse && schedules[i].jam == 1 ? plan_reuse(kernels[i]) : ReusePlan{};
    KernelEmitter(*m, kernels[i], schedules[i], target, out_of_line, std::move(reuse)).run();
    if (options.dedupe) emitted.emplace(std::move(key), m->getFunction(kernels[i].name));
  }
  return m;
}

} // namespace

std::string compile_kernels(std::span<const Kernel> kernels, std::span<const Schedule> schedules,
                            std::string_view module_name, const HostTarget& target) {
  return compile_kernels(kernels, schedules, module_name, target, CodegenOptions{});
}

namespace {

/// The kernels split into parts compiled apart: each part's kernel indices, in order. A kernel
/// goes with every other of its body (an alias lives in its function's object); bodies are
/// placed largest first on the part with the fewest instructions so far.
std::vector<std::vector<size_t>> partition(std::span<const Kernel> kernels,
                                           std::span<const Schedule> schedules, int parts) {
  std::vector<std::vector<size_t>> bodies; // kernel indices per distinct body, first-seen order
  std::unordered_map<std::string, size_t> body_of;
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto [it, fresh] = body_of.try_emplace(body_key(kernels[i], schedules[i]), bodies.size());
    if (fresh) bodies.emplace_back();
    bodies[it->second].push_back(i);
  }
  const size_t n = std::min(bodies.size(), static_cast<size_t>(std::max(parts, 1)));
  std::vector<size_t> order(bodies.size());
  std::iota(order.begin(), order.end(), 0);
  auto size = [&](size_t b) {
    const size_t k = bodies[b].front();
    return instruction_count(kernels[k], schedules[k]);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return size(a) > size(b); });
  std::vector<std::vector<size_t>> out(n);
  std::vector<size_t> load(n, 0);
  for (size_t b : order) {
    const size_t p = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[p] += size(b);
    out[p].insert(out[p].end(), bodies[b].begin(), bodies[b].end());
  }
  for (std::vector<size_t>& part : out)
    std::sort(part.begin(), part.end());
  return out;
}

} // namespace

std::string compile_kernels(std::span<const Kernel> kernels, std::span<const Schedule> schedules,
                            std::string_view module_name, const HostTarget& target,
                            const CodegenOptions& options) {
  const int threads = options.parallel > 0 ? options.parallel : get_num_threads();
  std::vector<std::vector<size_t>> parts = partition(kernels, schedules, threads);
  if (parts.size() <= 1 || !options.dedupe) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = build(ctx, kernels, schedules, module_name, target, options);
    return compile_module(*m, target, options.large_module_instructions);
  }
  // Each part in a context of its own, on its own thread of the pool.
  std::vector<std::string> objects(parts.size());
  parallel_for(
      0, static_cast<int64_t>(parts.size()), 1,
      [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          std::vector<Kernel> ks;
          std::vector<Schedule> ss;
          for (size_t i : parts[static_cast<size_t>(p)]) {
            ks.push_back(kernels[i]);
            ss.push_back(schedules[i]);
          }
          llvm::LLVMContext ctx;
          std::unique_ptr<llvm::Module> m = build(
              ctx, ks, ss, std::string(module_name) + "." + std::to_string(p), target, options);
          objects[static_cast<size_t>(p)] =
              compile_module(*m, target, options.large_module_instructions, /*own_machine=*/true);
        }
      },
      static_cast<int>(parts.size()));
  return bundle_objects(objects);
}

std::string kernels_llvm_ir(std::span<const Kernel> kernels, std::span<const Schedule> schedules) {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m =
      build(ctx, kernels, schedules, "kiln", host_target(), CodegenOptions{});
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return s;
}

} // namespace kiln::codegen::cpu
