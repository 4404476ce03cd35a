// sigaction and signal, interposed for SIGSEGV only: once the lazy executor guards pages
// (capture/lazy/guard.hpp), SOL's handler must stay first, and a program that installs its own
// SIGSEGV handler afterwards (Python's faulthandler, a JVM, a crash reporter) gets it recorded
// as the next handler: it sees every fault that is not SOL's, and reads back what it set. Until
// then, and for every other signal, both are libc's.
#include <signal.h>

#include <atomic>

#include "capture/lazy/guard.hpp"
#include "common/macros.hpp"
#include "interpose/next_symbol.hpp"

namespace {

using SignalFn = sighandler_t (*)(int, sighandler_t);
std::atomic<SignalFn> g_signal{nullptr};

SignalFn libc_signal() noexcept {
  return sol::interpose::next_symbol(g_signal, "signal");
}

}  // namespace

extern "C" SOL_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return sol::capture::lazy::program_sigaction(sig, act, old);
}

extern "C" SOL_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  if (sig != SIGSEGV) {
    if (SignalFn fn = libc_signal()) return fn(sig, handler);
  }
  // glibc's signal(): BSD semantics, the signal blocked in its handler, system calls restarted.
  struct sigaction act{}, old{};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  if (sol::capture::lazy::program_sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
