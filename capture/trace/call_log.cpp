#include "capture/trace/call_log.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "capture/trace/shape.hpp"
#include "capture/trace/text.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::call_log {
namespace {

std::atomic<int> g_fd{-1};
std::atomic<uint64_t> g_seq{0};
uint64_t g_start_ns = 0;
std::atomic<unsigned> g_generation{0};  // + 1 in each forked child: thread ids are cached per thread

long thread_id() noexcept {
  static thread_local unsigned generation = ~0u;
  static thread_local long tid = 0;
  const unsigned g = g_generation.load(std::memory_order_relaxed);
  if (generation != g) {
    tid = ::syscall(SYS_gettid);
    generation = g;
  }
  return tid;
}

constexpr char kHeader[] = "sol,header,seq,time_ms,tid,api,symbol,op,dtype,backend,duration_ms,shape\n";

void write_all(int fd, const char* p, size_t n) noexcept {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The file, appended to: created 0600 if missing, never through a symbolic link, and only a
// regular file of this user. -1 with `why` otherwise.
int open_log(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    why = std::strerror(errno);
    return -1;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    why = "not a regular file of yours";
    return -1;
  }
  if (st.st_size == 0) write_all(fd, kHeader, sizeof kHeader - 1);
  return fd;
}

// CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
void field(trace::Text& t, const char* s, size_t n) noexcept {
  if (!std::memchr(s, ',', n) && !std::memchr(s, '"', n) && !std::memchr(s, '\n', n)) {
    t.raw(s, n);
    return;
  }
  t.ch('"');
  for (size_t i = 0; i < n; ++i) {
    if (s[i] == '"') t.ch('"');
    t.ch(s[i]);
  }
  t.ch('"');
}

}  // namespace

bool start(const config::Config& cfg) noexcept {
  if (cfg.trace_log.empty()) return false;
  try {
    int fd = -1;
    if (cfg.trace_log == "stderr") {
      fd = STDERR_FILENO;
      write_all(fd, kHeader, sizeof kHeader - 1);
    } else {
      std::string path = cfg.trace_log, why;
      for (size_t at; (at = path.find("%p")) != std::string::npos;)
        path.replace(at, 2, std::to_string(::getpid()));
      fd = open_log(path, why);
      if (fd < 0) {
        SOL_LOG(warn, "per-call log %s not written: %s", path.c_str(), why.c_str());
        return false;
      }
    }
    g_start_ns = monotonic_ns();
    g_fd.store(fd, std::memory_order_release);
    pthread_atfork(nullptr, nullptr, [] { g_generation.fetch_add(1, std::memory_order_relaxed); });
    return true;
  } catch (...) {
    return false;
  }
}

bool active() noexcept {
  return g_fd.load(std::memory_order_relaxed) >= 0;
}

void record(const Node& node, const char* backend, uint64_t t0, uint64_t t1) noexcept {
  const int fd = g_fd.load(std::memory_order_acquire);
  if (fd < 0) return;
  const bool blas = op_family(node.op)[0] == 'b';
  if (!blas && !node.dnn) return;  // a set-up call: it computes nothing
  const long tid = thread_id();
  char buf[1024];
  trace::Text t(buf, sizeof buf - 1);
  t.lit("sol,call,").u64(g_seq.fetch_add(1, std::memory_order_relaxed) + 1).ch(',');
  t.usec((t0 > g_start_ns ? t0 - g_start_ns : 0) / 1000).ch(',').u64(static_cast<uint64_t>(tid)).ch(',');
  t.str(api_name(node.api)).ch(',').str(symbol_name(node.sym)).ch(',');
  if (node.dnn) {
    const dnn::Desc& d = *node.dnn->desc;
    t.str(op_name(d.kind)).ch(',').str(dtype_name(d.dtype)).ch(',');
  } else {
    t.str(op_name(node.op)).ch(',').str(dtype_name(node.dtype)).ch(',');
  }
  t.str(backend ? backend : "?").ch(',').usec((t1 - t0) / 1000).ch(',');
  if (node.dnn) {
    field(t, node.dnn->desc->shape.c_str(), node.dnn->desc->shape.size());
  } else {
    char shape[256];
    trace::Text s(shape, sizeof shape);
    trace::blas_shape(node, s);
    field(t, s.data(), s.size());
  }
  buf[t.size()] = '\n';
  write_all(fd, buf, t.size() + 1);  // one write: lines from several threads stay whole
}

}  // namespace sol::capture::call_log
