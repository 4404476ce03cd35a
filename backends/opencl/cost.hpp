// What a node costs on the device, from figures measured on it: the bandwidth of the link both
// ways, the fixed cost of a round trip, the device's own memory bandwidth and its GEMM rate.
// Under auto they predict a BLAS node's time here (the router compares it with the CPU's) and give
// the size below which the device is not worth considering at all.
//
// Measuring takes a fraction of a second once CLBlast's GEMM kernels are compiled, and seconds
// before (pocl compiles them with LLVM), so the figures are kept on disk (CostCache), keyed by
// everything they depend on; only the first process on a machine, or after a driver change,
// measures.
#pragma once

#include <cstdint>
#include <string>

#include "backends/opencl/device.hpp"
#include "capture/ir/node.hpp"

namespace sol::backends::opencl {

struct Costs {
  double to_device = 0;  // bytes/s, host memory to a device buffer (a blocking write)
  double to_host = 0;    // bytes/s, back (a blocking read)
  double on_device = 0;  // bytes/s read plus written by a copy within device memory
  double latency = 0;    // seconds, a tiny write, fill and read, waited for: what every node pays
  double gemm_f32 = 0;   // flops/s of CLBlast's sgemm, operands already on the device
  double gemm_f64 = 0;   // flops/s of dgemm; 0 on a device without double precision
};

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

// The least flops of a square GEMM (n x n times n x n) whose compute time on the device, 2n^3 /
// rate, is at least its fixed costs: the latency plus A, B and C up and C back. Below it the
// device spends more time moving data than computing, whatever the CPU would take. The smaller
// of the f32 and f64 figures (no node of either type below it is worth considering); 0 when no
// rate was measured.
double break_even_flops(const Costs& costs) noexcept;

// ", 5.1 GB/s to device, 4.8 GB/s back, 9.7 GB/s on device, 40.0 us latency, 21.3 GFLOP/s f32,
// 10.2 GFLOP/s f64" (", no f64" without double precision), to follow Device::description().
std::string describe(const Costs& costs);

// The figures on disk: <dir>/device-costs-<hash>.v1, a few lines of text whose first line repeats
// an independent hash of the key. `dir` must already be trusted (trusted_cache_dir); "" keeps
// nothing. Written atomically (temporary file, rename), so that concurrent processes see either
// no file or a whole one.
class CostCache {
 public:
  // `key`: everything the figures depend on (device identity, driver, ICD inventory, CLBlast).
  CostCache(std::string dir, const std::string& key);

  // false when there is no file for this key or it does not hold a complete set of figures.
  bool read(Costs& out) const;
  void write(const Costs& costs) const;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string dir_, path_;
  uint64_t check_ = 0;
};

}  // namespace sol::backends::opencl
