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
  /// Whether every guard holds: the same answer as !check(), from flat arrays built once, with
  /// no strings, maps or allocation (the hot path of every call; check() then says why not).
  bool holds(std::span<const detail::CallArg> args, const nn::Module* module) const;
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
  std::vector<TraceSession::Replay::GradRead> grads_;
  /// Why the gradient slot of read `g` fails its guard for this call, or nullopt.
  static std::optional<std::string> check_grad(const TraceSession::Replay::GradRead& g,
                                               std::span<const detail::CallArg> args);
  /// Per argument: the first earlier tensor argument sharing its storage (its index), or
  /// kNoAlias; then likewise against the captured tensors (kNoAlias or the captured index).
  /// The graph's writes and reads were recorded for this pattern of memory sharing.
  static constexpr int64_t kNoAlias = -1;
  std::vector<int64_t> arg_alias_;
  std::vector<int64_t> captured_alias_;
  void alias_pattern(std::span<const detail::CallArg> args, std::vector<int64_t>& arg_alias,
                     std::vector<int64_t>& captured_alias) const;

  /// The same guards laid out for holds(): one record per argument, sizes and strides in one
  /// array, module state as pointers with the values they had.
  struct FlatArg {
    bool is_tensor = false;
    DType dtype = DType::f32;
    Device device;
    bool requires_grad = false;
    uint32_t rank = 0, dims = 0; // sizes at flat_dims_[dims], strides right after
    Scalar::Kind kind = Scalar::Kind::integral;
    uint64_t bits = 0; // a scalar's value (a double's bits, or the integer)
  };
  std::vector<FlatArg> flat_args_;
  std::vector<int64_t> flat_dims_;
  std::vector<std::pair<const nn::Module*, size_t>> flat_modules_; // with registrations()
  std::vector<bool> flat_training_;                                // per flat_modules_
  std::vector<std::pair<const Tensor*, const TensorImpl*>> flat_members_;
  void flatten();
  static bool same_meta(const TensorMetaGuard& want, const TensorImpl& got);
};

} // namespace kiln::frontend
