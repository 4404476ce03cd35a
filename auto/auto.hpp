// What the executor asks of auto (SOL_BACKEND=auto), and all it asks: where a BLAS node of a
// measured shape class goes (choose), how a call of a class on trial went (native_turn, observe),
// and which library ran each other call (note_ran). Everything behind it (the race, the trial,
// the rules, the profile and its file, the warm-up) is auto's own: see auto/README.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "capture/blas/blas.hpp"
#include "ir/native_fn.hpp"
#include "route/router.hpp"

namespace sol::config {
struct Config;
}

namespace sol::autosel {

struct State;      // auto.cpp
struct OpenTrial;  // a class on trial (auto.cpp)

// The program's call on a backend, routed as the executor routes a call and its result delivered:
// what a race asks of home, or of a long call's screen leader, when native's call was not made.
using CallOn = hal::Reason (*)(hal::Backend& backend, capture::Node& node) noexcept;

// Where auto sends one call.
struct Choice {
  // "native" or a backend's name; nullptr: nothing is known, the router's built-in order decides.
  const char* backend = nullptr;
  // The call was made while measuring, by this ("native" or a backend's name): the node is done.
  const char* ran_on = nullptr;
  // The class is on trial: the call is timed and handed to native_turn() or observe().
  OpenTrial* trial = nullptr;
  // Routed by provisional figures, to be measured again once calm: the call's plan is not kept.
  bool provisional = false;
};

class Selector {
 public:
  // `call_on`: how the executor runs the program's call itself on a backend.
  Selector(const config::Config& cfg, hal::Registry& registry, route::Router& router, CallOn call_on);
  ~Selector();

  // Whether auto routes by measurement: it measures, or a profile exists to route by.
  bool measured() const noexcept { return measured_; }
  // Whether this BLAS node's class is auto's to choose: measured routing, a call large enough to
  // measure under a native library of kind `kind`, and no [[route]] that names another target.
  bool decides(const capture::Node& node, double flops, route::NativeKind kind) noexcept;

  // Where `node` goes (see Choice). Measures its class now when nobody has, making the call itself
  // natively first, timed (`native`). Only valid calls are measured: `err` (with `checked` set)
  // holds the argument check when one was needed.
  Choice choose(capture::Node& node, double flops, capture::NativeFn native, capture::blas::ArgError& err,
                bool& checked) noexcept;
  // Native's turn in a trial: the program's call made natively, timed, and observed.
  void native_turn(OpenTrial& trial, capture::NativeFn native, double flops) noexcept;
  // A call of a class on trial, begun at `started_ns`, ran on `ran` (ok: it computed the node).
  // false when `ran` is neither the trial's candidate nor its incumbent (a fallback): the next
  // candidate's run is observed instead.
  bool observe(OpenTrial& trial, const hal::Backend* ran, bool ok, double flops,
               uint64_t started_ns) noexcept;
  // A call outside any trial ran on `ran` (nullptr: natively): trials look at which threads the
  // program keeps busy, and races at whether it has made native calls.
  void note_ran(const hal::Backend* ran) noexcept;

  // Whether a class is on trial: then every call of the others must be noted (no memo skips it).
  // Inline, as changes(): the wrappers' memo of native calls asks both at every call.
  bool trial_open() const noexcept { return trial_open_->load(std::memory_order_relaxed); }
  // The profile's count of changes to where a known class routes (Profile::changes()).
  uint32_t changes() const noexcept { return changes_->load(std::memory_order_acquire); }

  // The profile's backends that compile kernels prepare its classes now, off the program's path.
  void start_warm_up() noexcept;
  // In a forked child: the locks other threads held at fork time are free.
  void after_fork_child() noexcept;

 private:
  std::unique_ptr<State> s_;
  bool measured_;
  const std::atomic<bool>* trial_open_;   // State's
  const std::atomic<uint32_t>* changes_;  // the profile's (Profile::change_count())
};

}  // namespace sol::autosel
