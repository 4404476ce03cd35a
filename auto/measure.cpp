#include "auto/measure.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "capture/blas/copies.hpp"
#include "common/clock.hpp"
#include "common/macros.hpp"
#include "common/openblas_core.hpp"

namespace sol::autosel::measure {

namespace {

// SOL_TEST_SLOW's knobs, comma-separated, each a backend and how it is slow: itself ("name"), the
// native call after it ("name:after"), itself only while measured ("name:measured": the race's
// runs, and the program's call when it makes it there as its first sample), only in use
// ("name:inuse": the program's calls, a trial's included), its first timed run of a class
// ("name:once"), its calls begun while native's workers would still spin from native's last call
// in a trial ("name:beside"), the program's next call in the same thread when another backend
// makes it ("name:switch", in use). Each makes what it slows fifty times as long: a difference no
// load on the machine makes, so that the tests that steer a decision with it get the same one on
// any machine. Knobs of other code ("opencl:startup") are left to it.
struct SlowKnob {
  char backend[32] = "";
  bool after = false, measured_only = false, in_use = false, once = false, beside = false, switch_ = false;
};
struct SlowKnobs {
  SlowKnob knobs[4];
  int count = 0;
};
constexpr uint64_t kSlower = 50;  // times as long
const SlowKnobs& slow_knobs() noexcept {
  static const SlowKnobs knobs = [] {
    SlowKnobs ks;
    const char* v = secure_getenv("SOL_TEST_SLOW");
    for (const char* p = v; p && *p && ks.count < 4;) {
      const char* end = std::strchr(p, ',');
      const size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
      SlowKnob k;
      std::snprintf(k.backend, sizeof k.backend, "%.*s",
                    static_cast<int>(std::min(len, sizeof k.backend - 1)), p);
      const char* how = "";
      if (char* colon = std::strchr(k.backend, ':')) {
        *colon = 0;
        how = colon + 1;
      }
      k.after = std::strcmp(how, "after") == 0;
      k.measured_only = std::strcmp(how, "measured") == 0;
      k.in_use = std::strcmp(how, "inuse") == 0;
      k.once = std::strcmp(how, "once") == 0;
      k.beside = std::strcmp(how, "beside") == 0;
      k.switch_ = std::strcmp(how, "switch") == 0;
      if (!*how || k.after || k.measured_only || k.in_use || k.once || k.beside || k.switch_)
        ks.knobs[ks.count++] = k;
      p = end ? end + 1 : nullptr;
    }
    return ks;
  }();
  return knobs;
}
thread_local bool t_native_owes = false;             // a "name:after" backend ran last in this thread
thread_local const char* t_switched_from = nullptr;  // a "name:switch" backend ran last in use here
thread_local bool t_measuring = false;       // this thread runs a measurement (its warm-ups, screen and race)
thread_local bool t_warming = false;         // a candidate's untimed first run in a measurement
thread_local bool t_race_call = false;       // the program's call, made by a candidate in a race
thread_local bool t_slowed_once = false;     // "name:once": this race slowed its first run already
thread_local bool t_probing = false;         // a probe's run (Probe): home's calls around another's
std::atomic<uint64_t> g_native_ended_ns{0};  // "name:beside": when native's last call in a trial ended

uint64_t thread_cpu_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

// Spins until the thread has spent kSlower times the processor time on the run that it had by now,
// at most kMaxExtraNs more: a backend's first run, its set-up, would otherwise take seconds.
constexpr uint64_t kMaxExtraNs = 100'000'000;
void slow_since(const Started& run) noexcept {
  const uint64_t now = thread_cpu_ns();
  const uint64_t until = now + std::min(kMaxExtraNs, (kSlower - 1) * (now - run.cpu_ns));
  while (thread_cpu_ns() < until) {
  }
}

}  // namespace

bool slowing() noexcept {
  return slow_knobs().count > 0;
}

Started started() noexcept {
  return {monotonic_ns(), thread_cpu_ns()};
}

void slow_down_if_asked(const char* backend, const Started& run) noexcept {
  const SlowKnobs& knobs = slow_knobs();
  if (SOL_LIKELY(knobs.count == 0)) return;
  if (!t_measuring) {  // "name:switch": this call follows one of that backend's, on another
    if (t_switched_from && std::strcmp(t_switched_from, backend) != 0) slow_since(run);
    t_switched_from = nullptr;
  }
  for (int i = 0; i < knobs.count; ++i) {  // a backend's knobs combine ("onednn:measured,onednn:beside")
    const SlowKnob& knob = knobs.knobs[i];
    if (std::strcmp(knob.backend, backend) != 0) continue;
    if (knob.after) {
      t_native_owes = true;
    } else if (t_probing) {
      continue;
    } else if (knob.switch_) {
      if (!t_measuring) t_switched_from = knob.backend;
    } else if (knob.once) {
      if (t_measuring && !t_warming && !t_slowed_once) {
        t_slowed_once = true;
        slow_since(run);
      }
    } else if (knob.beside) {
      const uint64_t ended = g_native_ended_ns.load(std::memory_order_relaxed);
      if (ended && run.wall_ns < ended + openblas_core::spin_ns()) slow_since(run);
    } else if (knob.in_use ? !t_measuring : !knob.measured_only || t_measuring || t_race_call) {
      slow_since(run);
    }
  }
}

void native_in_trial_ended() noexcept {
  if (SOL_UNLIKELY(slow_knobs().count > 0))
    g_native_ended_ns.store(monotonic_ns(), std::memory_order_relaxed);
}

void native_slowed_if_asked(const Started& run, bool in_race) noexcept {
  if (SOL_LIKELY(slow_knobs().count == 0)) return;
  if (in_race && t_native_owes) {
    t_native_owes = false;
    slow_since(run);
  }
  slow_down_if_asked("native", run);
}

namespace {

// The copies' memory outlives a measurement, per thread and up to kKeep: the next class's finds
// its pages mapped, where faulting in a 4 MB C took 2.5 ms of measuring a 3 ms call.
constexpr size_t kKeep = size_t{16} << 20;
thread_local blas::WrittenCopies t_copies;
thread_local bool t_copies_used = false;

// The node on private copies of what it writes (capture/blas/copies.hpp), and its screen.
class Scratch {
 public:
  Scratch() noexcept : mine_(!t_copies_used), copies_(mine_ ? t_copies : own_) { t_copies_used = true; }
  ~Scratch() {
    if (!mine_) return;
    if (copies_.capacity() > kKeep) copies_.release();
    t_copies_used = false;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // Larger than 1 GiB of copies, a measurement would cost more memory than users expect of a call.
  bool take(const Node& node) noexcept {
    return copies_.take(node, size_t{1} << 30, blas::WrittenCopies::Unread::zeroed);
  }
  Node& refresh() noexcept { return copies_.refresh_read(); }
  // The same call on a part of the larger of m and n, for a first look at a long GEMM: a
  // sub-block of the operands with the same leading dimensions, valid whatever the layout and
  // transposes. A quarter; an eighth (still 64 or more) after eighths(). False when the node is
  // no GEMM or too small to cut.
  bool screen(Node& out) noexcept {
    if (copies_.node().op != Op::gemm) return false;
    out = refresh();
    int64_t& d = out.blas.m >= out.blas.n ? out.blas.m : out.blas.n;
    if (d < 64) return false;
    d = ((eighths_ && d >= 512 ? d / 8 : d / 4) + 15) & ~int64_t{15};
    return true;
  }
  void eighths() noexcept { eighths_ = true; }

 private:
  const bool mine_;  // the thread's copies (a measurement inside one, if any, has its own)
  bool eighths_ = false;
  blas::WrittenCopies own_;
  blas::WrittenCopies& copies_;
};

// What the program's home library does around a routed call, for a GEMM class in a mixed
// program: a GEMM of the same routine large enough for every thread of a pool (128^3: OpenBLAS
// threads a GEMM from 64^3; about 40 us on two cores), on buffers of its own. A class's own calls
// may be too small to wake a library's other threads (OpenBLAS runs a 1024x10x256 SGEMM on one),
// and then a candidate timed between them never meets the pool that the program's larger calls
// keep spinning; a probe before a batch and after each of its calls puts it where the program's
// calls do.
class Probe {
 public:
  static constexpr int64_t kSize = 128;
  // False when the node is no GEMM or out of memory.
  bool take(const Node& like) noexcept {
    if (like.op != Op::gemm) return false;
    const size_t bytes = static_cast<size_t>(kSize * kSize) * dtype_size(like.dtype);
    for (auto& b : buffers_) {
      b.reset(new (std::nothrow) unsigned char[bytes]);
      if (!b) return false;
      std::memset(b.get(), 0, bytes);  // zeros: the same work whatever the library
    }
    node_ = like;
    blas::plain_gemm(node_.blas, 'N', 'N', kSize, kSize, kSize, buffers_[0].get(), buffers_[1].get(),
                     buffers_[2].get());
    return true;
  }
  double time(Candidate& c) noexcept {
    Node n = node_;
    const uint64_t t0 = decision_ns();
    t_probing = true;
    const hal::Reason r = blas::with_column_major(n, c.run);
    t_probing = false;
    if (r != hal::Reason::ok) return -1;
    return static_cast<double>(decision_ns() - t0) * 1e-9;
  }

