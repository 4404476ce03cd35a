#include "capture/trace/trace_file.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/fs_safety.hpp"
#include "common/signals.hpp"

namespace sol::capture::trace {

namespace {

void write_all(int fd, const char* data, size_t len) noexcept {
  if (fd < 0) return;
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // disk full: the file stays a loadable prefix
    data += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace

bool TraceFile::open(const std::string& path, const char* header, size_t len, std::string& error) noexcept {
  // The trace directory may be shared: neither name may lead SOL to write into someone's file.
  const std::string tmp = path + ".part";
  const int fd = fs_safety::open_new_private(tmp, O_APPEND, error);
  if (fd < 0) return false;
  fd_.store(fd, std::memory_order_release);
  write(header, len);
  if (!fs_safety::rename_over_own(tmp, path, error)) {
    abandon();
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

void TraceFile::write(const char* data, size_t len) noexcept {
  write_all(fd_.load(std::memory_order_acquire), data, len);
}

char* TraceFile::hand_over(char* block, size_t len) noexcept {
  pthread_mutex_lock(&mu_);
  const Writer w = writer_.load(std::memory_order_relaxed);
  if (w == Writer::running && !stop_ && free_spares_ > 0) {
    queue_[(head_ + queued_) % kSpares] = {block, len};
    ++queued_;
    char* spare = spares_[--free_spares_];
    if (queued_ == kWake || (queued_ == 1 && sleeping_)) pthread_cond_signal(&work_);
    pthread_mutex_unlock(&mu_);
    return spare;
  }
  if (w == Writer::none) writer_.store(Writer::wanted, std::memory_order_relaxed);
  pthread_mutex_unlock(&mu_);
  write(block, len);
  return block;
}

void TraceFile::start() noexcept {
  using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  // libc's pthread_create, not libsol's (interpose/thread_hooks.cpp), which would look for the
  // Python frames that started this thread.
  static const auto create = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  pthread_mutex_lock(&mu_);
  if (writer_.load(std::memory_order_relaxed) != Writer::wanted) {
    pthread_mutex_unlock(&mu_);
    return;
  }
  writer_.store(Writer::failed, std::memory_order_relaxed);  // unless all of the below works
  // The spares: mapped here, or those of the parent's writer in a forked child.
  const bool inherited = free_spares_ == kSpares;
  void* mem = inherited ? nullptr
                        : ::mmap(nullptr, kSpares * kBlock, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_attr_t attr;
  if (create && mem != MAP_FAILED && pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    // The writer's waits end on CLOCK_MONOTONIC (no waiter yet: it is made anew).
    pthread_condattr_t cattr;
    if (pthread_condattr_init(&cattr) == 0) {
      pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
      pthread_cond_init(&work_, &cattr);
      pthread_condattr_destroy(&cattr);
    }
    pthread_t thread;
    const AsyncSignalsBlocked blocked;
    if (create(&thread, &attr, writer_main, this) == 0) {
      pthread_setname_np(thread, "sol-trace");
      if (!inherited)
        for (size_t i = 0; i < kSpares; ++i) spares_[i] = static_cast<char*>(mem) + i * kBlock;
      free_spares_ = kSpares;
      writer_.store(Writer::running, std::memory_order_relaxed);
      mem = MAP_FAILED;
    }
    pthread_attr_destroy(&attr);
  }
  if (mem && mem != MAP_FAILED) ::munmap(mem, kSpares * kBlock);
  pthread_mutex_unlock(&mu_);
}

namespace {

timespec deadline() noexcept {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += static_cast<time_t>((t.tv_nsec + TraceFile::kLingerNs) / 1000000000);
  t.tv_nsec = static_cast<long>((t.tv_nsec + TraceFile::kLingerNs) % 1000000000);
  return t;
}

}  // namespace

void* TraceFile::writer_main(void* self) noexcept {
  auto& f = *static_cast<TraceFile*>(self);
  pthread_mutex_lock(&f.mu_);
  for (;;) {
    // Woken for kWake blocks, or for fewer after kLingerNs (a slow trickle of calls, or a
    // process that went quiet, does not keep its events from the file for long). With none
    // queued by then it sleeps until the next block, which wakes it (no timer while idle).
    timespec until = deadline();
    while (f.queued_ < kWake && !f.stop_) {
      if (pthread_cond_timedwait(&f.work_, &f.mu_, &until) != ETIMEDOUT) continue;
      if (f.queued_ > 0) break;
      f.sleeping_ = true;
      while (f.queued_ == 0 && !f.stop_) pthread_cond_wait(&f.work_, &f.mu_);
      f.sleeping_ = false;
      until = deadline();
    }
    // Awake: everything queued is written, down to the last block.
    while (f.queued_ > 0) {
      const Full full = f.queue_[f.head_];
      f.head_ = (f.head_ + 1) % kSpares;
      --f.queued_;
      f.writing_ = full.block;
      pthread_mutex_unlock(&f.mu_);
      f.write(full.block, full.len);
      pthread_mutex_lock(&f.mu_);
      f.writing_ = nullptr;
      f.spares_[f.free_spares_++] = full.block;
    }
    pthread_cond_broadcast(&f.idle_);
    if (f.stop_) break;
  }
  pthread_mutex_unlock(&f.mu_);
  return nullptr;
}

void TraceFile::close(const char* tail, size_t len, const char* head) noexcept {
  // What the writer has still to write goes first; it stops after that, and a block handed over
  // from now on is written by its caller (into a closed file: dropped).
  pthread_mutex_lock(&mu_);
  stop_ = true;
  if (writer_.load(std::memory_order_relaxed) == Writer::running) {
    pthread_cond_signal(&work_);
    while (queued_ > 0 || writing_) pthread_cond_wait(&idle_, &mu_);
  }
  pthread_mutex_unlock(&mu_);
  write(tail, len);
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd < 0) return;
  // pwrite(2) on a file opened O_APPEND appends on Linux, whatever the offset: drop the flag first.
  if (head && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_APPEND) == 0) {
    const size_t n = std::strlen(head);
    while (::pwrite(fd, head, n, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(fd);
}

void TraceFile::abandon() noexcept {
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) ::close(fd);
}

void TraceFile::lock_for_fork() noexcept {
  pthread_mutex_lock(&mu_);
}

void TraceFile::unlock_in_parent() noexcept {
  pthread_mutex_unlock(&mu_);
}

void TraceFile::reset_in_child() noexcept {
  // The parent's writer may have been waiting on the conditions: they start over, like the lock.
  pthread_mutex_init(&mu_, nullptr);
  pthread_cond_init(&work_, nullptr);
  pthread_cond_init(&idle_, nullptr);
  for (; queued_ > 0; --queued_, head_ = (head_ + 1) % kSpares) spares_[free_spares_++] = queue_[head_].block;
  if (writing_) spares_[free_spares_++] = writing_;
  writing_ = nullptr;
  head_ = 0;
  stop_ = false;
  sleeping_ = false;
  // The spares are kept: a writer the child starts takes them over instead of mapping more.
  writer_.store(Writer::none, std::memory_order_relaxed);
}

}  // namespace sol::capture::trace
