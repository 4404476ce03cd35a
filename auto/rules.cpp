#include "auto/rules.hpp"

#include <algorithm>
#include <cstdio>

namespace sol::autosel::rules {

void NativeRecord::note(const autosel::profile::Row& row) noexcept {
  double native = 0, best = 0;
  for (const auto& r : row.rates) {
    if (r.candidate == "native") native = r.gflops;
    best = std::max(best, r.gflops);
  }
  (native > 0 && 1.5 * native < best ? lost_ : held_).fetch_add(1, std::memory_order_relaxed);
}

std::string native_left_out(double flops, const char* outclassing, const std::string& home, bool outclassed) {
  if (flops < kLeaveNativeOutFlops) return "";
  if (outclassing) return std::string(outclassing) + " runs its library with this CPU's kernels";
  if (!home.empty() && home != "native" && outclassed) return "it lost each earlier class by 1.5x";
  return "";
}

namespace {

// A mixed program's class that the race sent away from home: tried against home (see after_race).
bool leaves_home(autosel::profile::Row& row, bool native_in, const std::string& home, const KindOf& kind) {
  if (home.empty() || !row.trial.empty() || row.choice == home || kind(row.choice) != Kind::cpu) return false;
  if (home == "native" ? !native_in : kind(home) != Kind::cpu) return false;
  const bool raced =
      std::any_of(row.rates.begin(), row.rates.end(), [&](const auto& r) { return r.candidate == home; });
  if (!raced) return false;
  row.trial = row.choice;
  row.choice = home;
  return true;
}

}  // namespace

NextTrial after_race(autosel::profile::Row& row, bool native_in, const std::string& home,
                     const KindOf& kind) {
  const bool against_native =
      native_in && (row.trial.empty() || row.choice == "native" || row.trial == row.choice);
  NextTrial next;
  next.incumbent = against_native ? "native" : row.choice;
  if (leaves_home(row, native_in, home, kind)) {
    next.incumbent = home;
    next.from_home = true;
  }
  // A race names a backend for its trial, never native.
  const Kind candidate = row.trial.empty() ? Kind::none : kind(row.trial);
  const Kind incumbent = next.incumbent == "native" ? Kind::native : kind(next.incumbent);
  if ((candidate != Kind::cpu && candidate != Kind::accelerator) || row.trial == next.incumbent ||
      incumbent == Kind::none)
    return {};
  next.candidate = row.trial;
  return next;
}

std::string rival(const autosel::profile::Row& row, const KindOf& kind) {
  const auto usable = [&](const std::string& name) {
    const Kind k = kind(name);
    return k == Kind::native || k == Kind::cpu;
  };
  if (!usable(row.choice)) return "";
  std::string other;
  double best = 0;
  for (const auto& r : row.rates)
    if (r.candidate != row.choice && r.gflops > best && usable(r.candidate)) {
      other = r.candidate;
      best = r.gflops;
    }
  return other;
}

std::string disturbed(uint64_t started_ns, uint64_t pools_quiet_ns, const autosel::profile::Row& row,
                      const std::vector<autosel::profile::Row>& near) {
  if (started_ns < pools_quiet_ns) {
    char why[96];
    std::snprintf(why, sizeof why, "the process is starting (its library's threads spin for %.0f ms more)",
                  static_cast<double>(pools_quiet_ns - started_ns) * 1e-6);
    return why;
  }
  for (const auto& r : row.rates)
    for (const auto& n : near) {
      if (n.how == autosel::profile::How::provisional) continue;
      for (const auto& calm : n.rates)
        if (calm.candidate == r.candidate && r.gflops * kFarBelowCalm < calm.gflops) {
          char why[160];
          std::snprintf(why, sizeof why, "%s ran at %.3g GFLOP/s, %.3g on %s calmly", r.candidate.c_str(),
                        r.gflops, calm.gflops, n.size.c_str());
          return why;
        }
    }
  return "";
}

}  // namespace sol::autosel::rules
