// The lazy executor's coherence layer: what keeps host memory right while its valid copy is on a
// device (GMAC/ADSM style). A device backend running lazily (the holder) keeps device copies of
// host ranges, each inside a block SOL serves (served.hpp: pages the block's alone), and says
// here what each block needs:
//
//   dirty  a pending or finished node's result is on the device only: the block's pages are
//          inaccessible (PROT_NONE);
//   clean  a device copy is current and so is the host's: the pages are read-only;
//   none   read-write, as the program left them.
//
// Everything that may touch such a block goes through here first, and makes the holder flush
// (run what is pending, write results back: the block becomes clean) or drop its copies (the
// host is about to change the block, or gave it back):
//
//   - a host access: the page fault (guard.hpp), on the faulting thread;
//   - a system call given the memory (interpose/syscall_hooks.cpp: write, read, send, recv...:
//     the kernel does not fault, it fails with EFAULT), madvise and mprotect of it;
//   - a node that runs elsewhere (native, a CPU backend) with it as an operand (the executor);
//   - free/realloc/munmap of it (capture/alloc observers): copies dropped, results discarded;
//   - fork (flushed before, so the child has every result; the child drops everything, since
//     device state does not survive fork) and exit (flushed, then nothing is guarded any more).
//
// Locking: the holder's lock, then the layer's. The holder never touches a guarded page while
// holding its lock (it reads host memory only after flushing what is dirty there), and the fault
// handler takes no lock of the layer's before calling the holder.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "hal/coherence.hpp"
#include "hal/transfers.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture::lazy {

// The holder and a block's states: the backend contract's (hal/coherence.hpp), which this layer
// implements (Layer, registered by start()).
using Holder = hal::coherence::Holder;
using State = hal::coherence::State;

// Lazy execution on: SOL_LAZY and a configuration that may send work to a device backend. Serves
// large allocations from SOL's own blocks, watches frees, fork and exit. Called once at start-up.
void start(const config::Config& cfg) noexcept;
bool enabled() noexcept;
size_t min_bytes() noexcept;  // [lazy] min_bytes: smaller operands are never guarded

// The device backend that holds copies (one per process).
void attach(Holder* holder) noexcept;

// The block SOL serves that holds all of [p, p + n), or false with a reason ("not in a block SOL
// serves", "spans blocks"). Lock-free.
bool block_of(const void* p, size_t n, uintptr_t& b, uintptr_t& e, const char*& why) noexcept;

// Sets a block's state (the holder, under its lock). false with a reason when its pages cannot be
// protected; the holder then keeps no copy there.
bool set_state(uintptr_t b, uintptr_t e, State s, const char*& why) noexcept;

// Whether any block is guarded now: the hooks' one test.
extern std::atomic<int> g_guarded;
inline bool any_guarded() noexcept {
  return g_guarded.load(std::memory_order_relaxed) != 0;
}

// The host is about to read (or, `host_writes`, change) [p, p + n) without faulting (a system
// call, a node running elsewhere): flushes a dirty block there; a change drops the copies.
void before_host_access(const void* p, size_t n, bool host_writes, hal::transfers::Cause cause) noexcept;
inline void host_access(const void* p, size_t n, bool host_writes, hal::transfers::Cause cause) noexcept {
  if (any_guarded() && p && n) before_host_access(p, n, host_writes, cause);
}

// The host needs everything done (`sol replay` at the end of a pass): pending nodes run and every
// result held only on the device is written back, whether or not its memory is touched next.
void sync(hal::transfers::Cause cause) noexcept;

// Process exit: flushes, then lifts every guard (nothing runs on the device after this).
void at_exit() noexcept;

}  // namespace sol::capture::lazy
