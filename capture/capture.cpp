#include "capture/capture.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "capture/exec/executor.hpp"
#include "capture/trace/call_log.hpp"
#include "capture/trace/trace.hpp"
#include "capture/exec/verify.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "config/config.hpp"
#include "hal/transfers.hpp"

namespace sol::capture {
namespace {

// SOL_LOG=info without tracing: calls counted per backend, one line when the process ends. The
// backends' names are static strings, so a name is its pointer.
class Tally {
 public:
  void count(const char* backend) noexcept {
    for (size_t i = 0;; ++i) {
      if (i == kMax) return;
      const char* name = slots_[i].name.load(std::memory_order_acquire);
      if (name == backend) {
        slots_[i].calls.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      if (!name) {
        const char* expected = nullptr;
        if (slots_[i].name.compare_exchange_strong(expected, backend, std::memory_order_acq_rel) ||
            expected == backend) {
          slots_[i].calls.fetch_add(1, std::memory_order_relaxed);
          return;
        }
      }
    }
  }
  // "1200 calls: 1000 native, 200 onednn", or empty when there were none.
  std::string line() const {
    uint64_t total = 0;
    std::string parts;
    for (const Slot& s : slots_) {
      const char* name = s.name.load(std::memory_order_acquire);
      const uint64_t n = s.calls.load(std::memory_order_relaxed);
      if (!name || !n) continue;
      total += n;
      parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + name;
    }
    return total ? std::to_string(total) + " calls: " + parts : std::string();
  }
  void reset() noexcept {
    for (Slot& s : slots_) s.calls.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kMax = 16;
  struct Slot {
    std::atomic<const char*> name{nullptr};
    std::atomic<uint64_t> calls{0};
  };
  Slot slots_[kMax];
};

bool g_tallying = false;
Tally g_tally;

// A BLAS call or a DNN primitive's execution; oneDNN's set-up calls compute nothing.
bool computes(const Node& node) noexcept {
  return op_family(node.op)[0] == 'b' || node.dnn != nullptr;
}

void at_exit() {
  finish_process("exit");
}
void after_fork_child() {
  verify::reset_after_fork();
  g_tally.reset();  // the child's line counts its own calls
}

}  // namespace

bool start(const config::Config& cfg) noexcept {
  const bool tracing = trace::start(cfg);
  const bool logging = call_log::start(cfg);
  const bool routing = start_executor(cfg);
  g_tallying = !tracing && log::enabled(log::Level::info);  // tracing has its own summaries
  if (!tracing && !logging && !routing && !g_tallying) return false;
  std::atexit(at_exit);
  pthread_atfork(nullptr, nullptr, after_fork_child);
  return true;
}

bool always_native(Sym sym, const void* native) noexcept {
  return !trace::active() && !call_log::active() && !g_tallying && executor_always_native(sym, native);
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
    if (g_tallying && computes(node)) g_tally.count(backend);
    return;
  }
  const char* backend = execute(node, native);
  if (SOL_UNLIKELY(g_tallying) && computes(node)) g_tally.count(backend);
}

void finish_process(const char* how) noexcept {
  verify::finish();
  trace::finish_process(how);  // summary.json carries the transfers too
  // One line per process in which a device backend ran work (a forked child reports its own).
  static std::atomic<pid_t> reported{0};
  const pid_t me = ::getpid();
  if (reported.exchange(me, std::memory_order_relaxed) == me) return;
  const hal::transfers::Totals t = hal::transfers::totals();
  try {
    if (g_tallying) {
      const std::string calls = g_tally.line();
      if (!calls.empty()) SOL_LOG(info, "%s", calls.c_str());
    }
    if (t.nodes > 0) SOL_LOG(info, "%s", hal::transfers::line(t).c_str());
  } catch (...) {
  }
}

}  // namespace sol::capture
