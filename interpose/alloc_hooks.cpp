// The allocator's entry points, interposed for two reasons:
// - SOL watches the memory a program gives back (free, realloc, munmap; capture/alloc/
//   observers.hpp: the trace's dataflow graph forgets what a freed block held, the lazy executor
//   drops its device copy).
// - Once the lazy executor serves large allocations from SOL's own pages (capture/lazy/served.hpp),
//   malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc and pvalloc hand out
//   such blocks at and above its threshold, and free, realloc and malloc_usable_size recognise them.
//   (reallocarray is glibc's realloc, called through the PLT: it comes here too. The obsolete
//   cfree, a compatibility symbol that no program links against today, is not interposed.)
// Everything else about them is the allocator's own.
//
// libsol is preloaded into every process, so these run for every allocation of every program:
// - Unobserved and not serving, each is one or two loads and predictable branches, then a jump to
//   the next definition (bench/free_hook.c measures free; bench/served_alloc.c the served path).
// - The next definitions (libc's, or those of an allocator preloaded after libsol, such as
//   jemalloc) are found with dlsym(RTLD_NEXT) by a constructor that runs before libsol's others,
//   or by the first call that needs one (libraries set up before libsol allocate in their
//   constructors). dlsym may allocate itself (glibc's dlerror state): while this thread looks a
//   definition up, malloc and calloc take small blocks from a static bootstrap arena, which free
//   ignores; frees that arrive before the next free is known are leaked, never passed to a guessed
//   function (__libc_free would corrupt a block that jemalloc owns).
// - munmap before the constructor ran is the system call, which is all libc's munmap is.
// - A freed block's size is the same allocator's malloc_usable_size (or the served block's),
//   asked only while something observes.
// - Nothing here holds state that a fork could tear: observers lock their own data across fork
//   (capture/trace/recorder.cpp), and so does the served allocator.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "capture/alloc/observers.hpp"
#include "capture/lazy/coherence.hpp"
#include "capture/lazy/served.hpp"
#include "common/macros.hpp"
#include "interpose/next_symbol.hpp"

