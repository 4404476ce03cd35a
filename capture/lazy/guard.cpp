#include "capture/lazy/guard.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace sol::capture::lazy {
namespace {

// The system calls themselves: libsol interposes mprotect, pread and pwrite for programs
// (interpose/syscall_hooks.cpp), and those hooks consult the guards this file keeps.
int sys_mprotect(uintptr_t b, size_t n, int prot) noexcept {
  return static_cast<int>(::syscall(SYS_mprotect, b, n, prot));
}
ssize_t sys_pread(int fd, void* buf, size_t n, off_t off) noexcept {
  return ::syscall(SYS_pread64, fd, buf, n, off);
}
ssize_t sys_pwrite(int fd, const void* buf, size_t n, off_t off) noexcept {
  return ::syscall(SYS_pwrite64, fd, buf, n, off);
}

// Guarded ranges, page-aligned [begin, end). Written under g_mu; read lock-free by the handler
// (begin != 0 marks a slot in use, published last).
struct Range {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<Protection> prot{Protection::read_write};
};
constexpr size_t kMaxRanges = 1024;
Range g_ranges[kMaxRanges];
std::mutex g_mu;

std::atomic<FaultCallback> g_callback{nullptr};
std::atomic<uint64_t> g_faults{0};

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
std::atomic<SigactionFn> g_real_sigaction{nullptr};
std::atomic<bool> g_installed{false};
// The program's disposition for SIGSEGV while SOL's handler is installed (see program_sigaction).
struct sigaction g_next;
std::atomic<unsigned> g_next_seq{0};  // odd while g_next is being written

size_t page_size() noexcept {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

SigactionFn real_sigaction() noexcept {
  SigactionFn fn = g_real_sigaction.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    if (!fn) fn = &::sigaction;  // linked statically into a program: libc's own
    g_real_sigaction.store(fn, std::memory_order_release);
  }
  return fn;
}

struct sigaction next_action() noexcept {
  struct sigaction a;
  for (;;) {
    const unsigned s = g_next_seq.load(std::memory_order_acquire);
    if (s & 1) continue;
    std::memcpy(&a, &g_next, sizeof a);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_next_seq.load(std::memory_order_relaxed) == s) return a;
  }
}

void set_next(const struct sigaction& a) noexcept {
  g_next_seq.fetch_add(1, std::memory_order_acq_rel);
  std::memcpy(&g_next, &a, sizeof a);
  g_next_seq.fetch_add(1, std::memory_order_release);
}

// A fault that is not SOL's: what the program asked for, as if SOL were not there.
void chain(int sig, siginfo_t* info, void* uctx) noexcept {
  const struct sigaction next = next_action();
  const bool siginfo = (next.sa_flags & SA_SIGINFO) != 0;
  if (!siginfo && (next.sa_handler == SIG_DFL || next.sa_handler == SIG_IGN)) {
    // A fault cannot be ignored: the kernel would kill the process on the retried access. Let it
    // do so with the default action (core dump and all).
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    real_sigaction()(SIGSEGV, &dfl, nullptr);
    return;
  }
  if (siginfo && !next.sa_sigaction) return;
  // The program's handler, with its mask and one-shot flag, as the kernel would have run it.
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &next.sa_mask, &old);
  if (next.sa_flags & SA_RESETHAND) {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    set_next(dfl);
  }
  if (siginfo)
    next.sa_sigaction(sig, info, uctx);
  else
    next.sa_handler(sig);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Lifts the range holding addr. Async-signal-safe.
void lift(const void* addr) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (Range& r : g_ranges) {
    const uintptr_t b = r.begin.load(std::memory_order_acquire);
    const uintptr_t e = r.end.load(std::memory_order_relaxed);
    if (!b || a < b || a >= e) continue;
    sys_mprotect(b, e - b, PROT_READ | PROT_WRITE);
    r.prot.store(Protection::read_write, std::memory_order_relaxed);
    r.begin.store(0, std::memory_order_release);
  }
}

void on_segv(int sig, siginfo_t* info, void* uctx) noexcept {
  const int saved_errno = errno;
  if (info && info->si_code == SEGV_ACCERR && guarded(info->si_addr)) {
    bool write = false;
#if defined(__x86_64__)
    if (uctx) write = (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
    g_faults.fetch_add(1, std::memory_order_relaxed);
    if (FaultCallback cb = g_callback.load(std::memory_order_acquire))
      cb(info->si_addr, write);
    else
      unguard_all();
    // Still closed to this access (the callback left the page as it was): lift it, or the access
    // faults forever. A read fault on a page now read-only is done.
    const Protection now = protection(info->si_addr);
    if (now == Protection::none || (now == Protection::read_only && write)) lift(info->si_addr);
    errno = saved_errno;
    return;  // the access is retried
  }
  errno = saved_errno;
  chain(sig, info, uctx);
}

bool install() noexcept {
  if (g_installed.load(std::memory_order_acquire)) return true;
  struct sigaction mine{};
  mine.sa_sigaction = on_segv;
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&mine.sa_mask);
  struct sigaction theirs{};
  if (real_sigaction()(SIGSEGV, &mine, &theirs) != 0) return false;
  set_next(theirs);
  g_installed.store(true, std::memory_order_release);
  return true;
}

