// SOL's own threads (the start-up work, the trace's writer) leave the program's asynchronous
// signals to the program's threads: a thread created while an AsyncSignalsBlocked lives inherits
// a mask that blocks every signal but the faults a thread raises itself.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace sol {

class AsyncSignalsBlocked {
 public:
  AsyncSignalsBlocked() noexcept {
    sigset_t all;
    sigfillset(&all);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&all, sig);
    pthread_sigmask(SIG_SETMASK, &all, &saved_);
  }
  ~AsyncSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
  AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace sol
