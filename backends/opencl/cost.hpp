// What a node costs on the device, from figures measured on it: the bandwidth of the link both
// ways, the fixed cost of a round trip, the device's own memory bandwidth and its GEMM rate.
// Under auto they predict a BLAS node's time here (the router compares it with the CPU's) and give
// the size below which the device is not worth considering at all.
//
// Measuring takes a fraction of a second once CLBlast's GEMM kernels are compiled, and seconds
// before (pocl compiles them with LLVM), so the figures are kept on disk (CostCache), keyed by
// everything they depend on; only the first process on a machine, or after a driver change,
// measures (backends/common/device_costs.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "backends/common/device_costs.hpp"
#include "backends/opencl/device.hpp"
#include "capture/ir/node.hpp"

namespace sol::backends::opencl {

using Costs = DeviceCosts;  // backends/common/device_costs.hpp

// Measures the device (its queue must be idle and nobody else may use it meanwhile). false with a
// one-line `why` ("CLBlast Dgemm: CL_OUT_OF_RESOURCES") when a step fails or gives no usable figure.
bool measure_costs(Device& device, Costs& out, std::string& why);

// The predicted seconds of a valid BLAS node of `flops` work (capture::blas::flops), its operands
// moved as the backend moves them (transfer.hpp: packed to the referenced rows, an output that is
// not read zero-filled on the device instead of uploaded):
//
//     latency + bytes up / to_device + bytes down / to_host
//             + max(flops / GEMM rate of its precision, bytes read and written / on_device)
//
// The last term is a roofline: level 3 routines are bound by the rate, level 1 and 2 by device
// memory. Complex types use the rate of their real type (flops count real operations). Kernel
// launches beyond the first round trip are not counted: the model is optimistic for nodes of a
// few microseconds. < 0 for a node it cannot tell (no rate for its type: f64 without fp64).
double predict_seconds(const Costs& costs, const capture::Node& node, double flops) noexcept;

// The device's figures on disk (backends/common/device_costs.hpp), in this backend's format.
inline constexpr const char* kCostCacheHeader = "sol opencl device costs v1";

}  // namespace sol::backends::opencl
