#include "capture/trace/trace_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fs_safety.hpp"

namespace sol::capture::trace {

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
  const int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0) return;
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // disk full: the file stays a loadable prefix
    data += n;
    len -= static_cast<size_t>(n);
  }
}

void TraceFile::close(const char* tail, size_t len, const char* head) noexcept {
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

}  // namespace sol::capture::trace
