// tt-sim: api/compute/binary_max_min.h of TT-Metalium 0.81 (see tt_sim/compute.hpp).
#pragma once
#include "tt_sim/compute.hpp"
