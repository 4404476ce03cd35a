// The clock of traced calls: CLOCK_MONOTONIC nanoseconds, read through the CPU's time-stamp
// counter where the kernel itself keeps time with it.
//
// Every traced call reads the clock twice. On a KVM guest clock_gettime costs about 24 ns (the
// vDSO reads the counter too, then converts, under a retry loop), rdtsc about 9 ns: the two reads
// were a ninth of what tracing a oneDNN set-up call cost. Where the kernel's clocksource is "tsc"
// (it found the counter invariant and synchronised across CPUs), a read is rdtsc and a multiply
// from an anchor, a (ticks, ns) pair each thread takes again from clock_gettime once it is more
// than a millisecond old, at the rate of ticks fitted over everything since the clock started.
// Times so stay within a few nanoseconds of CLOCK_MONOTONIC, NTP's slewing of it included, and
// comparable with the trace's other times (a device's, a delay's end). Elsewhere a read is
// clock_gettime.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.hpp"
#include "common/macros.hpp"

namespace sol::capture::trace {

// A thread's anchor: where its reads of the counter are measured from.
struct ClockAnchor {
  uint64_t ticks = 0;
  uint64_t ns = 0;
};

class SpanClock {
 public:
  static constexpr uint64_t kAnchorNs = 1000000;  // an anchor is taken again after this long

  // Chooses the source and measures the counter's rate (for 20 us). Once, before any read; with
  // `allow_tsc` false, or where the kernel keeps time otherwise, reads are clock_gettime's.
  void start(bool allow_tsc = true) noexcept;
  bool uses_tsc() const noexcept { return tsc_; }

  // Now, in CLOCK_MONOTONIC nanoseconds; `a` is the calling thread's own anchor.
  uint64_t now(ClockAnchor& a) noexcept {
    if (!tsc_) return monotonic_ns();
    const uint64_t d = ticks() - a.ticks;
    // Stale, never taken (0), or behind this read (wrapped to a huge difference): anchor anew.
    if (SOL_UNLIKELY(d > anchor_ticks_)) return anchor(a);
    return a.ns + static_cast<uint64_t>(
                      static_cast<unsigned __int128>(d) * rate_.load(std::memory_order_relaxed) >> 32);
  }

 private:
#if defined(__x86_64__)
  static uint64_t ticks() noexcept { return __builtin_ia32_rdtsc(); }
#else
  static uint64_t ticks() noexcept { return 0; }  // never read: start() keeps clock_gettime
#endif
  ClockAnchor pair() noexcept;
  uint64_t anchor(ClockAnchor& a) noexcept;

  bool tsc_ = false;
  uint64_t anchor_ticks_ = 0;  // kAnchorNs in ticks
  ClockAnchor start_;
  std::atomic<uint64_t> rate_{0};  // nanoseconds per tick, 32.32 fixed point
};

}  // namespace sol::capture::trace
