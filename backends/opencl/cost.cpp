#include "backends/opencl/cost.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/opencl/clblast_programs.hpp"
#include "backends/opencl/program_cache.hpp"
#include "backends/opencl/transfer.hpp"
#include "common/fs_safety.hpp"
#include "common/human.hpp"

namespace sol::backends::opencl {
namespace {

using Clock = std::chrono::steady_clock;

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

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

bool positive(double v) noexcept {
  return std::isfinite(v) && v > 0;
}

// Every figure a usable device has: the only ones that may be 0 are those of f64.
bool plausible(const Costs& c) noexcept {
  return positive(c.to_device) && positive(c.to_host) && positive(c.on_device) && positive(c.latency) &&
         positive(c.gemm_f32) && std::isfinite(c.gemm_f64) && c.gemm_f64 >= 0;
}

// The least n at which 2n^3 / rate >= latency + n^2 * per_element: the surplus is negative at 0,
// falls, then rises for good, so it has one positive root, found by bisection.
double break_even_size(double rate, double latency, double per_element) noexcept {
  const auto surplus = [&](double n) { return 2 * n * n * n / rate - n * n * per_element - latency; };
  double lo = 0, hi = 1;
  while (surplus(hi) < 0) {
    lo = hi;
    hi *= 2;
  }
  for (int i = 0; i < 64; ++i) {
    const double mid = (lo + hi) / 2;
    (surplus(mid) < 0 ? lo : hi) = mid;
  }
  return hi;
}

// Three significant digits, without an exponent up to thousands: "5.12", "21.3", "143", "2048".
std::string figure(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.3g", v);
  return buf;
}

// The fields of the cache file, in their order there, as integers (bytes/s, flops/s,
// picoseconds): text that reads the same whatever locale the program set (a decimal comma).
// Measured figures are rounded to the same units, so that a process reading them computes exactly
// what the measuring one did.
struct Field {
  const char* name;
  double Costs::*value;
  double per_unit;  // file units per unit of the figure: 1e12 picoseconds per second
};
constexpr Field kFields[] = {
    {"to_device_bytes_per_s", &Costs::to_device, 1}, {"to_host_bytes_per_s", &Costs::to_host, 1},
    {"on_device_bytes_per_s", &Costs::on_device, 1}, {"latency_ps", &Costs::latency, 1e12},
    {"gemm_f32_flops_per_s", &Costs::gemm_f32, 1},   {"gemm_f64_flops_per_s", &Costs::gemm_f64, 1}};
constexpr const char* kHeader = "sol opencl device costs v1";

}  // namespace

bool measure_costs(Device& device, Costs& out, std::string& why) {
  Costs c;
  if (!measure_transfers(device, c, why) || !measure_gemm<float>(device, c.gemm_f32, why)) return false;
  if (device.has_fp64() && !measure_gemm<double>(device, c.gemm_f64, why)) return false;
  for (const Field& f : kFields) c.*f.value = std::round(c.*f.value * f.per_unit) / f.per_unit;
  if (!plausible(c)) {
    why = "implausible figures (a timer that does not advance?)";
    return false;
  }
  out = c;
  return true;
}

double predict_seconds(const Costs& costs, const capture::Node& node, double flops) noexcept {
  double rate = 0;
  switch (node.dtype) {
    case capture::DType::f32:
    case capture::DType::c64: rate = costs.gemm_f32; break;
    case capture::DType::f64:
    case capture::DType::c128: rate = costs.gemm_f64; break;
    default: break;
  }
  if (!(rate > 0)) return -1;
  Operand ops[kMaxJobOperands];
  const int count = describe(node, ops);
  double up = 0, down = 0;
  for (int i = 0; i < count; ++i) {
    const double bytes = static_cast<double>(ops[i].device_bytes);
    if (ops[i].ext.read) up += bytes;
    if (ops[i].ext.written) down += bytes;
  }
  const double compute = std::max(std::max(flops, 0.0) / rate, (up + down) / costs.on_device);
  return costs.latency + up / costs.to_device + down / costs.to_host + compute;
}

double break_even_flops(const Costs& costs) noexcept {
  double least = 0;
  const double per_byte = 3 / costs.to_device + 1 / costs.to_host;  // A, B, C up; C back
  for (const auto& [rate, size] : {std::pair{costs.gemm_f32, 4.0}, std::pair{costs.gemm_f64, 8.0}}) {
    if (!(rate > 0)) continue;
    const double n = break_even_size(rate, costs.latency, size * per_byte);
    const double flops = 2 * n * n * n;
    least = least > 0 ? std::min(least, flops) : flops;
  }
  return least;
}

std::string describe(const Costs& c) {
  return ", " + figure(c.to_device / 1e9) + " GB/s to device, " + figure(c.to_host / 1e9) + " GB/s back, " +
         figure(c.on_device / 1e9) + " GB/s on device, " + human_ns(static_cast<uint64_t>(c.latency * 1e9)) +
         " latency, " + figure(c.gemm_f32 / 1e9) + " GFLOP/s f32, " +
         (c.gemm_f64 > 0 ? figure(c.gemm_f64 / 1e9) + " GFLOP/s f64" : std::string("no f64"));
}

CostCache::CostCache(std::string dir, const std::string& key) : dir_(std::move(dir)), check_(hash64(key, 2)) {
  if (dir_.empty()) return;
  char file[64];
  std::snprintf(file, sizeof file, "/device-costs-%016" PRIx64 ".v1", hash64(key, 1));
  path_ = dir_ + file;
}

bool CostCache::read(Costs& out) const {
  if (path_.empty()) return false;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';

  // Strictly what write() writes: the header with this key's check, then every field in order.
  char header[80];
  std::snprintf(header, sizeof header, "%s %016" PRIx64 "\n", kHeader, check_);
  const std::string_view text(buf, static_cast<size_t>(n));
  if (text.substr(0, std::strlen(header)) != header) return false;
  const char* p = buf + std::strlen(header);
  Costs c;
  for (const Field& f : kFields) {
    const size_t len = std::strlen(f.name);
    if (std::strncmp(p, f.name, len) != 0 || p[len] != ' ') return false;
    char* end = nullptr;
    const unsigned long long units = std::strtoull(p + len + 1, &end, 10);
    if (end == p + len + 1 || *end != '\n') return false;
    c.*f.value = static_cast<double>(units) / f.per_unit;
    p = end + 1;
  }
  if (*p != '\0' || !plausible(c)) return false;
  out = c;
  return true;
}

void CostCache::write(const Costs& costs) const {
  if (path_.empty() || !fs_safety::make_private_dir(dir_).empty()) return;
  std::string text = kHeader;
  char line[80];
  std::snprintf(line, sizeof line, " %016" PRIx64 "\n", check_);
  text += line;
  for (const Field& f : kFields) {
    std::snprintf(line, sizeof line, "%s %.0f\n", f.name, costs.*f.value * f.per_unit);
    text += line;
  }
  // Concurrent writers each rename a whole file into place.
  std::string error;
  fs_safety::replace_file(path_, text, error);
}

}  // namespace sol::backends::opencl
