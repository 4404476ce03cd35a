// The one clock for durations: CLOCK_MONOTONIC in nanoseconds (a vDSO read, some 20 ns).
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace sol {

inline uint64_t monotonic_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

// The clock auto's decisions read (a race's timings, a trial's turns): the monotonic clock, or in a
// unit test one that moves only when the test says (tests/unit/support/fake_clock.hpp), so that
// what each candidate takes is exact and no verdict depends on the machine's load. libsol never
// sets it.
using ClockFn = uint64_t (*)() noexcept;
inline std::atomic<ClockFn> g_decision_clock{nullptr};

inline uint64_t decision_ns() noexcept {
  const ClockFn f = g_decision_clock.load(std::memory_order_relaxed);
  return f ? f() : monotonic_ns();
}

}  // namespace sol
