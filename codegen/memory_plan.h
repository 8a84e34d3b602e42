// The memory plan of a runtime Plan (codegen/memory_plan.cpp says how it is chosen).
#pragma once

#include "runtime/plan.h"

namespace kiln::codegen {

/// Plans where a finished plan's kernel and library results live (Plan::set_memory).
void plan_memory(Plan& plan);

} // namespace kiln::codegen
