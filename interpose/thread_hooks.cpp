// pthread_create, interposed so that a thread that runs no Python (an OpenMP pool's, a library's
// own worker) can name the Python frames that started it in a traced process's stacks. Outside
// trace mode, or in a process without Python, it is libc's with one check in front.
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "capture/trace/trace.hpp"
#include "common/macros.hpp"
#include "interpose/next_symbol.hpp"

namespace {

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
std::atomic<CreateFn> g_create{nullptr};

CreateFn libc_create() noexcept {
  return sol::interpose::next_symbol(g_create, "pthread_create");
}

struct Start {
  void* (*fn)(void*);
  void* arg;
  const sol::capture::trace::ThreadOrigin* origin;
};

void* start_thread(void* p) {
  const Start start = *static_cast<Start*>(p);
  std::free(p);
  sol::capture::trace::adopt_thread_origin(start.origin);
  return start.fn(start.arg);
}

}  // namespace

extern "C" SOL_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                                         void* arg) {
  const CreateFn create = libc_create();
  if (!create) return EAGAIN;  // no libc pthread_create: cannot happen in a dynamically linked program
  const sol::capture::trace::ThreadOrigin* origin = sol::capture::trace::thread_origin();
  if (SOL_LIKELY(!origin)) return create(thread, attr, fn, arg);
  auto* start = static_cast<Start*>(std::malloc(sizeof(Start)));
  if (!start) return create(thread, attr, fn, arg);
  *start = Start{fn, arg, origin};
  const int rc = create(thread, attr, start_thread, start);
  if (rc != 0) std::free(start);
  return rc;
}
