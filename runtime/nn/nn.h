// nn modules (being written).
#pragma once
