// auto's trial in use (auto/trial.hpp), driven call by call with exact rates and times:
// whose turn it is, when a candidate leaves early, which calls count, and the verdict. No clock is
// read: each verdict follows from the inputs alone.
#include "auto/trial.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace sol::autosel {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSpins = 130 * kMs;  // OpenBLAS's workers after their last call (2^28 cycles at 2 GHz)
constexpr double kFlops = 2.0 * 128 * 128 * 128;

// A trial opened at t = 1 s, fed one call at a time by whoever's turn it is.
struct Driver {
  uint64_t now = 1000 * kMs;
  Trial trial;
  uint64_t measurements = 0;
  bool beside = false;  // the incumbent runs the program's other classes meanwhile
  int incumbent_calls = 0, candidate_calls = 0;

  explicit Driver(uint64_t candidate_spins = kSpins, uint64_t incumbent_spins = kSpins, double flops = kFlops)
      : trial(1000 * kMs, flops, candidate_spins, incumbent_spins) {}

  // A call `gap` after the last one returned, taking `took`, at `gflops` (< 0: declined).
  bool call(double gflops, uint64_t took = kMs, uint64_t gap = 0) {
    now += gap;
    const uint64_t started = now;
    now += took;
    ++(trial.incumbent_turn() ? incumbent_calls : candidate_calls);
    return trial.observe({gflops, trial.incumbent_turn(), started, now, measurements, beside});
  }
  // Calls at `gflops` for as long as it is `incumbent`'s turn and the trial is open, at most `max`.
  int turn(bool incumbent, double gflops, int max = 100000, uint64_t took = kMs, uint64_t gap = 0) {
    int n = 0;
    while (!trial.done() && trial.incumbent_turn() == incumbent && n < max) {
      call(gflops, took, gap);
      ++n;
    }
    return n;
  }
};

TEST(Trial, TheIncumbentsFirstTurnLastsThreeCallsAndAsLongAsTheCandidatesWorkersSpin) {
  // Calls of 1 ms: the candidate's workers spin for 130 ms after a call, so the incumbent's turn
  // ends with its first call that returns 130 ms after the trial opened.
  Driver d;
  EXPECT_EQ(d.turn(true, 100), 130);
  EXPECT_FALSE(d.trial.incumbent_turn());
  EXPECT_FALSE(d.trial.done());

  // A candidate that spins less: the turn's floor, 20 ms.
  Driver quick(0);
  EXPECT_EQ(quick.turn(true, 100), 20);

  // Long calls: three of them at least, whatever the time.
  Driver slow(0);
  EXPECT_EQ(slow.turn(true, 100, 100000, 50 * kMs), 3);
}

TEST(Trial, ACandidateFarBehindIsJudgedOnlyByCallsBegunOnceTheIncumbentsWorkersAreQuiet) {
  // Ten times slower: its calls begun while the incumbent's workers still spin (130 ms) ran beside
  // them and prove nothing; its first call begun after them ends the trial (1.5x behind, three calls).
  Driver d(0);
  d.turn(true, 100);
  const uint64_t candidate_from = d.now;
  d.turn(false, 10);
  ASSERT_TRUE(d.trial.done());
  EXPECT_EQ(d.candidate_calls, 131);
  EXPECT_GE(d.now - kMs, candidate_from + kSpins);  // the last call began after the spin
  const Trial::Verdict v = d.trial.verdict();
  EXPECT_FALSE(v.wins);
  EXPECT_EQ(v.turns, 1);  // no second turn for the incumbent
  EXPECT_DOUBLE_EQ(v.incumbent_gflops, 100);
  EXPECT_DOUBLE_EQ(v.candidate_gflops, 10);
}

TEST(Trial, BesideTheIncumbentsBusyThreadsEveryCandidateCallIsSettled) {
  // The program keeps the incumbent's threads busy with its other classes: the candidate's calls
  // are beside them from the first, and two settled calls 2x behind end the trial.
  Driver d(0);
  d.turn(true, 100);
  d.beside = true;
  EXPECT_EQ(d.turn(false, 40), 2);
  EXPECT_TRUE(d.trial.done());
  EXPECT_FALSE(d.trial.verdict().wins);
}

TEST(Trial, HowFarBehindDecidesHowManySettledCallsEndTheTrial) {
  // 1.5x behind: three calls, one of them settled.
  Driver d(0, 2 * kMs);  // the incumbent's workers quiet 2 ms into the candidate's turn
  d.turn(true, 100);
  EXPECT_EQ(d.turn(false, 60), 3);
  EXPECT_TRUE(d.trial.done());

  // 12 % behind: three settled calls.
  Driver near(0);
  near.turn(true, 100);
  near.beside = true;
  EXPECT_EQ(near.turn(false, 88), 3);
  EXPECT_TRUE(near.trial.done());

  // 8 % behind: not enough to leave early; the candidate gets its whole turn, 300 ms.
  Driver close(0);
  close.turn(true, 100);
  close.beside = true;
  EXPECT_EQ(close.turn(false, 92), 300);
  EXPECT_FALSE(close.trial.done());
  EXPECT_TRUE(close.trial.incumbent_turn());
}

TEST(Trial, ACandidateAheadGetsItsWholeTurnAndTheIncumbentASecond) {
  Driver d(0, kSpins);
  d.turn(true, 100);
  // Its turn: 300 ms, or the incumbent's spin and half that, when longer.
  EXPECT_EQ(d.turn(false, 120), 300);
  ASSERT_TRUE(d.trial.incumbent_turn());
  // The incumbent, still behind, runs its whole second turn (20 ms here).
  EXPECT_EQ(d.turn(true, 100), 20);
  ASSERT_TRUE(d.trial.done());
  const Trial::Verdict v = d.trial.verdict();
  EXPECT_TRUE(v.wins);
  EXPECT_EQ(v.turns, 2);
  EXPECT_EQ(v.calls, 300);
  EXPECT_EQ(v.incumbent_calls, 40);
  EXPECT_DOUBLE_EQ(v.candidate_gflops, 120);
}

