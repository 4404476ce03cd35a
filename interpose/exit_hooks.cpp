// _exit and _Exit, interposed so that a traced process ending without exit() (Python's os._exit,
// a forked worker's _exit) still writes its summaries. Everything else about them is libc's.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "capture/capture.hpp"
#include "common/macros.hpp"

namespace {

using ExitFn = void (*)(int);

// Resolved at load, never at exit: _exit is also how a vfork child ends, and such a child shares
// its parent's memory, so it must not run the dynamic linker (or malloc) on the way out.
std::atomic<ExitFn> g_exit{nullptr}, g_Exit{nullptr};

__attribute__((constructor)) void resolve_exits() {
  g_exit.store(reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_exit")), std::memory_order_release);
  g_Exit.store(reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_Exit")), std::memory_order_release);
}

[[noreturn]] void leave(std::atomic<ExitFn>& fn, int status, const char* how) {
  sol::capture::finish_process(how);  // trace summaries, the verify line: none if nothing to say
  if (ExitFn f = fn.load(std::memory_order_acquire)) f(status);
  // Called before our constructor ran (from another library's constructor): what libc would do.
  for (;;) ::syscall(SYS_exit_group, status);
}

}  // namespace

extern "C" SOL_EXPORT [[noreturn]] void _exit(int status) noexcept {
  leave(g_exit, status, "_exit");
}
extern "C" SOL_EXPORT [[noreturn]] void _Exit(int status) noexcept {
  leave(g_Exit, status, "_Exit");
}
