// The opencl backend on the accelerator path, which pocl's CPU device reaches through
// SOL_TEST_OPENCL_ACCELERATOR=1: the measured costs, the estimates and the threshold derived from
// them, an explicit threshold, the disk cache that spares a second process the measurement, and
// the device inventory, which must keep the device's real answer. An executable of its own, so
// that the switch never reaches the shared backend of the other opencl tests. Every check compares
// the estimates with the measured figures they come from, never with a time: a loaded machine
// changes the figures, not the verdicts (the times printed are for reading only).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "backends/opencl/opencl.hpp"
#include "capture/blas/blas.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "harness.hpp"

namespace sol::test {
namespace {

using capture::Node;
using capture::Scalar;
using Hint = hal::Backend::Hint;
namespace fs = std::filesystem;

// Sets the switch for a scope: the backend reads it in init() and accelerator_hint().
class ForcedAccelerator {
 public:
  ForcedAccelerator() { ::setenv("SOL_TEST_OPENCL_ACCELERATOR", "1", 1); }
  ~ForcedAccelerator() { ::unsetenv("SOL_TEST_OPENCL_ACCELERATOR"); }
};

// Debug lines captured from stderr for a scope's calls.
class CapturedLog {
 public:
  CapturedLog() : saved_(log::level()) {
    log::set_level(log::Level::debug);
    testing::internal::CaptureStderr();
  }
  ~CapturedLog() {
    if (!done_) text();
  }
  const std::string& text() {
    if (!done_) {
      text_ = testing::internal::GetCapturedStderr();
      log::set_level(saved_);
      done_ = true;
    }
    return text_;
  }

