// safetensors (being written).
#pragma once
