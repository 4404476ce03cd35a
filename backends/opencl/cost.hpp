// The figures the opencl backend measures on its device (backends/common/device_costs.hpp: the
// link's bandwidth both ways, the fixed cost of a round trip, the device's own memory bandwidth
// and CLBlast's GEMM rates), from which auto predicts a BLAS node's time here
// (backends/common/device_operand.hpp) and the size below which the device is not worth
// considering at all.
//
// Measuring takes a fraction of a second once CLBlast's GEMM kernels are compiled, and seconds
// before (pocl compiles them with LLVM), so the figures are kept on disk, keyed by everything they
// depend on; only the first process on a machine, or after a driver change, measures.
#pragma once

#include <string>

#include "backends/common/device_costs.hpp"
#include "backends/opencl/device.hpp"

namespace sol::backends::opencl {

using Costs = DeviceCosts;

// Measures the device (its queue must be idle and nobody else may use it meanwhile). false with a
// one-line `why` ("CLBlast Dgemm: CL_OUT_OF_RESOURCES") when a step fails or gives no usable figure.
bool measure_costs(Device& device, Costs& out, std::string& why);

// The device's figures on disk, in this backend's format.
inline constexpr const char* kCostCacheHeader = "sol opencl device costs v1";

}  // namespace sol::backends::opencl
