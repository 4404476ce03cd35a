// Slow one-time work begun off the caller's path: a backend's prepare() starts it on a thread of
// its own, so that the first call waits for what is left of it, not for all of it (a device's
// start-up, a library's JIT-compiled kernels), while a Python program is still importing modules.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <sys/types.h>

namespace sol {

// One piece of start-up work. Whoever comes first does it: the thread, or the first call when the
// thread has not begun (a program calling BLAS at once), through take().
//
// The thread begins the work once a library SOL intercepts is loaded (intercepted_library_loaded(),
// looked at every 10 ms during the first second, then every 100 ms up to kGiveUp): a process that
// never loads one (a shell command, a compiler run under `sol run`) never pays for it. It must
// never hurt the program:
// - it blocks asynchronous signals, which stay with the program's threads (threads it starts, a
//   driver's, inherit that mask);
// - exit() from the main thread sets `stop` and waits for the step under way, bounded (a
//   thread-local destructor of the main thread: those run before any atexit handler or library
//   destructor, which would otherwise tear a library down under the thread's feet);
// - fork() waits until the work is done (bounded), and for a look at the loaded libraries (it
//   holds the loader's locks): a child gets all of it or none of it. A child forked while the work
//   was still under way (the bounded wait ran out) sees it `abandoned`: whatever it set up may be
//   half done in the child, where no thread finishes it; the owner must not use it there.
class Startup {
 public:
  enum class State : uint8_t { waiting, running, done, abandoned };
  // What take() found.
  enum class Outcome : uint8_t {
    done,              // done in this process, by the thread or by this call
    done_before_fork,  // done in a parent before this process was forked
    abandoned,         // under way when this process was forked: half of it, perhaps
    timed_out,         // still under way after take()'s limit
  };
  static constexpr std::chrono::milliseconds kGiveUp{10000};
  static constexpr std::chrono::seconds kForkWait{2}, kExitWait{5};

  // `background`: on the thread (it may do more than a call that needs the result now would);
  // `stop`: set at exit, when the work should return at its next step.
  using Work = std::function<void(bool background, const std::atomic<bool>& stop)>;

  // What makes the thread begin the work.
  enum class Trigger : uint8_t {
    library,  // a library SOL intercepts is loaded (see above)
    request,  // request(): a first use that must not wait for the work, only start it
  };

  // Creates a start-up for `work` and its thread: only from the main thread (whose exit waits for
  // it), else nullptr and nothing runs. Never freed: the thread, the fork handlers and the exit
  // guard refer to it. nullptr too when out of memory or out of slots (a few per process). A
  // start-up whose thread could not be created is still returned: the first take() runs it.
  // `not_before`: the thread begins no earlier than that after begin(), however soon the library
  // shows up; a process that ends sooner never pays for the work (a take() still runs it).
  static Startup* begin(Work work, std::chrono::milliseconds not_before = std::chrono::milliseconds(0),
                        Trigger trigger = Trigger::library) noexcept;

  // Trigger::request: the thread may begin now (at once; a later call does nothing).
  void request();

  // Runs the work here unless it has begun (the thread's, or another take()'s), else waits for it
  // up to `limit`.
  Outcome take(std::chrono::milliseconds limit);

  // Where the work stands (for a look only: it may change right after).
  State state();

  // Whether the work is under way in this process, or its thread waits for the trigger to begin
  // it (a library not yet loaded; a request() its owner has promised). A caller that must not wait
  // routes around what the work sets up meanwhile; one that finds it false gets it from take()
  // (done, or run there and then: no thread will).
  bool pending();

 private:
  Startup(Work work, std::chrono::milliseconds not_before, Trigger trigger)
      : work_(std::move(work)), not_before_(not_before), trigger_(trigger) {}
  bool run(bool background);
  bool look(size_t& seen);
  bool busy() const;
  void stop_and_wait();
  static void thread_main(Startup* s);
  static void before_fork();
  static void after_fork_parent();
  static void after_fork_child();
  friend struct StartupExitGuard;

  Work work_;
  std::chrono::milliseconds not_before_;
  Trigger trigger_;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::waiting;
  bool looking_ = false;
  bool thread_waits_ = false;  // the thread waits for its trigger, to begin the work
  bool requested_ = false;     // request() was called
  std::atomic<bool> stop_{false};
  pid_t runner_ = 0;
};

// Whether a library whose calls SOL intercepts (BLAS, CBLAS, oneDNN) is loaded: the sign that a
// first call may come. A program linked to one has it from the start, a Python program once it
// imports NumPy or PyTorch; a compiler or a linker never. Looks at the global scope, then at the
// objects loaded since the last look (`seen` of them), by path: extension modules keep their
// libraries in local scopes.
bool intercepted_library_loaded(size_t& seen);

}  // namespace sol