namespace {

namespace alloc = sol::capture::alloc;
namespace lazy = sol::capture::lazy;
using sol::interpose::next_symbol;

// noexcept, as libc declares them: a noexcept hook may then end in a jump to the next definition
// instead of a call (a call through a pointer that may throw needs a frame to terminate from).
using MallocFn = void* (*)(size_t) noexcept;
using CallocFn = void* (*)(size_t, size_t) noexcept;
using FreeFn = void (*)(void*) noexcept;
using ReallocFn = void* (*)(void*, size_t) noexcept;
using AlignedFn = void* (*)(size_t, size_t) noexcept;  // memalign, aligned_alloc
using PosixMemalignFn = int (*)(void**, size_t, size_t) noexcept;
using MunmapFn = int (*)(void*, size_t) noexcept;
using UsableFn = size_t (*)(void*) noexcept;

void* malloc_unresolved(size_t n) noexcept;
void* calloc_unresolved(size_t k, size_t n) noexcept;
void leak(void*) noexcept {}

// malloc, calloc and free start at functions that resolve (or leak), so that their hot paths call
// through the pointer without testing it.
std::atomic<MallocFn> g_malloc{malloc_unresolved};
std::atomic<CallocFn> g_calloc{calloc_unresolved};
std::atomic<FreeFn> g_free{leak};
std::atomic<ReallocFn> g_realloc{nullptr};
std::atomic<MunmapFn> g_munmap{nullptr};
std::atomic<UsableFn> g_usable{nullptr};
// Looked up at their first call (dlsym never calls them).
std::atomic<AlignedFn> g_memalign{nullptr}, g_aligned_alloc{nullptr};
std::atomic<PosixMemalignFn> g_posix_memalign{nullptr};
std::atomic<MallocFn> g_valloc{nullptr}, g_pvalloc{nullptr};
size_t g_page = 4096;

// A lookup in progress on this thread: an allocation that dlsym makes meanwhile must not look up
// again.
constinit SOL_TLS bool t_resolving = false;

// The bootstrap arena: blocks for the allocations dlsym makes while a lookup is in progress (a few
// dozen bytes each, a handful per process). Each is preceded by its size; none is ever reused.
// Zero (.bss), so calloc needs nothing more.
constexpr size_t kBootBytes = 64 << 10;
constexpr size_t kBootAlign = 16;
alignas(kBootAlign) char g_boot[kBootBytes];
std::atomic<size_t> g_boot_used{0};

// Whether p lies in the arena: no load, the arena's address is a constant.
inline bool in_boot(const void* p) noexcept {
  return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(g_boot) < kBootBytes;
}

void* boot_alloc(size_t n) noexcept {
  const size_t need = kBootAlign + ((n + kBootAlign - 1) & ~(kBootAlign - 1));
  if (n > kBootBytes) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t at = g_boot_used.fetch_add(need, std::memory_order_relaxed);
  if (at + need > kBootBytes) {
    errno = ENOMEM;
    return nullptr;
  }
  *reinterpret_cast<size_t*>(g_boot + at) = n;
  return g_boot + at + kBootAlign;
}

size_t boot_size(const void* p) noexcept {
  return *reinterpret_cast<const size_t*>(static_cast<const char*>(p) - kBootAlign);
}

template <class Fn>
Fn next(const char* name) noexcept {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// A malloc or calloc before the constructor ran, or one that dlsym makes while looking up.
SOL_NOINLINE void* malloc_unresolved(size_t n) noexcept {
  if (t_resolving) return boot_alloc(n);
  t_resolving = true;
  const auto fn = next<MallocFn>("malloc");
  t_resolving = false;
  if (!fn) {
    errno = ENOMEM;
    return nullptr;
  }
  g_malloc.store(fn, std::memory_order_release);
  return fn(n);
}

SOL_NOINLINE void* calloc_unresolved(size_t k, size_t n) noexcept {
  if (t_resolving) {
    size_t bytes;
    if (__builtin_mul_overflow(k, n, &bytes)) {
      errno = ENOMEM;
      return nullptr;
    }
    return boot_alloc(bytes);
  }
  t_resolving = true;
  const auto fn = next<CallocFn>("calloc");
  t_resolving = false;
  if (!fn) {
    errno = ENOMEM;
    return nullptr;
  }
  g_calloc.store(fn, std::memory_order_release);
  return fn(k, n);
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

ReallocFn next_realloc() noexcept {
  return g_realloc.load(std::memory_order_acquire);
}

// Before libsol's other constructors, which read the configuration (and allocate as they go).
__attribute__((constructor(101))) void resolve_allocator() {
  t_resolving = true;
  if (auto fn = next<MallocFn>("malloc")) g_malloc.store(fn, std::memory_order_release);
  if (auto fn = next<CallocFn>("calloc")) g_calloc.store(fn, std::memory_order_release);
  g_usable.store(next<UsableFn>("malloc_usable_size"), std::memory_order_release);
  g_munmap.store(next<MunmapFn>("munmap"), std::memory_order_release);
  if (ReallocFn fn = next<ReallocFn>("realloc")) g_realloc.store(fn, std::memory_order_release);
  // Last: the frees dlsym made above were leaked, the ones from here on are not.
  if (FreeFn fn = next<FreeFn>("free")) g_free.store(fn, std::memory_order_release);
  t_resolving = false;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = static_cast<size_t>(page);
}

// The usable size of any block this process's malloc family handed out.
size_t usable_size(void* p) noexcept {
  if (!p) return 0;
  if (in_boot(p)) return boot_size(p);
  uintptr_t b, e;
  if (lazy::serving() && lazy::served_block(p, b, e)) return e - reinterpret_cast<uintptr_t>(p);
  UsableFn usable = g_usable.load(std::memory_order_acquire);
  return usable ? usable(p) : 0;
}

// Out of line: the unobserved path stays a test and a jump. A block that starts above every
// watched address is not asked its size.
SOL_NOINLINE void observe(void* p) noexcept {
  if (!p || !alloc::below_watch_hi(p) || alloc::quiet()) return;
  if (in_boot(p)) return;  // SOL's own, from before anything could observe
  if (size_t bytes = usable_size(p)) alloc::notify(p, bytes);
}

// The served block that p starts (false for any other pointer: the next allocator's).
bool served_start(void* p, uintptr_t& b, uintptr_t& e) noexcept {
  return lazy::serving() && lazy::served_block(p, b, e) && reinterpret_cast<uintptr_t>(p) == b;
}

// Gives back a block that is known not to be in the arena.
void release_block(void* p) noexcept {
  uintptr_t b, e;
  if (served_start(p, b, e)) {
    lazy::release(b);
    return;
  }
  // An interior pointer of a served block is a program's invalid free: glibc would abort, and the
  // next allocator must not see it. It is ignored.
  if (lazy::serving() && lazy::served_block(p, b, e)) return;
  g_free.load(std::memory_order_relaxed)(p);
}

SOL_NOINLINE void free_slow(void* p) noexcept {
  if (alloc::observed()) observe(p);
  if (in_boot(p)) return;
  release_block(p);
}

SOL_NOINLINE void* malloc_served(size_t n) noexcept {
  if (void* p = lazy::allocate(n, false)) return p;
  return g_malloc.load(std::memory_order_relaxed)(n);
}

SOL_NOINLINE void* calloc_served(size_t k, size_t n) noexcept {
  size_t bytes;
  if (!__builtin_mul_overflow(k, n, &bytes))
    if (void* p = lazy::allocate(bytes, true)) return p;
  return g_calloc.load(std::memory_order_relaxed)(k, n);
}

// The next allocator's malloc, then [p, p + copy) into it and p given back; nullptr (p kept, as
// realloc leaves it) when that malloc fails.
void* move_block(void* q, void* p, size_t copy) noexcept {
  if (!q) return nullptr;
  std::memcpy(q, p, copy);
  release_block(p);
  return q;
}

// realloc while something observes, while serving, or of a block from the arena. The old block
// was reported to observers before anything else happens to it (see realloc below).
SOL_NOINLINE void* realloc_slow(void* p, size_t n) noexcept {
  // A block with results pending on a device, or copies there: realloc keeps its bytes (in place
  // or moved), so they are written back first and the copies dropped; the observers below then
  // hear of a block with nothing pending, and discard nothing.
  if (lazy::any_guarded() && p) {
    uintptr_t b, e;
    if (lazy::served_block(p, b, e))
      lazy::host_access(p, e - reinterpret_cast<uintptr_t>(p), true, sol::hal::transfers::Cause::host_read);
  }
  if (alloc::observed()) observe(p);
  if (in_boot(p)) {
    // glibc frees on realloc(p, 0) and returns nullptr; the arena's blocks are never freed.
    if (n == 0) return nullptr;
    void* q = lazy::serving() ? lazy::allocate(n, false) : nullptr;
    if (!q) q = g_malloc.load(std::memory_order_relaxed)(n);
    const size_t old = boot_size(p);
    return q ? std::memcpy(q, p, old < n ? old : n) : nullptr;
  }
  if (lazy::serving()) {
    uintptr_t b, e;
    if (served_start(p, b, e)) {
      const size_t old = e - b;
      if (n == 0) {  // as glibc does: freed, nullptr
        lazy::release(b);
        return nullptr;
      }
      if (lazy::resize(b, n)) return p;  // n >= min_bytes, in place
      if (void* q = lazy::allocate(n, false)) return move_block(q, p, old < n ? old : n);
      // Below the threshold, or the region has no room: the next allocator's.
      return move_block(g_malloc.load(std::memory_order_relaxed)(n), p, old < n ? old : n);
    }
    if (p && lazy::served_block(p, b, e)) {  // an interior pointer: invalid, as glibc would say
      errno = EINVAL;
      return nullptr;
    }
    // A block of the next allocator (or none) that grows to served size moves, if its size can be
    // known; the next realloc keeps it otherwise.
    UsableFn usable = g_usable.load(std::memory_order_acquire);
    if (!p || usable) {
      if (void* q = lazy::allocate(n, false)) {
        if (!p) return q;
        const size_t old = usable(p);
        std::memcpy(q, p, old < n ? old : n);
        g_free.load(std::memory_order_relaxed)(p);
        return q;
      }
    }
  }
  if (ReallocFn fn = next_realloc()) return fn(p, n);
  return realloc_unresolved(p, n);
}

SOL_NOINLINE void* aligned_served(AlignedFn fn, size_t align, size_t n) noexcept {
  // A page-aligned block satisfies any alignment up to the page; a larger one is the next
  // allocator's (as is an invalid one, which it rejects as it does).
  if (align <= g_page && (align & (align - 1)) == 0)
    if (void* p = lazy::allocate(n, false)) return p;
  return fn ? fn(align, n) : (errno = ENOMEM, nullptr);
}

}  // namespace

extern "C" SOL_EXPORT void* malloc(size_t n) noexcept {
  if (SOL_UNLIKELY(lazy::serving())) return malloc_served(n);
  return g_malloc.load(std::memory_order_relaxed)(n);
}

extern "C" SOL_EXPORT void* calloc(size_t k, size_t n) noexcept {
  if (SOL_UNLIKELY(lazy::serving())) return calloc_served(k, n);
  return g_calloc.load(std::memory_order_relaxed)(k, n);
}

// The arena test costs no load (a constant address); the two flags are the only loads.
extern "C" SOL_EXPORT void free(void* p) noexcept {
  if (SOL_UNLIKELY(alloc::observed() | lazy::serving() | in_boot(p))) return free_slow(p);
  g_free.load(std::memory_order_relaxed)(p);
}

// The old block is forgotten before the call, moved or not: an observer must never hear of a
// block after the allocator may have handed it to another thread. A block grown in place loses
// what observers knew of it, which costs the dataflow graph an edge at worst, never adds one.
extern "C" SOL_EXPORT void* realloc(void* p, size_t n) noexcept {
  if (SOL_UNLIKELY(alloc::observed() | lazy::serving() | in_boot(p))) return realloc_slow(p, n);
  if (ReallocFn fn = next_realloc()) return fn(p, n);
  return realloc_unresolved(p, n);
}

extern "C" SOL_EXPORT size_t malloc_usable_size(void* p) noexcept {
  if (SOL_UNLIKELY(lazy::serving() | in_boot(p))) return usable_size(p);
  UsableFn usable = next_symbol(g_usable, "malloc_usable_size");
  return usable && p ? usable(p) : 0;
}

extern "C" SOL_EXPORT int posix_memalign(void** out, size_t align, size_t n) noexcept {
  if (SOL_UNLIKELY(lazy::serving()) && align <= g_page && (align & (align - 1)) == 0 && align % sizeof(void*) == 0)
    if (void* p = lazy::allocate(n, false)) {
      *out = p;
      return 0;
    }
  PosixMemalignFn fn = next_symbol(g_posix_memalign, "posix_memalign");
  return fn ? fn(out, align, n) : ENOMEM;
}

extern "C" SOL_EXPORT void* aligned_alloc(size_t align, size_t n) noexcept {
  AlignedFn fn = next_symbol(g_aligned_alloc, "aligned_alloc");
  if (SOL_UNLIKELY(lazy::serving())) return aligned_served(fn, align, n);
  return fn ? fn(align, n) : (errno = ENOMEM, nullptr);
}

// memalign accepts any alignment (glibc rounds one that is not a power of two up to one).
extern "C" SOL_EXPORT void* memalign(size_t align, size_t n) noexcept {
  AlignedFn fn = next_symbol(g_memalign, "memalign");
  if (SOL_UNLIKELY(lazy::serving()) && align <= g_page)
    if (void* p = lazy::allocate(n, false)) return p;
  return fn ? fn(align, n) : (errno = ENOMEM, nullptr);
}

extern "C" SOL_EXPORT void* valloc(size_t n) noexcept {
  if (SOL_UNLIKELY(lazy::serving()))
    if (void* p = lazy::allocate(n, false)) return p;
  MallocFn fn = next_symbol(g_valloc, "valloc");
  return fn ? fn(n) : (errno = ENOMEM, nullptr);
}

// pvalloc rounds the size up to whole pages (one at least).
extern "C" SOL_EXPORT void* pvalloc(size_t n) noexcept {
  if (SOL_UNLIKELY(lazy::serving()) && n <= SIZE_MAX - g_page)
    if (void* p = lazy::allocate(n ? (n + g_page - 1) & ~(g_page - 1) : g_page, false)) return p;
  MallocFn fn = next_symbol(g_pvalloc, "pvalloc");
  return fn ? fn(n) : (errno = ENOMEM, nullptr);
}

// Blocks an allocator maps itself (glibc's above 128 KiB) come back through free; this is for
// memory a program maps and unmaps on its own (numpy.memmap, an arena of its own).
extern "C" SOL_EXPORT int munmap(void* addr, size_t len) noexcept {
  if (SOL_UNLIKELY(alloc::observed())) alloc::notify(addr, (len + g_page - 1) & ~(g_page - 1));  // whole pages
  if (MunmapFn fn = g_munmap.load(std::memory_order_acquire)) return fn(addr, len);
  return static_cast<int>(::syscall(SYS_munmap, addr, len));
}
