// tt-sim: api/compute/compute_kernel_hw_startup.h of TT-Metalium 0.81 (see tt_sim/compute.hpp).
#pragma once
#include "tt_sim/compute.hpp"