// Whether [b, e) lies in one private writable mapping that is no thread's stack we know of.
const char* unguardable(uintptr_t b, uintptr_t e) noexcept {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr = nullptr;
    size_t size = 0;
    const bool got = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
    const auto lo = reinterpret_cast<uintptr_t>(addr);
    if (got && b < lo + size && e > lo) return "stack";
  }
  // /proc/self/maps, read with plain system calls: "lo-hi perms offset dev inode path".
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "not a private writable mapping";
  char buf[8192];
  size_t have = 0;
  const char* verdict = "not a private writable mapping";
  bool done = false;
  while (!done) {
    const ssize_t got = ::read(fd, buf + have, sizeof buf - 1 - have);
    if (got <= 0) break;
    have += static_cast<size_t>(got);
    buf[have] = 0;
    char* line = buf;
    char* nl;
    while ((nl = std::strchr(line, '\n')) != nullptr) {
      *nl = 0;
      char* rest = nullptr;
      const uintptr_t lo = std::strtoull(line, &rest, 16);
      const uintptr_t hi = rest && *rest == '-' ? std::strtoull(rest + 1, &rest, 16) : 0;
      if (b >= lo && b < hi) {
        const char* perms = rest ? rest + 1 : "";
        const bool private_rw = perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p';
        if (!private_rw) verdict = "not a private writable mapping";
        else if (std::strstr(line, "[stack")) verdict = "stack";
        else if (e > hi) verdict = "spans mappings";
        else verdict = nullptr;
        done = true;
        break;
      }
      line = nl + 1;
    }
    have = static_cast<size_t>(buf + have - line);
    std::memmove(buf, line, have);
  }
  ::close(fd);
  return verdict;
}

}  // namespace

bool guard(const void* p, size_t n, Protection prot, FaultCallback on_fault, const char*& why) noexcept {
  why = nullptr;
  if (!p || n == 0) return true;
  const size_t page = page_size();
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  if ((why = unguardable(b, e)) != nullptr) return false;
  g_callback.store(on_fault, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!install()) {
    why = "cannot install a SIGSEGV handler";
    return false;
  }
  Range* slot = nullptr;
  for (Range& r : g_ranges)
    if (r.begin.load(std::memory_order_relaxed) == 0) {
      slot = &r;
      break;
    }
  if (!slot) {
    why = "too many guarded ranges";
    return false;
  }
  if (sys_mprotect(b, e - b, prot == Protection::none ? PROT_NONE : PROT_READ) != 0) {
    why = "mprotect failed";
    return false;
  }
  slot->end.store(e, std::memory_order_relaxed);
  slot->prot.store(prot, std::memory_order_relaxed);
  slot->begin.store(b, std::memory_order_release);
  return true;
}

bool protect(uintptr_t b, uintptr_t e, Protection prot, FaultCallback on_fault, const char*& why) noexcept {
  why = nullptr;
  if (b >= e) return true;
  g_callback.store(on_fault, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_mu);
  if (prot != Protection::read_write && !install()) {
    why = "cannot install a SIGSEGV handler";
    return false;
  }
  Range* slot = nullptr;
  Range* free_slot = nullptr;
  for (Range& r : g_ranges) {
    const uintptr_t rb = r.begin.load(std::memory_order_relaxed);
    if (rb == b) {
      slot = &r;
      break;
    }
    if (!rb && !free_slot) free_slot = &r;
  }
  if (!slot && prot == Protection::read_write) return true;  // not guarded
  if (!slot && !(slot = free_slot)) {
    why = "too many guarded ranges";
    return false;
  }
  if (slot->begin.load(std::memory_order_relaxed) == b && slot->prot.load(std::memory_order_relaxed) == prot &&
      slot->end.load(std::memory_order_relaxed) == e)
    return true;
  const int p = prot == Protection::none ? PROT_NONE : prot == Protection::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  // Narrowing access: record the range first, so that a fault it causes at once is recognised;
  // widening: change the pages first, so that no fault finds the range gone while still closed.
  if (prot == Protection::read_write) {
    if (sys_mprotect(b, e - b, p) != 0) {
      why = "mprotect failed";
      return false;
    }
    slot->prot.store(prot, std::memory_order_relaxed);
    slot->begin.store(0, std::memory_order_release);
    return true;
  }
  slot->end.store(e, std::memory_order_relaxed);
  slot->prot.store(prot, std::memory_order_relaxed);
  slot->begin.store(b, std::memory_order_release);
  if (sys_mprotect(b, e - b, p) != 0) {
    why = "mprotect failed";
    sys_mprotect(b, e - b, PROT_READ | PROT_WRITE);
    slot->prot.store(Protection::read_write, std::memory_order_relaxed);
    slot->begin.store(0, std::memory_order_release);
    return false;
  }
  return true;
}

