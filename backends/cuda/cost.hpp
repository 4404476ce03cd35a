// What a node costs on the CUDA device, from figures measured on it (as the opencl backend's cost
// model): the link's bandwidth both ways, the fixed cost of a round trip, the device's own memory
// bandwidth and cuBLAS's GEMM rate. Under auto they predict a BLAS node's time here (the router
// compares it with the CPU's) and give the size below which the device is not worth considering.
// Measured once per process that asks (about 0.1 s on a datacenter GPU), never at start-up.
#pragma once

#include <string>

#include "backends/cuda/device.hpp"
#include "capture/ir/node.hpp"

namespace sol::backends::cuda {

struct Costs {
  double to_device = 0;  // bytes/s, pageable host memory to device memory, waited for
  double to_host = 0;    // bytes/s, back into pinned staging
  double on_device = 0;  // bytes/s read plus written by a copy within device memory
  double latency = 0;    // seconds: a tiny upload, a memset and a download, waited for
  double gemm_f32 = 0;   // flops/s of cuBLAS sgemm (CUBLAS_DEFAULT_MATH), operands on the device
  double gemm_f64 = 0;   // flops/s of dgemm
};

// Measures the device (its stream idle, nobody else using it meanwhile). false with a one-line
// `why` when a step fails.
bool measure_costs(Device& device, Costs& out, std::string& why);

//     latency + bytes up / to_device + bytes down / to_host
//             + max(flops / GEMM rate of its precision, bytes read and written / on_device)
// for a valid BLAS node of `flops` work whose operands move as transfer.hpp moves them.
double predict_seconds(const Costs& costs, const capture::Node& node, double flops) noexcept;

// The least flops of a square GEMM whose compute time here is at least its fixed costs (latency,
// A, B and C up, C back): the smaller of the f32 and f64 figures; 0 without a rate.
double break_even_flops(const Costs& costs) noexcept;

// ", 25.1 GB/s to device, 24.8 GB/s back, 2900 GB/s on device, 20.0 us latency, 50000 GFLOP/s
// f32, 60000 GFLOP/s f64", to follow Device::description().
std::string describe(const Costs& costs);

}  // namespace sol::backends::cuda
