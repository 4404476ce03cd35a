#include "common/startup.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <new>
#include <thread>
#include <vector>

#include "common/native.hpp"
#include "common/own_work.hpp"
#include "common/signals.hpp"

namespace sol {

namespace {

// The process's start-ups (one per backend that prepares: the executor prepares each once). A
// fixed table, so that the fork handlers and the exit guard walk it without locks or allocation.
constexpr int kSlots = 4;
std::atomic<Startup*> g_startups[kSlots];
std::atomic<int> g_count{0};
std::once_flag g_fork_handlers;

template <class F>
void each(F f) {
  const int n = g_count.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kSlots; ++i)
    if (Startup* s = g_startups[i].load(std::memory_order_acquire)) f(*s);
}

}  // namespace

// Destroyed when the main thread ends, by exit() or a return from main(), before anything else.
struct StartupExitGuard {
  bool armed = false;
  ~StartupExitGuard() {
    if (armed) each([](Startup& s) { s.stop_and_wait(); });
  }
};
namespace {
thread_local StartupExitGuard t_exit_guard;
}  // namespace

bool intercepted_library_loaded(size_t& seen) {
  static const char* const kSymbols[] = {"sgemm_", "cblas_sgemm", "dnnl_primitive_execute"};
  if (seen == 0)
    for (const char* name : kSymbols)
      if (void* p = dlsym(RTLD_NEXT, name); p && !in_libsol(p)) return true;
  const std::vector<std::string> paths = loaded_objects();
  bool found = false;
  for (size_t i = seen; i < paths.size() && !found; ++i)
    for (const char* name : kSymbols) found = found || find_in_object(paths[i], name);
  seen = paths.size();
  return found;
}

Startup* Startup::begin(Work work, std::chrono::milliseconds not_before, Trigger trigger) noexcept {
  if (::getpid() != static_cast<pid_t>(::gettid())) return nullptr;
  try {
    const int slot = g_count.load(std::memory_order_relaxed);
    if (slot >= kSlots) return nullptr;
    auto* s = new Startup(std::move(work), not_before, trigger);
    g_startups[slot].store(s, std::memory_order_release);
    g_count.store(slot + 1, std::memory_order_release);  // only the main thread adds
    t_exit_guard.armed = true;  // its first use registers its destructor with the main thread
    std::call_once(g_fork_handlers, [] { pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
    try {
      const AsyncSignalsBlocked blocked;
      s->thread_waits_ = true;  // before the thread can see it
      std::thread(thread_main, s).detach();
    } catch (...) {  // no thread: the first take() runs the work, as without a start-up
      s->thread_waits_ = false;
    }
    return s;
  } catch (...) {  // out of memory: no start-up ahead of the first call
    return nullptr;
  }
}

bool Startup::run(bool background) {
  std::unique_lock<std::mutex> lock(mu_);
  if (state_ != State::waiting || (background && stop_.load(std::memory_order_relaxed))) return false;
  state_ = State::running;
  runner_ = ::getpid();
  lock.unlock();
  try {
    const OwnWork own;  // on its thread or on a program's that took it: SOL's work either way
    work_(background, stop_);
  } catch (...) {  // the work reports its own failures to its owner; nothing may escape the thread
  }
  lock.lock();
  state_ = State::done;
  cv_.notify_all();
  return true;
}

bool Startup::look(size_t& seen) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::waiting || stop_.load(std::memory_order_relaxed)) return false;
    looking_ = true;
  }
  bool found = false;
  try {
    found = intercepted_library_loaded(seen);
  } catch (...) {  // out of memory: nothing found this time
  }
  std::lock_guard<std::mutex> lock(mu_);
  looking_ = false;
  cv_.notify_all();
  return found;
}

Startup::Outcome Startup::take(std::chrono::milliseconds limit) {
  if (run(false)) return Outcome::done;
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, limit, [this] { return state_ == State::done || state_ == State::abandoned; }))
    return Outcome::timed_out;
  if (state_ == State::abandoned) return Outcome::abandoned;
  return runner_ == ::getpid() ? Outcome::done : Outcome::done_before_fork;
}

Startup::State Startup::state() {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

bool Startup::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::running) return runner_ == ::getpid();
  return state_ == State::waiting && thread_waits_;
}

void Startup::request() {
  std::lock_guard<std::mutex> lock(mu_);
  if (requested_) return;
  requested_ = true;
  cv_.notify_all();
}

bool Startup::busy() const {
  return looking_ || (state_ == State::running && runner_ == ::getpid());
}

void Startup::stop_and_wait() {
  stop_.store(true, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.notify_all();
  cv_.wait_for(lock, kExitWait, [this] { return !busy(); });
}

// The wait is bounded because a thread that forks from inside dlopen (a library constructor) would
// hold the loader's lock that the work or a look needs; the child then sees the work abandoned.
void Startup::before_fork() {
  each([](Startup& s) {
    std::unique_lock<std::mutex> lock(s.mu_);
    s.cv_.wait_for(lock, kForkWait, [&s] { return !s.busy(); });
    lock.release();  // held across fork(), so that the child sees a consistent state
  });
}
void Startup::after_fork_parent() {
  each([](Startup& s) { s.mu_.unlock(); });
}
void Startup::after_fork_child() {
  each([](Startup& s) {
    new (&s.mu_) std::mutex;
    new (&s.cv_) std::condition_variable;
    // No thread runs here: work under way in the parent is lost to the child, and work not begun
    // is the child's first take()'s to do.
    if (s.state_ == State::running) s.state_ = State::abandoned;
    s.looking_ = false;
    s.thread_waits_ = false;
  });
}

// Waits for a library SOL intercepts, then runs the work, unless exit(), a take() (which then runs
// it) or kGiveUp came first.
void Startup::thread_main(Startup* s) {
  using std::chrono::milliseconds;
  struct NoLongerWaiting {  // however the loop ends: the work ran, or it is a take()'s now
    Startup* s;
    ~NoLongerWaiting() {
      std::lock_guard<std::mutex> lock(s->mu_);
      s->thread_waits_ = false;
    }
  } no_longer_waiting{s};
  if (s->trigger_ == Trigger::request) {
    {
      std::unique_lock<std::mutex> lock(s->mu_);
      s->cv_.wait(lock, [s] {
        return s->requested_ || s->state_ != State::waiting || s->stop_.load(std::memory_order_relaxed);
      });
    }
    s->run(true);  // unless a take() or exit came first
    return;
  }
  size_t seen = 0;
  bool found = false;
  for (milliseconds waited{0}; waited < kGiveUp;) {
    const milliseconds pause{waited < milliseconds(1000) ? 10 : 100};
    {
      std::unique_lock<std::mutex> lock(s->mu_);
      if (s->cv_.wait_for(lock, pause, [s] {
            return s->state_ != State::waiting || s->stop_.load(std::memory_order_relaxed);
          }))
        return;
    }
    waited += pause;
    found = found || s->look(seen);
    if (found && waited >= s->not_before_) {
      s->run(true);
      return;
    }
  }
}

}  // namespace sol