 private:
  std::unique_ptr<unsigned char[]> buffers_[3];
  Node node_{Sym{}, Op{}, DType::none};
};

// Candidates that ran a routine once already in this process: their first run pays for set-up
// (thread pools, JIT-compiled kernels, OpenCL programs) that later calls do not.
std::mutex g_warm_mu;
std::set<std::string>* g_warm = new std::set<std::string>;  // never freed: used until exit

bool warm(const char* candidate, Op op, DType dtype) {
  const std::string key = std::string(candidate) + ":" + op_name(op) + ":" + dtype_name(dtype);
  std::lock_guard<std::mutex> lock(g_warm_mu);
  return !g_warm->insert(key).second;
}
bool warm(const char* candidate, const Node& node) {
  return warm(candidate, node.op, node.dtype);
}

// One run of a candidate on the copies, in seconds; < 0 when it declined the node.
double time_once(Scratch& scratch, Candidate& c, bool screen = false) noexcept {
  Node screened{Sym{}, Op{}, DType::none};
  Node& n = screen && scratch.screen(screened) ? screened : scratch.refresh();
  const uint64_t t0 = decision_ns();
  if (blas::with_column_major(n, c.run) != hal::Reason::ok) return -1;  // c.run applies SOL_TEST_SLOW
  return static_cast<double>(decision_ns() - t0) * 1e-9;
}

}  // namespace

// Candidates are timed in rounds, each round running every candidate still in the race, and each
// keeps its best time: a spell of load on a shared machine then slows all of them rather than the
// one that happened to run during it.
// - The program's own library starts with the call itself (native_seconds): the caller's call
//   ran natively and was timed, so native costs nothing more unless it is close to the best.
// - A GEMM of 1 ms or more (native's call, or the fastest quarter scaled) is screened first: each
//   CPU candidate runs a quarter of it once (an eighth of a call known to take 4 ms or more), and
//   those more than 1.5x behind the best there leave before costing a whole call; those 1.25x to
//   1.5x behind run their quarter again, and leave when still 1.25x behind.
//   Native, screened last, runs no quarter when its call was already that far behind (scaled).
// - Alone, a trial in use follows the race (result()): where the screen leaves one CPU candidate
//   beside the maker of the program's call, that candidate runs no whole call on the copies; the
//   trial against the maker decides between them, by their calls in use (tried_in_use()).
// - With native left out (its library is misdetected), the program's call is still made first
//   where possible, timed, as a candidate's first sample: one whole call fewer on the copies. In a
//   mixed program home makes it, beside its own threads as the program's other calls are; alone,
//   the leader of a long GEMM's screen. Like native's, that sample carries the program's first
//   touches: its maker gets a sample on the copies before it loses on it.
// - A candidate more than 1.5x slower than the best so far leaves the race: it cannot win, and
//   timing it again is the most expensive thing a measurement could do.
// - Calls above 2 ms get one sample, two when another candidate is within 20 % (noise is small
//   against them, and each sample costs a whole call). Calls of 0.5 to 2 ms get one when every
//   other candidate is out or 1.5x behind, else two. The fastest so far takes its second only
//   once a rival's second sample overtakes it. Shorter ones get at least three rounds,
//   each a batch of calls back to back for 100 us, until each candidate has 500 us.
// - In a mixed program (`home`: it already made calls of other classes, most of them on the home
//   candidate's threads: native's, or a backend's that took its large classes), a short call
//   routed elsewhere switches the program between the home library's threads and another's, and
//   back: on a machine with few cores the pool that just worked still spins while the next one
//   needs the cores (OpenBLAS after oneDNN's OpenMP, and the reverse, slow down several times).
//   There each of another candidate's calls is followed by a home one, as in the program, the
//   candidate is charged what that call took beyond home's own, and it counts by the mean of all
//   its batches, stalls included; native too when it is not home. For a GEMM the home call after
//   it is a probe (Probe) that keeps home's threads busy, as the program's larger calls do. A
//   choice other than home is then tried in use against it (rules::after_race()).
//   Otherwise a batch counts by its fastest call: the library's steady state, which a program
//   calling only it gets once the others' threads sleep.
// - The first time a candidate runs a routine in this process it runs once untimed (thread
//   pools, JIT-compiled kernels), unless the background warm-up ran it already. A first sample
//   of a class four times behind the best is dropped and taken again, once (a kernel compiled
//   for this shape's regime). Native's one sample, the program's call, carries costs the
//   others' runs on warm copies do not (first touches of a new output, first use): when it would
//   lose on it, native gets a sample on the copies before it is judged, unless it is a long call
//   that loses by more than those costs could explain (1.5x).
// The program's own library (in a mixed program, home) keeps the class unless another is clearly
// faster (3 %): within the noise, staying where the program's other calls are costs nothing.
namespace {

constexpr double kLong = 2e-3;  // seconds: a call worth timing alone
// Seconds: a GEMM worth a screen. Its quarter, 0.25 ms or more, is still long against a call's
// fixed costs; a candidate twice as slow on the MLP's 1.9 ms first class cost a whole 3 ms run.
constexpr double kScreen = 1e-3;
// Seconds: a call whose screen runs an eighth, 0.5 ms or more (less only where the call paid
// several times its length for first touches), at half a quarter's cost: beside another
// library's spinning threads a candidate may run at half its speed (oneDNN on the MLP's
// 512x1024x256 SGEMM, beside the OpenBLAS instance's: its quarter took 3 ms of a 3.7 ms call).
constexpr double kEighth = 4e-3;
constexpr double kBatch = 100e-6, kShortTotal = 500e-6;
constexpr double kConfirm = 1.25;  // behind the fastest quarter twice by this much: out at the screen

class Race {
 public:
  Race(Scratch& scratch, std::vector<Candidate>& candidates, bool mixed)
      : scratch_(scratch), c_(candidates), e_(candidates.size()), mixed_(mixed) {}

