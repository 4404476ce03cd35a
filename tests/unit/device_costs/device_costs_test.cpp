// The device cost cache (backends/common/device_costs.hpp) as both device backends use it: a second
// process reads exactly what the first measured; another key, another backend's format, a torn,
// edited or implausible file is not read (the device is measured again); and the break-even size
// the figures give.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "backends/common/device_costs.hpp"

namespace sol::backends {
namespace {

namespace fs = std::filesystem;

// Figures as measure_costs() leaves them: rounded to the file's units.
DeviceCosts measured() {
  DeviceCosts c;
  c.to_device = 25.1e9 + 0.4;
  c.to_host = 24.8e9;
  c.on_device = 2.9e12;
  c.latency = 20.123456789e-6;
  c.gemm_f32 = 51.3e12;
  c.gemm_f64 = 60.1e12;
  round_to_file_units(c);
  return c;
}

class CostCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sol-device-costs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string text(const CostCache& cache) {
    std::ifstream in(cache.path());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write(const CostCache& cache, const std::string& text) { std::ofstream(cache.path()) << text; }
  std::string dir_;
};

TEST_F(CostCacheTest, ASecondProcessReadsExactlyWhatTheFirstMeasured) {
  const CostCache first(dir_ + "/cache", "NVIDIA H200\nslot 0:25:0\ndriver 580", "sol cuda device costs v1");
  DeviceCosts none;
  EXPECT_FALSE(first.read(none));
  const DeviceCosts c = measured();
  first.write(c);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const CostCache second(dir_ + "/cache", "NVIDIA H200\nslot 0:25:0\ndriver 580", "sol cuda device costs v1");
  DeviceCosts got;
  ASSERT_TRUE(second.read(got)) << text(first);
  EXPECT_EQ(got.to_device, c.to_device);
  EXPECT_EQ(got.to_host, c.to_host);
  EXPECT_EQ(got.on_device, c.on_device);
  EXPECT_EQ(got.latency, c.latency);
  EXPECT_EQ(got.gemm_f32, c.gemm_f32);
  EXPECT_EQ(got.gemm_f64, c.gemm_f64);
  EXPECT_EQ(break_even_flops(got), break_even_flops(c));
  EXPECT_EQ(describe(got), describe(c));
}

TEST_F(CostCacheTest, AnotherDeviceOrBackendFormatIsNotRead) {
  const CostCache h200(dir_, "NVIDIA H200\nslot 0:25:0", "sol cuda device costs v1");
  h200.write(measured());
  DeviceCosts got;
  // Another slot: another file name, and its check would not match either.
  const CostCache other_slot(dir_, "NVIDIA H200\nslot 0:26:0", "sol cuda device costs v1");
  EXPECT_NE(other_slot.path(), h200.path());
  EXPECT_FALSE(other_slot.read(got));
  // The same key under another backend's format: the header differs.
  const CostCache opencl(dir_, "NVIDIA H200\nslot 0:25:0", "sol opencl device costs v1");
  ASSERT_EQ(opencl.path(), h200.path());
  EXPECT_FALSE(opencl.read(got));
  // A file of another key renamed into this one's place: its check says so.
  const CostCache other(dir_, "another device", "sol cuda device costs v1");
  other.write(measured());
  fs::rename(other.path(), h200.path());
  EXPECT_FALSE(h200.read(got));
}

TEST_F(CostCacheTest, ATornEditedOrImplausibleFileIsNotRead) {
  const CostCache cache(dir_, "device", "sol cuda device costs v1");
  cache.write(measured());
  const std::string whole = text(cache);
  DeviceCosts got;
  ASSERT_TRUE(cache.read(got));
  write(cache, whole.substr(0, whole.size() - 5));  // torn
  EXPECT_FALSE(cache.read(got));
  std::string edited = whole;
  edited.replace(edited.find("latency_ps"), 10, "latency_ns");
  write(cache, edited);
  EXPECT_FALSE(cache.read(got));
  std::string zero = whole;
  const size_t at = zero.find("gemm_f32_flops_per_s ") + std::strlen("gemm_f32_flops_per_s ");
  zero.replace(at, zero.find('\n', at) - at, "0");
  write(cache, zero);  // a device with no f32 rate: not usable
  EXPECT_FALSE(cache.read(got));
  write(cache, whole + "extra 1\n");
  EXPECT_FALSE(cache.read(got));
  write(cache, whole);
  EXPECT_TRUE(cache.read(got));
}

TEST_F(CostCacheTest, NoDirectoryKeepsNothing) {
  const CostCache cache("", "device", "sol cuda device costs v1");
  EXPECT_TRUE(cache.path().empty());
  cache.write(measured());
  DeviceCosts got;
  EXPECT_FALSE(cache.read(got));
}

TEST(DeviceCosts, BreakEvenIsWhereComputeCatchesUpWithTheFixedCosts) {
  DeviceCosts c;
  c.to_device = c.to_host = 10e9;  // bytes/s
  c.on_device = 1e12;
  c.latency = 10e-6;
  c.gemm_f32 = 10e12;
  c.gemm_f64 = 0;  // no f64: the f32 figure alone
  const double flops = break_even_flops(c);
  const double n = std::cbrt(flops / 2);
  // 2n^3 / rate == latency + n^2 * 4 bytes * (3 up + 1 back) / 10 GB/s
  const double compute = 2 * n * n * n / c.gemm_f32;
  const double fixed = c.latency + n * n * 4 * (3 / c.to_device + 1 / c.to_host);
  EXPECT_NEAR(compute / fixed, 1.0, 1e-6);
  // With both rates, the smaller of the two sizes: no node of either type below it is worth it.
  DeviceCosts f64_only = c;
  f64_only.gemm_f32 = 0;
  f64_only.gemm_f64 = 5e12;
  c.gemm_f64 = 5e12;
  EXPECT_GT(break_even_flops(f64_only), 0);
  EXPECT_EQ(break_even_flops(c), std::min(flops, break_even_flops(f64_only)));
  DeviceCosts none;
  EXPECT_EQ(break_even_flops(none), 0);
  EXPECT_NE(describe(c).find("GFLOP/s f64"), std::string::npos);
  c.gemm_f64 = 0;
  EXPECT_NE(describe(c).find("no f64"), std::string::npos);
}

}  // namespace
}  // namespace sol::backends
