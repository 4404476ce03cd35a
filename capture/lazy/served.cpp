// SOL's own pages for large allocations (see served.hpp).
//
// This runs under malloc: nothing here allocates, and nothing here calls a function that might
// (the lock is a pthread mutex, the metadata lives in mappings of its own, logging happens only
// in serve_from() and serve_from_test_env(), which are not called from an allocation).
//
// Layout. One region of `pages` pages at `base`. Every page belongs to one run: a live block (handed
// out), a free run (on a free list: zero, read-write), or a parked block (given back, not yet on a
// free list: cached, or being remapped). Per page, in arrays of their own (mapped NORESERVE, so
// only the entries of pages in use cost memory):
//   owner[i]  the first page + 1 of the live or cached block that holds page i; 0 for every other
//             page (cleared before a block's pages are remapped or join a free list). The only
//             array served_block() reads, with len[] of that first page.
//   len[s]    at the first page of every run: its pages, | kFree for a free run, | kParked for a
//             cached block (served_block() says no; keeping owner[] as it is makes caching and
//             reusing a block O(1) instead of two stores per page). The free bit is set exactly
//             at the first pages of free runs (cleared when one merges or is carved).
//   tail[l]   at the last page of a free run: its first page. Not cleared when the run changes,
//             so checked against len[] before use (coalescing with the left neighbour).
//   next/prev at the first page of a free run: its free list, one list per size class
//             (class k holds runs of [2^k, 2^(k+1)) pages).
//
// Memory given back goes to the OS (fresh pages mapped over the block), except for a few blocks
// of moderate size kept in a cache without remapping: a program that frees and reallocates the
// same large buffer (a framework's temporaries, one per layer and step) would otherwise take a page
// fault per page each time it writes the new block. Cached blocks are made read-write when they
// are given back, and zeroed when reused only if the caller needs zero (calloc); see release().
#include "capture/lazy/served.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/log.hpp"
#include "common/macros.hpp"

namespace sol::capture::lazy {

std::atomic<bool> g_serving{false};

namespace {

constexpr uint32_t kFree = 0x80000000u;    // len[] of the first page of a free run
constexpr uint32_t kParked = 0x40000000u;  // len[] of the first page of a cached block
constexpr uint32_t kNone = UINT32_MAX;   // end of a free list
constexpr int kClasses = 32;

// Address space tried at serve_from(): halved after each refusal (a ulimit -v, overcommit
// disabled), down to the smallest worth having.
constexpr size_t kRegionMax = size_t{64} << 30;
constexpr size_t kRegionMin = size_t{1} << 30;
static_assert((kRegionMax >> 12) < kParked, "page counts must stay clear of len[]'s flags");

// The cache of given-back blocks (not remapped): at most kCacheSlots blocks of at most
// kCacheBytes together, about what glibc keeps at the top of its heap before trimming (its
// dynamic M_TRIM_THRESHOLD reaches 64 MiB on 64-bit systems). Larger blocks go back to the OS.
// 16 slots: a NumPy loop frees several arrays and temporaries per step; with 4, blocks missed the
// cache and came back as fresh pages (bench/lazy_transfers.py no-reuse at n = 2048: lazy 17 %
// slower than eager with 4 slots, within noise with 16).
constexpr int kCacheSlots = 16;
constexpr size_t kCacheBytes = size_t{64} << 20;

// Written once by serve_from() before `base` is published (release); served_block() reads them
// after loading `base` (acquire).
struct Region {
  std::atomic<uintptr_t> base{0};
  uintptr_t bytes = 0;
  uint32_t pages = 0;
  unsigned shift = 12;
  size_t min_bytes = 0;
  std::atomic<uint32_t>* owner = nullptr;
  std::atomic<uint32_t>* len = nullptr;
  uint32_t* tail = nullptr;
  uint32_t* next = nullptr;
  uint32_t* prev = nullptr;
};
Region g_r;

// Everything below is guarded by g_mu.
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
uint32_t g_head[kClasses];
uint32_t g_nonempty = 0;  // bit k: class k's list is not empty
struct Cached {
  uint32_t start, pages;
};
Cached g_cache[kCacheSlots];  // oldest first
int g_cached = 0;
size_t g_cached_bytes = 0;

// The thread that forks holds g_mu from the prepare handler to the parent's or child's. fork()
// runs other libraries' handlers meanwhile, and they may allocate or free: on this thread the
// lock is then already held, and taking it again would deadlock.
constinit SOL_TLS bool t_holds_for_fork = false;

class Carving {
 public:
  Carving() noexcept : own_(!t_holds_for_fork) {
    if (own_) pthread_mutex_lock(&g_mu);
  }
  ~Carving() {
    if (own_) pthread_mutex_unlock(&g_mu);
  }
  Carving(const Carving&) = delete;
  Carving& operator=(const Carving&) = delete;

