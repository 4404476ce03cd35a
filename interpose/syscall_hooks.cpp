// The system calls (and the stdio functions that make them from inside libc) that may be given
// memory the lazy executor guards (capture/lazy/coherence.hpp). The kernel does not fault on a
// protected user page: it fails the call with EFAULT, or (a read into it) stops short. So before
// the call the coherence layer makes the memory what the kernel needs: results pending there are
// written back (the pages become readable), and memory the call writes has its device copies
// dropped (the pages become writable again).
//
// Each hook is one relaxed load and a predictable branch before the next definition while nothing
// is guarded, which is every process that never ran lazily on a device. errno is the call's own:
// the coherence layer leaves it as it found it.
//
// fread and fwrite are here because glibc moves large blocks between the caller's buffer and the
// file with its internal read/write, which no hook sees; the unlocked variants likewise. madvise
// and mprotect: the program changes what the memory holds (MADV_DONTNEED zeroes it) or how it
// may be accessed, so pending results are written back and the device copies dropped first.
#include <dlfcn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>

// <sys/socket.h> defines SOL_TLS (a socket option level, 282), as SOL's macros do (thread-local
// storage); this file uses neither, and the socket one must not leak into SOL's headers.
#undef SOL_TLS

#include "capture/lazy/coherence.hpp"
#include "common/macros.hpp"
#include "interpose/next_symbol.hpp"

// GCC sees read()'s buffer (declared write-only by glibc) passed to a const void* parameter and
// warns that it may be read uninitialized: only the pointer's value is used, never the bytes.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

namespace lazy = sol::capture::lazy;
using sol::hal::transfers::Cause;

inline void reads(const void* p, size_t n) noexcept {
  lazy::host_access(p, n, false, Cause::syscall);
}
inline void writes(const void* p, size_t n) noexcept {
  lazy::host_access(p, n, true, Cause::syscall);
}
inline void iov_access(const struct iovec* iov, int count, bool host_writes) noexcept {
  if (!lazy::any_guarded() || !iov) return;
  for (int i = 0; i < count; ++i) lazy::host_access(iov[i].iov_base, iov[i].iov_len, host_writes, Cause::syscall);
}
inline void msg_access(const struct msghdr* msg, bool host_writes) noexcept {
  if (lazy::any_guarded() && msg) iov_access(msg->msg_iov, static_cast<int>(msg->msg_iovlen), host_writes);
}

}  // namespace

// One hook: the next definition looked up once, the coherence step, the call.
#define SOL_SYSCALL_HOOK(ret, name, params, args, access)                      \
  extern "C" SOL_EXPORT ret name params noexcept {                             \
    using Fn = ret(*) params noexcept;                                         \
    static std::atomic<Fn> next{nullptr};                                      \
    access;                                                                    \
    return sol::interpose::next_symbol(next, #name) args;                      \
  }

SOL_SYSCALL_HOOK(ssize_t, read, (int fd, void* buf, size_t n), (fd, buf, n), writes(buf, n))
SOL_SYSCALL_HOOK(ssize_t, write, (int fd, const void* buf, size_t n), (fd, buf, n), reads(buf, n))
SOL_SYSCALL_HOOK(ssize_t, pread, (int fd, void* buf, size_t n, off_t off), (fd, buf, n, off), writes(buf, n))
SOL_SYSCALL_HOOK(ssize_t, pread64, (int fd, void* buf, size_t n, off_t off), (fd, buf, n, off), writes(buf, n))
SOL_SYSCALL_HOOK(ssize_t, pwrite, (int fd, const void* buf, size_t n, off_t off), (fd, buf, n, off), reads(buf, n))
SOL_SYSCALL_HOOK(ssize_t, pwrite64, (int fd, const void* buf, size_t n, off_t off), (fd, buf, n, off), reads(buf, n))
SOL_SYSCALL_HOOK(ssize_t, readv, (int fd, const struct iovec* iov, int cnt), (fd, iov, cnt), iov_access(iov, cnt, true))
SOL_SYSCALL_HOOK(ssize_t, writev, (int fd, const struct iovec* iov, int cnt), (fd, iov, cnt), iov_access(iov, cnt, false))
SOL_SYSCALL_HOOK(ssize_t, preadv, (int fd, const struct iovec* iov, int cnt, off_t off), (fd, iov, cnt, off),
                 iov_access(iov, cnt, true))
SOL_SYSCALL_HOOK(ssize_t, pwritev, (int fd, const struct iovec* iov, int cnt, off_t off), (fd, iov, cnt, off),
                 iov_access(iov, cnt, false))
SOL_SYSCALL_HOOK(ssize_t, preadv2, (int fd, const struct iovec* iov, int cnt, off_t off, int flags),
                 (fd, iov, cnt, off, flags), iov_access(iov, cnt, true))
SOL_SYSCALL_HOOK(ssize_t, pwritev2, (int fd, const struct iovec* iov, int cnt, off_t off, int flags),
                 (fd, iov, cnt, off, flags), iov_access(iov, cnt, false))
SOL_SYSCALL_HOOK(ssize_t, send, (int fd, const void* buf, size_t n, int flags), (fd, buf, n, flags), reads(buf, n))
SOL_SYSCALL_HOOK(ssize_t, sendto,
                 (int fd, const void* buf, size_t n, int flags, const struct sockaddr* to, socklen_t len),
                 (fd, buf, n, flags, to, len), reads(buf, n))
SOL_SYSCALL_HOOK(ssize_t, sendmsg, (int fd, const struct msghdr* msg, int flags), (fd, msg, flags),
                 msg_access(msg, false))
SOL_SYSCALL_HOOK(ssize_t, recv, (int fd, void* buf, size_t n, int flags), (fd, buf, n, flags), writes(buf, n))
SOL_SYSCALL_HOOK(ssize_t, recvfrom,
                 (int fd, void* buf, size_t n, int flags, struct sockaddr* from, socklen_t* len),
                 (fd, buf, n, flags, from, len), writes(buf, n))
SOL_SYSCALL_HOOK(ssize_t, recvmsg, (int fd, struct msghdr* msg, int flags), (fd, msg, flags), msg_access(msg, true))
SOL_SYSCALL_HOOK(size_t, fread, (void* buf, size_t size, size_t n, FILE* f), (buf, size, n, f),
                 writes(buf, size * n))
SOL_SYSCALL_HOOK(size_t, fwrite, (const void* buf, size_t size, size_t n, FILE* f), (buf, size, n, f),
                 reads(buf, size * n))
SOL_SYSCALL_HOOK(size_t, fread_unlocked, (void* buf, size_t size, size_t n, FILE* f), (buf, size, n, f),
                 writes(buf, size * n))
SOL_SYSCALL_HOOK(size_t, fwrite_unlocked, (const void* buf, size_t size, size_t n, FILE* f), (buf, size, n, f),
                 reads(buf, size * n))
SOL_SYSCALL_HOOK(int, madvise, (void* p, size_t n, int advice), (p, n, advice), writes(p, n))
SOL_SYSCALL_HOOK(int, mprotect, (void* p, size_t n, int prot), (p, n, prot), writes(p, n))

#undef SOL_SYSCALL_HOOK
