// nn: modules and layers (the umbrella header; include <kiln/kiln.h> instead).
#pragma once

#include "runtime/nn/activation.h"
#include "runtime/nn/attention.h"
#include "runtime/nn/container.h"
#include "runtime/nn/conv.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/embedding.h"
#include "runtime/nn/flatten.h"
#include "runtime/nn/init.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/module.h"
#include "runtime/nn/norm.h"
#include "runtime/nn/pooling.h"
#include "runtime/nn/size2.h"
#include "runtime/nn/transformer.h"
