// auto's race of candidates (auto/measure.hpp) with candidates whose speed is known: each
// moves the race's clock (a FakeClock) by a set time per element of C, so the decisions, not the
// machine, are under test, and each verdict is exact. What is checked is how many whole calls a
// race costs, since each is a call of the program's size, and what it chooses.
#include "auto/measure.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_clock.hpp"

namespace sol::autosel::measure {
namespace {

constexpr int64_t kN = 256;

struct Spinner {
  double seconds;  // for the whole kN x kN call; a screen's quarter takes a quarter
  int whole_calls = 0, part_calls = 0;
  int probe_calls = 0;  // home's 128x128 calls around the others' in a mixed program
  hal::Reason operator()(Node& n) {
    ++(n.blas.m == kN && n.blas.n == kN     ? whole_calls
       : n.blas.m == 128 && n.blas.n == 128 ? probe_calls
                                            : part_calls);
    const double share = static_cast<double>(n.blas.m * n.blas.n) / static_cast<double>(kN * kN);
    test::FakeClock::advance(seconds * share);
    return hal::Reason::ok;
  }
};

struct Gemm {
  std::vector<float> a = std::vector<float>(kN * kN), b = a, c = a;
  Node node{Sym{}, Op::gemm, DType::f32};
  Gemm() { blas::plain_gemm(node.blas, 'N', 'N', kN, kN, kN, a.data(), b.data(), c.data()); }
};

// The program's call itself on a candidate (Candidate::call_itself): `seconds` for the whole call,
// which may include what a program's first touches of a new output cost.
struct Itself {
  double seconds;
  int calls = 0;
  hal::Reason operator()() {
    ++calls;
    test::FakeClock::advance(seconds);
    return hal::Reason::ok;
  }
};

// One race between `fast` and `slow` (seconds per whole call), without native (the program's
// library left out), as candidates named for this race alone (a name's first run is a warm-up).
// Each offers to make the program's call itself, in `itself_factor` times its own time. `mixed`:
// the program's other calls run on `fast` (home).
struct Race {
  test::FakeClock clock;
  Spinner fast, slow;
  Itself fast_itself, slow_itself;
  autosel::profile::Row row;
  const char* made_call = nullptr;
  std::string fast_name, slow_name;
  Race(double f, double s, const std::string& tag, double itself_factor = 1, bool mixed = false)
      : fast{f}, slow{s}, fast_itself{f * itself_factor}, slow_itself{s * itself_factor} {
    static std::vector<std::string> names;  // candidates' names must outlive the process's warm set
    names.push_back("fast-" + tag);
    names.push_back("slow-" + tag);
    fast_name = names[names.size() - 2];
    slow_name = names.back();
    Gemm g;
    std::vector<Candidate> c = {{names[names.size() - 2].c_str(), blas::FunctionRef<hal::Reason(Node&)>(fast),
                                 -1, blas::FunctionRef<hal::Reason()>(fast_itself)},
                                {names.back().c_str(), blas::FunctionRef<hal::Reason(Node&)>(slow), -1,
                                 blas::FunctionRef<hal::Reason()>(slow_itself)}};
    EXPECT_TRUE(run(g.node, 2.0 * kN * kN * kN, c, -1, mixed ? fast_name.c_str() : nullptr, row, made_call));
  }
};

template <class Check>
void in_a_race(double fast, double slow, const char* name, Check check, double itself_factor = 1,
               bool mixed = false) {
  check(Race(fast, slow, name, itself_factor, mixed));
}

// One race of native, whose program's call took `call` seconds and whose runs on the copies take
// `copies` each, against another candidate at `other` seconds per whole call (named for this race
// alone).
struct NativeRace {
  test::FakeClock clock;
  Spinner native, other;
  autosel::profile::Row row;
  const char* made_call = nullptr;
  std::string other_name;
  NativeRace(double call, double copies, double other_seconds, const std::string& tag)
      : native{copies}, other{other_seconds} {
    static std::vector<std::string> names;
    names.push_back(tag);
    other_name = names.back();
    Gemm g;
    std::vector<Candidate> c = {{"native", blas::FunctionRef<hal::Reason(Node&)>(native)},
                                {names.back().c_str(), blas::FunctionRef<hal::Reason(Node&)>(other)}};
    EXPECT_TRUE(run(g.node, 2.0 * kN * kN * kN, c, call, nullptr, row, made_call));
  }
};

template <class Check>
void in_a_native_race(double call, double copies, double other, const char* name, Check check) {
  check(NativeRace(call, copies, other, name));
}

// One race of native, whose program's call took `call` seconds and whose runs on the copies take
// `copies` each, against two other candidates at `first` and `second` seconds per whole call.
struct RaceOfThree {
  test::FakeClock clock;
  Spinner native, first, second;
  autosel::profile::Row row;
  const char* made_call = nullptr;
  std::string first_name, second_name;
  RaceOfThree(double call, double copies, double f, double s, const std::string& tag)
      : native{copies}, first{f}, second{s} {
    static std::vector<std::string> names;  // candidates' names must outlive the process's warm set
    names.push_back(tag + "-first");
    names.push_back(tag + "-second");
    first_name = names[names.size() - 2];
    second_name = names.back();
    Gemm g;
    std::vector<Candidate> c = {
        {"native", blas::FunctionRef<hal::Reason(Node&)>(native)},
        {names[names.size() - 2].c_str(), blas::FunctionRef<hal::Reason(Node&)>(first)},
        {names.back().c_str(), blas::FunctionRef<hal::Reason(Node&)>(second)}};
    EXPECT_TRUE(run(g.node, 2.0 * kN * kN * kN, c, call, nullptr, row, made_call));
  }
};

template <class Check>
void in_a_race_of_three(double call, double copies, double first, double second, const char* name,
                        Check check) {
  check(RaceOfThree(call, copies, first, second, name));
}

TEST(Measure, AWholeCallWithoutRivalsIsSampledOnce) {
  // 0.8 ms a call: a batch by itself. The other candidate is 2.5x slower: one sample of each.
  in_a_race(0.8e-3, 2.0e-3, "unrivalled", [](const Race& r) {
    EXPECT_EQ(r.fast.whole_calls, 1);
    EXPECT_EQ(r.slow.whole_calls, 1);
  });
}

TEST(Measure, AWholeCallsRivalWithin1_5xIsSampledTwiceTheLeaderOnce) {
  // Another sample of the leader could only widen its lead.
  in_a_race(0.8e-3, 1.0e-3, "rivalled", [](const Race& r) {
    EXPECT_EQ(r.fast.whole_calls, 1);
    EXPECT_EQ(r.slow.whole_calls, 2);
    EXPECT_EQ(r.row.choice, r.fast_name);
  });
}

TEST(Measure, ALeaderOvertakenByARivalsSecondSampleGetsItsOwnSecond) {
  // The rival's first whole call is slow (1.1 ms, a spell of load), its second 0.7 ms: it then
  // leads, and the former leader (0.8 ms) is sampled again before the race ends.
  test::FakeClock clock;
  Spinner leader{0.8e-3}, rival{0.7e-3};
  bool first = true;
  auto overtaker = [&](Node& n) {
    if (n.blas.m == kN && n.blas.n == kN && first) {
      first = false;
      rival.seconds = 1.1e-3;
      const hal::Reason r = rival(n);
      rival.seconds = 0.7e-3;
      return r;
    }
    return rival(n);
  };
  Gemm g;
  std::vector<Candidate> c = {{"leader", blas::FunctionRef<hal::Reason(Node&)>(leader)},
                              {"overtaker", blas::FunctionRef<hal::Reason(Node&)>(overtaker)}};
  autosel::profile::Row row;
  const char* made_call = nullptr;
  ASSERT_TRUE(run(g.node, 2.0 * kN * kN * kN, c, -1, nullptr, row, made_call));
  EXPECT_EQ(rival.whole_calls, 2);
  EXPECT_EQ(leader.whole_calls, 2);
  EXPECT_EQ(row.choice, "overtaker");
}

TEST(Measure, ACandidate1_25To1_5xBehindAtTheScreenRunsASecondQuarterNotAWholeCall) {
  // 4 ms a call, the other 1.4x slower: behind by as much at its second quarter, it leaves, and
  // the program's call on the leader is again the race's only whole call.
  in_a_race(4e-3, 5.6e-3, "confirmed", [](const Race& r) {
    EXPECT_EQ(r.slow.part_calls, 3);  // its first use, untimed; the screen's quarter; the second
    EXPECT_EQ(r.slow.whole_calls, 0);
    EXPECT_EQ(r.fast.part_calls, 2);
    EXPECT_EQ(r.fast.whole_calls, 0);
    EXPECT_EQ(r.fast_itself.calls, 1);
    EXPECT_EQ(r.row.choice, r.fast_name);
  });
}

TEST(Measure, ALongCallIsMadeByTheScreensLeaderAsItsFirstSample) {
  // 4 ms a call, the other 2x slower (left at the screen): the program's call on the leader is the
  // race's only whole call.
  in_a_race(4e-3, 8e-3, "itself", [](const Race& r) {
    ASSERT_NE(r.made_call, nullptr);
    EXPECT_EQ(r.made_call, r.fast_name);
    EXPECT_EQ(r.fast_itself.calls, 1);
    EXPECT_EQ(r.slow_itself.calls, 0);
    EXPECT_EQ(r.fast.whole_calls, 0);
    EXPECT_EQ(r.slow.whole_calls, 0);
    EXPECT_EQ(r.row.choice, r.fast_name);
  });
}

TEST(Measure, AloneTheOneRivalLeftAtTheScreenRunsNoWholeCallAndIsTriedInUse) {
  // The leader's call itself paid 3x for first touches of the program's output; the rival, 1.2x
  // slower, stays in at the screen. Neither runs a whole call on the copies: the trial in use
  // between them decides, on their calls there.
  in_a_race(
      3e-3, 3.6e-3, "touched",
      [](const Race& r) {
        EXPECT_EQ(r.made_call, r.fast_name);
        EXPECT_EQ(r.fast_itself.calls, 1);
        EXPECT_EQ(r.fast.whole_calls, 0);
        EXPECT_EQ(r.slow.whole_calls, 0);
        EXPECT_EQ(r.row.choice, r.fast_name);
        EXPECT_EQ(r.row.trial, r.slow_name);
      },
      3);
}

TEST(Measure, AloneARivalOfNativesCallAtTheScreenRunsNoWholeCallAndIsTriedInUse) {
  // Native's call took 4 ms, the other's quarters 1.1x that, scaled: it stays in at the screen,
  // and is tried in use against native rather than timed on whole calls beside native's threads.
  in_a_native_race(4e-3, 4e-3, 4.4e-3, "rival-of-call", [](const NativeRace& r) {
    EXPECT_EQ(r.other.whole_calls, 0);
    EXPECT_EQ(r.native.whole_calls, 0);
    EXPECT_EQ(r.row.choice, "native");
    EXPECT_EQ(r.row.trial, r.other_name);
  });
}

TEST(Measure, AloneTwoRivalsLeftAtTheScreenAreRankedByWholeCalls) {
  // Two candidates beside native's call (4 ms) within 1.25x at the screen: a trial takes only
  // one of them, so whole calls on the copies rank them first.
  in_a_race_of_three(4e-3, 4e-3, 4.6e-3, 4.2e-3, "near", [](const RaceOfThree& r) {
    EXPECT_GE(r.first.whole_calls, 1);
    EXPECT_GE(r.second.whole_calls, 1);
    EXPECT_EQ(r.row.choice, "native");
    EXPECT_EQ(r.row.trial, r.second_name);
  });
}

TEST(Measure, NativeFarAheadOfEveryQuarterRunsNoneOfItsOwn) {
  // Native's call (3 ms, the program's) is 1.5x ahead of the other's quarter, scaled: the other
  // leaves at the screen, and native runs neither a quarter nor a whole call on the copies.
  in_a_native_race(3e-3, 3e-3, 8e-3, "slow-far", [](const NativeRace& r) {
    EXPECT_EQ(r.native.whole_calls + r.native.part_calls, 0);
    EXPECT_EQ(r.other.whole_calls, 0);
    EXPECT_EQ(r.row.choice, "native");
    EXPECT_EQ(r.made_call, nullptr);
  });
}

TEST(Measure, HomesCallFarAheadOfEveryQuarterRunsNoneOfItsOwn) {
  // A mixed program, native left out: home (4 ms a call) makes the program's call, 2x ahead of the
  // other's quarter, scaled. The other leaves at the screen, and home runs no quarter (nor any
  // call on the copies): its call, first touches and all, already beat every other.
  in_a_race(
      4e-3, 8e-3, "home-far",
      [](const Race& r) {
        EXPECT_EQ(r.made_call, r.fast_name);
        EXPECT_EQ(r.fast_itself.calls, 1);
        EXPECT_EQ(r.fast.part_calls + r.fast.whole_calls, 0);
        EXPECT_EQ(r.slow.part_calls, 2);  // its first use, untimed; the screen's quarter
        EXPECT_EQ(r.slow.whole_calls, 0);
        EXPECT_EQ(r.row.choice, r.fast_name);
      },
      1, true);
}

TEST(Measure, HomesCallSlowedByFirstTouchesRunsItsQuarter) {
  // The same, home's call 3x its speed (first touches of the program's new output): scaled, it is
  // behind the other's quarter, and home runs its own quarter before the other leaves.
  in_a_race(
      4e-3, 8e-3, "home-touched",
      [](const Race& r) {
        EXPECT_EQ(r.made_call, r.fast_name);
        EXPECT_EQ(r.fast.part_calls, 1);
        EXPECT_EQ(r.slow.part_calls, 2);
        EXPECT_EQ(r.slow.whole_calls, 0);
        EXPECT_EQ(r.row.choice, r.fast_name);
      },
      3, true);
}

// The parts of a 512x512 GEMM that a screen runs on a candidate, as m x n, when native's call took
// `call` seconds (the candidate is 2x slower: it leaves at the screen).
std::vector<int64_t> screened_parts(double call, const std::string& name) {
  static std::vector<std::string> names;
  names.push_back(name);
  constexpr int64_t n = 512;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  Node node{Sym{}, Op::gemm, DType::f32};
  blas::plain_gemm(node.blas, 'N', 'N', n, n, n, a.data(), b.data(), c.data());
  std::vector<int64_t> parts;
  test::FakeClock clock;
  auto other = [&](Node& nd) {
    parts.push_back(nd.blas.m * nd.blas.n);
    test::FakeClock::advance(2 * call * static_cast<double>(nd.blas.m * nd.blas.n) /
                             static_cast<double>(n * n));
    return hal::Reason::ok;
  };
  auto native = [](Node&) { return hal::Reason::ok; };
  std::vector<Candidate> cs = {{"native", blas::FunctionRef<hal::Reason(Node&)>(native)},
                               {names.back().c_str(), blas::FunctionRef<hal::Reason(Node&)>(other)}};
  autosel::profile::Row row;
  const char* made_call = nullptr;
  EXPECT_TRUE(run(node, 2.0 * n * n * n, cs, call, nullptr, row, made_call));
  EXPECT_EQ(row.choice, "native");
  return parts;
}

TEST(Measure, ACallOf4MsOrMoreIsScreenedOnAnEighth) {
  // Its first use (untimed) and the screen's part, each an eighth of 512x512; a 2 ms call's, a quarter.
  EXPECT_EQ(screened_parts(5e-3, "eighth"), (std::vector<int64_t>{64 * 512, 64 * 512}));
  EXPECT_EQ(screened_parts(2e-3, "quarter"), (std::vector<int64_t>{128 * 512, 128 * 512}));
}

TEST(Measure, AFirstSampleFourTimesBehindIsTakenForSetUpAndTakenAgainOnce) {
  // A candidate's first timed call of a class takes twenty times its own (a kernel compiled for
  // the class's regime): dropped and taken again, and the candidate judged on what it then does.
  test::FakeClock clock;
  Spinner fast{100e-6}, compiled{50e-6};
  bool first = true;
  auto compiling = [&](Node& n) {
    const bool whole = n.blas.m == kN && n.blas.n == kN;
    const double own = compiled.seconds;
    if (whole && first) compiled.seconds *= 20, first = false;
    const hal::Reason r = compiled(n);
    compiled.seconds = own;
    return r;
  };
  Gemm g;
  std::vector<Candidate> c = {{"steady", blas::FunctionRef<hal::Reason(Node&)>(fast)},
                              {"compiling", blas::FunctionRef<hal::Reason(Node&)>(compiling)}};
  autosel::profile::Row row;
  const char* made_call = nullptr;
  ASSERT_TRUE(run(g.node, 2.0 * kN * kN * kN, c, -1, nullptr, row, made_call));
  EXPECT_EQ(row.choice, "compiling");
  ASSERT_EQ(row.set_up.size(), 1u);
  EXPECT_EQ(row.set_up[0].candidate, "compiling");

  // Slow by right (five times behind at every call): taken again once, then out.
  Spinner steady{100e-6}, slow{500e-6};
  std::vector<Candidate> d = {{"steady-2", blas::FunctionRef<hal::Reason(Node&)>(steady)},
                              {"slow-by-right", blas::FunctionRef<hal::Reason(Node&)>(slow)}};
  ASSERT_TRUE(run(g.node, 2.0 * kN * kN * kN, d, -1, nullptr, row, made_call));
  EXPECT_EQ(row.choice, "steady-2");
  EXPECT_EQ(slow.whole_calls, 2);
}

TEST(Measure, AShortCallIsNotMadeByACandidate) {
  // 0.8 ms: no screen judges it, and the caller makes the program's call on the winner.
  in_a_race(0.8e-3, 2.0e-3, "short-itself", [](const Race& r) {
    EXPECT_EQ(r.made_call, nullptr);
    EXPECT_EQ(r.fast_itself.calls + r.slow_itself.calls, 0);
  });
}

TEST(Measure, AShortCallIsSampledInBatchesOfSeveralRounds) {
  // 50 us a call: batches of 100 us, at least three rounds and 500 us in all for the winner.
  in_a_race(50e-6, 150e-6, "short", [](const Race& r) {
    EXPECT_GE(r.fast.whole_calls, 6);
    EXPECT_LE(r.slow.whole_calls, 2);  // left at its first batch, 3x behind
  });
}

TEST(Measure, ACandidateTheWarmUpRanHasNoUntimedFirstRun) {
  // Without native, each candidate runs a quarter at the screen; one never run in this process
  // runs one more before it, untimed, unless the background warm-up already ran it.
  test::FakeClock clock;
  warmed("warm-up-ran", Op::gemm, DType::f32);
  Spinner w{0.8e-3}, c{0.8e-3};
  Gemm g;
  std::vector<Candidate> cs = {{"warm-up-ran", blas::FunctionRef<hal::Reason(Node&)>(w)},
                               {"warm-up-did-not", blas::FunctionRef<hal::Reason(Node&)>(c)}};
  autosel::profile::Row row;
  const char* made_call = nullptr;
  ASSERT_TRUE(run(g.node, 2.0 * kN * kN * kN, cs, -1, nullptr, row, made_call));
  EXPECT_EQ(w.part_calls, 1);
  EXPECT_EQ(c.part_calls, 2);
}

TEST(Measure, ACallOf1To2MsIsScreenedAndItsClearLoserCostsNoWholeCall) {
  // Native's call took 1.5 ms, the other candidate's quarters are 2x behind native's: it leaves
  // at the screen, and native, alone in the race, is not timed again.
  in_a_native_race(1.5e-3, 1.5e-3, 3e-3, "slow-mid", [](const NativeRace& r) {
    EXPECT_EQ(r.other.whole_calls, 0);
    EXPECT_EQ(r.native.whole_calls, 0);
    EXPECT_EQ(r.row.choice, "native");
  });
}

TEST(Measure, ACandidate1_5xAheadOfNativesCallAloneIsStillTriedInUse) {
  // Alone, native's call took 0.4 ms (it paid for first use), its runs on the copies (beside the
  // others' threads) 0.5 ms: the candidate's 0.2 ms, 2x ahead of that call, proves nothing, and
  // it is tried in use.
  in_a_native_race(0.4e-3, 0.5e-3, 0.2e-3, "ahead-of-call", [](const NativeRace& r) {
    EXPECT_EQ(r.row.choice, r.other_name);
    EXPECT_EQ(r.row.trial, r.other_name);
  });
}

TEST(Measure, ACandidate2xAheadOfNativesRunsOnTheCopiesIsNotTried) {
  // 2.25x ahead of native's best run on the copies (0.45 ms): it wins in use too, no trial.
  in_a_native_race(0.5e-3, 0.45e-3, 0.2e-3, "ahead-of-copies", [](const NativeRace& r) {
    EXPECT_EQ(r.row.choice, r.other_name);
    EXPECT_EQ(r.row.trial, "");
  });
}

TEST(Measure, WithNative2xBehindTheRunnerUpIsTriedAgainstTheChoice) {
  // Native is out of the question (0.45 ms on the copies, the best other 0.2), but the two others
  // ran beside each other's threads: the runner-up (0.3 ms; it may have met the other's spinning
  // workers) is tried in use against the choice, as with native left out.
  in_a_race_of_three(0.5e-3, 0.45e-3, 0.2e-3, 0.3e-3, "choice", [](const RaceOfThree& r) {
    EXPECT_EQ(r.row.choice, r.first_name);
    EXPECT_EQ(r.row.trial, r.second_name);
  });
}

TEST(Measure, ACandidate1_75xAheadOfNativesRunsOnTheCopiesIsStillTried) {
  // 1.75x ahead of native's best run on the copies (0.35 ms): native may have run in a slow spell
  // of the machine's (two thirds of its speed, seen), and the candidate is tried in use.
  in_a_native_race(0.4e-3, 0.35e-3, 0.2e-3, "spell-of-copies", [](const NativeRace& r) {
    EXPECT_EQ(r.row.choice, r.other_name);
    EXPECT_EQ(r.row.trial, r.other_name);
  });
}

}  // namespace
}  // namespace sol::autosel::measure
