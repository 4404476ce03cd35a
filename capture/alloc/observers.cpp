#include "capture/alloc/observers.hpp"

namespace sol::capture::alloc {

std::atomic<bool> g_observed{false};
std::atomic<uintptr_t> g_watch_lo{UINTPTR_MAX}, g_watch_hi{0};
constinit SOL_TLS int t_quiet = 0;

namespace {

// A few slots, no lock: observers are added at start-up and stay (the trace's until the process
// writes its files), so the hooks only ever read them.
constexpr int kSlots = 4;
std::atomic<Observer> g_slots[kSlots];

void update_flag() noexcept {
  bool any = false;
  for (auto& s : g_slots) any |= s.load(std::memory_order_relaxed) != nullptr;
  g_observed.store(any, std::memory_order_release);
}

}  // namespace

bool add(Observer fn) noexcept {
  for (auto& s : g_slots)
    if (s.load(std::memory_order_acquire) == fn) return true;
  for (auto& s : g_slots) {
    Observer empty = nullptr;
    if (s.compare_exchange_strong(empty, fn, std::memory_order_acq_rel)) {
      update_flag();
      return true;
    }
  }
  return false;
}

void remove(Observer fn) noexcept {
  for (auto& s : g_slots) {
    Observer mine = fn;
    s.compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel);
  }
  update_flag();
}

void watch(const void* lo, const void* hi) noexcept {
  const auto l = reinterpret_cast<uintptr_t>(lo), h = reinterpret_cast<uintptr_t>(hi);
  uintptr_t cur = g_watch_lo.load(std::memory_order_relaxed);
  while (l < cur && !g_watch_lo.compare_exchange_weak(cur, l, std::memory_order_relaxed)) {
  }
  cur = g_watch_hi.load(std::memory_order_relaxed);
  while (h > cur && !g_watch_hi.compare_exchange_weak(cur, h, std::memory_order_relaxed)) {
  }
}

void notify(void* p, size_t bytes) noexcept {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  if (quiet() || !p || !bytes || lo >= g_watch_hi.load(std::memory_order_relaxed) ||
      lo + bytes <= g_watch_lo.load(std::memory_order_relaxed))
    return;
  Quiet q;
  for (auto& s : g_slots)
    if (Observer fn = s.load(std::memory_order_acquire)) fn(p, bytes);
}

}  // namespace sol::capture::alloc
