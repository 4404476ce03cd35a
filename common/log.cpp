#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>

namespace sol::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::warn)};

// Causes already reported by once(). Open addressing over 64-bit hashes with CAS, so it is
// lock-free and a fork in the middle of a report cannot leave a lock held in the child.
constexpr size_t kSeenSlots = 512;
std::atomic<uint64_t> g_seen[kSeenSlots];

uint64_t hash(std::string_view s) noexcept {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h ? h : 1;  // 0 marks an empty slot
}

// True the first time `cause` is seen. When the table is full every cause counts as new:
// repeating a line is better than losing one.
bool first_time(std::string_view cause) noexcept {
  const uint64_t h = hash(cause);
  for (size_t i = 0; i < kSeenSlots; ++i) {
    auto& slot = g_seen[(h + i) % kSeenSlots];
    uint64_t cur = slot.load(std::memory_order_acquire);
    if (cur == h) return false;
    if (cur == 0) {
      if (slot.compare_exchange_strong(cur, h, std::memory_order_acq_rel)) return true;
      if (cur == h) return false;
    }
  }
  return true;
}

}  // namespace

void set_level(Level level) noexcept {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

Level level() noexcept {
  return static_cast<Level>(g_level.load(std::memory_order_relaxed));
}

void vwrite(Level lvl, const char* fmt, va_list ap) noexcept {
  if (!enabled(lvl)) return;
  char buf[1024];
  constexpr size_t kPrefix = 5;
  __builtin_memcpy(buf, "sol: ", kPrefix);
  int n = std::vsnprintf(buf + kPrefix, sizeof buf - kPrefix - 1, fmt, ap);
  if (n < 0) return;
  size_t len = kPrefix + (static_cast<size_t>(n) < sizeof buf - kPrefix - 1 ? static_cast<size_t>(n)
                                                                            : sizeof buf - kPrefix - 2);
  buf[len++] = '\n';
  const int saved = errno;  // a log line must not change what the host program sees in errno
  for (size_t off = 0; off < len;) {
    ssize_t w = ::write(STDERR_FILENO, buf + off, len - off);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      break;
    }
    off += static_cast<size_t>(w);
  }
  errno = saved;
}

void write(Level lvl, const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  vwrite(lvl, fmt, ap);
  va_end(ap);
}

void once(Level lvl, std::string_view cause, const char* fmt, ...) noexcept {
  if (!enabled(lvl) || !first_time(cause)) return;
  va_list ap;
  va_start(ap, fmt);
  vwrite(lvl, fmt, ap);
  va_end(ap);
}

}  // namespace sol::log