 private:
  log::Level saved_;
  std::string text_;
  bool done_ = false;
};

// The figures as the cache file holds them (backends/opencl/cost.cpp), exact where device() rounds.
struct Figures {
  double to_device = 0, to_host = 0, on_device = 0, latency = 0, gemm_f32 = 0, gemm_f64 = 0;
};

std::string cost_file(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("device-costs-", 0) == 0) return e.path();
  return {};
}

bool read_figures(const std::string& path, Figures& f) {
  std::ifstream in(path);
  std::string header, name;
  std::getline(in, header);
  std::map<std::string, double> v;
  unsigned long long units = 0;
  while (in >> name >> units) v[name] = static_cast<double>(units);
  f.to_device = v["to_device_bytes_per_s"];
  f.to_host = v["to_host_bytes_per_s"];
  f.on_device = v["on_device_bytes_per_s"];
  f.latency = v["latency_ps"] * 1e-12;
  f.gemm_f32 = v["gemm_f32_flops_per_s"];
  f.gemm_f64 = v["gemm_f64_flops_per_s"];
  return v.size() == 6;
}

// C = A * B + C, all n x n. The operands are never read: an estimate looks at shapes only.
Node square_gemm(const char* routine, int64_t n, double beta) {
  static double any;
  Node node = blas_node(routine);
  auto& p = node.blas;
  p.transa = p.transb = 'N';
  p.m = p.n = p.k = p.lda = p.ldb = p.ldc = n;
  p.alpha = Scalar(1.0), p.beta = Scalar(beta);
  p.a = p.b = p.c = &any;
  return node;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(OpenclCosts, MeasuredOnceThenReadFromTheCache) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  ForcedAccelerator forced;
  const config::Config cfg = test_config(dir);

  auto first = backends::opencl::create();
  std::string why;
  if (!first->init(cfg, why)) GTEST_SKIP() << "no usable OpenCL device: " << why;
  EXPECT_TRUE(first->accelerator());
  EXPECT_EQ(first->accelerator_hint(cfg), Hint::yes);
  EXPECT_EQ(first->device().find("GB/s"), std::string::npos) << "nothing measured or cached yet";

  double threshold = 0, cold_ms = 0;
  {
    CapturedLog log;
    const auto t0 = std::chrono::steady_clock::now();
    threshold = first->min_flops();
    cold_ms = ms_since(t0);
    EXPECT_NE(log.text().find("opencl: measured"), std::string::npos) << log.text();
  }
  EXPECT_GT(threshold, 0);
  const std::string description = first->device();
  EXPECT_NE(description.find("GB/s to device"), std::string::npos) << description;
  EXPECT_NE(description.find("GFLOP/s f32"), std::string::npos) << description;

  const std::string path = cost_file(dir);
  ASSERT_FALSE(path.empty()) << "no cost file in " << dir;
  Figures f;
  ASSERT_TRUE(read_figures(path, f)) << path;
  EXPECT_GT(f.to_device, 0);
  EXPECT_GT(f.to_host, 0);
  EXPECT_GT(f.on_device, 0);
  EXPECT_GT(f.latency, 0);
  EXPECT_GT(f.gemm_f32, 0);
  EXPECT_EQ(f.gemm_f64 > 0, description.find("no f64") == std::string::npos) << description;

  // Estimates grow with the size and cover at least the latency, the operands' transfers and
  // the compute at the measured rate.
  double previous = 0;
  for (int64_t n : {8, 64, 256, 1024}) {
    const Node gemm = square_gemm("sgemm", n, 1.0);
    const double flops = capture::blas::flops(gemm);
    const double est = first->estimate_seconds(gemm, flops);
    const double bytes = static_cast<double>(n * n) * sizeof(float);
    const double transfers = 3 * bytes / f.to_device + bytes / f.to_host;  // A, B, C up; C back
    EXPECT_GT(est, previous) << n;
    EXPECT_GT(est, transfers) << n;
    EXPECT_GE(est * (1 + 1e-12), f.latency + transfers + flops / f.gemm_f32) << n;
    previous = est;
  }
  // C is not uploaded when beta == 0; double precision moves twice the bytes at its own rate.
  const Node gemm = square_gemm("sgemm", 256, 1.0);
  const double flops = capture::blas::flops(gemm);
  const double est = first->estimate_seconds(gemm, flops);
  EXPECT_LT(first->estimate_seconds(square_gemm("sgemm", 256, 0.0), flops), est);
  if (f.gemm_f64 > 0) {
    // Compared without the compute, whose rates are measured (on a loaded machine f64 may come
    // out faster than f32): the fixed costs and transfers of twice the bytes are larger.
    const double est_d = first->estimate_seconds(square_gemm("dgemm", 256, 1.0), flops);
    const double bytes_d = 256.0 * 256.0 * sizeof(double);
    EXPECT_GE(est_d * (1 + 1e-12), f.latency + 3 * bytes_d / f.to_device + bytes_d / f.to_host + flops / f.gemm_f64);
    EXPECT_GT(est_d - flops / f.gemm_f64, est - flops / f.gemm_f32);
  }
  EXPECT_LT(first->estimate_seconds(blas_node("srotg"), 6), 0) << "a node the backend declines";

  // The threshold is where a square GEMM's compute time meets its fixed costs, in the precision
  // that gets there first.
  const double n = std::cbrt(threshold / 2);
  double closest = 1e300, highest = 0;
  for (const auto& [rate, size] : {std::pair{f.gemm_f32, 4.0}, std::pair{f.gemm_f64, 8.0}}) {
    if (rate <= 0) continue;
    const double ratio = (threshold / rate) / (f.latency + n * n * size * (3 / f.to_device + 1 / f.to_host));
    closest = std::min(closest, std::abs(ratio - 1));
    highest = std::max(highest, ratio);
  }
  EXPECT_LT(closest, 1e-6);
  EXPECT_LT(highest, 1 + 1e-6);

  // A second instance (another process, in effect) reads the figures instead of measuring.
  auto second = backends::opencl::create();
  ASSERT_TRUE(second->init(cfg, why)) << why;
  double warm_ms = 0;
  {
    CapturedLog log;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(second->min_flops(), threshold);
    warm_ms = ms_since(t0);
    EXPECT_NE(log.text().find("opencl: device costs from " + path), std::string::npos) << log.text();
    EXPECT_EQ(log.text().find("opencl: measured"), std::string::npos) << log.text();
  }
  EXPECT_EQ(second->device(), description);
  EXPECT_EQ(second->estimate_seconds(gemm, flops), est);

  // An explicit threshold wins; estimates still come from the cached figures.
  config::Config explicit_cfg = cfg;
  explicit_cfg.opencl_min_flops = 12345;
  auto third = backends::opencl::create();
  ASSERT_TRUE(third->init(explicit_cfg, why)) << why;
  EXPECT_EQ(third->min_flops(), 12345.0);
  EXPECT_EQ(third->estimate_seconds(gemm, flops), est);

  std::printf(
      "[ timing   ] %s\n[ timing   ] costs measured in %.0f ms, read from the cache in %.2f ms; "
      "threshold %.3g flops\n",
      description.c_str(), cold_ms, warm_ms, threshold);
  fs::remove_all(dir);
}

// With an explicit threshold and nothing cached the device is never measured: no estimates.
TEST(OpenclCosts, ExplicitThresholdNeverMeasures) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  ForcedAccelerator forced;
  config::Config cfg = test_config(dir);
  cfg.opencl_min_flops = 12345;
  auto backend = backends::opencl::create();
  std::string why;
  if (!backend->init(cfg, why)) GTEST_SKIP() << "no usable OpenCL device: " << why;
  CapturedLog log;
  EXPECT_EQ(backend->min_flops(), 12345.0);
  const Node gemm = square_gemm("sgemm", 512, 1.0);
  EXPECT_LT(backend->estimate_seconds(gemm, capture::blas::flops(gemm)), 0);
  EXPECT_EQ(backend->device().find("GB/s"), std::string::npos);
  EXPECT_TRUE(backend->accelerator());
  EXPECT_EQ(log.text().find("opencl: measured"), std::string::npos) << log.text();
  EXPECT_EQ(cost_file(dir), "");
  fs::remove_all(dir);
}

// The switch does not reach the device inventory: a process without it gets the real answer.
TEST(OpenclCosts, InventoryKeepsTheRealAnswer) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  const config::Config cfg = test_config(dir);
  std::string why;
  {
    ForcedAccelerator forced;
    auto backend = backends::opencl::create();
    if (!backend->init(cfg, why)) GTEST_SKIP() << "no usable OpenCL device: " << why;
    EXPECT_TRUE(backend->accelerator());
  }
  auto plain = backends::opencl::create();
  const Hint hint = plain->accelerator_hint(cfg);  // what the forced process left in the inventory
  ASSERT_TRUE(plain->init(cfg, why)) << why;
  EXPECT_EQ(hint, plain->accelerator() ? Hint::yes : Hint::no);
  if (!plain->accelerator()) {  // pocl: a CPU device has no threshold and no estimates
    const Node gemm = square_gemm("sgemm", 512, 1.0);
    EXPECT_EQ(plain->min_flops(), 0.0);
    EXPECT_LT(plain->estimate_seconds(gemm, capture::blas::flops(gemm)), 0);
    EXPECT_EQ(cost_file(dir), "");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sol::test
