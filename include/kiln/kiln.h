// kiln: the one public header. Tensors, ops, nn modules, weights, and (later) compile().
#pragma once

#include "frontend/version.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/nn/nn.h"
#include "runtime/ops.h"
#include "runtime/random.h"
#include "runtime/serialize/safetensors.h"
#include "runtime/tensor.h"
