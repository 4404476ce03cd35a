// Observers of the memory a program gives back. interpose/alloc_hooks.cpp exports free, realloc
// and munmap; while an observer is registered, each hands it the block [p, p + bytes) before the
// block is released, so that an observer never learns of a block after someone else may own it.
// Who subscribes: the trace's dataflow graph (a freed block's bytes start over: no later read of
// that address comes from an earlier write), and the lazy executor later (a freed block's device
// copy can go).
//
// Unobserved, a free costs one predictable branch more than the allocator's own; the size of a
// block (malloc_usable_size) is asked only while something observes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "common/macros.hpp"

namespace sol::capture::alloc {

// Runs on the freeing thread, inside free(), with this thread Quiet (its own frees unobserved).
// It may lock, as long as nothing holding that lock waits for a thread that is in free().
using Observer = void (*)(void* p, size_t bytes) noexcept;

// Registers an observer (once: adding it again is a no-op); false when every slot is taken.
bool add(Observer fn) noexcept;
void remove(Observer fn) noexcept;

// The addresses observers care about: blocks wholly outside [lo, hi) are not reported. Observers
// widen it as they learn of memory (the dataflow, as calls write), before that memory can be
// freed; it starts empty and never narrows. Most of a program's frees (a Python interpreter's
// while it imports, long before the first BLAS call) then cost a comparison.
void watch(const void* lo, const void* hi) noexcept;
extern std::atomic<uintptr_t> g_watch_lo, g_watch_hi;
inline bool below_watch_hi(const void* p) noexcept {
  return reinterpret_cast<uintptr_t>(p) < g_watch_hi.load(std::memory_order_relaxed);
}

// Whether any observer is registered: the hooks' one test on every free.
extern std::atomic<bool> g_observed;
inline bool observed() noexcept {
  return g_observed.load(std::memory_order_relaxed);
}

// Hands [p, p + bytes) to every observer, unless this thread is Quiet or the block lies outside
// the watched addresses.
void notify(void* p, size_t bytes) noexcept;

// While one lives, this thread's frees are not observed. An observer's own bookkeeping frees
// memory under its lock (a map node, a grown vector), and observing that free would take the
// lock again; so does code that holds such a lock outside an observer (the dataflow recording a
// call). Scopes nest.
extern constinit SOL_TLS int t_quiet;
class Quiet {
 public:
  Quiet() noexcept { ++t_quiet; }
  ~Quiet() { --t_quiet; }
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;
};
inline bool quiet() noexcept {
  return t_quiet != 0;
}

// A free observer's lock, held with this thread's frees unobserved: the observer's own maps free
// as they go, and the observer takes the same lock.
class QuietLock {
 public:
  explicit QuietLock(std::mutex& mu) : mu_(mu) { mu_.lock(); }
  ~QuietLock() { mu_.unlock(); }
  QuietLock(const QuietLock&) = delete;
  QuietLock& operator=(const QuietLock&) = delete;

 private:
  Quiet quiet_;  // first in, last out
  std::mutex& mu_;
};

}  // namespace sol::capture::alloc
