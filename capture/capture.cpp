#include "capture/capture.hpp"

#include <pthread.h>

#include <cstdlib>

#include "capture/exec/executor.hpp"
#include "capture/trace/trace.hpp"
#include "capture/exec/verify.hpp"
#include "config/config.hpp"

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
  const bool routing = start_executor(cfg);
  if (!tracing && !routing) return false;
  std::atexit(at_exit);
  pthread_atfork(nullptr, nullptr, after_fork_child);
  return true;
}

bool always_native(Sym sym, const void* native) noexcept {
  return !trace::active() && executor_always_native(sym, native);
}

void submit(Node& node, NativeFn native) noexcept {
  if (trace::active()) {
    trace::Span span(node);
    const char* backend = execute(node, native);
    span.finish(node, backend);
    return;
  }
  execute(node, native);
}

void finish_process(const char* how) noexcept {
  verify::finish();
  trace::finish_process(how);
}

}  // namespace sol::capture
