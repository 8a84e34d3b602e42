// kiln: the one public header. Tensors, ops, nn modules, weights, compile(), explain().
#pragma once

#include "frontend/compile.h"
#include "frontend/model_registry.h"
#include "frontend/version.h"
#include "runtime/accuracy.h"
#include "runtime/allocator.h"
#include "runtime/aot/load.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/grad_mode.h"
#include "runtime/nn/nn.h"
#include "runtime/ops.h"
#include "runtime/random.h"
#include "runtime/serialize/safetensors.h"
#include "runtime/tensor.h"
#include "runtime/tracing.h"
