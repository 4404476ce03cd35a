#include "capture/capture.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "capture/exec/executor.hpp"
#include "capture/trace/call_log.hpp"
#include "capture/trace/trace.hpp"
#include "capture/exec/verify.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "hal/transfers.hpp"

namespace sol::capture {
namespace {

void at_exit() {
  finish_process("exit");
}
void after_fork_child() {
  verify::reset_after_fork();
}

}  // namespace

bool start(const config::Config& cfg) noexcept {
  const bool tracing = trace::start(cfg);
  const bool logging = call_log::start(cfg);
  const bool routing = start_executor(cfg);
  if (!tracing && !logging && !routing) return false;
  std::atexit(at_exit);
  pthread_atfork(nullptr, nullptr, after_fork_child);
  return true;
}

bool always_native(Sym sym, const void* native) noexcept {
  return !trace::active() && !call_log::active() && executor_always_native(sym, native);
}

void submit(Node& node, NativeFn native) noexcept {
  const bool logging = call_log::active();
  if (trace::active()) {
    trace::Span span(node);
    const uint64_t t0 = logging ? monotonic_ns() : 0;
    const char* backend = execute(node, native);
    if (logging) call_log::record(node, backend, t0, monotonic_ns());
    span.finish(node, backend);
    return;
  }
  if (logging) {
    const uint64_t t0 = monotonic_ns();
    const char* backend = execute(node, native);
    call_log::record(node, backend, t0, monotonic_ns());
    return;
  }
  execute(node, native);
}

void finish_process(const char* how) noexcept {
  verify::finish();
  trace::finish_process(how);  // summary.json carries the transfers too
  // One line per process in which a device backend ran work (a forked child reports its own).
  static std::atomic<pid_t> reported{0};
  const pid_t me = ::getpid();
  if (reported.exchange(me, std::memory_order_relaxed) == me) return;
  const hal::transfers::Totals t = hal::transfers::totals();
  if (t.nodes > 0) {
    try {
      SOL_LOG(info, "%s", hal::transfers::line(t).c_str());
    } catch (...) {
    }
  }
}

}  // namespace sol::capture
