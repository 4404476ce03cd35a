#include "capture/lazy/coherence.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "capture/alloc/observers.hpp"
#include "capture/lazy/guard.hpp"
#include "capture/lazy/served.hpp"
#include "common/log.hpp"
#include "config/config.hpp"

namespace sol::capture::lazy {

std::atomic<int> g_guarded{0};

namespace {

using hal::transfers::Cause;

std::atomic<bool> g_enabled{false};
std::atomic<Holder*> g_holder{nullptr};
size_t g_min_bytes = 65536;

Protection protection_of(State s) noexcept {
  switch (s) {
    case State::dirty: return Protection::none;
    case State::clean: return Protection::read_only;
    default: return Protection::read_write;
  }
}

// A fault on a guarded page, on the faulting thread: results the page waits for are written back,
// and a write drops the device copies of its block (the host's are about to be the only current
// ones). The handler (guard.cpp) retries the access.
void on_fault(void* addr, bool write) noexcept {
  Holder* h = g_holder.load(std::memory_order_acquire);
  if (!h) return;  // the handler lifts what is still closed
  if (protection(addr) == Protection::none) h->flush(write ? Cause::host_write : Cause::host_read);
  if (write) {
    uintptr_t b, e;
    if (served_block(addr, b, e)) h->drop(b, e, false);
  }
}

// A block given back (free, realloc, munmap): copies dropped, pending results there discarded.
void on_free(void* p, size_t bytes) noexcept {
  if (!any_guarded() || !p || !bytes) return;
  uintptr_t ranges[8][2];
  Protection strongest;
  const size_t n = overlapping(p, bytes, ranges, 8, strongest);
  if (n == 0) return;
  Holder* h = g_holder.load(std::memory_order_acquire);
  if (!h) return;
  if (n > 8) {  // more than a few blocks: drop them all at once
    h->drop(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes, true);
    return;
  }
  for (size_t i = 0; i < n; ++i) h->drop(ranges[i][0], ranges[i][1], true);
}

void before_fork() noexcept {
  if (Holder* h = g_holder.load(std::memory_order_acquire); h && any_guarded()) h->flush(Cause::fork);
}

// The child has no device: every copy goes, every page opens again.
void in_child() noexcept {
  if (Holder* h = g_holder.load(std::memory_order_acquire)) h->forget();
  unguard_all();
  g_guarded.store(0, std::memory_order_relaxed);
}

// The layer as backends reach it (hal/coherence.hpp).
class Layer final : public hal::coherence::Layer {
 public:
  bool enabled() const noexcept override { return lazy::enabled(); }
  size_t min_bytes() const noexcept override { return lazy::min_bytes(); }
  void attach(Holder* holder) noexcept override { lazy::attach(holder); }
  bool block_of(const void* p, size_t n, uintptr_t& b, uintptr_t& e, const char*& why) noexcept override {
    return lazy::block_of(p, n, b, e, why);
  }
  bool set_state(uintptr_t b, uintptr_t e, State s, const char*& why) noexcept override {
    return lazy::set_state(b, e, s, why);
  }
  bool write_guarded(void* dst, const void* src, size_t n) noexcept override {
    return lazy::write_guarded(dst, src, n);
  }
  bool read_guarded(void* dst, const void* src, size_t n) noexcept override {
    return lazy::read_guarded(dst, src, n);
  }
  void at_exit() noexcept override { lazy::at_exit(); }
};
Layer g_layer;

}  // namespace

void start(const config::Config& cfg) noexcept {
  if (!cfg.lazy) return;
  g_min_bytes = static_cast<size_t>(cfg.lazy_min_bytes);
  if (!serve_from(g_min_bytes)) return;
  alloc::add(on_free);
  pthread_atfork(before_fork, nullptr, in_child);
  g_enabled.store(true, std::memory_order_release);
  hal::coherence::g_layer.store(&g_layer, std::memory_order_release);
  SOL_LOG(debug, "lazy: on; allocations of %zu bytes and more are served page-aligned", g_min_bytes);
}

bool enabled() noexcept {
  return g_enabled.load(std::memory_order_acquire);
}

size_t min_bytes() noexcept {
  return g_min_bytes;
}

void attach(Holder* holder) noexcept {
  g_holder.store(holder, std::memory_order_release);
}

bool block_of(const void* p, size_t n, uintptr_t& b, uintptr_t& e, const char*& why) noexcept {
  why = nullptr;
  if (!served_block(p, b, e)) {
    why = n < g_min_bytes ? "too small to guard" : "not in a block SOL serves";
    return false;
  }
  if (reinterpret_cast<uintptr_t>(p) + n > e) {
    why = "spans blocks";
    return false;
  }
  return true;
}

bool set_state(uintptr_t b, uintptr_t e, State s, const char*& why) noexcept {
  const Protection before = protection(reinterpret_cast<const void*>(b));
  const Protection after = protection_of(s);
  if (before == after) return true;
  if (before == Protection::read_write) alloc::watch(reinterpret_cast<void*>(b), reinterpret_cast<void*>(e));
  if (!protect(b, e, after, on_fault, why)) return false;
  if (before == Protection::read_write) g_guarded.fetch_add(1, std::memory_order_relaxed);
  if (after == Protection::read_write) g_guarded.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void before_host_access(const void* p, size_t n, bool host_writes, Cause cause) noexcept {
  uintptr_t ranges[8][2];
  Protection strongest;
  const size_t count = overlapping(p, n, ranges, 8, strongest);
  if (count == 0) return;
  Holder* h = g_holder.load(std::memory_order_acquire);
  if (!h) return;
  const int saved = errno;  // a system call's wrapper must leave errno as the call sets it
  if (strongest == Protection::none) h->flush(cause);
  if (host_writes) {
    if (count > 8)
      h->drop(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + n, false);
    else
      for (size_t i = 0; i < count; ++i) h->drop(ranges[i][0], ranges[i][1], false);
  }
  errno = saved;
}

void sync(Cause cause) noexcept {
  if (Holder* h = g_holder.load(std::memory_order_acquire)) h->flush(cause);
}

void at_exit() noexcept {
  if (!g_enabled.exchange(false, std::memory_order_acq_rel)) return;
  Holder* h = g_holder.load(std::memory_order_acquire);
  if (h && any_guarded()) h->flush(Cause::exit);
  if (h) h->forget();
  unguard_all();
  g_guarded.store(0, std::memory_order_relaxed);
}

}  // namespace sol::capture::lazy
