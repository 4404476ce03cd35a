// The cuda backend without a GPU: its libraries resolve (every function the tables name exists
// in the installed cuBLAS and CUDA runtime), init() says why the backend is unavailable, the
// operands' device layout, and the cost model's arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "backends/common/device_costs.hpp"
#include "backends/cuda/api.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/transfer.hpp"
#include "capture/blas/blas.hpp"
#include "config/config.hpp"
#include "harness.hpp"
#include "reference_blas.hpp"

namespace sol::backends::cuda {
std::unique_ptr<hal::Backend> create();
}

namespace sol::test {
namespace {

using namespace sol::backends::cuda;
using backends::kMaxJobOperands;
using Costs = backends::DeviceCosts;
using backends::predict_seconds;
using backends::Shape;

int describe(const capture::Node& node, Operand* ops) {
  return backends::describe_operands<Operand, kMaxJobOperands>(node, ops);
}

bool missing_library(const std::string& why) {
  return why.find("cannot open shared object file") != std::string::npos;
}

TEST(CudaLibraries, ResolveEveryFunction) {
  Libraries libs;
  std::string why;
  if (!load_libraries(libs, why)) {
    if (missing_library(why)) GTEST_SKIP() << "CUDA 13 is not installed here: " << why;
    FAIL() << why;  // installed, but a function of the tables is missing
  }
  EXPECT_NE(libs.blas.cublasSgemm, nullptr);
  EXPECT_NE(libs.blas.cublasZtrsm, nullptr);
  EXPECT_NE(libs.rt.cudaMemcpy2DAsync, nullptr);
  EXPECT_FALSE(libs.cublas_path.empty());
  // Error texts come from the runtime itself.
  EXPECT_NE(error_text(libs.rt, cudaErrorNoDevice).find("cudaErrorNoDevice"), std::string::npos);
}

// With a GPU it initialises and describes itself; without one (or without CUDA) it says why, in
// the terms `sol backends` prints.
TEST(CudaInit, AvailableOrSaysWhy) {
  auto backend = create();
  EXPECT_STREQ(backend->name(), "cuda");
  EXPECT_TRUE(backend->device_backend());
  std::string why;
  if (backend->init(test_config(make_temp_dir()), why)) {
    EXPECT_NE(backend->device().find("cuBLAS"), std::string::npos) << backend->device();
    EXPECT_NE(backend->memory(), nullptr);
    return;
  }
  EXPECT_TRUE(why.rfind("no CUDA device: cudaGetDeviceCount: ", 0) == 0 || missing_library(why)) << why;
  // Unavailable: the hint never makes auto initialise it in vain where no NVIDIA driver is loaded.
  if (why.find("cudaErrorNoDevice") != std::string::npos || missing_library(why)) {
    EXPECT_NE(backend->accelerator_hint(test_config(make_temp_dir())), hal::Backend::Hint::yes);
  }
}

// Operands are packed to the rows the routine references; vectors gathered contiguous.
TEST(CudaLayout, PacksOperandsToReferencedRows) {
  std::vector<float> a(100 * 7), b(7 * 5), c(60 * 5);
  capture::Node node = blas_node("sgemm");
  auto& g = node.blas;
  g.layout = 'C', g.transa = 'N', g.transb = 'N', g.m = 10, g.n = 5, g.k = 7;
  g.lda = 100, g.ldb = 7, g.ldc = 60, g.a = a.data(), g.b = b.data(), g.c = c.data();
  g.alpha = capture::Scalar(1.0), g.beta = capture::Scalar(0.0);
  Operand ops[kMaxJobOperands];
  ASSERT_EQ(describe(node, ops), 3);
  for (const Operand& o : ops) {
    if (!o.ext.ptr) continue;
    EXPECT_EQ(o.shape, Shape::general);
    EXPECT_EQ(o.dld, o.rows);
    EXPECT_EQ(o.device_bytes, static_cast<size_t>(o.rows * o.cols) * sizeof(float));
  }
  EXPECT_EQ(ops[0].device_bytes, 10u * 7 * 4);  // not lda * k
  EXPECT_FALSE(ops[2].ext.read);               // beta == 0: C is zero-filled on the device, not uploaded

  std::vector<double> x(1 + 4 * 3), y(9);
  capture::Node dot = blas_node("ddot");
  dot.blas.layout = 'C', dot.blas.n = 4, dot.blas.incx = -3, dot.blas.incy = 2, dot.blas.x = x.data(),
  dot.blas.y = y.data();
  ASSERT_EQ(describe(dot, ops), 2);
  EXPECT_EQ(ops[0].shape, Shape::vector);
  EXPECT_EQ(ops[0].device_bytes, 4u * sizeof(double));
  EXPECT_EQ(ops[1].device_bytes, 4u * sizeof(double));
}

Costs example_costs() {
  Costs c;
  c.to_device = 25e9, c.to_host = 20e9, c.on_device = 3e12, c.latency = 20e-6;
  c.gemm_f32 = 50e12, c.gemm_f64 = 60e12;
  return c;
}

TEST(CudaCosts, PredictsTransfersPlusComputeRoofline) {
  const Costs c = example_costs();
  const int64_t n = 2048;
  std::vector<double> a(n * n), b(n * n), cm(n * n);
  capture::Node node = blas_node("dgemm");
  auto& g = node.blas;
  g.layout = 'C', g.transa = 'N', g.transb = 'N', g.m = n, g.n = n, g.k = n, g.lda = n, g.ldb = n, g.ldc = n;
  g.a = a.data(), g.b = b.data(), g.c = cm.data(), g.alpha = capture::Scalar(1.0), g.beta = capture::Scalar(1.0);
  const double flops = capture::blas::flops(node);
  const double bytes = 8.0 * n * n;
  const double want = c.latency + 3 * bytes / c.to_device + bytes / c.to_host + flops / c.gemm_f64;
  EXPECT_NEAR(predict_seconds(c, node, flops), want, want * 1e-9);
  g.beta = capture::Scalar(0.0);  // C not uploaded
  const double want0 = c.latency + 2 * bytes / c.to_device + bytes / c.to_host + flops / c.gemm_f64;
  EXPECT_NEAR(predict_seconds(c, node, flops), want0, want0 * 1e-9);
  Costs none = c;
  none.gemm_f64 = 0;
  EXPECT_LT(predict_seconds(none, node, flops), 0);
}

TEST(CudaCosts, BreakEvenIsWhereComputeCatchesUpWithFixedCosts) {
  const Costs c = example_costs();
  const double f = break_even_flops(c);
  ASSERT_GT(f, 0);
  const double n = std::cbrt(f / 2);
  // The f32 figure is the smaller here (a quarter of f64's bytes at a similar rate).
  const double fixed = c.latency + 3 * n * n * 4 / c.to_device + n * n * 4 / c.to_host;
  EXPECT_NEAR(2 * n * n * n / c.gemm_f32, fixed, fixed * 0.05);
  EXPECT_EQ(break_even_flops(Costs{}), 0);
  EXPECT_NE(describe(c).find("GFLOP/s f64"), std::string::npos);
}

}  // namespace
}  // namespace sol::test
