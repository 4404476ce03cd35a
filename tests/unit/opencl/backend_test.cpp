// The opencl backend as a hal::Backend: initialisation and its reasons, declined nodes, the
// on-disk program cache, reference semantics the random tests cannot reach (ties and NaN in
// iamax, extreme values in nrm2), device memory, fork, concurrent callers, and the cost of a
// tiny call.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <thread>
#include <vector>

#include "backends/opencl/opencl.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "fixture.hpp"
#include "harness.hpp"

namespace sol::test {
namespace {

using capture::Node;
using capture::Scalar;
using hal::Reason;
namespace fs = std::filesystem;

using Opencl = WithOpencl<::testing::Test>;

// Runs `routine` on x (n elements, increment 1) through the backend and the reference.
template <class T>
void function_of_vector(hal::Backend& backend, ReferenceBlas& reference, const char* routine,
                        std::vector<T> x, Node& got, Node& want) {
  got = blas_node(routine);
  got.blas.n = static_cast<int64_t>(x.size());
  got.blas.incx = 1;
  got.blas.x = x.data();
  want = got;
  reference.run(want);
  ASSERT_EQ(backend.supports(got), Reason::ok);
  ASSERT_EQ(backend.run(got), Reason::ok);
}

TEST_F(Opencl, DescribesItself) {
  EXPECT_STREQ(backend_->name(), "opencl");
  EXPECT_NE(backend_->device().find("driver"), std::string::npos) << backend_->device();
  if (!backend_->accelerator()) {  // pocl's CPU device: nothing to measure, no threshold, no estimates
    const Node gemm = blas_node("sgemm");
    EXPECT_EQ(backend_->min_flops(), 0.0);
    EXPECT_LT(backend_->estimate_seconds(gemm, 1e9), 0);
    EXPECT_EQ(backend_->device().find("GB/s"), std::string::npos) << backend_->device();
  }
  EXPECT_NE(backend_->memory(), nullptr);
}

TEST(OpenclInit, ExplainsWhyNoDeviceMatches) {
  auto backend = backends::opencl::create();
  config::Config cfg = test_config("");
  cfg.opencl_platform = "no-such-platform";
  std::string why;
  EXPECT_FALSE(backend->init(cfg, why));
  EXPECT_NE(why.find("no-such-platform"), std::string::npos) << why;

  auto other = backends::opencl::create();
  cfg = test_config("");
  cfg.opencl_device = "no-such-device";
  why.clear();
  EXPECT_FALSE(other->init(cfg, why));
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(other->supports(blas_node("sgemm")), Reason::unavailable);
}

TEST_F(Opencl, DeclinesWhatItCannotDoExactly) {
  EXPECT_EQ(backend_->supports(blas_node("srotg")), Reason::op_unsupported);
  EXPECT_EQ(backend_->supports(blas_node("drotmg")), Reason::op_unsupported);

  float x[4] = {1, 2, 3, 4}, y[4] = {};
  Node axpy = blas_node("saxpy");  // incy == 0 accumulates into one element: a recurrence
  axpy.blas.n = 4, axpy.blas.incx = 1, axpy.blas.incy = 0, axpy.blas.alpha = Scalar(2.0);
  axpy.blas.x = x, axpy.blas.y = y;
  EXPECT_EQ(backend_->supports(axpy), Reason::stride_unsupported);
  EXPECT_EQ(backend_->run(axpy), Reason::stride_unsupported);
  EXPECT_EQ(y[0], 0.0f);

  Node huge = blas_node("sgemm");  // never run: C alone would be 4 TiB
  huge.blas.transa = huge.blas.transb = 'N';
  huge.blas.m = huge.blas.n = huge.blas.k = huge.blas.lda = huge.blas.ldb = huge.blas.ldc = int64_t{1} << 20;
  huge.blas.a = huge.blas.b = huge.blas.c = x;
  huge.blas.alpha = huge.blas.beta = Scalar(1.0);
  EXPECT_EQ(backend_->supports(huge), Reason::too_large);

  Node dnnl(static_cast<capture::Sym>(0), capture::Op::dnnl_execute, capture::DType::none);
  EXPECT_EQ(backend_->supports(dnnl), Reason::not_blas);
}

TEST_F(Opencl, Beta0DoesNotReadC) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a(6, 1.0f), b(6, 2.0f), c(9, nan);  // 3x2 * 2x3, ldc = 3
  Node node = blas_node("sgemm");
  auto& p = node.blas;
  p.transa = p.transb = 'N', p.m = 3, p.n = 3, p.k = 2, p.lda = 3, p.ldb = 2, p.ldc = 3;
  p.alpha = Scalar(1.0), p.beta = Scalar(0.0), p.a = a.data(), p.b = b.data(), p.c = c.data();
  ASSERT_EQ(backend_->run(node), Reason::ok);
  for (float v : c) EXPECT_EQ(v, 4.0f);
}

TEST_F(Opencl, IamaxTiesAndNaNAsReference) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::vector<double>> cases = {{1, -3, 3, 2}, {nan, 5, 1}, {1, nan, 5, 5}, {0, 0, 0},
                                                  {-2, 2},       {nan, nan},  {1, inf, -inf}};
  for (const auto& values : cases) {
    Node got(blas_node("idamax")), want(got);
    function_of_vector(*backend_, *reference_, "idamax", values, got, want);
    EXPECT_EQ(got.ret.get<int>(), want.ret.get<int>());
  }
  // Equal maxima far apart land in different work-groups: the first one wins.
  std::vector<cfloat> x(20000, cfloat(0.5f, -0.25f));
  x[12345] = cfloat(2, -1);
  x[19999] = cfloat(-1, 2);
  x[777] = cfloat(1.5f, 1.5f);
  Node got(blas_node("icamax")), want(got);
  function_of_vector(*backend_, *reference_, "icamax", x, got, want);
  EXPECT_EQ(got.ret.get<int>(), want.ret.get<int>());
  EXPECT_EQ(got.ret.get<int>(), 778);
}

