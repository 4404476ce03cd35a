#include "auto/auto.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "auto/measure.hpp"
#include "auto/profile.hpp"
#include "auto/rules.hpp"
#include "auto/trial.hpp"
#include "auto/warm_up.hpp"
#include "capture/blas/call.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "common/openblas_core.hpp"
#include "config/config.hpp"
#include "hal/one_time.hpp"
#include "hal/registry.hpp"

namespace sol::autosel {

using capture::NativeFn;

// A class on trial (trial.hpp): the decision, and what auto does with it.
struct OpenTrial {
  int native;
  uint64_t key;
  profile::Row row;         // the measurement (its choice, the incumbent, so far)
  hal::Backend* backend;    // the candidate; nullptr: native (a class judged again, judge_again())
  hal::Backend* incumbent;  // nullptr: native
  // The class was measured in a mixed program, beside home's threads, and left them: the incumbent
  // is home (rules::after_race()).
  bool from_home;
  Trial trial;
  const char* incumbent_name() const noexcept { return incumbent ? incumbent->name() : "native"; }
  const char* candidate_name() const noexcept { return backend ? backend->name() : "native"; }
};

namespace {

// How long a backend's workers (native's, as OpenBLAS's: other libraries spin less) spin after its
// last call.
uint64_t spins_ns(const hal::Backend* b) noexcept {
  return b ? b->spin_after_call_ns() : openblas_core::spin_ns();
}

// Per symbol: 0 unknown, else the profile's index of its native library + 2 (1: none usable).
std::atomic<int> g_native_index[capture::kNumSymbols];
SOL_TLS bool t_judging = false;  // this thread's last call was one of a class on trial

}  // namespace

// auto's state in a process: the profile, the classes on trial, and what the program did so far.
struct State {
  hal::Registry& registry;
  route::Router& router;
  CallOn call_on;
  profile::Profile profile;
  // The program has made a routed BLAS call that its own library ran: a class measured from then
  // on is measured as part of a mixed program (measure::run's `home`).
  std::atomic<bool> native_ran{false};
  void note_native() noexcept {
    if (!native_ran.load(std::memory_order_relaxed)) native_ran.store(true, std::memory_order_relaxed);
  }
  // Per native library (profile index): how it fared in its races (rules::NativeRecord).
  rules::NativeRecord natives[16];
  bool native_outclassed(int native) const noexcept {
    return native >= 0 && native < 16 && natives[native].outclassed();
  }
  std::mutex trials_mu;                            // trials; taken only by calls of a class on trial
  std::vector<std::unique_ptr<OpenTrial>> trials;  // finished ones stay: callers may hold pointers
  // A trial began (trial_open), and its incumbent (trial_incumbent, nullptr: native) has run a call
  // of another class since (incumbent_beside): the program keeps the incumbent's threads busy, and
  // the candidate's calls in use are beside them from the first, quiet or not.
  std::atomic<bool> trial_open{false}, incumbent_beside{false};
  // Counts the races begun and ended (measured_choice()): a trial's step that saw one is not
  // a step of the program as it runs (Trial::Call::measurements).
  std::atomic<uint64_t> measurements{0};
  std::atomic<const hal::Backend*> trial_incumbent{nullptr};
  void note_beside(const hal::Backend* ran) noexcept {
    if (SOL_UNLIKELY(trial_open.load(std::memory_order_relaxed)) &&
        !incumbent_beside.load(std::memory_order_relaxed) &&
        ran == trial_incumbent.load(std::memory_order_relaxed))
      incumbent_beside.store(true, std::memory_order_relaxed);
  }
  State(const config::Config& cfg, hal::Registry& r, route::Router& ro, CallOn c)
      : registry(r), router(ro), call_on(c), profile(cfg) {}
};

namespace {

// When the program's own library's thread pool, started at its load, stops spinning: OpenBLAS starts
// its workers as it is loaded, and they spin for openblas_core::spin_ns() before they sleep. 0 where
// there is none (one thread, or another library). Found once, at the first measurement.
uint64_t pools_quiet_ns(const Node& node) noexcept {
  static std::atomic<uint64_t> quiet{UINT64_MAX};
  uint64_t q = quiet.load(std::memory_order_relaxed);
  if (SOL_LIKELY(q != UINT64_MAX)) return q;
  q = 0;
  Dl_info info{};
  if (node.native && dladdr(node.native, &info) && info.dli_fname)
    if (void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
      if (auto threads = reinterpret_cast<int (*)()>(dlsym(lib, "openblas_get_num_threads"));
          threads && threads() > 1)
        q = openblas_core::loaded_ns() + openblas_core::spin_ns();
      dlclose(lib);
    }
  quiet.store(q, std::memory_order_relaxed);
  return q;
}

// Test-only: SOL_TEST_CALM=1 takes every race for calm (rules::disturbed() is not asked), for the
// tests that steer a decision and must not see it measured again because the machine was loaded.
bool assumed_calm() noexcept {
  static const bool calm = [] {
    const char* v = secure_getenv("SOL_TEST_CALM");
    return v && std::strcmp(v, "1") == 0;
  }();
  return calm;
}

// This process is `sol tune`'s (sol_tune_begin()): its races wait until the process is calm, and
// its figures are tuned ones (Row::How), which a program's never replace.
std::atomic<bool> g_tuning{false};

// Sleeps until `ns` (monotonic) has passed.
void wait_until(uint64_t ns) noexcept {
  for (uint64_t now = monotonic_ns(); now < ns; now = monotonic_ns()) {
    timespec t{static_cast<time_t>((ns - now) / 1'000'000'000),
               static_cast<long>((ns - now) % 1'000'000'000)};
    nanosleep(&t, nullptr);
  }
}

// Of a race that took `race_ns`, the part that was measuring: when the race made the program's own
// call on `made_call`, that call's time (one run at its measured rate) is the call's, not measuring.
uint64_t measuring_ns(uint64_t race_ns, double flops, const profile::Row& row,
                      const char* made_call) noexcept {
  if (!made_call) return race_ns;
  for (const auto& r : row.rates)
    if (r.candidate == made_call && r.gflops > 0) {
      const auto own = static_cast<uint64_t>(flops / r.gflops);  // GFLOP/s is flop per ns
      return own < race_ns ? race_ns - own : 0;
    }
  return race_ns;
}

// Whether two races agree: the same choice, and every candidate both timed within 10 %.
bool agree(const profile::Row& a, const profile::Row& b) noexcept {
  if (a.choice != b.choice) return false;
  for (const auto& x : a.rates)
    for (const auto& y : b.rates)
      if (x.candidate == y.candidate && (x.gflops > 1.1 * y.gflops || y.gflops > 1.1 * x.gflops))
        return false;
  return true;
}

// `sol tune`'s races are run again, on the copies (the program's call was made), until two in a row
// agree, three at most: `row` becomes the last, each candidate at its best rate of them.
void race_until_agreed(const Node& node, double flops, const std::vector<measure::Candidate>& candidates,
                       const std::string& home, profile::Row& row) noexcept {
  try {
    std::vector<measure::Candidate> copies_only = candidates;
    for (auto& c : copies_only) c.call_itself = {};  // the program's call is made once, already
    for (int race = 1; race < 3; ++race) {
      profile::Row again;
      again.key = row.key;
      const char* made = nullptr;
      if (!measure::run(node, flops, copies_only, -1, home.empty() ? nullptr : home.c_str(), again, made))
        return;
      const bool agreed = agree(row, again);
      for (auto& r : again.rates)
        for (const auto& before : row.rates)
          if (r.candidate == before.candidate) r.gflops = std::max(r.gflops, before.gflops);
      again.trial = agreed ? row.trial : again.trial;
      row = std::move(again);
      if (agreed) return;
    }
  } catch (...) {  // out of memory: the races so far stand
  }
}

// The profile's index of the library that defines a symbol natively, found once per symbol.
int native_index(State& st, const Node& node) noexcept {
  auto& slot = g_native_index[static_cast<size_t>(node.sym)];
  int v = slot.load(std::memory_order_acquire);
  if (SOL_UNLIKELY(!v)) {
    try {
      const std::string id = library_identity(node.native);
      v = st.profile.native_index(id.empty() ? "none" : id) + 2;
    } catch (...) {
      v = 1;
    }
    slot.store(v, std::memory_order_release);
  }
  return v - 2;
}

// After a measurement: the one below-par line (shared with warn_if_below_par) when the native
// library is clearly slower than the best candidate on a call large enough to matter.
void warn_if_measured_slow(const Node& node, double flops, const profile::Row& row,
                           const std::string& home) noexcept {
  // Only calls of a millisecond or more: on a loaded machine a shorter one's rate can be off by
  // as much, and a user told their library is slow deserves a figure that holds. Not from a class
  // measured beside another library's threads (a mixed program's, home not native): native's
  // figure there is charged for the switch, not its speed (auto/README.md, R10).
  if (flops < 1e8 || row.choice == "native" || (!home.empty() && home != "native")) return;
  double native = 0, best = 0;
  for (const auto& r : row.rates) {
    if (r.candidate == "native") native = r.gflops;
    if (r.candidate == row.choice) best = r.gflops;
  }
  if (native <= 0 || best < 2 * native) return;
  log::once(log::Level::warn, "native-below-par",
            "the program's BLAS (%s) runs below this machine's ability: %s %s measured %.1f GFLOP/s "
            "natively, %.1f on %s; auto routes such calls there",
            object_name(node.native), symbol_name(node.sym), row.size.c_str(), native, best,
            row.choice.c_str());
}

// What auto may measure for a node of `flops` work: every CPU backend (the reference backend is
// the test oracle, not a contender) and every accelerator above its threshold.
void candidates_for(State& st, double flops, std::vector<hal::Backend*>& out) {
  out.clear();
  for (const auto& e : hal::builtin_backends()) {
    if (std::strcmp(e.name, "reference") == 0) continue;
    // Device backends only as accelerators, from accelerators(), which knows for sure.
    if (st.registry.device_backend(e.name) || st.registry.accelerator_hint(e.name) != hal::Backend::Hint::no)
      continue;
    // supports() is left to the measurement, which sees the node in column-major terms as
    // backends expect; a backend that declines is recorded at 0.
    if (hal::Backend* b = st.registry.get(e.name); b && !b->accelerator()) out.push_back(b);
  }
  if (flops >= st.router.accelerator_floor())
    for (hal::Backend* a : st.router.accelerators())
      if (a->accelerator() && flops >= a->min_flops()) out.push_back(a);
}

// The program's call on a backend, its result delivered: what measure::run asks of home, or of a
// screen's leader, when native's call was not made.
struct CallItself {
  CallOn call_on;
  hal::Backend* backend;
  Node* node;
  hal::Reason operator()() noexcept { return call_on(*backend, *node); }
};

// Tries `candidate` in use against `incumbent` (either nullptr: native) for class `key`, from the
// call at hand on: the incumbent's turn comes first. `row`: the class's measurement, its choice
// standing until the trial ends. Both are judged by their calls in use alone: the incumbent's
// figure starts at nothing, as the candidate's does.
OpenTrial* open_trial(State& st, int native, uint64_t key, profile::Row row, hal::Backend* candidate,
                      hal::Backend* incumbent, double flops, bool from_home = false) {
  auto t = std::make_unique<OpenTrial>(
      OpenTrial{native, key, std::move(row), candidate, incumbent, from_home,
                Trial(decision_ns(), flops, spins_ns(candidate), spins_ns(incumbent))});
  std::lock_guard<std::mutex> lock(st.trials_mu);
  st.trials.push_back(std::move(t));
  st.incumbent_beside.store(false, std::memory_order_relaxed);
  st.trial_incumbent.store(incumbent, std::memory_order_relaxed);
  st.trial_open.store(true, std::memory_order_relaxed);
  st.profile.begin_trial(native, key);
  return st.trials.back().get();
}

// What a candidate's name stands for in this process, for `node` (rules::Kind).
rules::KindOf kind_of(State& st, const Node& node) {
  return [&st, native = node.native != nullptr](const std::string& name) {
    if (name == "native") return native ? rules::Kind::native : rules::Kind::none;
    const hal::Backend* b = st.registry.get(name);
    return !b ? rules::Kind::none : b->accelerator() ? rules::Kind::accelerator : rules::Kind::cpu;
  };
}

// A class that earlier processes judged close (Profile::kJudgeAgain): its choice in the profile,
// the incumbent, and the fastest other candidate tried in use again in this process. The
// incumbent's turn comes first: the process's first call of the class goes where the profile
// says, as in any process after the first. Where there is no trial to make (or this call is
// invalid), the class routes by the earlier row as it stands.
const char* judge_again(State& st, const Node& node, int native, uint64_t key, OpenTrial*& trial) noexcept {
  profile::Profile& prof = st.profile;
  try {
    profile::Row row;
    if (!prof.earlier(native, key, row)) {
      prof.release(native, key);
      return nullptr;
    }
    // An invalid call is no call to time (native's would only report it).
    if (blas::check(node).level != blas::ArgError::none)
      return prof.candidate_name(prof.keep_earlier(native, key));
    const std::string other = rules::rival(row, kind_of(st, node));
    if (other.empty()) return prof.candidate_name(prof.keep_earlier(native, key));
    hal::Backend* incumbent = row.choice == "native" ? nullptr : st.registry.get(row.choice);
    hal::Backend* candidate = other == "native" ? nullptr : st.registry.get(other);
    const bool unconfirmed = profile::unconfirmed(row);
    char by[48] = "kept there by";
    if (!unconfirmed) std::snprintf(by, sizeof by, "judged within %.1fx by", profile::kJudgeAgainRates);
    SOL_LOG(debug, "trying %s in use for %s, between two turns of %s's: %s %d earlier process%s%s",
            other.c_str(), profile::class_text(key).c_str(), row.choice.c_str(), by, row.judged,
            row.judged == 1 ? "" : "es", unconfirmed ? " whose trial did not end" : "");
    prof.judging(native, key);
    trial = open_trial(st, native, key, std::move(row), candidate, incumbent, blas::flops(node));
    return trial->incumbent_name();
  } catch (...) {
    prof.release(native, key);
    return nullptr;
  }
}

// The program's own routine in a race: the Fortran one (a CBLAS call's column-major equivalent is
// what every candidate computes), or for dnnl_sgemm oneDNN's own, on the same equivalent.
struct RunNative {
  void* own;
  Sym routine;
  bool row_major_own;
  hal::Reason operator()(Node& cm) noexcept {
    const measure::Started t0 = measure::slowing() ? measure::started() : measure::Started{};
    if (row_major_own)
      blas::call_dnnl_sgemm(own, cm);
    else
      blas::call_fortran(routine, own, cm, cm.ilp64);
    measure::native_slowed_if_asked(t0, true);
    return hal::Reason::ok;
  }
};

// One race of a class: who runs in it (the candidates refer to `native_run`, `runs` and `calls`,
// so a Race never moves once entered), where the program's other calls run, and when it began.
struct Race {
  Race(int n, uint64_t k) : native(n), key(k) {}
  int native;
  uint64_t key;
  RunNative native_run{};
  std::vector<hal::Backend*> backends;
  std::vector<measure::OnBackend> runs;
  std::vector<CallItself> calls;
  std::vector<measure::Candidate> candidates;
  std::string home;        // "" alone, else where most of the program's measured classes went
  std::string left_out;    // why native is left out, "" when it runs
  bool native_in = false;  // native is measured, on the call itself
  uint64_t race_from = 0, measuring_from = 0;
  uint64_t native_ns = 0;           // the program's call, made natively in the race: not measuring
  const char* made_call = nullptr;  // the candidate that made the program's call in the race
};

// Where a class that is known, on trial or judged again goes (`race` false), or that it is to be
// raced now (`race` true; `reclaimed`: a provisional class claimed again once calm). nullptr with
// `race` false: the router's built-in order decides.
const char* known_choice(State& st, const Node& node, double flops, int native, uint64_t& key,
                         OpenTrial*& trial, bool& provisional, bool& race, bool& reclaimed) noexcept {
  profile::Profile& prof = st.profile;
  race = reclaimed = false;
  // A class whose candidates measured close, called in other halves of its sizes: its sub-class.
  bool again = false;
  const int v = prof.lookup(native, key, node, &again);
  if (SOL_LIKELY(v >= 0 && !again)) return prof.candidate_name(v);
  if (v >= 0) {
    // Routed by a provisional row (Row::How): measured again once the process is calm, once; until
    // then, and for an invalid call, routed by it, call by call (no call's plan is remembered).
    provisional = true;
    if (decision_ns() < pools_quiet_ns(node) || blas::check(node).level != blas::ArgError::none ||
        !prof.claim_again(native, key))
      return prof.candidate_name(v);
    SOL_LOG(debug, "measuring %s again, calm: its figures were provisional",
            profile::class_text(key).c_str());
    provisional = false;
    race = reclaimed = true;  // the slot says kMeasuring
    return nullptr;
  }
  if (v == profile::Profile::kTrial) {
    std::lock_guard<std::mutex> lock(st.trials_mu);
    for (const auto& t : st.trials)
      if (!t->trial.done() && t->native == native && t->key == key) {
        trial = t.get();
        return t->trial.incumbent_turn() ? t->incumbent_name() : t->candidate_name();
      }
    return nullptr;  // decided meanwhile
  }
  if (v == profile::Profile::kJudgeAgain) return judge_again(st, node, native, key, trial);
  if (v != profile::Profile::kUnknown) return nullptr;
  // An accelerator still starting (it may be the fastest for a class this large): the class is
  // measured once it is up, with every candidate; meanwhile the built-in order routes its calls.
  if (flops >= st.router.accelerator_floor() && !st.router.accelerators_known()) {
    log::once(log::Level::debug, "auto: accelerator starting",
              "auto: an accelerator is still starting; classes are measured once it is up");
    return nullptr;
  }
  if (!st.profile.measuring()) {
    prof.unrouted(native, key);
    return nullptr;
  }
  race = true;
  return nullptr;
}

// Fills the race's candidates: native's own routine, then each backend; where the program's
// other calls run (home); whether native is left out. false when there is nothing to race.
bool enter(State& st, Node& node, double flops, Race& r) {
  const Sym routine = blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
  const bool row_major_own = node.api == Api::dnnl;
  void* own = !node.native || routine == blas::kNoRoutine ? nullptr
              : row_major_own                             ? const_cast<void*>(node.native)
                                                          : blas::native_routine(node, routine);
  r.native_run = {own, routine, row_major_own};
  candidates_for(st, flops, r.backends);
  r.runs.reserve(r.backends.size());  // the candidates below refer to these: no reallocation
  r.calls.reserve(r.backends.size());
  if (own) r.candidates.push_back({"native", blas::FunctionRef<hal::Reason(Node&)>(r.native_run), -1});
  for (hal::Backend* b : r.backends) {
    if (own && b->runs_native_code(routine, own)) continue;  // native's own code: measured as native
    r.runs.push_back({b});
    r.calls.push_back({st.call_on, b, &node});
    r.candidates.push_back({b->name(), blas::FunctionRef<hal::Reason(Node&)>(r.runs.back()),
                            b->accelerator() ? b->estimate_seconds(node, flops) : -1,
                            blas::FunctionRef<hal::Reason()>(r.calls.back())});
  }
  if (r.native < 0 || r.candidates.size() < (own ? 2u : 1u)) return false;
  // The program's earlier classes (their first calls ran natively): where most of them went.
  if (st.native_ran.load(std::memory_order_relaxed)) {
    r.home = st.profile.home(r.native);
    if (r.home.empty()) r.home = "native";
  }
  // A misdetected library (Prescott kernels on an AVX-512 machine), or one that lost each class
  // so far: its call, several times slower than the others', is neither made nor measured; the
  // chosen candidate computes it.
  if (own) {
    const char* outclassing = nullptr;
    for (hal::Backend* b : r.backends)
      if (!outclassing && b->outclasses_native(routine, own)) outclassing = b->name();
    r.left_out = rules::native_left_out(flops, outclassing, r.home, st.native_outclassed(r.native));
  }
  if (!r.left_out.empty()) r.candidates.erase(r.candidates.begin());  // native is first
  r.native_in = own && r.left_out.empty();
  return true;
}

// The race's figures at SOL_LOG=debug.
void log_race(const Node& node, const Race& r, const profile::Row& row) {
  if (!log::enabled(log::Level::debug)) return;
  const auto text = [](const std::vector<profile::Rate>& rates) {
    std::string t;
    for (const auto& x : rates) t += " " + x.candidate + "=" + std::to_string(x.gflops).substr(0, 7);
    return t;
  };
  const std::string rates = text(row.rates), set_up = text(row.set_up);
  const bool outclassed = !r.left_out.empty();
  SOL_LOG(debug, "measured %s (%s, %s):%s GFLOP/s; auto takes %s (measuring took %.1f ms%s%s%s%s%s%s%s%s%s)",
          profile::class_text(r.key).c_str(), symbol_name(node.sym), row.size.c_str(), rates.c_str(),
          row.choice.c_str(), static_cast<double>(decision_ns() - r.measuring_from) * 1e-6,
          r.home.empty() ? "" : ", beside ", r.home.c_str(), r.home.empty() ? "" : "'s threads",
          outclassed ? "; native left out: " : "", r.left_out.c_str(),
          r.made_call ? "; the call itself on " : "", r.made_call ? r.made_call : "",
          set_up.empty() ? "" : "; first run taken again:", set_up.c_str());
}

// What a race found, kept: its figures' trust (How), the profile's row, and the trial in use it
// leads to, if any (`trial` set). Returns where this call goes when nobody made it while measuring.
const char* settle(State& st, const Node& node, double flops, Race& r, profile::Row& row, const char* ran_on,
                   OpenTrial*& trial) {
  profile::Profile& prof = st.profile;
  const bool outclassed = !r.left_out.empty();
  const bool tuning = g_tuning.load(std::memory_order_relaxed);
  if (tuning) race_until_agreed(node, flops, r.candidates, r.home, row);
  hal::one_time::note_measuring(
      measuring_ns(decision_ns() - r.measuring_from - r.native_ns, flops, row, r.made_call));
  if (outclassed) st.note_native();  // the program's calls of other classes come after this one
  if (r.native >= 0 && r.native < 16 && !outclassed) st.natives[r.native].note(row);
  const std::string disturbed =
      tuning || assumed_calm()
          ? ""
          : rules::disturbed(r.race_from, pools_quiet_ns(node), row, prof.near_calm(r.native, r.key));
  row.how = !disturbed.empty() ? profile::How::provisional
            : tuning           ? profile::How::tuned
                               : profile::How::calm;
  if (!disturbed.empty())
    SOL_LOG(debug, "provisional figures for %s: %s; measured again once calm",
            profile::class_text(r.key).c_str(), disturbed.c_str());
  log_race(node, r, row);
  warn_if_measured_slow(node, flops, row, r.home);
  const rules::NextTrial next = rules::after_race(row, r.native_in, r.home, kind_of(st, node));
  if (next.candidate.empty()) {
    prof.record(r.native, row);
    const int chosen = prof.lookup(r.native, r.key);
    return chosen >= 0 ? prof.candidate_name(chosen) : nullptr;
  }
  hal::Backend* incumbent = next.incumbent == "native" ? nullptr : st.registry.get(next.incumbent);
  SOL_LOG(debug, "trying %s in use for %s, between two turns of %s's: %s", next.candidate.c_str(),
          profile::class_text(r.key).c_str(), next.incumbent.c_str(),
          next.from_home ? "measured away from the threads most of the program's calls run on"
                         : "measured beside each other's threads");
  // The choice is recorded first: it stands if the process ends before the trial. One that
  // would leave home stays home's meanwhile: the classes measured during its trial are
  // measured beside the threads the program's calls run on.
  prof.record(r.native, row);
  // This call, when nobody made it while measuring, and the next go to the incumbent: its
  // first turn, this call included. (Not a call of another class on the incumbent's threads,
  // which would count the candidate's calls as settled from the first, beside those threads
  // still spinning from this one.)
  trial = open_trial(st, r.native, r.key, std::move(row), st.registry.get(next.candidate), incumbent, flops,
                     next.from_home);
  return ran_on || !incumbent ? nullptr : incumbent->name();
}

// What auto measured fastest for this node's shape class ("native" or a backend's name), measuring
// it now if nobody has: nullptr when nothing is known (the router's built-in order decides).
// Measuring runs the call itself natively first, timed, as native's sample; with native left out,
// home or a long call's screen leader may make it instead. `ran_on` then names who did ("native" or the
// backend), and the node is done.
// Only valid calls are measured: `err` (with `checked` set) holds the check when one was needed.
// A class on trial: `trial` is set, and the candidate's name returned.
const char* measured_choice(State& st, Node& node, double flops, NativeFn native_call, const char*& ran_on,
                            blas::ArgError& err, bool& checked, OpenTrial*& trial,
                            bool& provisional) noexcept {
  ran_on = nullptr;
  trial = nullptr;
  provisional = false;
  profile::Profile& prof = st.profile;
  const int native = native_index(st, node);
  uint64_t key = profile::class_of(node);
  bool race = false, reclaimed = false;
  const char* known = known_choice(st, node, flops, native, key, trial, provisional, race, reclaimed);
  if (!race) return known;
  err = blas::check(node);
  checked = true;
  if (err.level != blas::ArgError::none) return nullptr;
  if (!reclaimed && !prof.claim(native, key)) return nullptr;  // another thread measures it right now
  try {
    Race r(native, key);
    if (!enter(st, node, flops, r)) {
      prof.release(native, key);
      return nullptr;
    }
    // A backend still setting up would be timed on its set-up, and slow the others (native's call
    // too: beside a busy core, or on its own set-up when it is that backend's library, as the
    // program's dnnl_sgemm is oneDNN's).
    st.measurements.fetch_add(1, std::memory_order_relaxed);
    r.measuring_from = decision_ns();  // waits for set-ups included: the call's own is not
    warm_up::settle();
    if (g_tuning.load(std::memory_order_relaxed)) wait_until(pools_quiet_ns(node));
    r.race_from = decision_ns();  // native's call is its first sample
    double native_seconds = -1;
    if (r.native_in) {
      const uint64_t t0 = decision_ns();
      const measure::Started slow = measure::slowing() ? measure::started() : measure::Started{};
      native_call();
      measure::native_slowed_if_asked(slow, false);
      native_seconds = static_cast<double>(decision_ns() - t0) * 1e-9;
      ran_on = "native";
      st.note_native();
    }
    r.native_ns = static_cast<uint64_t>(native_seconds > 0 ? native_seconds * 1e9 : 0);
    profile::Row row;
    row.key = key;
    const bool measured = measure::run(node, flops, r.candidates, native_seconds,
                                       r.home.empty() ? nullptr : r.home.c_str(), row, r.made_call);
    st.measurements.fetch_add(1, std::memory_order_relaxed);
    if (r.made_call) ran_on = r.made_call;
    if (!measured) {
      hal::one_time::note_measuring(decision_ns() - r.measuring_from - r.native_ns);
      prof.release(native, key);
      return nullptr;
    }
    return settle(st, node, flops, r, row, ran_on, trial);
  } catch (...) {
    prof.release(native, key);
    return nullptr;
  }
}

// One call of a class on trial, begun at `started_ns`, at `gflops` (< 0: the candidate declined
// it), made by the incumbent in its turn or by the candidate. When it ends the trial, the class goes
// where the trial says (auto/trial.hpp), and the profile keeps both figures in use.
void observe_trial(State& st, OpenTrial& t, double gflops, bool by_incumbent, uint64_t started_ns) noexcept {
  std::lock_guard<std::mutex> lock(st.trials_mu);
  const Trial::Call call{gflops,
                         by_incumbent,
                         started_ns,
                         decision_ns(),
                         st.measurements.load(std::memory_order_relaxed),
                         st.incumbent_beside.load(std::memory_order_relaxed)};
  if (!t.trial.observe(call)) return;
  bool open = false;
  for (const auto& other : st.trials) open = open || !other->trial.done();
  st.trial_open.store(open, std::memory_order_relaxed);
  const Trial::Verdict v = t.trial.verdict();
  char steps[96] = "";
  if (v.home_ms >= 0)
    std::snprintf(steps, sizeof steps, "; a call every %.4g ms, %.4g on %s", v.away_ms, v.home_ms,
                  t.incumbent_name());
  try {
    for (auto& r : t.row.rates) {
      if (r.candidate == t.candidate_name()) r.gflops = v.candidate_gflops;
      if (r.candidate == t.incumbent_name()) r.gflops = v.incumbent_gflops;
    }
    t.row.choice = v.wins ? t.candidate_name() : t.incumbent_name();
    t.row.trial.clear();
    t.row.how = g_tuning.load(std::memory_order_relaxed) ? profile::How::tuned : profile::How::trial;
    // The class was measured alone, before the program's other classes settled where its calls
    // mostly run; a trial that ends away from there is measured again beside those threads.
    const std::string home = st.profile.home(t.native, t.key);
    const bool again =
        !t.from_home && !home.empty() && home != t.row.choice && st.profile.measure_again(t.native, t.key);
    SOL_LOG(debug,
            "tried %s in use for %s: %.1f GFLOP/s over %d calls, %s %.1f over %d in %d turns%s; %s%s%s",
            t.candidate_name(), profile::class_text(t.key).c_str(), v.best_gflops, v.calls,
            t.incumbent_name(), v.incumbent_gflops, v.incumbent_calls, v.turns, steps,
            again ? "measuring it again beside " : "auto takes ", again ? home.c_str() : t.row.choice.c_str(),
            again ? "'s threads" : "");
    if (again) return;
    st.profile.record(t.native, t.row);
  } catch (...) {
    st.profile.release(t.native, t.key);
  }
}
}  // namespace

Selector::Selector(const config::Config& cfg, hal::Registry& registry, route::Router& router, CallOn call_on)
    : s_(std::make_unique<State>(cfg, registry, router, call_on)),
      trial_open_(&s_->trial_open),
      changes_(&s_->profile.change_count()) {
  const profile::Profile& p = s_->profile;
  measured_ = p.measuring() || (!p.path().empty() && ::access(p.path().c_str(), R_OK) == 0);
  router.set_measured(measured_);
}

Selector::~Selector() = default;

bool Selector::decides(const Node& node, double flops, route::NativeKind kind) noexcept {
  return measured_ && flops >= route::Router::measure_flops(kind) && s_->router.automatic(node, flops);
}

Choice Selector::choose(Node& node, double flops, NativeFn native, blas::ArgError& err,
                        bool& checked) noexcept {
  Choice c;
  c.backend = measured_choice(*s_, node, flops, native, c.ran_on, err, checked, c.trial, c.provisional);
  t_judging = c.trial != nullptr;
  return c;
}

void Selector::native_turn(OpenTrial& trial, NativeFn native, double flops) noexcept {
  s_->note_native();
  const uint64_t t0 = decision_ns();
  const measure::Started slow = measure::slowing() ? measure::started() : measure::Started{};
  native();
  measure::native_slowed_if_asked(slow, false);
  measure::native_in_trial_ended();
  observe_trial(*s_, trial, flops / (static_cast<double>(decision_ns() - t0) * 1e-9) * 1e-9,
                trial.incumbent == nullptr, t0);
}

bool Selector::observe(OpenTrial& trial, const hal::Backend* ran, bool ok, double flops,
                       uint64_t started_ns) noexcept {
  if (ran != trial.backend && ran != trial.incumbent) return false;
  const double seconds = static_cast<double>(decision_ns() - started_ns) * 1e-9;
  observe_trial(*s_, trial, ok ? flops / seconds * 1e-9 : -1, ran == trial.incumbent, started_ns);
  return true;
}

void Selector::note_ran(const hal::Backend* ran) noexcept {
  if (!ran) s_->note_native();
  s_->note_beside(ran);
}

void Selector::start_warm_up() noexcept {
  warm_up::start(s_->registry, s_->profile);
}

void Selector::after_fork_child() noexcept {
  s_->profile.after_fork_child();
  new (&s_->trials_mu) std::mutex;
}

}  // namespace sol::autosel

// For SOL's own tune driver (tools/tune/tune_driver.cpp): 1 while the class of this thread's last
// BLAS call is being tried in use (its trial's turns want more of its calls), else 0. `sol tune`
// calls a shape again until its class is decided, so that the profile holds what a trial in use
// judged, not a race alone beside the previous shape's threads.
extern "C" SOL_EXPORT int sol_tune_pending() noexcept {
  return sol::autosel::t_judging ? 1 : 0;
}

// For SOL's own tune driver: this process measures for `sol tune`, with nothing else to run. Its
// races wait until the process's pools are quiet and its figures are tuned ones (auto/profile.hpp,
// Row::How), which a program's measurements never replace.
extern "C" SOL_EXPORT void sol_tune_begin() noexcept {
  sol::autosel::g_tuning.store(true, std::memory_order_relaxed);
}
