// Call stacks without libunwind: glibc's backtrace() is the fallback (a GPU host with pip's
// PyTorch has no libunwind.so.8), and it must see the same frames as libunwind.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capture/trace/stacks.hpp"

namespace sol::capture::trace {
namespace {

// The frames above libsol's own code (here: above this test executable, which links the capture
// library statically, so the frames of gtest's runner and of the C library's start-up).
std::vector<uintptr_t> walk(const Unwinder& u) {
  uintptr_t ips[64];
  const int n = u.capture(ips, 64);
  return std::vector<uintptr_t>(ips, ips + (n > 0 ? n : 0));
}

TEST(Unwinder, GlibcBacktraceIsTheFallback) {
  Unwinder libc;
  std::string why;
  ASSERT_TRUE(libc.load(why, /*libunwind=*/false));
  EXPECT_TRUE(libc.loaded());
  EXPECT_NE(why.find("glibc's backtrace()"), std::string::npos) << why;
  EXPECT_FALSE(walk(libc).empty());
}

TEST(Unwinder, GlibcBacktraceSeesTheFramesLibunwindSees) {
  Unwinder libunwind, libc;
  std::string why;
  ASSERT_TRUE(libunwind.load(why));
  if (!why.empty()) GTEST_SKIP() << "no libunwind here: " << why;
  ASSERT_TRUE(libc.load(why, false));
  // Both walks start below the same frame of this test (skipped as the executable's own code),
  // so the frames of the runner above it are the same return addresses.
  std::vector<uintptr_t> a, b;
  for (int i = 0; i < 2; ++i) (i == 0 ? a : b) = walk(i == 0 ? libunwind : libc);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace sol::capture::trace
