// The opencl backend's measurement of its device (Device::measure_costs; the figures are
// backends/common/device_costs.hpp's), from which auto predicts a BLAS node's time here
// (backends/common/device_operand.hpp) and the size below which the device is not worth
// considering at all. Measuring takes a fraction of a second once CLBlast's GEMM kernels are
// compiled, and seconds before (pocl compiles them with LLVM), so the figures are kept on disk,
// keyed by everything they depend on: only the first process on a machine, or after a driver
// change, measures.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/opencl/clblast_programs.hpp"
#include "backends/opencl/device.hpp"

namespace sol::backends::opencl {
namespace {

using Clock = std::chrono::steady_clock;
using Costs = DeviceCosts;

// Large enough that a transfer's fixed cost is noise next to its bandwidth term, small enough to
// take milliseconds over any link.
constexpr size_t kTransferBytes = size_t{16} << 20;
constexpr int kTransferRuns = 4;  // best of: the first run also faults the device pages in
constexpr int kLatencyRuns = 21;  // median: the fixed cost a node typically pays, not the luckiest
// GEMM from 512 up: a size is kept once one run takes kGemmMinSeconds, so that the launch costs
// are noise next to the compute (a GPU needs the larger sizes); every size uses the same
// CLBlast kernels, compiled by the first untimed run.
constexpr size_t kGemmFirstSize = 512;
constexpr size_t kGemmLastSize = 2048;
constexpr double kGemmMinSeconds = 0.02;
constexpr int kGemmRuns = 3;  // best of, after an untimed run at each size

// Sets `why` for a failed step; true when `status` is a failure.
bool failed(int status, const char* what, std::string& why) {
  if (status == CL_SUCCESS) return false;
  why = std::string(what) + ": " + status_name(status);
  return true;
}

// A device buffer released with its scope.
class Buffer {
 public:
  explicit Buffer(const Device& dev) : cl_(dev.cl()), context_(dev.context()) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (mem_) cl_.clReleaseMemObject(mem_);
  }
  cl_int create(size_t bytes) {
    cl_int err = CL_SUCCESS;
    mem_ = cl_.clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    return mem_ ? CL_SUCCESS : err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE;
  }
  cl_mem get() const noexcept { return mem_; }

