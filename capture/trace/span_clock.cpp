#include "capture/trace/span_clock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace sol::capture::trace {

namespace {

bool kernel_keeps_time_with_tsc() noexcept {
  const int fd =
      ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[32] = {};
  const ssize_t n = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  return n >= 3 && std::strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
}

}  // namespace

ClockAnchor SpanClock::pair() noexcept {
  // The counter read on both sides of the clock: its midpoint is the clock's moment, to within
  // half the bracket. A bracket widened by an interrupt or a preemption is read again: the
  // narrowest of four.
  ClockAnchor best;
  uint64_t narrowest = ~0ull;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = ticks();
    const uint64_t ns = monotonic_ns();
    const uint64_t width = ticks() - before;
    if (width < narrowest) {
      narrowest = width;
      best = {before + width / 2, ns};
    }
    if (tsc_ && width < anchor_ticks_ / 10000) break;  // within 100 ns: good enough
  }
  return best;
}

void SpanClock::start(bool allow_tsc) noexcept {
#if defined(__x86_64__)
  tsc_ = false;
  if (!allow_tsc || !kernel_keeps_time_with_tsc()) return;
  // 20 us apart: the rate to 0.2 % at worst, until the first anchors refine it over a
  // millisecond, then over the whole run.
  const ClockAnchor first = pair();
  for (int spins = 0; monotonic_ns() < first.ns + 20000 && spins < 1000000; ++spins) {
  }
  const ClockAnchor last = pair();
  if (last.ticks <= first.ticks || last.ns <= first.ns) return;
  const uint64_t rate = static_cast<uint64_t>((static_cast<unsigned __int128>(last.ns - first.ns) << 32) /
                                              (last.ticks - first.ticks));
  // 0.05-10 ns a tick (100 MHz to 20 GHz): anything else is no counter to trust.
  if (rate < (1ull << 32) / 20 || rate > (10ull << 32)) return;
  rate_.store(rate, std::memory_order_relaxed);
  anchor_ticks_ = static_cast<uint64_t>((static_cast<unsigned __int128>(kAnchorNs) << 32) / rate);
  start_ = first;
  tsc_ = true;
#else
  (void)allow_tsc;
#endif
}

uint64_t SpanClock::anchor(ClockAnchor& a) noexcept {
  a = pair();
  // The rate over everything since the start, once that is long enough to improve on the start's
  // measurement; races between threads store one good fit or another.
  if (a.ns - start_.ns >= kAnchorNs && a.ticks > start_.ticks)
    rate_.store(static_cast<uint64_t>((static_cast<unsigned __int128>(a.ns - start_.ns) << 32) /
                                      (a.ticks - start_.ticks)),
                std::memory_order_relaxed);
  return a.ns;
}

}  // namespace sol::capture::trace