  // In a mixed program: the candidate whose threads the program's other calls mostly use. A CPU
  // candidate; native when it is none of them. `probe`: home's calls around the others' (or
  // nullptr: the class's own call).
  void set_home(const char* name, Probe* probe) {
    if (name) home_ = cpu_candidate(name);
    probe_ = probe;
  }

  // Native's sample: the program's call itself, which the caller made.
  void native_call(size_t i, double seconds) {
    native_ = i;
    program_call(i, seconds);
  }
  // Native left out: the program's call made here by candidate i, timed as its first sample.
  // Seconds, or < 0 when it made none (nullptr, out, or it cannot take the program's operands).
  double make_call(size_t i) {
    if (native_ < e_.size() || called_ < e_.size() || i >= e_.size() || e_[i].out || !c_[i].call_itself)
      return -1;
    const uint64_t t0 = decision_ns();
    t_race_call = true;
    const hal::Reason r = c_[i].call_itself();
    t_race_call = false;
    if (r != hal::Reason::ok) {
      e_[i].out = true;  // routed calls would not go there either
      return -1;
    }
    const double seconds = static_cast<double>(decision_ns() - t0) * 1e-9;
    program_call(i, seconds);
    return seconds;
  }
  size_t home() const { return home_; }
  // The fastest at a screen that judged a long call (SIZE_MAX: none did).
  size_t leader() const { return leader_; }
  void warm_up(size_t i, bool screen) {
    t_warming = true;
    if (time_once(scratch_, c_[i], screen) < 0) e_[i].out = true;
    t_warming = false;
  }
  // `cut`: how many times the part's m x n the whole call's is (4, or 8: Scratch::screen()).
  void screen(double cut) {
    const size_t n = e_.size();
    std::vector<double> part(n, -1);
    double fastest = -1;
    // The candidate that made the program's call (native, or home) last: that call already timed
    // it on the whole problem. Native's, when more than 1.5x behind the best quarter (scaled to
    // the whole, which favours native: a quarter pays the call's fixed costs on a quarter of the
    // work), has lost without one. Home's may have paid several times its time for the first
    // touches of a new output, and home, which took the program's larger classes, is likely to
    // win: behind, it runs its quarter. Either call 1.5x ahead of the best quarter, first touches
    // and all, has beaten every other, and its maker needs no quarter (the MLP's four large
    // classes under Prescott kernels, home the OpenBLAS instance: 11 ms of a 50 ms first step).
    for (size_t pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < n; ++i) {
        if ((i == called_) != (pass == 1) || e_[i].out || c_[i].predicted_seconds >= 0)
          continue;  // accelerators: by prediction
        if (i == native_ && fastest > 0 && e_[i].best / cut > 1.5 * fastest) {
          e_[i].out = true;
          continue;
        }
        if (i == called_ && fastest > 0 && 1.5 * e_[i].best / cut < fastest) {
          fastest = e_[i].best / cut;  // the others are judged against its call
          continue;
        }
        part[i] = time_once(scratch_, c_[i], true);
        if (part[i] < 0)
          e_[i].out = true;
        else if (fastest < 0 || part[i] < fastest)
          fastest = part[i];
        if (part[i] > 0) e_[i].part = part[i] * cut;
      }
    // Without native's call the call's length is the fastest quarter's, scaled: a short one is
    // not screened (its quarters were the warm-ups).
    if (native_ >= n && fastest * cut <= kScreen) return;
    // A quarter predicts the whole call's ratio closely (the MLP's classes: 1.82x behind at the
    // quarter, 1.72x on the whole call; 1.47 and 1.49; 1.34 and 1.33; 1.48 and 1.56), but one run
    // may have met a spell of load. More than 1.5x behind, a candidate leaves at once; 1.25x to
    // 1.5x behind, it runs its quarter again, and leaves when its better quarter is still 1.25x
    // behind: a second quarter costs a quarter of the whole call that it would cost otherwise.
    std::vector<bool> again(n, false);
    // Once each, until no faster second quarter moves another candidate into the band.
    for (bool more = true; more;) {
      more = false;
      for (size_t i = 0; i < n; ++i) {
        if (again[i] || part[i] <= kConfirm * fastest || part[i] > 1.5 * fastest) continue;
        again[i] = more = true;
        const double t = time_once(scratch_, c_[i], true);
        if (t > 0 && t < part[i]) {
          part[i] = t;
          e_[i].part = t * cut;
          fastest = std::min(fastest, t);
        }
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (part[i] > kConfirm * fastest)
        e_[i].out = true;
      else if (part[i] > 0 && part[i] == fastest)
        leader_ = i;
    screened_ = true;
  }
  void run() {
    const size_t n = e_.size();
    if (home_ >= n) home_ = native_;
    // Alone, a short call's sample by the program's call is taken again at once, before any other
    // pool has run: the program's call paid for first touches and its library's first use
    // (auto/README.md, R9), and a sample after the others would run beside their threads. Not when every other candidate already left at the screen.
    bool rivals = false;  // whether a candidate other than the call's maker is still in the race
    for (size_t i = 0; i < n; ++i) rivals |= i != called_ && !e_[i].out;
    if (!mixed_ && rivals && called_ < n && e_[called_].best > 0 && e_[called_].best <= kLong)
      sample(called_);
    // A home other than native is timed first: the others' charges are measured against it.
    if (mixed_ && home_ < n && home_ != native_ && !e_[home_].out && e_[home_].samples == 0 && !sample(home_))
      home_ = native_;
    // The probe's own time after itself, the best of three: what a home call costs in the
    // program's steady state.
    for (int i = 0; mixed_ && probe_ && home_ < n && i < 3; ++i) {
      const double t = probe_->time(c_[home_]);
      if (t < 0) {
        probe_ = nullptr;
        break;
      }
      if (i > 0 && (probe_ref_ < 0 || t < probe_ref_)) probe_ref_ = t;
    }
    double best_cpu = -1;
    for (size_t i = 0; i < n; ++i)
      if (e_[i].best > 0 && c_[i].predicted_seconds < 0) best_cpu = e_[i].best;
    const size_t tried = tried_in_use();
    for (int round = 0; round < 64; ++round) {
      bool more = false;
      for (size_t i = 0; i < n; ++i) {
        Entry& e = e_[i];
        if (e.out || i == tried) continue;
        // An accelerator predicted to lose clearly to the CPU is not worth its transfers.
        if (c_[i].predicted_seconds >= 0 && best_cpu > 0 && c_[i].predicted_seconds > 2 * best_cpu) {
          e.out = true;
          continue;
        }
        // Native's sample is the call itself, unless it must be judged beside home's threads (a
        // short call, which is paired).
        if (i == native_ && round == 0 && (home_ == native_ || e.best > kLong)) continue;
        const double f = fastest();
        // The program's call carries costs the runs on warm copies do not (first touches of a new
        // output, first use): a candidate that would lose on it gets a sample on the copies
        // first, unless it is a long call that loses by more than those costs could explain.
        const bool second_chance = i == called_ && (i != native_ || home_ == native_) && e.samples == 1 &&
                                   f > 0 && f < e.best / 1.03 &&
                                   (i != native_ || e.best <= kLong || e.best <= 1.5 * f);
        // A first sample four times behind is taken for set-up rather than speed (a kernel that
        // oneDNN compiles for this transposition and size regime: 26 ms, then 0.13 ms a call) and
        // taken again, once: a candidate that slow by right costs one more call.
        if (e.samples == 1 && e.set_up < 0 && i != native_ && f > 0 && e.best > 4 * f) {
          const double set_up = e.best;
          e = Entry{};
          e.set_up = set_up;
        }
        if (e.samples > 0 && f > 0 && e.best > 1.5 * f && !second_chance) {
          e.out = true;
          continue;
        }
        const bool long_call = e.best > kLong;
        // A call of kShortTotal or more is a batch by itself: once every other candidate is out
        // of the race or more than 1.5x behind it, its one sample says enough, where three would
        // cost two more whole calls (the MLP's 1024x256x512 SGEMM: 1.3 ms each). Else two.
        // The fastest so far waits for its second: a run only ever takes longer than the
        // candidate's speed allows, so another sample of the leader could only widen its lead.
        // It takes it once a rival's second sample overtakes it.
        const bool whole = !long_call && e.best >= kShortTotal;
        const bool leads = e.samples >= 1 && e.best <= f;
        if (!second_chance && (long_call ? e.samples >= 2 || (e.samples >= 1 && (!contested(i) || leads))
                               : whole   ? e.samples >= 2 || (e.samples >= 1 && (unrivalled(i) || leads))
                                         : e.samples >= 3 && e.spent >= kShortTotal))
          continue;
        if (!sample(i)) continue;
        if (c_[i].predicted_seconds < 0 && (best_cpu < 0 || e.best < best_cpu)) best_cpu = e.best;
        more = true;
      }
      if (!more && round > 0) break;
    }
  }
  // Fills the row's rates and choice; false when no candidate ran.
  bool result(double flops, autosel::profile::Row& row) const {
    row.rates.clear();
    row.choice.clear();
    row.set_up.clear();
    double chosen = -1;
    for (size_t i = 0; i < e_.size(); ++i) {
      const Entry& e = e_[i];
      if (e.set_up > 0) row.set_up.push_back({c_[i].name, flops / e.set_up * 1e-9});
      if (e.best <= 0) {
        if (e.part > 0) row.rates.push_back({c_[i].name, flops / e.part * 1e-9});
        continue;  // declined the node, or left at the screen
      }
      // A leader known only by the program's call, which paid for first touches of the program's
      // output: its rate is the better of that call's and its screen's (scaled).
      const bool by_call_alone = i == called_ && i != native_ && e.samples == 1 && e.part > 0;
      row.rates.push_back({c_[i].name, flops / (by_call_alone ? std::min(e.best, e.part) : e.best) * 1e-9});
      if (chosen < 0 || e.best < chosen) {
        chosen = e.best;
        row.choice = c_[i].name;
      }
    }
    const size_t keeps = mixed_ && home_ < e_.size() ? home_ : native_;
    if (keeps < e_.size() && e_[keeps].best > 0 && chosen > e_[keeps].best / 1.03)
      row.choice = c_[keeps].name;
    // Alone, every other candidate ran right after native, beside native's threads still spinning
    // from its call (OpenBLAS's spin for about 0.1 s), and native right after them: on few cores
    // that slows a library with threads of its own several times, by how much varies from run to
    // run, and a program that calls only one of them never sees it. The best other CPU candidate
    // is then tried in use against native (auto.cpp's trial).
    // That handicap slows the candidate most: a candidate that still beat native's best run on
    // the copies by 2x wins in use too, and its trial would only cost native's turns (on a
    // misdetected library, calls several times slower), so there is none. (Not by 1.5x: native's
    // threads may be in a slow spell of the machine's while the candidate's are not.) Not when
    // native's best is the program's call: that call paid for the shape's first use and first
    // touches, and its runs on the copies, beside the others' spinning threads, did worse still.
    // With native left out, the candidates ran beside each other's threads, each after the
    // other, whatever their order in the race. The best other CPU candidate is then tried in use
    // against the measured choice, however far behind it was. So too when native lost by 2x: the
    // question left is the others', which ran beside each other's threads as well.
    // (auto/README.md, R6 and R8.)
    row.trial.clear();
    if (mixed_) return chosen > 0;
    // The fastest CPU candidate other than `a` and `b` becomes the row's trial; its time.
    const auto runner_up = [&](size_t a, size_t b) {
      double trial = -1;
      for (size_t i = 0; i < e_.size(); ++i) {
        const double t = e_[i].best > 0 ? e_[i].best : e_[i].part;
        if (i == a || i == b || t <= 0 || c_[i].predicted_seconds >= 0) continue;
        if (trial < 0 || t < trial) {
          trial = t;
          row.trial = c_[i].name;
        }
      }
      return trial;
    };
    const size_t choice = cpu_candidate(row.choice.c_str());
    if (native_ >= e_.size()) {
      if (choice < e_.size()) runner_up(choice, choice);
    } else if (const double trial = runner_up(native_, native_);
               trial > 0 && e_[native_].best > 0 && 2 * trial < e_[native_].best && !e_[native_].by_call) {
      row.trial.clear();
      if (choice < e_.size()) runner_up(choice, native_);  // against the choice (the trial's incumbent)
    }
    return chosen > 0;
  }

 private:
  struct Paired {
    double own, follower;  // seconds: the candidate's calls, and the native calls after them
    int calls;
  };
  void program_call(size_t i, double seconds) {
    called_ = i;
    e_[i].best = e_[i].spent = seconds;
    e_[i].samples = 1;
    e_[i].by_call = true;
  }

  struct Entry {
    double best = -1;  // seconds per call: the best batch's mean (paired: with native's extra)
    double spent = 0;  // seconds timed
    int samples = 0;
    bool out = false;
    double part = -1;      // screened: seconds per call at the rate it ran its part (a quarter or an eighth)
    double set_up = -1;    // seconds: its first sample, dropped as set-up and taken again
    bool by_call = false;  // best is the program's call's time, no run on the copies beat it
    std::vector<Paired> paired;
  };

  // The CPU candidate of that name: SIZE_MAX when there is none, or it is an accelerator
  // (measured with its transfers, not beside threads).
  size_t cpu_candidate(const char* name) const {
    for (size_t i = 0; i < c_.size(); ++i)
      if (std::strcmp(c_[i].name, name) == 0 && c_[i].predicted_seconds < 0) return i;
    return SIZE_MAX;
  }
  double fastest() const {
    double f = -1;
    for (const Entry& e : e_)
      if (!e.out && e.best > 0 && (f < 0 || e.best < f)) f = e.best;
    return f;
  }
  // Alone, after a screen that left the program's call's maker in the race and one other CPU
  // candidate beside it: that candidate, which result() makes the row's trial against the maker
  // (native, or with native left out the screen's leader, the choice). Its whole calls on the
  // copies would decide nothing the trial does not decide again in use, where its figure is its
  // calls' and the maker's theirs (the race's ran beside each other's threads): it is known by its
  // screen's part, and costs none (the MLP's first class, native's Zen kernels against oneDNN, within
  // 1.2x at the quarter: two whole calls, 16 ms, where native ran at half its speed beside
  // oneDNN's threads). SIZE_MAX when not so: two others still in are ranked by whole calls.
  size_t tried_in_use() const {
    if (mixed_ || !screened_ || called_ >= e_.size() || e_[called_].out) return SIZE_MAX;
    size_t other = SIZE_MAX;
    for (size_t i = 0; i < e_.size(); ++i) {
      if (i == called_ || e_[i].out || c_[i].predicted_seconds >= 0) continue;
      if (other < e_.size() || e_[i].part <= 0) return SIZE_MAX;
      other = i;
    }
    return other;
  }
  // Whether every other candidate is out of the race, or sampled and more than 1.5x behind this
  // one (it leaves at its next turn), the program's call excepted: it may get a second chance.
  bool unrivalled(size_t i) const {
    for (size_t j = 0; j < e_.size(); ++j) {
      if (j == i || e_[j].out) continue;
      const bool behind = e_[j].samples > 0 && e_[j].best > 1.5 * e_[i].best;
      if (!behind || (j == called_ && e_[j].samples == 1)) return false;
    }
    return true;
  }
  // Whether another candidate still in the race is within 20 % of this one: only then is a long
  // call's second sample worth its cost.
  bool contested(size_t i) const {
    for (size_t j = 0; j < e_.size(); ++j)
      if (j != i && !e_[j].out && e_[j].best > 0 && e_[j].best < 1.2 * e_[i].best &&
          e_[i].best < 1.2 * e_[j].best)
        return true;
    return false;
  }
  // A paired candidate's figure: what all its calls took, plus what the native calls after them
  // took beyond native's own time, per call. The mean of every batch, not the best one: switching
  // thread pools stalls now and then (one pair in three, say, for a millisecond), and a program
  // that routes the class there pays every stall, where the best batch would show none.
  void rejudge(Entry& e) const {
    if (e.paired.empty()) return;
    const double ref = probe_ ? probe_ref_ : e_[home_].best;
    double total = 0;
    int calls = 0;
    for (const Paired& p : e.paired) {
      const double extra = p.follower - p.calls * ref;
      total += p.own + (extra > 0 ? extra : 0);
      calls += p.calls;
    }
    e.best = total / calls;
  }
  // One batch of candidate i; false when it declined the node.
  bool sample(size_t i) {
    Entry& e = e_[i];
    const bool paired =
        mixed_ && home_ < e_.size() && i != home_ && e_[home_].best > 0 && e_[home_].best <= kLong;
    const bool probed = paired && probe_ != nullptr;
    double own = 0, follower = 0, fastest = -1;
    int calls = 0;
    if (probed) probe_->time(c_[home_]);  // home's threads busy, as after the program's calls
    do {
      const double t = time_once(scratch_, c_[i]);
      if (t < 0) {
        e.out = true;
        return false;
      }
      own += t;
      if (fastest < 0 || t < fastest) fastest = t;
      ++calls;
      if (paired) follower += probed ? probe_->time(c_[home_]) : time_once(scratch_, c_[home_]);
    } while (own / calls <= kLong && own < kBatch);
    e.spent += own;
    ++e.samples;
    if (paired) {
      e.paired.push_back({own, follower, calls});
      rejudge(e);
      return true;
    }
    // In a mixed program a batch counts by its mean, stalls included; alone, by its fastest call
    // (a library's steady state: a program calling only it leaves the others' threads asleep).
    const double t = mixed_ ? own / calls : fastest;
    if (e.best < 0 || t < e.best) {
      e.best = t;
      e.by_call = false;
      if (i == home_)
        for (Entry& other : e_) rejudge(other);
    }
    return true;
  }

  Scratch& scratch_;
  std::vector<Candidate>& c_;
  std::vector<Entry> e_;
  const bool mixed_;
  size_t native_ = SIZE_MAX;
  size_t home_ = SIZE_MAX;
  size_t leader_ = SIZE_MAX;  // the fastest at a screen that judged a long call
  size_t called_ = SIZE_MAX;  // whose first sample is the program's call
  bool screened_ = false;     // screen() judged a long call
  Probe* probe_ = nullptr;
  double probe_ref_ = -1;
};

}  // namespace

void warmed(const char* candidate, Op op, DType dtype) noexcept {
  try {
    warm(candidate, op, dtype);
  } catch (...) {  // out of memory: its first run in a measurement is untimed, as without warm-up
  }
}

bool run(const Node& node, double flops, std::vector<Candidate>& candidates, double native_seconds,
         const char* home, autosel::profile::Row& row, const char*& made_call) noexcept {
  made_call = nullptr;
  const bool mixed = home != nullptr;
  Scratch scratch;
  if (!scratch.take(node)) return false;
  const BlasArgs& b = node.blas;
  char size[96] = "";
  for (const int64_t d : {b.m, b.n, b.k})  // the dimensions the routine has
    if (d > 0)
      std::snprintf(size + std::strlen(size), sizeof size - std::strlen(size), "%s%lld", size[0] ? "x" : "",
                    static_cast<long long>(d));
  Node part{Sym{}, Op{}, DType::none};
  // Every run from here on is the measurement's, for SOL_TEST_SLOW's knobs.
  struct Measuring {
    Measuring() noexcept { t_measuring = true, t_slowed_once = false; }
    ~Measuring() { t_measuring = false; }
  } measuring;
  try {
    row.size = size;
    Race race(scratch, candidates, mixed);
    std::unique_ptr<Probe> probe;
    if (mixed) {
      probe.reset(new (std::nothrow) Probe);
      if (probe && !probe->take(node)) probe.reset();
    }
    race.set_home(home, probe.get());
    // The program's call: native's, made by the caller; with native left out, home's in a mixed
    // program, made now beside home's threads as the program's other calls are.
    for (size_t i = 0; i < candidates.size(); ++i)
      if (std::strcmp(candidates[i].name, "native") == 0 && native_seconds > 0) {
        warm(candidates[i].name, node);  // the call itself warmed it
        race.native_call(i, native_seconds);
      }
    double call_seconds = native_seconds;
    if (native_seconds < 0 && mixed && (call_seconds = race.make_call(race.home())) >= 0) {
      warm(candidates[race.home()].name, node);
      made_call = candidates[race.home()].name;
    }
    if (call_seconds >= kEighth) scratch.eighths();
    // Without native's call, the call may be long: the screen tells (home's call may have paid
    // several times its length for first touches of the program's new output).
    const bool screening = (native_seconds > kScreen || native_seconds < 0) && scratch.screen(part);
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!warm(candidates[i].name, node)) race.warm_up(i, screening);  // on the part when screening
    if (screening) {
      race.screen(static_cast<double>(b.m * b.n) / static_cast<double>(part.blas.m * part.blas.n));
      // Alone, the screen's leader makes a long call.
      if (!made_call && race.make_call(race.leader()) >= 0) made_call = candidates[race.leader()].name;
    }
    race.run();
    return race.result(flops, row);
  } catch (...) {
    return false;
  }
}

}  // namespace sol::autosel::measure
