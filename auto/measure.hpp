// auto's measurements: the first call of a BLAS shape class runs natively, timed, and then each
// other candidate (every backend that takes it, and native again when it is close) is timed on
// the same call, so that the class goes to the fastest from then on (auto/profile.hpp keeps the
// choice). That first call's results are the program's own library's, as without SOL.
//
// Candidates compute on private copies of every operand the node writes; what it only reads is
// read in place. The caller's memory is never written, whatever the call: beta != 0, an output
// that overlaps an input, an in-place routine (trsm's B). Invalid calls are never measured (the
// executor checks arguments first), so error exits stay exactly the program's own.
#pragma once

#include <vector>

#include "auto/names.hpp"
#include "auto/profile.hpp"
#include "capture/blas/blas.hpp"
#include "common/macros.hpp"

namespace sol::autosel::measure {

struct Candidate {
  const char* name;                           // "native" or a backend's name
  blas::FunctionRef<hal::Reason(Node&)> run;  // column-major semantics, as backends see nodes
  // An accelerator's predicted time for the node (Backend::estimate_seconds), < 0 for others: an
  // accelerator predicted to lose clearly to the best CPU candidate measured is not run.
  double predicted_seconds = -1;
  // The program's call itself on this candidate: the caller's operands, routed as the executor
  // routes a call (empty: not offered). When native's call was not made (its library is left
  // out), home makes it (a mixed program) or a long GEMM's screen leader (alone), timed, and that
  // is its first sample: the call the program needs anyway, rather than one more on the copies.
  blas::FunctionRef<hal::Reason()> call_itself = {};
};

// Times `node` on each candidate (CPU candidates first) on copies of its outputs. The call itself
// has just run natively in `native_seconds` (< 0: it has not; native is left out, or the program
// has no library for it), which is native's first sample. Fills `row` (size, rates, choice) and
// returns true when at least one candidate ran. `made_call` names the candidate that made the
// program's call (Candidate::call_itself), nullptr when none did: the caller then makes it.
// Costs a few calls of the fastest candidates: the slow ones leave the race after one run.
// `home`: the program already made calls of other classes, which stay where they are, most of
// them on `home`'s threads ("native", or a backend's name; nullptr: none yet, alone). A
// candidate's short calls are then timed each followed by a call of home, as in the program, and
// charged for the switch between their threads; native too when it is not home. (The caller
// tries a choice other than home in use against home before it stands.)
// Otherwise (alone) every other candidate ran beside native's threads, which spin for a while
// after each call (OpenBLAS's for about 0.1 s), and native beside theirs: row.trial then names
// the best other CPU candidate, to be tried in use against native before the choice is final
// (with native left out, against the chosen CPU candidate).
bool run(const Node& node, double flops, std::vector<Candidate>& candidates, double native_seconds,
         const char* home, autosel::profile::Row& row, const char*& made_call) noexcept;

// The background warm-up (auto/warm_up.hpp) ran `candidate` on this op and type: its
// thread pool and library are set up, and its first run in a measurement is timed (without the
// untimed run that a first use gets otherwise; a kernel compiled for the class's own regime is
// still caught: such a first sample is taken again).
void warmed(const char* candidate, Op op, DType dtype) noexcept;

// Test-only: SOL_TEST_SLOW=<backend> makes that backend (or "native": the program's library, its
// timed calls) take fifty times as long per node (it
// spins after computing, for 49 times the processor time its thread spent on the node, up to a
// tenth of a second: a thread preempted meanwhile is not slowed the more for it, and a first run's
// set-up does not take seconds), so that tests can check that auto avoids a
// slow candidate: a difference that no load on the machine makes, so that the decision is the same
// on any machine. Applies to
// measured and routed runs alike; ignored unless the variable is set. Variants, each as slow:
// - <backend>:after slows the native call that follows it in the same thread (in a measurement),
//   as a library whose threads keep the cores busy after it returns does;
// - <backend>:measured slows it only while measured (its runs in the race, and the program's call
//   when it makes it there), as beside native's spinning threads, so that its trial in use
//   (Row::trial) finds it fast; <backend>:inuse only in use;
// - <backend>:once slows its first timed run of each measured class, as a kernel compiled for that
//   class does;
// - <backend>:beside slows its calls that begin while native's workers would still spin
//   (openblas_core::spin_ns) after native's last call in a trial (native_in_trial_ended());
// - <backend>:switch slows the program's next call in the same thread when another backend makes
//   it (in use), as a library whose threads keep the cores busy slows the next call of another.
// Knobs combine, comma-separated: SOL_TEST_SLOW=onednn:measured,onednn:beside. A probe of home's
// in a mixed program's race stands for the program's other calls and is not slowed (but for
// :after's effect on the native call after it): fifty times its time would bury the candidates'
// charges under its variations.
// When a run began, for the knobs: the monotonic clock and the thread's processor time.
struct Started {
  uint64_t wall_ns, cpu_ns;
};
Started started() noexcept;
void slow_down_if_asked(const char* backend, const Started& run) noexcept;
bool slowing() noexcept;  // whether SOL_TEST_SLOW set any knob (callers time backends' runs only then)
// A timed run of the program's own library: in a race (`in_race`: on the copies, where :after's
// effect lands), the program's call measured, or a call in a trial's turn. SOL_TEST_SLOW=native
// slows each of them, as a library much slower than the candidates would be.
void native_slowed_if_asked(const Started& run, bool in_race) noexcept;
void native_in_trial_ended() noexcept;  // a native call in a trial's turn has returned

// A column-major node on `backend`, if it takes it, slowed as SOL_TEST_SLOW asks: what the
// executor and auto's races run.
struct OnBackend {
  hal::Backend* backend;
  hal::Reason operator()(Node& cm) noexcept {
    if (const hal::Reason r = blas::fits_backend(cm, *backend); r != hal::Reason::ok) return r;
    const hal::Reason why = backend->supports(cm);
    if (why != hal::Reason::ok) return why;
    if (SOL_LIKELY(!slowing())) return backend->run(cm);  // no clock read: 5 % of an 8^3 SGEMM
    const Started t0 = started();
    const hal::Reason r = backend->run(cm);
    slow_down_if_asked(backend->name(), t0);
    return r;
  }
};

}  // namespace sol::autosel::measure
