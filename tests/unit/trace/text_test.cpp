// capture/trace/text.hpp: the formatting of the recorder's per-call path, against snprintf.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "capture/trace/text.hpp"

namespace sol::capture::trace {
namespace {

std::vector<uint64_t> interesting() {
  std::vector<uint64_t> v = {0, 1, 9, 10, 11, 99, 100, 101, 12345, 798380947, std::numeric_limits<uint64_t>::max()};
  for (uint64_t p = 1; p <= std::numeric_limits<uint64_t>::max() / 10; p *= 10) {
    v.push_back(p - 1);
    v.push_back(p);
    v.push_back(p + 1);
  }
  v.push_back(10000000000000000000ull - 1);
  v.push_back(10000000000000000000ull);
  return v;
}

TEST(Text, UnsignedAndSignedIntegersAsPrintfWritesThem) {
  for (uint64_t x : interesting()) {
    char buf[64], want[32];
    Text t(buf, sizeof buf);
    t.u64(x);
    std::snprintf(want, sizeof want, "%" PRIu64, x);
    EXPECT_EQ(std::string(t.data(), t.size()), want) << x;
  }
  for (int64_t x : {int64_t{0}, int64_t{-1}, int64_t{-10}, int64_t{42}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    char buf[64], want[32];
    Text t(buf, sizeof buf);
    t.i64(x);
    std::snprintf(want, sizeof want, "%" PRId64, x);
    EXPECT_EQ(std::string(t.data(), t.size()), want) << x;
  }
}

TEST(Text, MicrosecondsWithThreeDecimals) {
  for (uint64_t ns : {uint64_t{0}, uint64_t{7}, uint64_t{1000}, uint64_t{1532118}, uint64_t{798380947123}}) {
    char buf[64], want[48];
    Text t(buf, sizeof buf);
    t.usec(ns);
    std::snprintf(want, sizeof want, "%" PRIu64 ".%03u", ns / 1000, static_cast<unsigned>(ns % 1000));
    EXPECT_EQ(std::string(t.data(), t.size()), want) << ns;
  }
}

TEST(Text, OutputIsCutAtTheEndOfTheBufferNeverPastIt) {
  for (size_t cap = 0; cap < 24; ++cap) {
    char buf[32];
    std::memset(buf, '#', sizeof buf);
    Text t(buf, cap);
    t.lit("ab").u64(12345678901234ull).ch('x').usec(1532118);
    EXPECT_LE(t.size(), cap);
    const std::string whole = "ab12345678901234x1532.118";
    EXPECT_EQ(std::string(t.data(), t.size()), whole.substr(0, cap)) << cap;
    EXPECT_EQ(t.truncated(), whole.size() > cap) << cap;
    for (size_t i = cap; i < sizeof buf; ++i) ASSERT_EQ(buf[i], '#') << cap;  // nothing written past it
  }
}

}  // namespace
}  // namespace sol::capture::trace