 private:
  bool own_;
};

void before_fork() noexcept {
  pthread_mutex_lock(&g_mu);
  t_holds_for_fork = true;
}
void after_fork_parent() noexcept {
  t_holds_for_fork = false;
  pthread_mutex_unlock(&g_mu);
}
void after_fork_child() noexcept {
  t_holds_for_fork = false;
  pthread_mutex_init(&g_mu, nullptr);  // the child's only thread; the lists are whole
}

int size_class(uint32_t pages) noexcept {
  return 31 - __builtin_clz(pages);
}

uintptr_t page_addr(uint32_t s) noexcept {
  return g_r.base.load(std::memory_order_relaxed) + (uintptr_t{s} << g_r.shift);
}

uint32_t page_index(uintptr_t a) noexcept {
  return static_cast<uint32_t>((a - g_r.base.load(std::memory_order_relaxed)) >> g_r.shift);
}

uint32_t run_pages(uint32_t s) noexcept {
  return g_r.len[s].load(std::memory_order_relaxed) & ~(kFree | kParked);
}

bool is_free_run(uint32_t s) noexcept {
  return g_r.len[s].load(std::memory_order_relaxed) & kFree;
}

// Free lists (g_mu held).

void link(uint32_t s, uint32_t n) noexcept {
  g_r.len[s].store(n | kFree, std::memory_order_relaxed);
  g_r.tail[s + n - 1] = s;
  const int c = size_class(n);
  g_r.next[s] = g_head[c];
  g_r.prev[s] = kNone;
  if (g_head[c] != kNone) g_r.prev[g_head[c]] = s;
  g_head[c] = s;
  g_nonempty |= 1u << c;
}

// Takes the free run at s off its list; s is no longer the start of a free run.
void unlink(uint32_t s) noexcept {
  const int c = size_class(run_pages(s));
  const uint32_t n = g_r.next[s], p = g_r.prev[s];
  if (p != kNone) g_r.next[p] = n;
  else g_head[c] = n;
  if (n != kNone) g_r.prev[n] = p;
  if (g_head[c] == kNone) g_nonempty &= ~(1u << c);
  g_r.len[s].store(0, std::memory_order_relaxed);
}

// Makes [s, s + n), zero and read-write, a free run, merged with free neighbours.
void add_free(uint32_t s, uint32_t n) noexcept {
  if (s > 0) {
    const uint32_t t = g_r.tail[s - 1];
    if (t < s && is_free_run(t) && t + run_pages(t) == s) {
      unlink(t);
      n += s - t;
      s = t;
    }
  }
  if (s + n < g_r.pages && is_free_run(s + n)) {
    const uint32_t m = run_pages(s + n);
    unlink(s + n);
    n += m;
  }
  link(s, n);
}

// The first page of `want` free pages taken off the lists (a parked run: the caller's), or kNone.
// First fit in want's own class, else the first run of the smallest larger class (all fit).
uint32_t carve(uint32_t want) noexcept {
  const int c = size_class(want);
  uint32_t s = kNone;
  for (uint32_t t = g_head[c]; t != kNone; t = g_r.next[t]) {
    if (run_pages(t) >= want) {
      s = t;
      break;
    }
  }
  if (s == kNone) {
    const uint64_t larger = g_nonempty & ~((uint64_t{2} << c) - 1);
    if (!larger) return kNone;
    s = g_head[__builtin_ctzll(larger)];
  }
  const uint32_t have = run_pages(s);
  unlink(s);
  g_r.len[s].store(want, std::memory_order_relaxed);
  if (have > want) link(s + want, have - want);
  return s;
}

// Fresh anonymous pages over [s, s + n): the old ones go back to the OS, the new ones are zero and
// read-write whatever protection the old ones had. false (the pages are then lost to serving, never
// handed out again) in the unlikely case that the kernel refuses (too many mappings).
bool remap(uint32_t s, uint32_t n) noexcept {
  void* a = reinterpret_cast<void*>(page_addr(s));
  const size_t bytes = size_t{n} << g_r.shift;
  if (::mmap(a, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
      a)
    return true;
  // A failed MAP_FIXED may have unmapped the range already: only memory that is mapped read-write
  // and discarded is given out again.
  return ::mprotect(a, bytes, PROT_READ | PROT_WRITE) == 0 && ::madvise(a, bytes, MADV_DONTNEED) == 0;
}

void set_owner(uint32_t from, uint32_t to, uint32_t value) noexcept;

// Parked runs to free lists: not served any more, then remapped. Called without g_mu held
// (remapping a large block takes a while); takes it for the lists.
void give_back(const Cached* runs, int count) noexcept {
  bool ok[kCacheSlots + 1];
  for (int i = 0; i < count; ++i) {
    set_owner(runs[i].start, runs[i].start + runs[i].pages, 0);
    ok[i] = remap(runs[i].start, runs[i].pages);
  }
  Carving lock;
  for (int i = 0; i < count; ++i)
    if (ok[i]) add_free(runs[i].start, runs[i].pages);
}

// Pages [from, to) name the live block whose first page + 1 is `value` (0: none) for served_block().
void set_owner(uint32_t from, uint32_t to, uint32_t value) noexcept {
  for (uint32_t i = from; i < to; ++i) g_r.owner[i].store(value, std::memory_order_release);
}

uint32_t pages_for(size_t n) noexcept {
  return static_cast<uint32_t>((n + (size_t{1} << g_r.shift) - 1) >> g_r.shift);
}

}  // namespace

bool served_block(const void* p, uintptr_t& b, uintptr_t& e) noexcept {
  const uintptr_t base = g_r.base.load(std::memory_order_acquire);
  if (!base) return false;
  const uintptr_t off = reinterpret_cast<uintptr_t>(p) - base;
  if (off >= g_r.bytes) return false;
  const uint32_t s1 = g_r.owner[off >> g_r.shift].load(std::memory_order_acquire);
  if (!s1) return false;
  const uint32_t len = g_r.len[s1 - 1].load(std::memory_order_acquire);
  if (len & (kFree | kParked)) return false;  // cached: given back
  b = base + (uintptr_t{s1 - 1} << g_r.shift);
  e = b + (uintptr_t{len} << g_r.shift);
  // A block shrinking (the program's own realloc) names pages beyond its new end a moment longer.
  return reinterpret_cast<uintptr_t>(p) < e;
}

void* allocate(size_t n, bool zero) noexcept {
  // Acquire: the region's figures below were written before serving started.
  if (!g_serving.load(std::memory_order_acquire) || n < g_r.min_bytes || n > g_r.bytes) return nullptr;
  const uint32_t want = pages_for(n);
  uint32_t s = kNone;
  bool dirty = false;        // from the cache: its old contents are still there
  Cached excess{kNone, 0};   // a cached block's pages beyond `want`, to give back
  Cached flushed[kCacheSlots];
  int nflushed = 0;
  {
    Carving lock;
    // The smallest cached block that is large enough, unless it is more than twice too large
    // (remapping the excess would then cost more than the faults saved).
    int best = -1;
    for (int i = 0; i < g_cached; ++i) {
      const uint32_t have = g_cache[i].pages;
      if (have >= want && have / 2 <= want && (best < 0 || have < g_cache[best].pages)) best = i;
    }
    if (best >= 0) {
      s = g_cache[best].start;
      const uint32_t have = g_cache[best].pages;
      g_cached_bytes -= size_t{have} << g_r.shift;
      for (int i = best + 1; i < g_cached; ++i) g_cache[i - 1] = g_cache[i];
      --g_cached;
      dirty = true;
      if (have > want) {
        g_r.len[s + want].store(have - want, std::memory_order_relaxed);  // parked
        excess = {s + want, have - want};
      }
      g_r.len[s].store(want, std::memory_order_release);  // served again
    } else {
      s = carve(want);
      if (s == kNone && g_cached) {
        // The region is full: the cache goes back to the lists, then one more try (below).
        nflushed = g_cached;
        for (int i = 0; i < g_cached; ++i) flushed[i] = g_cache[i];
        g_cached = 0;
        g_cached_bytes = 0;
      }
    }
  }
  if (excess.pages) give_back(&excess, 1);
  if (nflushed) {
    give_back(flushed, nflushed);
    Carving lock;
    s = carve(want);
  }
  if (s == kNone) return nullptr;
  void* p = reinterpret_cast<void*>(page_addr(s));
  if (dirty) {
    if (zero) std::memset(p, 0, size_t{want} << g_r.shift);
  } else {
    set_owner(s, s + want, s + 1);
  }
  return p;
}

void release(uintptr_t b) noexcept {
  const uint32_t s = page_index(b);
  const uint32_t n = run_pages(s);
  const size_t bytes = size_t{n} << g_r.shift;
  // Cached blocks must be read-write for their next owner, whatever the lazy executor left. Not
  // served any more (parked) before anyone else can have these pages; give_back() clears owner[]
  // for the others before they are remapped.
  if (bytes <= kCacheBytes && ::mprotect(reinterpret_cast<void*>(b), bytes, PROT_READ | PROT_WRITE) == 0) {
    g_r.len[s].store(n | kParked, std::memory_order_release);
    Cached evicted[kCacheSlots];
    int nevicted = 0;
    {
      Carving lock;
      while (g_cached && (g_cached == kCacheSlots || g_cached_bytes + bytes > kCacheBytes)) {
        evicted[nevicted++] = g_cache[0];
        g_cached_bytes -= size_t{g_cache[0].pages} << g_r.shift;
        for (int i = 1; i < g_cached; ++i) g_cache[i - 1] = g_cache[i];
        --g_cached;
      }
      g_cache[g_cached++] = {s, n};
      g_cached_bytes += bytes;
    }
    if (nevicted) give_back(evicted, nevicted);
    return;
  }
  const Cached run{s, n};
  give_back(&run, 1);
}

bool resize(uintptr_t b, size_t n) noexcept {
  if (!g_serving.load(std::memory_order_acquire) || n < g_r.min_bytes || n > g_r.bytes) return false;
  const uint32_t s = page_index(b);
  const uint32_t want = pages_for(n);
  const uint32_t have = run_pages(s);
  if (want == have) return true;
  if (want < have) {
    // The tail stops being served (served_block() checks the end), then goes back like a block of
    // its own.
    g_r.len[s].store(want, std::memory_order_release);
    g_r.len[s + want].store(have - want, std::memory_order_relaxed);  // parked: inside the block, no one looks
    const Cached run{s + want, have - want};
    give_back(&run, 1);
    return true;
  }
  {
    Carving lock;
    const uint32_t r = s + have;
    if (r >= g_r.pages || !is_free_run(r)) return false;
    const uint32_t free_pages = run_pages(r);
    if (have + free_pages < want) return false;
    unlink(r);
    if (have + free_pages > want) link(s + want, have + free_pages - want);
    g_r.len[s].store(want, std::memory_order_relaxed);
  }
  set_owner(s + have, s + want, s + 1);
  return true;
}

bool serve_from(size_t min_bytes) noexcept {
  // One attempt per process: later calls (the lazy executor after SOL_TEST_SERVE_FROM) report it.
  static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
  static bool tried = false;
  pthread_mutex_lock(&start_mu);
  if (tried) {
    pthread_mutex_unlock(&start_mu);
    return serving();
  }
  tried = true;
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t page_bytes = page > 0 ? static_cast<size_t>(page) : 4096;
  const unsigned shift = static_cast<unsigned>(__builtin_ctzll(page_bytes));
  void* region = MAP_FAILED;
  size_t bytes = kRegionMax;
  for (; bytes >= kRegionMin; bytes /= 2) {
    region = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region != MAP_FAILED) break;
  }
  const int region_errno = errno;
  const size_t pages = region == MAP_FAILED ? 0 : bytes >> shift;
  constexpr size_t kArrays = 5;  // owner, len, tail, next, prev: one uint32_t per page each
  void* meta = MAP_FAILED;
  if (region != MAP_FAILED)
    meta = ::mmap(nullptr, kArrays * pages * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  // Registered before serving starts: pthread_atfork may allocate.
  const bool hooked = meta != MAP_FAILED && pthread_atfork(before_fork, after_fork_parent, after_fork_child) == 0;
  if (!hooked) {
    if (region == MAP_FAILED)
      log::write(log::Level::warn, "cannot reserve %zu MiB of address space for large allocations (%s); they "
                 "stay the allocator's, and the lazy executor cannot guard them",
                 kRegionMin >> 20, std::strerror(region_errno));
    else
      log::write(log::Level::warn, "cannot set up served allocations (%s); large allocations stay the "
                 "allocator's, and the lazy executor cannot guard them", std::strerror(errno));
    if (meta != MAP_FAILED) ::munmap(meta, kArrays * pages * sizeof(uint32_t));
    if (region != MAP_FAILED) ::munmap(region, bytes);
    pthread_mutex_unlock(&start_mu);
    return false;
  }
  {
    Carving lock;
    auto* words = static_cast<uint32_t*>(meta);
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
    g_r.owner = reinterpret_cast<std::atomic<uint32_t>*>(words);
    g_r.len = reinterpret_cast<std::atomic<uint32_t>*>(words + pages);
    g_r.tail = words + 2 * pages;
    g_r.next = words + 3 * pages;
    g_r.prev = words + 4 * pages;
    g_r.bytes = bytes;
    g_r.pages = static_cast<uint32_t>(pages);
    g_r.shift = shift;
    // Below a page, every such allocation would take a page of its own: a page at least.
    g_r.min_bytes = min_bytes < page_bytes ? page_bytes : min_bytes;
    for (uint32_t& h : g_head) h = kNone;
    g_r.base.store(reinterpret_cast<uintptr_t>(region), std::memory_order_release);
    link(0, static_cast<uint32_t>(pages));
  }
  g_serving.store(true, std::memory_order_release);
  pthread_mutex_unlock(&start_mu);
  SOL_LOG(debug, "serving allocations of %zu bytes and more from %zu GiB of address space", g_r.min_bytes,
          bytes >> 30);
  return true;
}

void serve_from_test_env() noexcept {
  const char* v = ::secure_getenv("SOL_TEST_SERVE_FROM");
  if (!v || !*v) return;
  char* end = nullptr;
  errno = 0;
  const unsigned long long bytes = std::strtoull(v, &end, 10);
  if (errno || *end || bytes == 0 || *v == '-') {
    log::write(log::Level::warn, "SOL_TEST_SERVE_FROM=%s is not a byte count; ignored", v);
    return;
  }
  serve_from(static_cast<size_t>(bytes));
}

}  // namespace sol::capture::lazy
