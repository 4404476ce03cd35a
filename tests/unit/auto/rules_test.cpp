// auto's rules around a race and a trial (auto/rules.hpp), on names and figures: when
// native is left out of a race, and what a race's outcome is tried against in use, alone and in a
// mixed program.
#include "auto/rules.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace sol::autosel::rules {
namespace {

using autosel::profile::Row;

// native, two CPU backends and an accelerator, as the executor would see them.
Kind kind(const std::string& name) {
  static const std::map<std::string, Kind> kinds = {{"native", Kind::native},
                                                    {"openblas", Kind::cpu},
                                                    {"onednn", Kind::cpu},
                                                    {"opencl", Kind::accelerator}};
  const auto it = kinds.find(name);
  return it == kinds.end() ? Kind::none : it->second;
}

Row race(const std::string& choice, const std::string& trial, std::map<std::string, double> rates) {
  Row row;
  row.choice = choice;
  row.trial = trial;
  for (const auto& [name, gflops] : rates) row.rates.push_back({name, gflops});
  return row;
}

TEST(Rules, NativeIsLeftOutFromA64CubedGemmsWorkWhenABackendRunsItsLibraryBetter) {
  const double below = kLeaveNativeOutFlops - 1;
  EXPECT_EQ(native_left_out(below, "openblas", "", false), "");
  EXPECT_EQ(native_left_out(kLeaveNativeOutFlops, "openblas", "", false),
            "openblas runs its library with this CPU's kernels");
  EXPECT_EQ(native_left_out(kLeaveNativeOutFlops, nullptr, "", false), "");
}

TEST(Rules, ALibraryThatLostEveryClassIsLeftOutOnceTheProgramsCallsRunElsewhere) {
  NativeRecord record;
  record.note(race("openblas", "", {{"native", 10}, {"openblas", 16}}));
  EXPECT_FALSE(record.outclassed());  // one class lost
  record.note(race("onednn", "", {{"native", 10}, {"onednn", 20}}));
  EXPECT_TRUE(record.outclassed());
  const double flops = kLeaveNativeOutFlops;
  EXPECT_EQ(native_left_out(flops, nullptr, "openblas", record.outclassed()),
            "it lost each earlier class by 1.5x");
  // Alone, or where the program's calls stay native, it is measured as ever.
  EXPECT_EQ(native_left_out(flops, nullptr, "", record.outclassed()), "");
  EXPECT_EQ(native_left_out(flops, nullptr, "native", record.outclassed()), "");
  // A class it held its own in (within 1.5x) keeps it in for good.
  record.note(race("openblas", "", {{"native", 11}, {"openblas", 16}}));
  EXPECT_FALSE(record.outclassed());
}

TEST(Rules, AloneTheMeasuredCandidateIsTriedAgainstNative) {
  Row chosen = race("onednn", "onednn", {{"native", 100}, {"onednn", 120}});
  NextTrial t = after_race(chosen, true, "", kind);
  EXPECT_EQ(t.candidate, "onednn");
  EXPECT_EQ(t.incumbent, "native");
  EXPECT_FALSE(t.from_home);

  Row kept = race("native", "onednn", {{"native", 120}, {"onednn", 100}});
  t = after_race(kept, true, "", kind);
  EXPECT_EQ(t.candidate, "onednn");
  EXPECT_EQ(t.incumbent, "native");

  Row no_trial = race("onednn", "", {{"native", 50}, {"onednn", 120}});  // 2x ahead: the race said
  EXPECT_EQ(after_race(no_trial, true, "", kind).candidate, "");
}

TEST(Rules, WithNativeLeftOutOrFarBehindTheRunnerUpIsTriedAgainstTheChoice) {
  Row left_out = race("openblas", "onednn", {{"openblas", 100}, {"onednn", 60}});
  NextTrial t = after_race(left_out, false, "", kind);
  EXPECT_EQ(t.candidate, "onednn");
  EXPECT_EQ(t.incumbent, "openblas");

  Row behind = race("openblas", "onednn", {{"native", 20}, {"openblas", 100}, {"onednn", 90}});
  t = after_race(behind, true, "", kind);
  EXPECT_EQ(t.candidate, "onednn");
  EXPECT_EQ(t.incumbent, "openblas");
}

TEST(Rules, InAMixedProgramAClassSentAwayFromHomeStaysHomeUntilItWinsInUse) {
  // Home native: the race's choice becomes the trial, home the choice until the trial ends.
  Row row = race("onednn", "", {{"native", 100}, {"onednn", 130}});
  NextTrial t = after_race(row, true, "native", kind);
  EXPECT_EQ(t.candidate, "onednn");
  EXPECT_EQ(t.incumbent, "native");
  EXPECT_TRUE(t.from_home);
  EXPECT_EQ(row.choice, "native");
  EXPECT_EQ(row.trial, "onednn");

  // Home a backend (native left out).
  Row away = race("onednn", "", {{"openblas", 100}, {"onednn", 130}});
  t = after_race(away, false, "openblas", kind);
  EXPECT_EQ(t.candidate, "onednn");
  EXPECT_EQ(t.incumbent, "openblas");
  EXPECT_EQ(away.choice, "openblas");

  // Staying home: no trial.
  Row stays = race("openblas", "", {{"openblas", 100}, {"onednn", 90}});
  EXPECT_EQ(after_race(stays, false, "openblas", kind).candidate, "");
  EXPECT_EQ(stays.choice, "openblas");
}

TEST(Rules, AClassLeavesHomeFreelyWhereHomeCouldNotRunIt) {
  // Home declined the class in the race (no rate), or home is native but native was left out: the
  // race's choice stands, with no trial against home.
  Row declined = race("onednn", "", {{"native", 50}, {"onednn", 130}});
  EXPECT_EQ(after_race(declined, true, "openblas", kind).candidate, "");
  EXPECT_EQ(declined.choice, "onednn");

  Row no_native = race("onednn", "", {{"openblas", 50}, {"onednn", 130}});
  EXPECT_EQ(after_race(no_native, false, "native", kind).candidate, "");
  EXPECT_EQ(no_native.choice, "onednn");

  // Sent to the program's own library, away from a backend's home: its calls are the library's,
  // no candidate's to try.
  Row back = race("native", "", {{"native", 130}, {"openblas", 100}});
  EXPECT_EQ(after_race(back, true, "openblas", kind).candidate, "");
  EXPECT_EQ(back.choice, "native");

  // An accelerator's choice is measured with its transfers, not beside threads: no trial.
  Row device = race("opencl", "", {{"native", 50}, {"opencl", 500}});
  EXPECT_EQ(after_race(device, true, "native", kind).candidate, "");
  EXPECT_EQ(device.choice, "opencl");
}

TEST(Rules, AClassJudgedAgainTriesItsFastestOtherCandidateThatCanRunHere) {
  Row row = race("onednn", "", {{"native", 90}, {"openblas", 95}, {"onednn", 100}, {"opencl", 500}});
  EXPECT_EQ(rival(row, kind), "openblas");  // not the accelerator
  Row gone = race("onednn", "", {{"native", 90}, {"cuda", 300}});
  EXPECT_EQ(rival(gone, kind), "native");  // a backend this process lacks is passed over
  Row unusable = race("cuda", "", {{"native", 90}, {"cuda", 300}});
  EXPECT_EQ(rival(unusable, kind), "");  // its choice cannot run here: kept as it stands
  const auto without_native = [](const std::string& name) {
    return name == "native" ? Kind::none : kind(name);
  };
  EXPECT_EQ(rival(gone, without_native), "");
}

TEST(Rules, ARaceBeforeTheProgramsPoolsAreQuietIsDisturbed) {
  const Row row = race("native", "", {{"native", 100}, {"onednn", 0.1}});
  EXPECT_NE(disturbed(1000, 2000, row, {}).find("the process is starting"), std::string::npos);
  EXPECT_EQ(disturbed(2000, 2000, row, {}), "");  // from then on, nothing known disturbs it
}

TEST(Rules, ACandidateFarBelowItsCalmFigureOnANearClassMakesTheRaceDisturbed) {
  Row near = race("onednn", "", {{"native", 80}, {"onednn", 86}});
  near.size = "128x128x128";
  EXPECT_NE(disturbed(0, 0, race("native", "", {{"native", 70}, {"onednn", 0.1}}), {near})
                .find("onednn ran at 0.1 GFLOP/s, 86 on 128x128x128 calmly"),
            std::string::npos);
  // A quarter of it or more: a size's own speed.
  EXPECT_EQ(disturbed(0, 0, race("native", "", {{"native", 70}, {"onednn", 22}}), {near}), "");
  // Only calm figures count: a provisional near row proves nothing.
  near.how = autosel::profile::How::provisional;
  EXPECT_EQ(disturbed(0, 0, race("native", "", {{"native", 70}, {"onednn", 0.1}}), {near}), "");
}

}  // namespace
}  // namespace sol::autosel::rules
