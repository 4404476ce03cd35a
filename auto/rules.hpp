// auto's rules around a race (auto/measure.hpp) and a trial (trial.hpp): whether native
// runs in a class's race, and what a race's outcome is tried against in use. Decisions on names and
// figures alone, so that each is tested with exact inputs (tests/unit/auto/rules_test.cpp); the
// executor looks the backends up and acts on them.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "auto/profile.hpp"

namespace sol::autosel::rules {

// A class of at least this much work may be measured without native: a 64^3 GEMM, from which
// OpenBLAS 0.3.21 runs a GEMM on several threads. Below it native stays in the race: it runs on one
// thread, its samples cost little, and the kernels for this CPU are not always faster there than a
// misdetected library's.
inline constexpr double kLeaveNativeOutFlops = 2.0 * 64 * 64 * 64;

// Per native library: the classes where it lost by 1.5x to the best candidate, and the others.
class NativeRecord {
 public:
  // A race in which native ran.
  void note(const autosel::profile::Row& row) noexcept;
  // It lost every class so far, two at least: in a program whose calls run on a backend, the next
  // classes are measured without it.
  bool outclassed() const noexcept {
    return lost_.load(std::memory_order_relaxed) >= 2 && held_.load(std::memory_order_relaxed) == 0;
  }

 private:
  std::atomic<int> lost_{0}, held_{0};
};

// Why native is left out of a class's race, "" when it is not: a class of kLeaveNativeOutFlops or
// more, and a backend that runs the program's own library with this CPU's kernels
// (`outclassing`: its name, nullptr when none), or a program whose calls run on a backend
// (`home`) while its library lost every earlier class (`outclassed`, NativeRecord).
std::string native_left_out(double flops, const char* outclassing, const std::string& home, bool outclassed);

// What a name stands for, as auto can run it: nothing usable, native (the program has a
// library for the call), a CPU backend, or an accelerator.
enum class Kind { none, native, cpu, accelerator };
using KindOf = std::function<Kind(const std::string&)>;

// The trial a race leads to: `candidate` tried in use against `incumbent` ("native" or a backend's
// name); no trial when `candidate` is empty.
struct NextTrial {
  std::string candidate, incumbent;
  bool from_home = false;  // the class leaves home (below): home is the incumbent
};

// After a race that filled `row` (its choice and, alone, its trial: measure::run). `native_in`:
// native ran in it, on the program's call; `home`: where the program's calls of other classes
// mostly run ("" when it made none yet: alone).
// - Alone, the trial is against native when native ran and the choice is native or the trial
//   itself; else (native left out, or 2x behind the others) against the choice.
// - In a mixed program, a class the race sends to another CPU candidate than home leaves home only
//   by a trial in use against home (home's turn first), and stays home's meanwhile: `row`'s choice
//   becomes home and its trial the race's choice. The race charged the candidate for switching
//   between the two libraries' threads, but on few cores its figures follow whichever pool spun
//   last. Not where home declined the class in the race, nor for an accelerator's choice.
NextTrial after_race(autosel::profile::Row& row, bool native_in, const std::string& home, const KindOf& kind);

// A class that earlier processes judged close, tried again in this process: the fastest other
// candidate of its row that can run here, against its choice; "" when there is none (or its
// choice cannot run here).
std::string rival(const autosel::profile::Row& row, const KindOf& kind);

// Why a race's figures cannot be trusted (Row::How::provisional), "" when nothing known disturbed
// them:
// - it began before `pools_quiet_ns`: the process is starting, and its library's thread pool spins
//   from its load (OpenBLAS starts its workers then, and they spin for 2^28 counter ticks), beside
//   every candidate on few cores;
// - a candidate ran at under a quarter of what it ran at calmly on a near class (`near`: calm,
//   trial or tuned rows of the same routine, element type, layout and transposes within twice the
//   size each way): a library is not four times slower for so small a change of size, and beside a
//   starting pool it was timed at a thousandth of its speed (auto/README.md, R5).
std::string disturbed(uint64_t started_ns, uint64_t pools_quiet_ns, const autosel::profile::Row& row,
                      const std::vector<autosel::profile::Row>& near);
inline constexpr double kFarBelowCalm = 4;

}  // namespace sol::autosel::rules
