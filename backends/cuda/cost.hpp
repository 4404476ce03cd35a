// The figures the cuda backend measures on its device (backends/common/device_costs.hpp: the
// link's bandwidth both ways, the fixed cost of a round trip, the device's own memory bandwidth
// and cuBLAS's GEMM rates), from which auto predicts a BLAS node's time here
// (backends/common/device_operand.hpp). Measured once per machine (about 0.45 s on an H200), on
// the start-up thread under auto.
#pragma once

#include <string>

#include "backends/common/device_costs.hpp"
#include "backends/cuda/device.hpp"

namespace sol::backends::cuda {

using Costs = DeviceCosts;

// Measures the device (its stream idle, nobody else using it meanwhile). false with a one-line
// `why` when a step fails.
bool measure_costs(Device& device, Costs& out, std::string& why);

// The device's figures on disk, in this backend's format, in the profile directory
// (hal/profile.hpp: tune.dir, else $XDG_CACHE_HOME/sol, else ~/.cache/sol): measured by the first
// process on a machine, or after a driver, cuBLAS or GPU change.
inline constexpr const char* kCostCacheHeader = "sol cuda device costs v1";

}  // namespace sol::backends::cuda
