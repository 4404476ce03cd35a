#include "capture/trace/mapped_file.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sol::capture::trace {

MappedFile::~MappedFile() {
  release();
}

bool MappedFile::open(const std::string& path, std::string& error) noexcept {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error = std::strerror(errno);
    return false;
  }
  chunks_ = new (std::nothrow) std::atomic<char*>[kMaxChunks]();
  if (!chunks_) {
    error = "out of memory";
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  return true;
}

bool MappedFile::grow(uint64_t end) noexcept {
  std::lock_guard<std::mutex> lock(grow_mu_);
  while (mapped_.load(std::memory_order_acquire) < end) {
    const uint64_t have = mapped_.load(std::memory_order_relaxed);
    const size_t index = have / kChunk;
    if (index >= kMaxChunks || ::ftruncate(fd_, static_cast<off_t>(have + kChunk)) != 0) return false;
    void* p = ::mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(have));
    if (p == MAP_FAILED) return false;
    std::memset(p, ' ', kChunk);  // whitespace, so a reader of a crashed process's file sees valid JSON
    chunks_[index].store(static_cast<char*>(p), std::memory_order_release);
    mapped_.store(have + kChunk, std::memory_order_release);
  }
  return true;
}

void MappedFile::append(const char* data, size_t len) noexcept {
  if (fd_ < 0 || len == 0) return;
  // Dekker-style handshake with close(): announce the write, then check whether it closed.
  writers_.fetch_add(1, std::memory_order_seq_cst);
  if (closed_.load(std::memory_order_seq_cst) || broken_.load(std::memory_order_relaxed)) {
    writers_.fetch_sub(1, std::memory_order_release);
    return;
  }
  uint64_t off = reserved_.fetch_add(len, std::memory_order_relaxed);
  if (off + len > mapped_.load(std::memory_order_acquire) && !grow(off + len)) {
    broken_.store(true, std::memory_order_relaxed);
    writers_.fetch_sub(1, std::memory_order_release);
    return;
  }
  while (len > 0) {
    const size_t in = off % kChunk;
    const size_t n = len < kChunk - in ? len : kChunk - in;
    std::memcpy(chunks_[off / kChunk].load(std::memory_order_acquire) + in, data, n);
    data += n;
    off += n;
    len -= n;
  }
  writers_.fetch_sub(1, std::memory_order_release);
}

void MappedFile::close(const char* tail) noexcept {
  if (fd_ < 0) return;
  append(tail, std::strlen(tail));
  closed_.store(true, std::memory_order_seq_cst);
  while (writers_.load(std::memory_order_seq_cst) != 0) sched_yield();
  uint64_t size = reserved_.load(std::memory_order_relaxed);
  if (broken_.load(std::memory_order_relaxed)) size = mapped_.load(std::memory_order_relaxed);
  release();
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    // The tail stays spaces: still a loadable file.
  }
  ::close(fd_);
  fd_ = -1;
}

void MappedFile::abandon() noexcept {
  release();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  reserved_.store(0);
  mapped_.store(0);
  closed_.store(false);
  broken_.store(false);
  writers_.store(0);
}

void MappedFile::release() noexcept {
  if (!chunks_) return;
  const uint64_t mapped = mapped_.load(std::memory_order_acquire);
  for (size_t i = 0; i < mapped / kChunk; ++i) ::munmap(chunks_[i].load(std::memory_order_relaxed), kChunk);
  delete[] chunks_;
  chunks_ = nullptr;
  mapped_.store(0, std::memory_order_release);
}

}  // namespace sol::capture::trace