TEST_F(Opencl, Nrm2ScalesLikeReference) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::vector<double>> cases = {{1e300, 1e300, 3e299},
                                                  {1e-300, 2e-300, 1e-310},
                                                  {1e-300, 1, 1e300},
                                                  {1e-170, 1e-170, 1},
                                                  {3, 4},
                                                  {inf, 1},
                                                  {nan, 1},
                                                  {1, nan, inf},
                                                  {0, 0}};
  for (const auto& values : cases) {
    Node got(blas_node("dnrm2")), want(got);
    function_of_vector(*backend_, *reference_, "dnrm2", values, got, want);
    const double g = got.ret.get<double>(), w = want.ret.get<double>();
    if (std::isfinite(w)) {
      EXPECT_NEAR(g, w, 1e-14 * w) << values[0];
    } else {
      EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w) << values[0] << ": " << g << " vs " << w;
    }
  }
  std::vector<cfloat> x = {{1e30f, 1e30f}, {3e-30f, -1e-30f}, {2e30f, 0}};
  Node got(blas_node("scnrm2")), want(got);
  function_of_vector(*backend_, *reference_, "scnrm2", x, got, want);
  EXPECT_NEAR(got.ret.get<float>(), want.ret.get<float>(), 1e-6f * want.ret.get<float>());
}

TEST_F(Opencl, DeviceMemoryRoundTrip) {
  expect_device_memory_round_trip(*backend_);
}

