// What a device backend measured about its device (opencl, cuda): the link's bandwidth both ways,
// the fixed cost of a round trip, the device's own memory bandwidth and its GEMM rates. Each
// backend measures them and predicts a node's time from them its own way (how its operands move);
// the figures, the break-even size they give and their disk cache are the same for every device.
//
// The cache spares later processes the measurement (a fraction of a second on a GPU, seconds on
// pocl before CLBlast's kernels are compiled): <dir>/device-costs-<hash>.v1, keyed by everything
// the figures depend on, a few lines of integers whose first line repeats an independent hash of
// the key. Written atomically (temporary file, rename): concurrent processes see either no file or
// a whole one.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "common/fs_safety.hpp"
#include "common/hash.hpp"
#include "common/human.hpp"
#include "common/log.hpp"

namespace sol::backends {

struct DeviceCosts {
  double to_device = 0;  // bytes/s, host memory to device memory, waited for
  double to_host = 0;    // bytes/s, back
  double on_device = 0;  // bytes/s read plus written by a copy within device memory
  double latency = 0;    // seconds, a tiny upload, fill and download, waited for: what every node pays
  double gemm_f32 = 0;   // flops/s of the device's sgemm, operands already on the device
  double gemm_f64 = 0;   // flops/s of dgemm; 0 on a device without double precision
};

namespace device_costs_detail {

// The fields of the cache file, in their order there, as integers (bytes/s, flops/s,
// picoseconds): text that reads the same whatever locale the program set (a decimal comma).
struct Field {
  const char* name;
  double DeviceCosts::*value;
  double per_unit;  // file units per unit of the figure: 1e12 picoseconds per second
};
inline constexpr Field kFields[] = {
    {"to_device_bytes_per_s", &DeviceCosts::to_device, 1}, {"to_host_bytes_per_s", &DeviceCosts::to_host, 1},
    {"on_device_bytes_per_s", &DeviceCosts::on_device, 1}, {"latency_ps", &DeviceCosts::latency, 1e12},
    {"gemm_f32_flops_per_s", &DeviceCosts::gemm_f32, 1},   {"gemm_f64_flops_per_s", &DeviceCosts::gemm_f64, 1}};

inline bool positive(double v) noexcept {
  return std::isfinite(v) && v > 0;
}

// The least n at which 2n^3 / rate >= latency + n^2 * per_element: the surplus is negative at 0,
// falls, then rises for good, so it has one positive root, found by bisection.
inline double break_even_size(double rate, double latency, double per_element) noexcept {
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
inline std::string figure(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.3g", v);
  return buf;
}

}  // namespace device_costs_detail

// Seconds on the steady clock since t0, for a measurement.
inline double seconds_since(std::chrono::steady_clock::time_point t0) noexcept {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every figure a usable device has: the only ones that may be 0 are those of f64.
inline bool plausible(const DeviceCosts& c) noexcept {
  using device_costs_detail::positive;
  return positive(c.to_device) && positive(c.to_host) && positive(c.on_device) && positive(c.latency) &&
         positive(c.gemm_f32) && std::isfinite(c.gemm_f64) && c.gemm_f64 >= 0;
}

// Measured figures rounded to the cache file's units, so that a process reading them computes
// exactly what the measuring one did.
inline void round_to_file_units(DeviceCosts& c) noexcept {
  for (const auto& f : device_costs_detail::kFields) c.*f.value = std::round(c.*f.value * f.per_unit) / f.per_unit;
}

// The least flops of a square GEMM (n x n times n x n) whose compute time on the device, 2n^3 /
// rate, is at least its fixed costs: the latency plus A, B and C up and C back. Below it the
// device spends more time moving data than computing, whatever the CPU would take. The smaller
// of the f32 and f64 figures (no node of either type below it is worth considering); 0 when no
// rate was measured.
inline double break_even_flops(const DeviceCosts& costs) noexcept {
  double least = 0;
  const double per_byte = 3 / costs.to_device + 1 / costs.to_host;  // A, B, C up; C back
  for (const auto& [rate, size] : {std::pair{costs.gemm_f32, 4.0}, std::pair{costs.gemm_f64, 8.0}}) {
    if (!(rate > 0)) continue;
    const double n = device_costs_detail::break_even_size(rate, costs.latency, size * per_byte);
    const double flops = 2 * n * n * n;
    least = least > 0 ? std::min(least, flops) : flops;
  }
  return least;
}

// ", 5.1 GB/s to device, 4.8 GB/s back, 9.7 GB/s on device, 40.0 us latency, 21.3 GFLOP/s f32,
// 10.2 GFLOP/s f64" (", no f64" without double precision), to follow a device's description.
inline std::string describe(const DeviceCosts& c) {
  using device_costs_detail::figure;
  return ", " + figure(c.to_device / 1e9) + " GB/s to device, " + figure(c.to_host / 1e9) + " GB/s back, " +
         figure(c.on_device / 1e9) + " GB/s on device, " + human_ns(static_cast<uint64_t>(c.latency * 1e9)) +
         " latency, " + figure(c.gemm_f32 / 1e9) + " GFLOP/s f32, " +
         (c.gemm_f64 > 0 ? figure(c.gemm_f64 / 1e9) + " GFLOP/s f64" : std::string("no f64"));
}

// The figures on disk (see the top of this file). `dir` must already be trusted; "" keeps nothing.
// `header` names the backend's format ("sol opencl device costs v1"): another's file is not read.
class CostCache {
 public:
  CostCache(std::string dir, const std::string& key, const char* header)
      : dir_(std::move(dir)), header_(header), check_(hash64(key, 2)) {
    if (dir_.empty()) return;
    char file[64];
    std::snprintf(file, sizeof file, "/device-costs-%016" PRIx64 ".v1", hash64(key, 1));
    path_ = dir_ + file;
  }

  // false when there is no file for this key or it does not hold a complete, plausible set.
  bool read(DeviceCosts& out) const {
    if (path_.empty()) return false;
    const int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    // Strictly what write() writes: the header with this key's check, then every field in order.
    const std::string header = first_line();
    const std::string_view text(buf, static_cast<size_t>(n));
    if (text.substr(0, header.size()) != header) return false;
    const char* p = buf + header.size();
    DeviceCosts c;
    for (const auto& f : device_costs_detail::kFields) {
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

  void write(const DeviceCosts& costs) const {
    if (path_.empty() || !fs_safety::make_private_dir(dir_).empty()) return;
    std::string text = first_line();
    for (const auto& f : device_costs_detail::kFields) {
      char line[80];
      std::snprintf(line, sizeof line, "%s %.0f\n", f.name, costs.*f.value * f.per_unit);
      text += line;
    }
    std::string error;
    fs_safety::replace_file(path_, text, error);  // concurrent writers each rename a whole file
  }

  const std::string& path() const noexcept { return path_; }

 private:
  std::string first_line() const {
    char check[24];
    std::snprintf(check, sizeof check, " %016" PRIx64 "\n", check_);
    return header_ + check;
  }

  std::string dir_, path_;
  std::string header_;
  uint64_t check_ = 0;
};

// What a start-up thread found of the costs (find_costs_ahead).
enum class CostsFound : uint8_t { not_looked_for, from_cache, measured, failed };

// The costs from `cache`, said at debug: false when it has none.
inline bool read_costs(const char* backend, const CostCache& cache, DeviceCosts& out) {
  if (!cache.read(out)) return false;
  SOL_LOG(debug, "%s: device costs from %s", backend, cache.path().c_str());
  return true;
}

// The costs measured by `measure` (a `bool(DeviceCosts&, std::string& why)`), written to `cache`
// (when there is one) and said at info, `where` ("", ", on the start-up thread") after the time.
template <class Measure>
bool measure_costs_now(const char* backend, const std::string& device, const CostCache* cache, const char* where,
                       DeviceCosts& out, std::string& why, Measure&& measure) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!measure(out, why)) return false;
  if (cache) cache->write(out);
  SOL_LOG(info, "%s: measured %s%s in %.0f ms%s; under auto from %.3g flops", backend, device.c_str(),
          describe(out).c_str(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
          where, break_even_flops(out));
  return true;
}

// On a device's start-up thread: its costs from `cache`, else measured by `measure` and written
// there. `backend` and `device` name them in the log lines.
template <class Measure>
CostsFound find_costs_ahead(const char* backend, const std::string& device, const CostCache& cache,
                            DeviceCosts& out, std::string& why, Measure&& measure) {
  if (read_costs(backend, cache, out)) return CostsFound::from_cache;
  return measure_costs_now(backend, device, &cache, ", on the start-up thread", out, why, measure)
             ? CostsFound::measured
             : CostsFound::failed;
}

// A device backend's costs in a process: unknown until the start-up thread found them, the disk
// cache had them, or they were measured at their first need; measured at most once, and a failure
// is final (the backend is then no accelerator, with the reason in its description). Lock-free to
// read once settled.
class KnownCosts {
 public:
  explicit KnownCosts(const char* backend) : backend_(backend) {}

  // In init(), before any other use: where the figures are kept, and what a start-up thread found
  // (`found`, with `costs` or `why`); `device` names the device in a failure's warning.
  void begin(std::unique_ptr<CostCache> cache, CostsFound found, const DeviceCosts& costs, const std::string& why,
             const std::string& device) noexcept {
    cache_ = std::move(cache);
    if (found == CostsFound::not_looked_for) return;
    cache_read_ = true;
    if (found == CostsFound::failed) fail(device, why.c_str());
    else publish(costs);
  }

  const DeviceCosts* known() const noexcept {
    return state_.load(std::memory_order_acquire) == State::known ? &costs_ : nullptr;
  }
  bool failed() const noexcept { return state_.load(std::memory_order_acquire) == State::failed; }
  const std::string& why() const noexcept { return why_; }  // once failed()
  double break_even() const noexcept { return break_even_; }  // once known()

  // The costs: known, else from the disk cache (read once), else measured now by `measure` (a
  // `bool(DeviceCosts&, std::string& why)`) when `may_measure` (never in a forked child or an
  // exiting process: the caller says so). `mu` is the device's lock, held while measuring. nullptr
  // when there are none.
  template <class Measure>
  const DeviceCosts* get(bool may_measure, std::mutex& mu, const std::string& device, Measure&& measure) noexcept {
    if (state_.load(std::memory_order_acquire) != State::unknown) return known();
    std::lock_guard<std::mutex> lock(mu);
    if (state_.load(std::memory_order_relaxed) != State::unknown) return known();
    try {
      DeviceCosts c;
      if (!cache_read_) {
        cache_read_ = true;
        if (cache_ && read_costs(backend_, *cache_, c)) return publish(c);
      }
      if (!may_measure) return nullptr;
      std::string why;
      if (!measure_costs_now(backend_, device, cache_.get(), "", c, why, measure)) {
        fail(device, why.c_str());
        return nullptr;
      }
      return publish(c);
    } catch (const std::bad_alloc&) {
      fail(device, "out of memory while measuring");
    } catch (...) {
      fail(device, "unexpected error while measuring");
    }
    return nullptr;
  }

 private:
  enum class State : uint8_t { unknown, known, failed };

  const DeviceCosts* publish(const DeviceCosts& c) noexcept {
    costs_ = c;
    break_even_ = break_even_flops(c);
    state_.store(State::known, std::memory_order_release);
    return &costs_;
  }
  void fail(const std::string& device, const char* why) noexcept {
    try {
      why_ = why;
    } catch (...) {  // out of memory: the description gives no reason, the line below still does
    }
    state_.store(State::failed, std::memory_order_release);
    char cause[32];
    std::snprintf(cause, sizeof cause, "%s: costs", backend_);
    log::once(log::Level::warn, cause, "%s: not used under auto: measuring %s failed: %s", backend_, device.c_str(),
              why);
  }

  const char* backend_;
  std::unique_ptr<CostCache> cache_;
  // Written under the device's lock while state_ is unknown, read-only once it is not.
  DeviceCosts costs_;
  double break_even_ = 0;
  std::string why_;
  bool cache_read_ = false;
  std::atomic<State> state_{State::unknown};
};

}  // namespace sol::backends
