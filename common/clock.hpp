// The one clock for durations: CLOCK_MONOTONIC in nanoseconds (a vDSO read, some 20 ns).
#pragma once

#include <time.h>

#include <cstdint>

namespace sol {

inline uint64_t monotonic_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

}  // namespace sol
