// The thread's active tracer and the host-read scopes.
#include "runtime/tracing.h"

namespace kiln {
namespace {
thread_local Tracer* g_tracer = nullptr;

Tracer* report(const Tensor* t, HostRead why) {
  if (Tracer* tr = g_tracer) tr->host_read(t, why);
  return nullptr;
}
} // namespace

Tracer* active_tracer() { return g_tracer; }

TracerScope::TracerScope(Tracer* t) : saved_(g_tracer) { g_tracer = t; }
TracerScope::~TracerScope() { g_tracer = saved_; }

HostReadScope::HostReadScope(const Tensor* t, HostRead why) : suspend_(report(t, why)) {}

void graph_break() { HostReadScope scope(nullptr, HostRead::explicit_break); }

} // namespace kiln
