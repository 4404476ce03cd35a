// The onednn backend in both of its GEMM paths (dnnl_sgemm, and matmul primitives cached per
// problem) against the reference BLAS: transposes, leading dimensions > rows, alpha == 0, k == 0,
// beta == 0 with NaN in C, beta == 1 and other betas; concurrent callers, fork, and the matmul
// primitive cache (one primitive per problem, bounded, least recently used evicted first).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/onednn/api.hpp"
#include "backends/onednn/matmul.hpp"
#include "backends/onednn/onednn.hpp"
#include "config/config.hpp"
#include "harness.hpp"

namespace sol::test {
namespace {

using capture::Scalar;
using hal::Reason;

// One backend per GEMM path, initialised once per process as libsol does.
hal::Backend* backend_for(const std::string& gemm, std::string& why) {
  static std::map<std::string, std::pair<std::unique_ptr<hal::Backend>, std::string>> backends;
  auto& [backend, reason] = backends[gemm];
  if (!backend && reason.empty()) {
    config::Config cfg = test_config("");
    cfg.onednn_gemm = gemm;
    backend = backends::onednn::create();
    if (!backend->init(cfg, reason)) backend.reset();
    if (!backend && reason.empty()) reason = "init failed without a reason";
  }
  why = reason;
  return backend.get();
}

TEST(OnednnInit, ExplainsAMissingLibrary) {
  config::Config cfg = test_config("");
  cfg.onednn_library = "/nonexistent/libdnnl.so.2";
  auto backend = backends::onednn::create();
  std::string why;
  // A program that has loaded libdnnl gets that one: this test needs a process without it (ctest
  // runs each test in its own, and this is the first test of the file).
  if (dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD)) GTEST_SKIP() << "libdnnl is loaded in this process";
  EXPECT_FALSE(backend->init(cfg, why));
  EXPECT_NE(why.find("/nonexistent/libdnnl.so.2"), std::string::npos) << why;
}

// How long oneDNN's GNU OpenMP workers spin after a call (a measurement after the warm-up, and
// auto's trial in use, wait that long): GOMP_SPINCOUNT's rounds, none when they wait passively.
TEST(OnednnInit, ReportsHowLongItsOpenMPWorkersSpin) {
  struct Case {
    const char *policy, *count;
    uint64_t ns;
  };
  const Case cases[] = {{nullptr, nullptr, 30'000'000},   {"passive", nullptr, 0},
                        {"PASSIVE", "1M", 0},             {"active", nullptr, 300'000'000},
                        {nullptr, "30000", 3'000'000},    {nullptr, "600k", 60'000'000},
                        {nullptr, "1G", 300'000'000},     {nullptr, "INFINITY", 300'000'000}};
  for (const Case& c : cases) {
    c.policy ? setenv("OMP_WAIT_POLICY", c.policy, 1) : unsetenv("OMP_WAIT_POLICY");
    c.count ? setenv("GOMP_SPINCOUNT", c.count, 1) : unsetenv("GOMP_SPINCOUNT");
    auto backend = backends::onednn::create();
    std::string why;
    ASSERT_TRUE(backend->init(test_config(""), why)) << why;
    EXPECT_EQ(backend->spin_after_call_ns(), c.ns)
        << (c.policy ? c.policy : "-") << " " << (c.count ? c.count : "-");
  }
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("GOMP_SPINCOUNT");
}

class OnednnGemm : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = backend_for(GetParam(), why);
    ASSERT_NE(backend_, nullptr) << "libdnnl is a build dependency, yet: " << why;
    reference_ = shared_reference(why);
    ASSERT_NE(reference_, nullptr) << why;
  }
  hal::Backend* backend_ = nullptr;
  ReferenceBlas* reference_ = nullptr;
};

Call gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, int64_t pad, Scalar alpha, Scalar beta) {
  Call c;
  c.routine = "sgemm";
  c.transa = ta, c.transb = tb, c.m = m, c.n = n, c.k = k, c.pad = pad, c.alpha = alpha, c.beta = beta;
  return c;
}

