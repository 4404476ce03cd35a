#include "auto/trial.hpp"

#include <algorithm>

namespace sol::autosel {

Trial::Trial(uint64_t now_ns, double flops, uint64_t candidate_spins_ns, uint64_t incumbent_spins_ns) noexcept
    : flops_(flops),
      candidate_spins_ns_(candidate_spins_ns),
      incumbent_spins_ns_(incumbent_spins_ns),
      incumbent_until_ns_(now_ns + std::max(kIncumbentTurnNs, candidate_spins_ns)) {}

// The program's step from the previous call of the class to this one, when both fell in the same
// turn, no race began or ended between them, and (in the candidate's turn) the previous one was
// settled.
void Trial::take_step(const Call& c) noexcept {
  const bool settled = c.by_incumbent || last_ns_ >= quiet_from_ns_ || c.incumbent_beside;
  if (last_phase_ == phase_ && last_measurements_ == c.measurements && c.started_ns > last_ns_ && settled) {
    const int side = c.by_incumbent ? 0 : 1;
    steps_[side][step_count_[side]++ % kSteps] = c.started_ns - last_ns_;
  }
  last_phase_ = phase_;
  last_ns_ = c.started_ns;
  last_measurements_ = c.measurements;
}

// A candidate whose best call is still behind the incumbent's figure once it runs as it will in
// this program cannot win: the incumbent's second turn could only raise that figure, and each
// further call costs the program what the candidate loses. 1.5x behind, one settled call says so
// (three calls in all); 2x behind, two settled calls do (a shared machine's spell slows a library
// to two thirds of its speed, not half); 10 % behind, three settled calls do.
bool Trial::candidate_lost() const noexcept {
  return (settled_calls_ > 0 && calls_ >= 3 &&
          (settled_calls_ >= 3 ? 1.1 : 1.5) * best_gflops_ < incumbent_gflops_) ||
         (settled_calls_ >= 2 && 2 * best_gflops_ < incumbent_gflops_);
}

bool Trial::observe(const Call& c) noexcept {
  if (done_ || c.by_incumbent != incumbent_turn_) return false;
  take_step(c);
  if (c.by_incumbent) {
    incumbent_gflops_ = std::max(incumbent_gflops_, c.gflops);
    ++incumbent_calls_;
    const bool won = phase_ == 2 && 1.03 * incumbent_gflops_ >= best_gflops_;
    if (++turn_calls_ < 3 || (!won && c.now_ns < incumbent_until_ns_)) return false;
    if (phase_ == 0) {  // the candidate's turn
      phase_ = 1;
      incumbent_turn_ = false;
      quiet_from_ns_ = c.now_ns + incumbent_spins_ns_;
      until_ns_ = c.now_ns + std::max(kTrialNs, incumbent_spins_ns_ + kTrialNs / 2);
      return false;
    }
  } else {
    best_gflops_ = std::max(best_gflops_, c.gflops);
    ++calls_;
    if (c.started_ns >= quiet_from_ns_ || c.incumbent_beside) ++settled_calls_;
    const bool lost = candidate_lost();
    if (c.gflops >= 0 && !lost && (calls_ < 3 || c.now_ns < until_ns_)) return false;
    if (c.gflops >= 0 && !lost) {  // the incumbent's second turn
      phase_ = 2;
      incumbent_turn_ = true;
      turn_calls_ = 0;
      incumbent_until_ns_ = c.now_ns + std::max(kIncumbentTurnNs, candidate_spins_ns_);
      return false;
    }
  }
  done_ = true;
  wins_ = c.gflops >= 0 && best_gflops_ > 1.03 * incumbent_gflops_;
  return true;
}

double Trial::median_ms(const uint64_t* steps, int n) noexcept {
  uint64_t s[kSteps];
  std::copy(steps, steps + n, s);
  std::sort(s, s + n);
  return (n % 2 ? static_cast<double>(s[n / 2]) : 0.5 * static_cast<double>(s[n / 2 - 1] + s[n / 2])) * 1e-6;
}

Trial::Verdict Trial::verdict() const noexcept {
  Verdict v{wins_,  best_gflops_,     incumbent_gflops_,   best_gflops_,
            calls_, incumbent_calls_, phase_ == 2 ? 2 : 1, -1,
            -1};
  if (step_count_[0] > 0 && step_count_[1] > 0) {
    v.home_ms = median_ms(steps_[0], std::min(step_count_[0], kSteps));
    v.away_ms = median_ms(steps_[1], std::min(step_count_[1], kSteps));
    // The candidate's turn 2 % slower loses, and is charged the difference, in the incumbent's time.
    if (v.away_ms > 1.02 * v.home_ms && flops_ > 0 && incumbent_gflops_ > 0) {
      v.wins = false;
      const double own_ms = flops_ / incumbent_gflops_ * 1e-6;
      v.candidate_gflops = std::min(best_gflops_, flops_ / (own_ms + v.away_ms - v.home_ms) * 1e-6);
    }
  }
  return v;
}

}  // namespace sol::autosel