// OpenCL state does not survive fork(): a child declines with `forked` (the executor then
// runs the node natively) instead of touching the parent's context.
TEST_F(Opencl, ForkedChildDeclines) {
  std::vector<float> x(8, 1.0f), y(8, 2.0f);
  Node axpy = blas_node("saxpy");
  axpy.blas.n = 8, axpy.blas.incx = axpy.blas.incy = 1, axpy.blas.alpha = Scalar(1.0);
  axpy.blas.x = x.data(), axpy.blas.y = y.data();
  ASSERT_EQ(backend_->run(axpy), Reason::ok);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const bool declined = backend_->run(axpy) == Reason::forked && y[0] == 3.0f;
    _exit(declined ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(backend_->run(axpy), Reason::ok);  // the parent is unaffected
  EXPECT_EQ(y[0], 4.0f);
}

TEST_F(Opencl, ConcurrentCallersGetTheirOwnResults) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25 && errors[t].empty(); ++i) {
        Call call;
        call.routine = t % 2 ? "dgemm" : "cgemv";
        call.m = 9 + t, call.n = 7, call.k = 5, call.pad = 1;
        errors[t] = compare_with_reference(*backend_, *reference_, call, 100 * t + i);
      }
    });
  for (auto& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// Compiled programs go to the cache directory; a second backend (another process, in effect)
// loads them instead of compiling; a truncated or corrupt file is ignored and replaced. Which path
// ran is read from the log lines; the times are printed for reading, never compared.
TEST(OpenclCache, SecondInstanceLoadsProgramsFromDisk) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  const log::Level saved = log::level();
  log::set_level(log::Level::debug);

  auto run_once = [&](std::string& log_text, double& ms) -> bool {
    auto backend = backends::opencl::create();
    std::string why;
    if (!backend->init(test_config(dir), why)) return false;
    std::vector<float> x(64, 1.0f), y(64, 2.0f);
    Node rot = blas_node("srot");  // our own kernel: program sol_blas_s
    rot.blas.n = 64, rot.blas.incx = rot.blas.incy = 1, rot.blas.x = x.data(), rot.blas.y = y.data();
    rot.blas.cs = Scalar(0.6), rot.blas.sn = Scalar(0.8);
    testing::internal::CaptureStderr();
    const auto t0 = std::chrono::steady_clock::now();
    const Reason r = backend->run(rot);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    log_text = testing::internal::GetCapturedStderr();
    EXPECT_EQ(r, Reason::ok);
    EXPECT_FLOAT_EQ(x[0], 0.6f * 1 + 0.8f * 2);
    return true;
  };

  std::string first, second, third;
  double first_ms = 0, second_ms = 0, third_ms = 0;
  if (!run_once(first, first_ms)) {
    log::set_level(saved);
    GTEST_SKIP() << "no usable OpenCL device";
  }
  EXPECT_NE(first.find("opencl: compiled program sol_blas_s"), std::string::npos) << first;

  // One program binary and no temporary left behind (devices.v1, the accelerator inventory the
  // backend also keeps there, is not a program).
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != "devices.v1") files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << "one program binary, no temporary left behind";
  EXPECT_EQ(files[0].extension(), ".clbin");

  ASSERT_TRUE(run_once(second, second_ms));
  EXPECT_NE(second.find("opencl: loaded cached program sol_blas_s"), std::string::npos) << second;
  EXPECT_EQ(second.find("compiled program"), std::string::npos) << second;

  {  // a truncated file is not a binary for this key: compile again and replace it
    std::FILE* f = std::fopen(files[0].c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fputs("garbage", f);
    std::fclose(f);
    fs::resize_file(files[0], 100);
  }
  ASSERT_TRUE(run_once(third, third_ms));
  EXPECT_NE(third.find("sol: opencl: cache file " + files[0].string() + " is corrupt (not a program cache file)"),
            std::string::npos)
      << third;
  EXPECT_NE(third.find("opencl: compiled program sol_blas_s"), std::string::npos) << third;
  EXPECT_GT(fs::file_size(files[0]), 100u);

  // A damaged byte inside the binary, header intact: caught by the digest before the driver sees
  // it, with one line, and replaced by a compile.
  const auto corrupt_lines = [](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("is corrupt"); at != std::string::npos; at = text.find("is corrupt", at + 1)) ++n;
    return n;
  };
  const uintmax_t size = fs::file_size(files[0]);
  {
    std::FILE* f = std::fopen(files[0].c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(size / 2), SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(size / 2), SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
  }
  std::string fourth, fifth;
  double fourth_ms = 0, fifth_ms = 0;
  ASSERT_TRUE(run_once(fourth, fourth_ms));
  EXPECT_EQ(corrupt_lines(fourth), 1u) << fourth;
  EXPECT_NE(fourth.find("sol: opencl: cache file " + files[0].string() + " is corrupt"), std::string::npos) << fourth;
  EXPECT_NE(fourth.find("opencl: compiled program sol_blas_s"), std::string::npos) << fourth;
  ASSERT_TRUE(run_once(fifth, fifth_ms));
  EXPECT_EQ(corrupt_lines(fifth), 0u) << fifth;
  EXPECT_NE(fifth.find("opencl: loaded cached program sol_blas_s"), std::string::npos) << fifth;

  std::printf("[ timing   ] first call with compile %.1f ms, with cached program %.1f ms\n", first_ms,
              second_ms);
  log::set_level(saved);
  fs::remove_all(dir);
}

// Not a pass/fail check: the per-call cost of tiny nodes, which bounds how long a test program
// making tens of thousands of calls takes with this backend.
TEST_F(Opencl, TinyCallOverhead) {
  std::vector<float> a(16, 0.5f), b(16, 0.25f), c(16, 1.0f), x(4, 1.0f), y(4, 2.0f);
  Node gemm = blas_node("sgemm");
  auto& g = gemm.blas;
  g.transa = g.transb = 'N', g.m = g.n = g.k = g.lda = g.ldb = g.ldc = 4;
  g.alpha = Scalar(1.0), g.beta = Scalar(0.5), g.a = a.data(), g.b = b.data(), g.c = c.data();
  Node axpy = blas_node("saxpy");
  axpy.blas.n = 4, axpy.blas.incx = axpy.blas.incy = 1, axpy.blas.alpha = Scalar(0.5);
  axpy.blas.x = x.data(), axpy.blas.y = y.data();
  for (Node* node : {&gemm, &axpy}) {
    ASSERT_EQ(backend_->run(*node), Reason::ok);  // warm: kernels built
    const int calls = 2000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) ASSERT_EQ(backend_->run(*node), Reason::ok);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ timing   ] %s 4x4: %.1f us per call\n", capture::op_name(node->op), us / calls);
  }
}

}  // namespace
}  // namespace sol::test