 private:
  const ClApi& cl_;
  cl_context context_;
  cl_mem mem_ = nullptr;
};

// to_device, to_host, on_device and latency.
bool measure_transfers(Device& dev, Costs& out, std::string& why) {
  const ClApi& cl = dev.cl();
  cl_command_queue q = dev.queue();
  const size_t bytes = std::min(kTransferBytes, dev.max_alloc());
  // Written once so that its pages are resident, as a program's operands are.
  std::vector<unsigned char> host(bytes, 1);
  Buffer a(dev), b(dev);
  if (failed(a.create(bytes), "clCreateBuffer", why) || failed(b.create(bytes), "clCreateBuffer", why))
    return false;

  double up = std::numeric_limits<double>::infinity(), down = up, copy = up;
  for (int i = 0; i < kTransferRuns; ++i) {
    auto t0 = Clock::now();
    if (failed(cl.clEnqueueWriteBuffer(q, a.get(), CL_TRUE, 0, bytes, host.data(), 0, nullptr, nullptr),
               "clEnqueueWriteBuffer", why))
      return false;
    up = std::min(up, seconds_since(t0));
    t0 = Clock::now();
    if (failed(cl.clEnqueueReadBuffer(q, a.get(), CL_TRUE, 0, bytes, host.data(), 0, nullptr, nullptr),
               "clEnqueueReadBuffer", why))
      return false;
    down = std::min(down, seconds_since(t0));
    t0 = Clock::now();
    if (failed(cl.clEnqueueCopyBuffer(q, a.get(), b.get(), 0, 0, bytes, 0, nullptr, nullptr),
               "clEnqueueCopyBuffer", why) ||
        failed(cl.clFinish(q), "clFinish", why))
      return false;
    copy = std::min(copy, seconds_since(t0));
  }
  out.to_device = static_cast<double>(bytes) / up;
  out.to_host = static_cast<double>(bytes) / down;
  out.on_device = 2.0 * static_cast<double>(bytes) / copy;  // each byte read and written

  // The smallest node's round trip: an operand up, one command on the device (a fill: a kernel
  // launch on GPU drivers, nothing of ours to compile), a result down, the wait for all three.
  // The first trip is not counted (the queue's first commands may set things up).
  std::vector<double> trips;
  unsigned char word[4] = {}, back[4] = {};
  const unsigned char zero = 0;
  for (int i = 0; i <= kLatencyRuns; ++i) {
    const auto t0 = Clock::now();
    if (failed(cl.clEnqueueWriteBuffer(q, b.get(), CL_FALSE, 0, sizeof word, word, 0, nullptr, nullptr),
               "clEnqueueWriteBuffer", why) ||
        failed(cl.clEnqueueFillBuffer(q, b.get(), &zero, sizeof zero, sizeof word, sizeof word, 0, nullptr,
                                      nullptr),
               "clEnqueueFillBuffer", why) ||
        failed(cl.clEnqueueReadBuffer(q, b.get(), CL_TRUE, 0, sizeof back, back, 0, nullptr, nullptr),
               "clEnqueueReadBuffer", why))
      return false;
    if (i > 0) trips.push_back(seconds_since(t0));
  }
  std::nth_element(trips.begin(), trips.begin() + kLatencyRuns / 2, trips.end());
  out.latency = trips[kLatencyRuns / 2];
  return true;
}

constexpr CLBlastLayout kColMajor = CLBlastLayoutColMajor;
constexpr CLBlastTranspose kNo = CLBlastTransposeNo;

template <class T>
constexpr const char* kGemmName = std::is_same_v<T, float> ? "CLBlast Sgemm" : "CLBlast Dgemm";

// C = A * B, n x n, as blas_run() calls CLBlast for gemm (with a temporary buffer of ours).
template <class T>
CLBlastStatusCode gemm(const ClblastApi& api, size_t n, cl_mem a, cl_mem b, cl_mem c, cl_command_queue* q,
                       cl_event* ev, cl_mem temp) {
  if constexpr (std::is_same_v<T, float>)
    return api.SgemmWithTempBuffer(kColMajor, kNo, kNo, n, n, n, 1.0f, a, 0, n, b, 0, n, 0.0f, c, 0, n, q, ev,
                                   temp);
  else
    return api.DgemmWithTempBuffer(kColMajor, kNo, kNo, n, n, n, 1.0, a, 0, n, b, 0, n, 0.0, c, 0, n, q, ev,
                                   temp);
}

// The best time of an n x n GEMM, its operands already on the device.
template <class T>
bool time_gemm(Device& dev, size_t n, double& seconds, std::string& why) {
  const ClApi& cl = dev.cl();
  const ClblastApi& api = dev.clblast();
  cl_command_queue q = dev.queue();
  const size_t bytes = n * n * sizeof(T);
  Buffer a(dev), b(dev), c(dev), temp(dev);
  if (failed(a.create(bytes), "clCreateBuffer", why) || failed(b.create(bytes), "clCreateBuffer", why) ||
      failed(c.create(bytes), "clCreateBuffer", why))
    return false;
  // Plain numbers: uninitialised device memory may hold denormals, which are slow on CPUs.
  const T half = T(0.5);
  if (failed(cl.clEnqueueFillBuffer(q, a.get(), &half, sizeof half, 0, bytes, 0, nullptr, nullptr),
             "clEnqueueFillBuffer", why) ||
      failed(cl.clEnqueueFillBuffer(q, b.get(), &half, sizeof half, 0, bytes, 0, nullptr, nullptr),
             "clEnqueueFillBuffer", why))
    return false;
  size_t temp_bytes = 0;
  const auto size_fn = std::is_same_v<T, float> ? api.SGemmTempBufferSize : api.DGemmTempBufferSize;
  if (failed(size_fn(kColMajor, kNo, kNo, n, n, n, 0, n, 0, n, 0, n, &q, &temp_bytes), kGemmName<T>, why) ||
      failed(temp.create(std::max<size_t>(temp_bytes, 64)), "clCreateBuffer", why))
    return false;

  seconds = std::numeric_limits<double>::infinity();
  const clblast_programs::Routine routine(std::is_same_v<T, float> ? 's' : 'd', "gemm");
  for (int i = 0; i <= kGemmRuns; ++i) {
    const auto t0 = Clock::now();
    cl_event ev = nullptr;
    const CLBlastStatusCode st = gemm<T>(api, n, a.get(), b.get(), c.get(), &q, &ev, temp.get());
    if (ev) cl.clReleaseEvent(ev);
    if (failed(st, kGemmName<T>, why) || failed(cl.clFinish(q), "clFinish", why)) return false;
    if (i > 0) seconds = std::min(seconds, seconds_since(t0));  // the first run compiles or warms up
  }
  return true;
}

template <class T>
bool measure_gemm(Device& dev, double& rate, std::string& why) {
  rate = 0;
  for (size_t n = kGemmFirstSize; n <= kGemmLastSize && n * n * sizeof(T) <= dev.max_alloc(); n *= 2) {
    double seconds = 0;
    if (!time_gemm<T>(dev, n, seconds, why)) return false;
    rate = 2.0 * static_cast<double>(n * n * n) / seconds;
    if (seconds >= kGemmMinSeconds) break;
  }
  if (rate > 0) return true;
  why = std::string(kGemmName<T>) + ": the device's largest buffer cannot hold a 512 x 512 matrix";
  return false;
}

}  // namespace

bool Device::measure_costs(DeviceCosts& out, std::string& why) {
  Costs c;
  if (!measure_transfers(*this, c, why) || !measure_gemm<float>(*this, c.gemm_f32, why)) return false;
  if (has_fp64() && !measure_gemm<double>(*this, c.gemm_f64, why)) return false;
  round_to_file_units(c);
  if (!plausible(c)) {
    why = "implausible figures (a timer that does not advance?)";
    return false;
  }
  out = c;
  return true;
}

}  // namespace sol::backends::opencl
