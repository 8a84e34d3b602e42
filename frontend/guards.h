// Guards: what must hold for a compiled entry to answer a call (docs/user-guide.md, "Compiling").
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frontend/compile.h"
#include "frontend/trace.h"

namespace kiln::frontend {

class GuardSet {
public:
  /// The guards of a call traced with these arguments. With `replay`, also the captured
  /// tensors' metadata and the versions of tensors read on the host (a replayed call does
  /// not re-run the code that depended on them).
  static GuardSet build(std::span<const detail::CallArg> args, const nn::Module* module,
                        const TraceSession::Replay* replay,
                        std::span<const HostReadGuard> host_reads,
                        std::span<const ModeReadGuard> mode_reads);

  /// The first guard that fails for this call ("tensor argument 0: sizes [1, 784] became
  /// [2, 784]"), or nullopt when all hold.
  std::optional<std::string> check(std::span<const detail::CallArg> args,
                                   const nn::Module* module) const;
  /// One line per guard, for explain and KILN_LOGS=guards.
  std::vector<std::string> describe() const;

private:
  struct TensorMetaGuard {
    DType dtype = DType::f32;
    Shape sizes, strides;
    Device device;
    bool requires_grad = false;
  };
  struct ArgGuard {
    bool is_tensor = false;
    TensorMetaGuard meta;
    Scalar scalar = Scalar(0);
  };
  struct CapturedGuard {
    std::shared_ptr<TensorImpl> tensor;
    std::string name;
    TensorMetaGuard meta;
  };
  static TensorMetaGuard meta_of(const TensorImpl& t);
  static std::optional<std::string> compare(const TensorMetaGuard& want, const TensorImpl& got);

  bool grad_enabled_ = true;
  bool has_module_ = false;
  std::vector<std::pair<std::string, bool>> training_; // per module: name, is_training
  std::vector<std::pair<std::string, const TensorImpl*>> module_tensors_;
  std::vector<ArgGuard> args_;
  std::vector<CapturedGuard> captured_;
  std::vector<HostReadGuard> versions_;
  std::vector<ModeReadGuard> modes_;
  /// Per argument: the first earlier tensor argument sharing its storage (its index), or
  /// kNoAlias; then likewise against the captured tensors (kNoAlias or the captured index).
  /// The graph's writes and reads were recorded for this pattern of memory sharing.
  static constexpr int64_t kNoAlias = -1;
  std::vector<int64_t> arg_alias_;
  std::vector<int64_t> captured_alias_;
  void alias_pattern(std::span<const detail::CallArg> args, std::vector<int64_t>& arg_alias,
                     std::vector<int64_t>& captured_alias) const;
};

} // namespace kiln::frontend