std::vector<Call> gemm_calls() {
  std::vector<Call> out;
  const Scalar betas[] = {Scalar(0.0), Scalar(1.0), Scalar(1.3), Scalar(-0.5)};
  struct Size {
    int64_t m, n, k, pad;
  };
  const Size sizes[] = {{1, 1, 1, 0}, {7, 5, 3, 2}, {33, 17, 9, 0}, {64, 96, 130, 1}};
  for (char ta : {'N', 'T', 'C'})
    for (char tb : {'N', 'T', 'C'})
      for (const Size& s : sizes)
        for (const Scalar& beta : betas) out.push_back(gemm(ta, tb, s.m, s.n, s.k, s.pad, Scalar(0.7), beta));
  for (const Scalar& beta : betas) {
    out.push_back(gemm('T', 'N', 6, 4, 3, 1, Scalar(0.0), beta));  // A and B are not read
    out.push_back(gemm('N', 'N', 6, 4, 0, 0, Scalar(0.7), beta));  // k == 0: C = beta*C
  }
  out.push_back(gemm('N', 'N', 0, 4, 3, 0, Scalar(0.7), Scalar(1.3)));
  out.push_back(gemm('N', 'N', 4, 0, 3, 0, Scalar(0.7), Scalar(1.3)));
  out.push_back(gemm('N', 'N', 40, 30, 20, 0, Scalar(-1.5), Scalar(0.0)));
  out.push_back(gemm('T', 'C', 300, 200, 260, 3, Scalar(0.7), Scalar(1.3)));
  // beta == 0 on oneDNN's other kernel paths (C is all NaN: none may survive): GEMV-shaped
  // problems, the MLP's skinny ones, and large ones that pack and thread.
  const Size paths[] = {{1, 300, 200, 0}, {300, 1, 200, 1}, {1024, 10, 256, 0}, {10, 256, 1024, 0},
                        {300, 200, 260, 3}, {512, 512, 512, 0}};
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (const Size& s : paths) out.push_back(gemm(ta, tb, s.m, s.n, s.k, s.pad, Scalar(0.7), Scalar(0.0)));
  return out;
}

TEST_P(OnednnGemm, DescribesItsPath) {
  EXPECT_STREQ(backend_->name(), "onednn");
  const std::string device = backend_->device();
  EXPECT_NE(device.find(std::string(GetParam()) == "matmul" ? "matmul primitives" : "dnnl_sgemm"),
            std::string::npos)
      << device;
}

TEST_P(OnednnGemm, TakesOnlySinglePrecisionGemm) {
  EXPECT_EQ(backend_->supports(blas_node("sgemm")), Reason::ok);
  EXPECT_EQ(backend_->supports(blas_node("dgemm")), Reason::dtype_unsupported);
  EXPECT_EQ(backend_->supports(blas_node("cgemm")), Reason::dtype_unsupported);
  EXPECT_EQ(backend_->supports(blas_node("ssymm")), Reason::op_unsupported);
  EXPECT_EQ(backend_->supports(blas_node("saxpy")), Reason::op_unsupported);
}

TEST_P(OnednnGemm, MatchesTheReference) {
  unsigned seed = 1;
  for (const Call& call : gemm_calls()) {
    EXPECT_EQ(compare_with_reference(*backend_, *reference_, call, seed++), "") << call.describe();
  }
}

// The same problems again: a cached primitive computes what a fresh one did.
TEST_P(OnednnGemm, RepeatedProblemsMatchTheReference) {
  for (unsigned round = 0; round < 3; ++round)
    for (char ta : {'N', 'T'}) {
      const Call call = gemm(ta, 'N', 19, 23, 29, 1, Scalar(0.7), Scalar(round == 1 ? 0.0 : 1.3));
      EXPECT_EQ(compare_with_reference(*backend_, *reference_, call, 100 + round), "") << call.describe();
    }
}

