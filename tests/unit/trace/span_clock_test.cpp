// The clock of traced calls against CLOCK_MONOTONIC, on both sources: the time-stamp counter
// (where the kernel keeps time with it) and clock_gettime.
#include "capture/trace/span_clock.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/clock.hpp"

namespace trace = sol::capture::trace;

namespace {

// Reads the clock between two reads of CLOCK_MONOTONIC for `ms` milliseconds (many anchors
// long) and returns the largest distance outside that bracket, and whether any read went back by
// more than `slack` from the one before. A thread preempted between the reads only widens the
// bracket: load cannot put a correct clock outside it.
void check_against_monotonic(trace::SpanClock& clock, uint64_t ms, uint64_t slack) {
  trace::ClockAnchor anchor;
  uint64_t worst = 0, previous = 0, reads = 0;
  bool backwards = false;
  const uint64_t end = sol::monotonic_ns() + ms * 1000000;
  for (uint64_t before = sol::monotonic_ns(); before < end; before = sol::monotonic_ns()) {
    const uint64_t t = clock.now(anchor);
    const uint64_t after = sol::monotonic_ns();
    if (t < before) worst = std::max(worst, before - t);
    if (t > after) worst = std::max(worst, t - after);
    backwards = backwards || t + slack < previous;
    previous = t;
    ++reads;
  }
  EXPECT_LE(worst, slack) << "over " << reads << " reads";
  EXPECT_FALSE(backwards);
}

}  // namespace

TEST(SpanClock, FollowsMonotonicOverManyAnchors) {
  trace::SpanClock clock;
  clock.start();
  // The first millisecond runs on the start's 20 us measurement of the rate (0.2 % at worst),
  // later ones on a fit over all of it.
  check_against_monotonic(clock, 30, 3000);
  check_against_monotonic(clock, 20, 1000);
}

TEST(SpanClock, ClockGettimeWhenTheCounterIsNotAllowed) {
  trace::SpanClock clock;
  clock.start(false);
  EXPECT_FALSE(clock.uses_tsc());
  check_against_monotonic(clock, 5, 0);
}

TEST(SpanClock, ThreadsWithAnchorsOfTheirOwn) {
  trace::SpanClock clock;
  clock.start();
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { check_against_monotonic(clock, 20, 3000); });
  for (auto& t : threads) t.join();
}

TEST(SpanClock, UsesTheCounterWhereTheKernelDoes) {
  FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) GTEST_SKIP() << "no clocksource in /sys";
  char name[32] = {};
  const bool got = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  trace::SpanClock clock;
  clock.start();
#if defined(__x86_64__)
  EXPECT_EQ(clock.uses_tsc(), got && std::string(name) == "tsc\n");
#else
  EXPECT_FALSE(clock.uses_tsc());
#endif
}
