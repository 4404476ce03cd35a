// The cuda backend's measurement of its device (Device::measure_costs; the figures are
// backends/common/device_costs.hpp's), from which auto predicts a BLAS node's time here
// (backends/common/device_operand.hpp). Measured once per machine, on the start-up thread under
// auto.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "backends/cuda/device.hpp"

namespace sol::backends::cuda {
namespace {

using Clock = std::chrono::steady_clock;
using Costs = DeviceCosts;

// Large enough that a transfer's fixed cost is noise next to its bandwidth term.
constexpr size_t kTransferBytes = size_t{32} << 20;
constexpr int kTransferRuns = 4;  // best of: the first run also maps the pages
constexpr int kLatencyRuns = 21;  // median: the fixed cost a node typically pays
// GEMM from 1024 up, doubling until one run takes kGemmMinSeconds (launch costs are then noise).
constexpr int kGemmFirstSize = 1024;
constexpr int kGemmLastSize = 8192;
constexpr double kGemmMinSeconds = 0.01;
constexpr int kGemmRuns = 3;  // best of, after an untimed run at each size

// A device allocation freed with its scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const CudartApi& rt) : rt_(rt) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) rt_.cudaFree(ptr_);
  }
  cudaError_t create(size_t bytes) { return rt_.cudaMalloc(&ptr_, bytes); }
  void* get() const noexcept { return ptr_; }

 private:
  const CudartApi& rt_;
  void* ptr_ = nullptr;
};

bool failed(const CudartApi& rt, cudaError_t err, const char* what, std::string& why) {
  if (err == cudaSuccess) return false;
  why = std::string(what) + ": " + error_text(rt, err);
  return true;
}

bool measure_transfers(Device& dev, Costs& out, std::string& why) {
  const CudartApi& rt = dev.rt();
  cudaStream_t s = dev.stream();
  // Pageable memory, written once so that its pages are resident, as a program's operands are.
  std::vector<unsigned char> host(kTransferBytes, 1);
  DeviceBuffer a(rt), b(rt);
  if (failed(rt, a.create(kTransferBytes), "cudaMalloc", why) || failed(rt, b.create(kTransferBytes), "cudaMalloc", why))
    return false;
  cudaError_t err = cudaSuccess;
  void* pinned = dev.staging(0, kTransferBytes, err);
  if (!pinned) return !failed(rt, err, "cudaMallocHost", why);
  double up = std::numeric_limits<double>::infinity(), down = up, copy = up;
  for (int i = 0; i < kTransferRuns; ++i) {
    auto t0 = Clock::now();
    if (failed(rt, rt.cudaMemcpyAsync(a.get(), host.data(), kTransferBytes, cudaMemcpyHostToDevice, s), "upload", why) ||
        failed(rt, rt.cudaStreamSynchronize(s), "cudaStreamSynchronize", why))
      return false;
    up = std::min(up, seconds_since(t0));
    t0 = Clock::now();
    if (failed(rt, rt.cudaMemcpyAsync(pinned, a.get(), kTransferBytes, cudaMemcpyDeviceToHost, s), "download", why) ||
        failed(rt, rt.cudaStreamSynchronize(s), "cudaStreamSynchronize", why))
      return false;
    down = std::min(down, seconds_since(t0));
    t0 = Clock::now();
    if (failed(rt, rt.cudaMemcpyAsync(b.get(), a.get(), kTransferBytes, cudaMemcpyDeviceToDevice, s), "copy", why) ||
        failed(rt, rt.cudaStreamSynchronize(s), "cudaStreamSynchronize", why))
      return false;
    copy = std::min(copy, seconds_since(t0));
  }
  out.to_device = kTransferBytes / up;
  out.to_host = kTransferBytes / down;
  out.on_device = 2.0 * kTransferBytes / copy;  // each byte read and written

  // The smallest node's round trip (the first one not counted).
  std::vector<double> trips;
  unsigned char word[4] = {};
  for (int i = 0; i <= kLatencyRuns; ++i) {
    const auto t0 = Clock::now();
    if (failed(rt, rt.cudaMemcpyAsync(b.get(), word, sizeof word, cudaMemcpyHostToDevice, s), "upload", why) ||
        failed(rt, rt.cudaMemsetAsync(a.get(), 0, sizeof word, s), "cudaMemsetAsync", why) ||
        failed(rt, rt.cudaMemcpyAsync(pinned, a.get(), sizeof word, cudaMemcpyDeviceToHost, s), "download", why) ||
        failed(rt, rt.cudaStreamSynchronize(s), "cudaStreamSynchronize", why))
      return false;
    if (i) trips.push_back(seconds_since(t0));
  }
  std::nth_element(trips.begin(), trips.begin() + trips.size() / 2, trips.end());
  out.latency = trips[trips.size() / 2];
  return true;
}

// cuBLAS's GEMM rate of E (float or double) on n x n operands of small normal values.
template <class E>
bool measure_gemm(Device& dev, double& rate, std::string& why) {
  const CudartApi& rt = dev.rt();
  const CublasApi& api = dev.blas();
  cudaStream_t s = dev.stream();
  for (int n = kGemmFirstSize; n <= kGemmLastSize; n *= 2) {
    const size_t bytes = static_cast<size_t>(n) * n * sizeof(E);
    DeviceBuffer a(rt), b(rt), c(rt);
    if (failed(rt, a.create(bytes), "cudaMalloc", why) || failed(rt, b.create(bytes), "cudaMalloc", why) ||
        failed(rt, c.create(bytes), "cudaMalloc", why))
      return false;
    // 0x3c bytes: about 0.0115 in f32, 1.5e-18 in f64; normal numbers, no denormal slow path.
    if (failed(rt, rt.cudaMemsetAsync(a.get(), 0x3c, bytes, s), "cudaMemsetAsync", why) ||
        failed(rt, rt.cudaMemsetAsync(b.get(), 0x3c, bytes, s), "cudaMemsetAsync", why))
      return false;
    const E one = 1, zero = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int run = 0; run <= kGemmRuns; ++run) {
      const auto t0 = Clock::now();
      cublasStatus_t st;
      if constexpr (std::is_same_v<E, float>)
        st = api.cublasSgemm(dev.handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, static_cast<E*>(a.get()), n,
                             static_cast<E*>(b.get()), n, &zero, static_cast<E*>(c.get()), n);
      else
        st = api.cublasDgemm(dev.handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, static_cast<E*>(a.get()), n,
                             static_cast<E*>(b.get()), n, &zero, static_cast<E*>(c.get()), n);
      if (st != CUBLAS_STATUS_SUCCESS) {
        why = std::string(std::is_same_v<E, float> ? "cublasSgemm: " : "cublasDgemm: ") + status_text(api, st);
        return false;
      }
      if (failed(rt, rt.cudaStreamSynchronize(s), "cudaStreamSynchronize", why)) return false;
      if (run) best = std::min(best, seconds_since(t0));
    }
    rate = 2.0 * n * n * static_cast<double>(n) / best;
    if (best >= kGemmMinSeconds) break;
  }
  return true;
}

}  // namespace

bool Device::measure_costs(DeviceCosts& out, std::string& why) {
  Costs c;
  if (!measure_transfers(*this, c, why) || !measure_gemm<float>(*this, c.gemm_f32, why) ||
      !measure_gemm<double>(*this, c.gemm_f64, why))
    return false;
  round_to_file_units(c);  // what a process reading them from the cache computes with
  if (!plausible(c) || !(c.gemm_f64 > 0)) {
    why = "a measured figure is not positive";
    return false;
  }
  out = c;
  return true;
}

}  // namespace sol::backends::cuda
