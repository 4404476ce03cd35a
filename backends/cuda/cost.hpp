// What a node costs on the CUDA device, from figures measured on it (as the opencl backend's cost
// model): the link's bandwidth both ways, the fixed cost of a round trip, the device's own memory
// bandwidth and cuBLAS's GEMM rate. Under auto they predict a BLAS node's time here (the router
// compares it with the CPU's) and give the size below which the device is not worth considering.
// Measured once per machine (about 0.45 s on an H200), on the start-up thread under auto.
#pragma once

#include <string>

#include "backends/common/device_costs.hpp"
#include "backends/cuda/device.hpp"
#include "capture/ir/node.hpp"

namespace sol::backends::cuda {

using Costs = DeviceCosts;  // backends/common/device_costs.hpp

// Measures the device (its stream idle, nobody else using it meanwhile). false with a one-line
// `why` when a step fails.
bool measure_costs(Device& device, Costs& out, std::string& why);

//     latency + bytes up / to_device + bytes down / to_host
//             + max(flops / GEMM rate of its precision, bytes read and written / on_device)
// for a valid BLAS node of `flops` work whose operands move as transfer.hpp moves them.
double predict_seconds(const Costs& costs, const capture::Node& node, double flops) noexcept;

// The device's figures on disk (backends/common/device_costs.hpp), in this backend's format, in the
// profile directory (hal/profile.hpp: tune.dir, else $XDG_CACHE_HOME/sol, else ~/.cache/sol):
// measured by the first process on a machine, or after a driver, cuBLAS or GPU change.
inline constexpr const char* kCostCacheHeader = "sol cuda device costs v1";

}  // namespace sol::backends::cuda
