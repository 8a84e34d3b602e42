// Grad mode: whether operations are recorded for autograd on this thread. Compiled
// functions are guarded on it, so a call under NoGradGuard never replays a graph traced
// with gradients enabled (or the other way round).
#pragma once

namespace kiln {

/// True unless a NoGradGuard (or InferenceMode) is active on this thread.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// Disables grad mode for its scope: `{ NoGradGuard g; ... }`.
class NoGradGuard {
public:
  NoGradGuard() : saved_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(saved_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
  bool saved_;
};

/// Sets grad mode for its scope, as libtorch's AutoGradMode: `{ AutoGradMode on(true); ... }`
/// records a training step inside code that runs under NoGradGuard.
class AutoGradMode {
public:
  explicit AutoGradMode(bool enabled) : saved_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~AutoGradMode() { set_grad_enabled(saved_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

private:
  bool saved_;
};

} // namespace kiln
