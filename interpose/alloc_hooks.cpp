// free, realloc and munmap, interposed so that SOL can watch the memory a program gives back
// (capture/alloc/observers.hpp: the trace's dataflow graph forgets what a freed block held).
// Everything else about them is the allocator's own.
//
// libsol is preloaded into every process, so these run for every free of every program:
// - Unobserved, free is one load and one predictable branch, then a jump to the next definition
//   (bench/free_hook.c measures it).
// - The next definitions (libc's, or those of an allocator preloaded after libsol, such as
//   jemalloc) are found with dlsym(RTLD_NEXT) by a constructor that runs before libsol's others.
//   dlsym may call free itself (glibc's dlerror buffer), and libraries set up before libsol may
//   free in their constructors: a free that arrives before the next one is known is leaked, never
//   passed to a guessed function (__libc_free would corrupt a block that jemalloc owns).
// - realloc cannot leak: before the constructor ran it looks up the next realloc itself.
// - munmap before the constructor ran is the system call, which is all libc's munmap is.
// - A freed block's size is the same allocator's malloc_usable_size, asked only while something
//   observes.
// - Nothing here holds state that a fork could tear; observers lock their own data across fork
//   (capture/trace/recorder.cpp).
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

#include "capture/alloc/observers.hpp"
#include "common/macros.hpp"

namespace {

namespace alloc = sol::capture::alloc;

// noexcept, as libc declares them: a noexcept hook may then end in a jump to the next definition
// instead of a call (a call through a pointer that may throw needs a frame to terminate from).
using FreeFn = void (*)(void*) noexcept;
using ReallocFn = void* (*)(void*, size_t) noexcept;
using MunmapFn = int (*)(void*, size_t) noexcept;
using UsableFn = size_t (*)(void*) noexcept;

void leak(void*) noexcept {}

// free starts at leak, so that its hot path calls through the pointer without testing it.
std::atomic<FreeFn> g_free{leak};
std::atomic<ReallocFn> g_realloc{nullptr};
std::atomic<MunmapFn> g_munmap{nullptr};
std::atomic<UsableFn> g_usable{nullptr};
size_t g_page = 4096;

// A lookup in progress on this thread: a realloc that dlsym makes meanwhile must not look up again.
constinit SOL_TLS bool t_resolving = false;

template <class Fn>
Fn next(const char* name) noexcept {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// A realloc before the constructor ran.
SOL_NOINLINE void* realloc_unresolved(void* p, size_t n) noexcept {
  ReallocFn fn = nullptr;
  if (!t_resolving) {
    t_resolving = true;
    fn = next<ReallocFn>("realloc");
    t_resolving = false;
  }
  if (!fn) {
    errno = ENOMEM;
    return nullptr;
  }
  g_realloc.store(fn, std::memory_order_release);
  return fn(p, n);
}

// Before libsol's other constructors, which read the configuration (and free as they go).
__attribute__((constructor(101))) void resolve_allocator() {
  t_resolving = true;
  g_usable.store(next<UsableFn>("malloc_usable_size"), std::memory_order_release);
  g_munmap.store(next<MunmapFn>("munmap"), std::memory_order_release);
  if (ReallocFn fn = next<ReallocFn>("realloc")) g_realloc.store(fn, std::memory_order_release);
  // Last: the frees dlsym made above were leaked, the ones from here on are not.
  if (FreeFn fn = next<FreeFn>("free")) g_free.store(fn, std::memory_order_release);
  t_resolving = false;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = static_cast<size_t>(page);
}

// Out of line: the unobserved path stays a test and a jump. A block that starts above every
// watched address is not asked its size.
SOL_NOINLINE void observe(void* p) noexcept {
  if (!p || !alloc::below_watch_hi(p) || alloc::quiet()) return;
  if (UsableFn usable = g_usable.load(std::memory_order_acquire)) alloc::notify(p, usable(p));
}

}  // namespace

extern "C" SOL_EXPORT void free(void* p) noexcept {
  if (SOL_UNLIKELY(alloc::observed())) observe(p);
  g_free.load(std::memory_order_relaxed)(p);
}

// The old block is forgotten before the call, moved or not: an observer must never hear of a
// block after the allocator may have handed it to another thread. A block grown in place loses
// what observers knew of it, which costs the dataflow graph an edge at worst, never adds one.
extern "C" SOL_EXPORT void* realloc(void* p, size_t n) noexcept {
  if (SOL_UNLIKELY(alloc::observed())) observe(p);
  if (ReallocFn fn = g_realloc.load(std::memory_order_acquire)) return fn(p, n);
  return realloc_unresolved(p, n);
}

// Blocks an allocator maps itself (glibc's above 128 KiB) come back through free; this is for
// memory a program maps and unmaps on its own (numpy.memmap, an arena of its own).
extern "C" SOL_EXPORT int munmap(void* addr, size_t len) noexcept {
  if (SOL_UNLIKELY(alloc::observed())) alloc::notify(addr, (len + g_page - 1) & ~(g_page - 1));  // whole pages
  if (MunmapFn fn = g_munmap.load(std::memory_order_acquire)) return fn(addr, len);
  return static_cast<int>(::syscall(SYS_munmap, addr, len));
}
