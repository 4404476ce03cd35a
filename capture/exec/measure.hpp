// auto's measurements: the first call of a BLAS shape class runs natively, timed, and then each
// other candidate (every backend that takes it, and native again when it is close) is timed on
// the same call, so that the class goes to the fastest from then on (hal/profile.hpp keeps the
// choice). That first call's results are the program's own library's, as without SOL.
//
// Candidates compute on private copies of every operand the node writes; what it only reads is
// read in place. The caller's memory is never written, whatever the call: beta != 0, an output
// that overlaps an input, an in-place routine (trsm's B). Invalid calls are never measured (the
// executor checks arguments first), so error exits stay exactly the program's own.
#pragma once

#include <vector>

#include "capture/blas/blas.hpp"
#include "hal/profile.hpp"

namespace sol::capture::measure {

struct Candidate {
  const char* name;                                // "native" or a backend's name
  blas::FunctionRef<hal::Reason(Node&)> run;       // column-major semantics, as backends see nodes
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
         const char* home, hal::profile::Row& row, const char*& made_call) noexcept;

// The background warm-up (capture/exec/warm_up.hpp) ran `candidate` on this op and type: its
// thread pool and library are set up, and its first run in a measurement is timed (without the
// untimed run that a first use gets otherwise; a kernel compiled for the class's own regime is
// still caught: such a first sample is taken again).
void warmed(const char* candidate, Op op, DType dtype) noexcept;

// Test-only: SOL_TEST_SLOW=<backend> makes that backend take ten times as long per node (it
// spins after computing), so that tests can check that auto avoids a slow candidate. Applies to
// measured and routed runs alike; ignored unless the variable is set. SOL_TEST_SLOW=<backend>:after
// instead makes the native call that follows it in the same thread (in a measurement) take ten
// times as long, as a library whose threads keep the cores busy after it returns does;
// SOL_TEST_SLOW=<backend>:measured slows it only while measured (its runs in the race, and the
// program's call when it makes it there, timed as its first sample), as beside native's spinning
// threads, so that its trial in use (Row::trial) finds it fast; SOL_TEST_SLOW=<backend>:once
// makes its first timed run of each measured class take fifty times as long, as a kernel compiled
// for that class does (oneDNN's: 200 times). SOL_TEST_SLOW=<backend>:beside makes its calls ten
// times as long when they begin while native's workers would still spin (openblas_core::spin_ns)
// after native's last call in a trial, as a team of threads beside OpenBLAS's spinning workers
// runs on few cores (native_in_trial_ended()). SOL_TEST_SLOW=<backend>:switch makes the program's
// next call in the same thread take ten times as long when another backend makes it (in use, not
// while measured), as a library whose threads keep the cores busy after it returns slows the next
// call of the library the program's other calls run on. SOL_TEST_SLOW=native:spell makes every native call
// that is timed (the program's measured call, native's runs on the copies, its calls in a trial's
// turn) take 1.4 times as long until native_turn_over(), as in a spell of a shared machine's in
// which the native library's threads run slow (at two thirds of their speed, seen).
// Knobs combine, comma-separated: SOL_TEST_SLOW=native:spell,onednn:measured.
void slow_down_if_asked(const char* backend, uint64_t started_ns) noexcept;
bool slowing() noexcept;  // whether SOL_TEST_SLOW set any knob (callers time backends' runs only then)
void native_slowed_if_asked(uint64_t started_ns) noexcept;  // a native run in a measurement's race
void native_in_spell_if_asked(uint64_t started_ns) noexcept;  // any other timed native call
void native_in_trial_ended() noexcept;                        // a native call in a trial's turn has returned
// A trial's first turn of native's ended (SOL_TEST_SLOW=native:spell: the spell ends with it).
void native_turn_over() noexcept;

}  // namespace sol::capture::measure
