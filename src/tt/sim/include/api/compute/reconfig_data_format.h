// tt-sim: api/compute/reconfig_data_format.h of TT-Metalium 0.81 (see tt_sim/compute.hpp).
#pragma once
#include "tt_sim/compute.hpp"
