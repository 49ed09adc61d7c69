// tt-sim: api/compute/eltwise_unary/typecast.h of TT-Metalium 0.81 (see tt_sim/compute.hpp).
#pragma once
#include "tt_sim/compute.hpp"
