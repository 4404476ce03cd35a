// Page protection for host memory whose valid copy lives on a device, the coherence layer of the
// lazy executor (GMAC/ADSM style): the pages of a pending node's outputs are made inaccessible
// and those of device-resident inputs read-only, and the first host access that touches one
// faults into SOL, which makes the host copy valid (runs the pending graph, copies results back,
// drops a stale device copy) and lifts the protection; the access then proceeds.
//
// - Granularity is the page. A guarded page may hold unrelated data (another variable, an
//   allocator's header): a fault on it is handled like one on the operand itself, so that data
//   stays usable and correct; it only costs an early flush.
// - SOL's SIGSEGV handler is installed at the first guard and stays first: the program's own
//   sigaction()/signal() for SIGSEGV are recorded as the next handler (libsol exports both), and
//   faults that are not SOL's go to it, or, with none, kill the process as they would have.
// - What may be guarded: private writable mappings (heap, anonymous mmap, data segments). Not a
//   thread's stack (guarding it would fault in signal frames), not shared or file mappings (other
//   processes see them), not memory that is not mapped writable.
// - The handler runs on the faulting thread, synchronously: the fault callback may take locks and
//   call the device runtime, as long as no code path that holds those locks touches guarded
//   memory (the executor's own rule). Kernel accesses (read(2) into guarded memory) do not fault:
//   they fail with EFAULT, so system calls given such memory must be flushed before (not here).
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>

namespace sol::capture::lazy {

enum class Protection : uint8_t {
  read_write,  // not guarded
  read_only,   // a device copy is current and the host's too: host reads are free, a write faults
  none,        // the device holds the only valid copy: any host access faults
};

// Called on the faulting thread, in the SIGSEGV handler, for a fault on a guarded page: it must
// make host memory valid and unguard what it needs (unguard_all() at least the faulting page);
// the faulting access is retried when it returns. `write` is a best guess from the CPU's error
// code (x86-64), for information only.
using FaultCallback = void (*)(void* addr, bool write) noexcept;

// Guards the pages spanning [p, p + n). Installs the handler on first use (with `on_fault`, which
// must be the same for every call). false with a reason when the memory cannot be guarded:
// "stack", "not a private writable mapping", "too many guarded ranges", "mprotect failed".
bool guard(const void* p, size_t n, Protection prot, FaultCallback on_fault, const char*& why) noexcept;

// Sets the protection of the pages [b, e) (page-aligned), which the caller knows to be memory that
// may be guarded and to hold nothing else of anyone's (a block SOL serves, capture/lazy/served.hpp):
// no mapping check, and the range replaces any earlier one that starts at b. read_write lifts it.
// false with a reason as guard().
bool protect(uintptr_t b, uintptr_t e, Protection prot, FaultCallback on_fault, const char*& why) noexcept;

// Restores read-write access to every page guard() or protect() changed. Async-signal-safe.
void unguard_all() noexcept;

// Copies into or out of guarded memory without lifting its protection, so that no other thread
// sees the pages half written (a flush writing results back while other threads run): through
// /proc/self/mem, which the kernel lets a process write into its own private mappings whatever
// their protection; where that is refused, by lifting the protection for the copy and restoring
// it. false when neither works.
bool write_guarded(void* dst, const void* src, size_t n) noexcept;
bool read_guarded(void* dst, const void* src, size_t n) noexcept;

// Whether `addr` lies on a page SOL guards now. Async-signal-safe, lock-free.
bool guarded(const void* addr) noexcept;
// Its protection (read_write when it is not guarded).
Protection protection(const void* addr) noexcept;

// The guarded ranges overlapping [p, p + n): up to `max` of them into `out` ([begin, end) pairs),
// with their strongest protection. Returns how many there are (which may exceed max).
size_t overlapping(const void* p, size_t n, uintptr_t (*out)[2], size_t max, Protection& strongest) noexcept;

// Faults SOL handled (for tests and the trace).
uint64_t faults_handled() noexcept;

// The sigaction() libsol exports: SIGSEGV's disposition is the program's own as far as the program
// can tell (recorded, and returned as `old`), while SOL's handler stays installed once it is.
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

}  // namespace sol::capture::lazy