TEST(Trial, TheCandidatesTurnOutlastsTheIncumbentsSpinByHalfATurn) {
  Driver d(0, 400 * kMs);
  d.turn(true, 100);
  EXPECT_EQ(d.turn(false, 120), 550);
}

TEST(Trial, TheIncumbentsSecondTurnEndsOnceItHasWon) {
  // Within 3 % of the candidate's best: three calls of its second turn settle it.
  Driver d(0);
  d.turn(true, 100);
  d.turn(false, 102);
  EXPECT_EQ(d.turn(true, 100), 3);
  ASSERT_TRUE(d.trial.done());
  EXPECT_FALSE(d.trial.verdict().wins);
}

TEST(Trial, AnIncumbentInASlowSpellForItsFirstTurnIsJudgedByItsBestTurn) {
  // Its first turn at two thirds of its speed: the candidate, ahead of that, is not the winner for
  // it; the incumbent's second turn gives its figure.
  Driver d(0);
  d.turn(true, 66);
  d.turn(false, 80);
  d.turn(true, 100);
  ASSERT_TRUE(d.trial.done());
  const Trial::Verdict v = d.trial.verdict();
  EXPECT_FALSE(v.wins);
  EXPECT_DOUBLE_EQ(v.incumbent_gflops, 100);
}

TEST(Trial, ACandidateMustBeatTheIncumbentBy3Percent) {
  for (const auto& [rate, wins] : {std::pair{103.5, true}, std::pair{102.5, false}}) {
    Driver d(0);
    d.turn(true, 100);
    d.turn(false, rate);
    // Its second turn, 2 % slower than its first (a spell), decides nothing.
    d.turn(true, 98);
    ASSERT_TRUE(d.trial.done());
    EXPECT_EQ(d.trial.verdict().wins, wins) << rate;
  }
}

TEST(Trial, ACallTheCandidateDeclinesEndsTheTrialForTheIncumbent) {
  Driver d(0);
  d.turn(true, 100);
  d.call(500);
  EXPECT_TRUE(d.call(-1));
  EXPECT_FALSE(d.trial.verdict().wins);
}

TEST(Trial, ACallOutOfTurnOrAfterTheEndIsIgnored) {
  Driver d(0);
  // The candidate's call while the incumbent's turn runs (routed before the turn changed).
  EXPECT_FALSE(d.trial.observe({1000, false, d.now, d.now + kMs, 0, false}));
  d.turn(true, 100);
  EXPECT_FALSE(d.trial.observe({1000, true, d.now, d.now + kMs, 0, false}));
  d.turn(false, 10);
  ASSERT_TRUE(d.trial.done());
  EXPECT_FALSE(d.trial.observe({1000, false, d.now, d.now + kMs, 0, false}));
  EXPECT_DOUBLE_EQ(d.trial.verdict().best_gflops, 10);
}

TEST(Trial, ACandidateWhoseTurnSlowsTheProgramsStepsLosesAndIsChargedForThem) {
  // The class's calls are a millisecond apart on the incumbent (1 ms each at 100 GFLOP/s, no
  // other work between), and the candidate's own calls win (0.5 ms each) but each step of the
  // program takes 3 ms in its turn: the switch costs its other calls 2.5 ms. It loses, and its
  // figure is what a step then costs in the incumbent's time: 1 + (3 - 1) ms for the class's work.
  const double flops = 100e9 * 1e-3;  // 1 ms at 100 GFLOP/s
  Driver d(0, 0, flops);
  d.turn(true, 100);
  d.turn(false, 200, 100000, kMs / 2, 2 * kMs + kMs / 2);
  d.turn(true, 100);
  ASSERT_TRUE(d.trial.done());
  const Trial::Verdict v = d.trial.verdict();
  EXPECT_FALSE(v.wins);
  EXPECT_NEAR(v.home_ms, 1, 1e-9);
  EXPECT_NEAR(v.away_ms, 3, 1e-9);
  EXPECT_NEAR(v.candidate_gflops, flops / 3e-3 * 1e-9, 1e-9);
  EXPECT_DOUBLE_EQ(v.best_gflops, 200);

  // Steps within 2 %: its own calls decide.
  Driver fair(0, 0, flops);
  fair.turn(true, 100);
  fair.turn(false, 200, 100000, kMs / 2, kMs / 2 + kMs / 100);
  fair.turn(true, 100);
  ASSERT_TRUE(fair.trial.done());
  EXPECT_TRUE(fair.trial.verdict().wins);
}

TEST(Trial, AStepThatSawARaceIsNotOneOfTheProgramsSteps) {
  // A race of another class between two calls of this one: that step is not counted. Here every
  // step of the candidate's turn sees one, so there are no steps to compare and its calls decide.
  const double flops = 100e9 * 1e-3;
  Driver d(0, 0, flops);
  d.turn(true, 100);
  while (!d.trial.done() && !d.trial.incumbent_turn()) {
    ++d.measurements;
    d.call(200, kMs / 2, 10 * kMs);
  }
  d.turn(true, 100);
  ASSERT_TRUE(d.trial.done());
  const Trial::Verdict v = d.trial.verdict();
  EXPECT_LT(v.away_ms, 0);
  EXPECT_TRUE(v.wins);
}

}  // namespace
}  // namespace sol::autosel
