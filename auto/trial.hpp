// A trial in use: a candidate tried against the measured choice, the incumbent (native, or with
// native left out a CPU backend), on the program's own calls of one class, in three turns, each
// call timed: the incumbent's, the candidate's, and the incumbent's again. A race on copies runs
// each candidate beside the others' threads, which on few cores slows a library several times and
// by how much varies from run to run; a trial judges both by their calls as the program makes them.
//
// This is the decision alone: auto.cpp feeds it each call of the class (its rate, who made
// it, when it began) and the time, and it says whose turn it is and, at the end, the verdict. It
// reads no clock and keeps no lock, so that its rules are tested with exact inputs
// (tests/unit/auto/trial_test.cpp).
//
// - The incumbent's first turn gives it its figure in use: its race figure may be the program's
//   call, which paid for first touches, or a run beside the candidate's threads. The turn ends
//   after at least 3 calls and kIncumbentTurnNs, or as long as the candidate's workers spin after
//   a call, when that is longer.
// - The candidate's turn lasts kTrialNs (longer than OpenBLAS's workers spin after their last
//   work, so that its best calls are its own steady state), and ends early when it cannot win:
//   its best call 1.5x behind the incumbent's figure after three calls (1.1x after three settled
//   ones), or 2x behind after two settled ones. A call is settled when it began after the
//   incumbent's workers stopped spinning, or at once when the program keeps them busy with other
//   classes: calls begun beside them run several times slower.
// - The incumbent's second turn, after the candidate's: a shared machine has spells of seconds in
//   which a library runs at two thirds of its speed, and one turn may fall into one where the
//   other did not. It ends early once the incumbent has won (its figure only rises).
// - The candidate wins if its best call beats the incumbent's best by 3 % and the program's steps
//   (from each call of the class to its next, in each turn) were not 2 % slower in its turn: a
//   call's own time misses what switching libraries costs the program's other calls. A candidate
//   that lost on steps is charged the difference in its rate.
#pragma once

#include <cstdint>

namespace sol::autosel {

class Trial {
 public:
  static constexpr uint64_t kTrialNs = 300'000'000;         // the candidate's turn
  static constexpr uint64_t kIncumbentTurnNs = 20'000'000;  // an incumbent's turn, at least
  static constexpr int kSteps = 64;                         // the program's latest steps kept per side

  // One call of the class on trial.
  struct Call {
    double gflops;        // its rate; < 0: the candidate declined it
    bool by_incumbent;    // made by the incumbent (in its turn), else by the candidate
    uint64_t started_ns;  // when it began
    uint64_t now_ns;      // when it returned
    // How many races the process has begun and ended so far: a step that saw one is not a step of
    // the program as it runs.
    uint64_t measurements;
    // The incumbent has run a call of another class since the trial began: the program keeps its
    // threads busy, and the candidate's calls are beside them from the first, quiet or not.
    bool incumbent_beside;
  };

  // What the trial decided, once done().
  struct Verdict {
    bool wins;                // the candidate takes the class
    double candidate_gflops;  // its figure for the profile: its best call, or less when charged for steps
    double incumbent_gflops;  // the best of the incumbent's calls in its turns
    double best_gflops;       // the candidate's best call
    int calls, incumbent_calls;
    int turns;  // the incumbent's: 1 when the candidate left early, else 2
    double away_ms,
        home_ms;  // the program's median step in the candidate's and the incumbent's turns; < 0: none
  };

  // Opens a trial at `now_ns`. `flops`: of the class's calls (alike); `candidate_spins_ns` and
  // `incumbent_spins_ns`: how long each one's workers spin after a call (Backend::spin_after_call_ns).
  Trial(uint64_t now_ns, double flops, uint64_t candidate_spins_ns, uint64_t incumbent_spins_ns) noexcept;

  bool done() const noexcept { return done_; }
  bool incumbent_turn() const noexcept { return incumbent_turn_; }
  // Takes one call; true when it ended the trial (verdict() holds then). A call made out of turn
  // (a thread that routed it before the turn changed), or after the end, is ignored.
  bool observe(const Call& call) noexcept;
  Verdict verdict() const noexcept;

 private:
  void take_step(const Call& call) noexcept;
  bool candidate_lost() const noexcept;
  static double median_ms(const uint64_t* steps, int n) noexcept;

  double flops_;
  uint64_t candidate_spins_ns_, incumbent_spins_ns_;
  int phase_ = 0;  // 0: the incumbent's first turn, 1: the candidate's, 2: the incumbent's second
  bool incumbent_turn_ = true;
  bool done_ = false;
  bool wins_ = false;
  double incumbent_gflops_ = 0, best_gflops_ = 0;
  int incumbent_calls_ = 0, calls_ = 0;
  int turn_calls_ = 0;              // in this turn
  int settled_calls_ = 0;           // the candidate's, begun after quiet_from_ns_ or beside busy threads
  uint64_t incumbent_until_ns_;     // the incumbent's turn may end from then on
  uint64_t until_ns_ = 0;           // the candidate's turn ends at its first call from then on
  uint64_t quiet_from_ns_ = 0;      // the incumbent's workers have stopped spinning
  uint64_t steps_[2][kSteps] = {};  // [0]: the incumbent's turns, [1]: the candidate's
  int step_count_[2] = {0, 0};
  uint64_t last_ns_ = 0, last_measurements_ = 0;
  int last_phase_ = -1;
};

}  // namespace sol::autosel
