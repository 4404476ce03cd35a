// A clock for auto's decisions (sol::decision_ns) that moves only when a test moves it: what each
// candidate takes is then exact, and no verdict depends on the machine or its load. One per test;
// it puts the real clock back when it goes.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.hpp"

namespace sol::test {

class FakeClock {
 public:
  FakeClock() noexcept {
    now_.store(1'000'000'000, std::memory_order_relaxed);
    g_decision_clock.store(&read, std::memory_order_relaxed);
  }
  ~FakeClock() { g_decision_clock.store(nullptr, std::memory_order_relaxed); }
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  static void advance(double seconds) noexcept {
    now_.fetch_add(static_cast<uint64_t>(seconds * 1e9 + 0.5), std::memory_order_relaxed);
  }
  static uint64_t now() noexcept { return now_.load(std::memory_order_relaxed); }

 private:
  // Each read takes a nanosecond: a loop that waits for time to pass still ends.
  static uint64_t read() noexcept { return now_.fetch_add(1, std::memory_order_relaxed) + 1; }
  static inline std::atomic<uint64_t> now_{0};
};

}  // namespace sol::test