void unguard_all() noexcept {
  for (Range& r : g_ranges) {
    const uintptr_t b = r.begin.load(std::memory_order_acquire);
    if (!b) continue;
    const uintptr_t e = r.end.load(std::memory_order_relaxed);
    sys_mprotect(b, e - b, PROT_READ | PROT_WRITE);
    r.prot.store(Protection::read_write, std::memory_order_relaxed);
    r.begin.store(0, std::memory_order_release);
  }
}

Protection protection(const void* addr) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (const Range& r : g_ranges) {
    const uintptr_t b = r.begin.load(std::memory_order_acquire);
    if (b && a >= b && a < r.end.load(std::memory_order_relaxed)) return r.prot.load(std::memory_order_relaxed);
  }
  return Protection::read_write;
}

bool guarded(const void* addr) noexcept {
  return protection(addr) != Protection::read_write;
}

size_t overlapping(const void* p, size_t n, uintptr_t (*out)[2], size_t max, Protection& strongest) noexcept {
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + n;
  size_t count = 0;
  strongest = Protection::read_write;
  for (const Range& r : g_ranges) {
    const uintptr_t b = r.begin.load(std::memory_order_acquire);
    const uintptr_t e = r.end.load(std::memory_order_relaxed);
    if (!b || e <= lo || b >= hi) continue;
    const Protection prot = r.prot.load(std::memory_order_relaxed);
    if (static_cast<int>(prot) > static_cast<int>(strongest)) strongest = prot;
    if (count < max) {
      out[count][0] = b;
      out[count][1] = e;
    }
    ++count;
  }
  return count;
}

namespace {

// /proc/self/mem of this process (a forked child opens its own: the parent's descriptor would
// reach the parent's memory).
std::atomic<int> g_mem_fd{-1};
std::atomic<pid_t> g_mem_pid{0};

int self_mem() noexcept {
  const pid_t pid = ::getpid();
  int fd = g_mem_fd.load(std::memory_order_acquire);
  if (fd >= 0 && g_mem_pid.load(std::memory_order_acquire) == pid) return fd;
  const int fresh = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (fresh < 0) return -1;
  g_mem_pid.store(pid, std::memory_order_release);
  g_mem_fd.store(fresh, std::memory_order_release);  // an inherited descriptor is left as it was
  return fresh;
}

bool through_mem(void* dst, const void* src, size_t n, bool write) noexcept {
  const int fd = self_mem();
  if (fd < 0) return false;
  auto* local = static_cast<unsigned char*>(write ? const_cast<void*>(src) : dst);
  const auto remote = reinterpret_cast<uintptr_t>(write ? dst : src);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = write ? sys_pwrite(fd, local + done, n - done, static_cast<off_t>(remote + done))
                              : sys_pread(fd, local + done, n - done, static_cast<off_t>(remote + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

// The fallback: the pages open for the copy, then as they were.
bool through_mprotect(void* dst, const void* src, size_t n, const void* guarded_side) noexcept {
  const size_t page = page_size();
  const auto g = reinterpret_cast<uintptr_t>(guarded_side);
  const uintptr_t b = g & ~(page - 1), e = (g + n + page - 1) & ~(page - 1);
  const Protection before = protection(guarded_side);
  if (sys_mprotect(b, e - b, PROT_READ | PROT_WRITE) != 0) return false;
  std::memcpy(dst, src, n);
  if (before != Protection::read_write)
    sys_mprotect(b, e - b, before == Protection::none ? PROT_NONE : PROT_READ);
  return true;
}

}  // namespace

bool write_guarded(void* dst, const void* src, size_t n) noexcept {
  if (n == 0) return true;
  if (through_mem(dst, src, n, true)) return true;
  return through_mprotect(dst, src, n, dst);
}

bool read_guarded(void* dst, const void* src, size_t n) noexcept {
  if (n == 0) return true;
  if (protection(src) == Protection::read_write && protection(static_cast<const char*>(src) + n - 1) == Protection::read_write) {
    std::memcpy(dst, src, n);
    return true;
  }
  if (through_mem(dst, src, n, false)) return true;
  return through_mprotect(dst, src, n, src);
}

uint64_t faults_handled() noexcept {
  return g_faults.load(std::memory_order_relaxed);
}

int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (sig != SIGSEGV || !g_installed.load(std::memory_order_acquire)) return real_sigaction()(sig, act, old);
  if (old) *old = next_action();
  if (act) set_next(*act);
  return 0;
}

}  // namespace sol::capture::lazy