TEST_P(OnednnGemm, ConcurrentCallers) {
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds && failures[t].empty(); ++r) {
        // Shared problems (one primitive, used at once by several threads) and private ones.
        const int64_t m = r % 2 ? 24 : 24 + t, n = 16 + r % 3, k = 40;
        const Call call = gemm(t % 2 ? 'T' : 'N', 'N', m, n, k, t % 3, Scalar(0.7), Scalar(r % 4 ? 1.3 : 0.0));
        std::string diff = compare_with_reference(*backend_, *reference_, call, 1000 * t + r);
        if (!diff.empty()) failures[t] = call.describe() + ": " + diff;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

// A child forked after the parent ran GEMMs (its primitives cached, its locks used, OpenMP
// teams started by this thread) runs GEMMs too, and does not hang.
TEST_P(OnednnGemm, WorksInAForkedChild) {
  const Call cached = gemm('N', 'T', 192, 160, 128, 0, Scalar(0.7), Scalar(1.3));  // large: threaded
  ASSERT_EQ(compare_with_reference(*backend_, *reference_, cached, 7), "");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const Call fresh = gemm('T', 'T', 111, 131, 95, 2, Scalar(-1.5), Scalar(0.0));
    const bool ok = compare_with_reference(*backend_, *reference_, cached, 8).empty() &&
                    compare_with_reference(*backend_, *reference_, fresh, 9).empty();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  pid_t done = 0;
  // A hang's bound, not a time the child must keep: a minute is a thousand times what it takes.
  for (int waited_ms = 0; waited_ms < 60000 && (done = waitpid(pid, &status, WNOHANG)) == 0; waited_ms += 10)
    usleep(10000);
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the child hung for 60 s";
  }
  ASSERT_EQ(done, pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

INSTANTIATE_TEST_SUITE_P(Paths, OnednnGemm, ::testing::Values("sgemm", "matmul"),
                         [](const auto& info) { return std::string(info.param); });

// The "auto" path says what it chose and why.
TEST(OnednnInit, AutoExplainsItsChoice) {
  std::string why;
  hal::Backend* backend = backend_for("auto", why);
  ASSERT_NE(backend, nullptr) << why;
  const std::string device = backend->device();
  EXPECT_TRUE(device.find("matmul primitives (brg") != std::string::npos ||
              device.find("dnnl_sgemm on the CPU; its matmul would be") != std::string::npos)
      << device;
}

// The primitive cache, seen through Matmul itself.
class MatmulCache : public ::testing::Test {
 protected:
  void SetUp() override {
    void* lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    std::string why;
    ASSERT_TRUE(api_.bind(lib, why)) << why;
    matmul_ = std::make_unique<backends::onednn::Matmul>(api_);
    ASSERT_TRUE(matmul_->init(why)) << why;
  }
  // C (m x n, leading dimension ldc) = alpha*A*B + beta*C with A and B all ones: every element of
  // the result is alpha*k + beta*c0.
  bool run(int64_t m, int64_t n, int64_t k, int64_t ldc, float alpha, float beta, float c0, float& got) {
    std::vector<float> a(static_cast<size_t>(m * k), 1.0f), b(static_cast<size_t>(k * n), 1.0f);
    std::vector<float> c(static_cast<size_t>(ldc * n), c0);
    if (!matmul_->run('N', 'N', m, n, k, alpha, a.data(), m, b.data(), k, beta, c.data(), ldc)) return false;
    got = c[static_cast<size_t>(ldc * (n - 1) + m - 1)];
    return true;
  }
  backends::onednn::Api api_;
  std::unique_ptr<backends::onednn::Matmul> matmul_;
};

TEST_F(MatmulCache, OnePrimitivePerProblem) {
  float got = 0;
  ASSERT_TRUE(run(8, 8, 8, 8, 1.0f, 0.0f, 5.0f, got));
  EXPECT_EQ(got, 8.0f);
  EXPECT_EQ(matmul_->created(), 1u);
  // alpha is given at execution: the same primitive serves every alpha.
  ASSERT_TRUE(run(8, 8, 8, 8, 2.5f, 0.0f, 5.0f, got));
  EXPECT_EQ(got, 20.0f);
  ASSERT_TRUE(run(8, 8, 8, 8, -1.0f, -0.0f, 5.0f, got));  // beta -0.0 is beta 0: C not read
  EXPECT_EQ(got, -8.0f);
  EXPECT_EQ(matmul_->created(), 1u);
  // beta is part of the primitive (a sum post-op), and so is each leading dimension.
  ASSERT_TRUE(run(8, 8, 8, 8, 1.0f, 1.0f, 5.0f, got));
  EXPECT_EQ(got, 13.0f);
  ASSERT_TRUE(run(8, 8, 8, 8, 1.0f, 0.5f, 4.0f, got));
  EXPECT_EQ(got, 10.0f);
  ASSERT_TRUE(run(8, 8, 8, 11, 1.0f, 0.0f, 5.0f, got));
  EXPECT_EQ(got, 8.0f);
  EXPECT_EQ(matmul_->created(), 4u);
  ASSERT_TRUE(run(8, 8, 8, 8, 3.0f, 1.0f, 1.0f, got));
  EXPECT_EQ(got, 25.0f);
  EXPECT_EQ(matmul_->created(), 4u);
}

TEST_F(MatmulCache, EvictsTheLeastRecentlyUsed) {
  using backends::onednn::Matmul;
  float got = 0;
  // Capacity + 1 problems: the first is evicted by the last.
  for (int64_t m = 1; m <= static_cast<int64_t>(Matmul::kCapacity) + 1; ++m) {
    ASSERT_TRUE(run(m, 2, 3, m, 1.0f, 0.0f, 0.0f, got)) << m;
    ASSERT_EQ(got, 3.0f) << m;
  }
  EXPECT_EQ(matmul_->created(), Matmul::kCapacity + 1);
  ASSERT_TRUE(run(static_cast<int64_t>(Matmul::kCapacity) + 1, 2, 3, Matmul::kCapacity + 1, 1.0f, 0.0f, 0.0f, got));
  EXPECT_EQ(matmul_->created(), Matmul::kCapacity + 1);  // the newest is cached
  ASSERT_TRUE(run(1, 2, 3, 1, 1.0f, 0.0f, 0.0f, got));
  EXPECT_EQ(got, 3.0f);
  EXPECT_EQ(matmul_->created(), Matmul::kCapacity + 2);  // the oldest was not
}

}  // namespace
}  // namespace sol::test
