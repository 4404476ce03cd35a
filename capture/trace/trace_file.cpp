#include "capture/trace/trace_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sol::capture::trace {

bool TraceFile::open(const std::string& path, const char* header, size_t len, std::string& error) noexcept {
  const std::string tmp = path + ".part";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = std::strerror(errno);
    return false;
  }
  fd_.store(fd, std::memory_order_release);
  write(header, len);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    error = std::strerror(errno);
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

void TraceFile::close(const char* tail) noexcept {
  write(tail, std::strlen(tail));
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) ::close(fd);
}

void TraceFile::abandon() noexcept {
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) ::close(fd);
}

}  // namespace sol::capture::trace
