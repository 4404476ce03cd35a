#include "capture/exec/executor.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "capture/exec/measure.hpp"
#include "capture/exec/pairing.hpp"
#include "capture/exec/rules.hpp"
#include "capture/exec/trial.hpp"
#include "capture/exec/verify.hpp"
#include "capture/exec/warm_up.hpp"
#include "capture/dnn/operands.hpp"
#include "capture/ir/dnn.hpp"
#include "capture/lazy/coherence.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "common/openblas_core.hpp"
#include "config/config.hpp"
#include "hal/one_time.hpp"
#include "hal/profile.hpp"
#include "hal/registry.hpp"
#include "hal/router.hpp"
#include "hal/transfers.hpp"

namespace sol::capture {

std::atomic<double> g_native_below[kNumSymbols];

namespace {

// A class on trial (capture/exec/trial.hpp): the decision, and what the executor does with it.
struct OpenTrial {
  int native;
  uint64_t key;
  hal::profile::Row row;  // the measurement (its choice, the incumbent, so far)
  hal::Backend* backend;  // the candidate; nullptr: native (a class judged again, judge_again())
  hal::Backend* incumbent;  // nullptr: native
  // The class was measured in a mixed program, beside home's threads, and left them: the incumbent
  // is home (rules::after_race()).
  bool from_home;
  Trial trial;
  const char* incumbent_name() const noexcept { return incumbent ? incumbent->name() : "native"; }
  const char* candidate_name() const noexcept { return backend ? backend->name() : "native"; }
};

// How long a backend's workers (native's, as OpenBLAS's: other libraries spin less) spin after its
// last call.
uint64_t spins_ns(const hal::Backend* b) noexcept {
  return b ? b->spin_after_call_ns() : openblas_core::spin_ns();
}

struct Executor {
  config::Config cfg;
  hal::Registry registry;
  hal::Router router;
  hal::profile::Profile profile;
  bool strict;
  bool verify;
  bool measured;  // auto routes by measurement: it measures, or a profile exists to route by
  // Under auto, the device backends prepared for their first use (Backend::StartWhen::first_use):
  // started once the process's first routed call has returned (start_devices()).
  std::vector<std::string> start_after_first_call;
  // The program has made a routed BLAS call that its own library ran: a class measured from then
  // on is measured as part of a mixed program (measure::run's `home`).
  std::atomic<bool> native_ran{false};
  void note_native() noexcept {
    if (!native_ran.load(std::memory_order_relaxed)) native_ran.store(true, std::memory_order_relaxed);
  }
  // Per native library (profile index): how it fared in its races (rules::NativeRecord).
  rules::NativeRecord natives[16];
  bool native_outclassed(int native) const noexcept { return native >= 0 && native < 16 && natives[native].outclassed(); }
  std::mutex trials_mu;  // trials; taken only by calls of a class on trial
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
        !incumbent_beside.load(std::memory_order_relaxed) && ran == trial_incumbent.load(std::memory_order_relaxed))
      incumbent_beside.store(true, std::memory_order_relaxed);
  }
  explicit Executor(const config::Config& c)
      : cfg(c), registry(cfg), router(cfg, registry), profile(cfg), strict(c.strict), verify(c.verify) {
    measured = profile.measuring() || (!profile.path().empty() && ::access(profile.path().c_str(), R_OK) == 0);
    router.set_measured(measured);
  }
};
std::atomic<Executor*> g_exec{nullptr};
bool tracing_ = false;
std::atomic<bool> g_start_devices{false};  // Executor::start_after_first_call is still to be done

// Per symbol: 0 unknown, else NativeKind + 1.
std::atomic<uint8_t> g_kind[kNumSymbols];
// Per symbol: the router's native_below() once known (the wrappers' copy, g_native_below, stays
// 0 while tracing or verifying, which must see every call; this one is the executor's own).
std::atomic<double> g_below[kNumSymbols];
std::atomic<bool> g_below_set[kNumSymbols];
// Per symbol: 0 unknown, else the profile's index of its native library + 2 (1: none usable).
std::atomic<int> g_native_index[kNumSymbols];

bool is_blas(Op op) noexcept {
  return op_family(op)[0] == 'b';
}

// One line per process when the program's own library runs below this CPU's ability: an
// OpenBLAS whose kernels are older than the CPU (the measured figures say the same later).
// Whether it does.
bool warn_if_below_par(void* lib) noexcept {
  try {
    openblas_core::Check c;
    if (!openblas_core::check(lib, c) || !c.below_par) return false;
    log::once(log::Level::warn, "native-below-par",
              "the program's OpenBLAS (%s) runs its %s kernels, below this CPU's ability: %s; "
              "auto measures and routes around it meanwhile",
              c.library.c_str(), c.core.c_str(), c.fix.c_str());
    return true;
  } catch (...) {
    return false;
  }
}

// `below_par`: an OpenBLAS that runs kernels older than this CPU's. `family`: how the library
// spells OpenBLAS's openblas_get_config (scipy_openblas_get_config64_...).
hal::NativeKind classify(const void* native, Family family, bool& below_par) noexcept {
  below_par = false;
  if (!native) return hal::NativeKind::missing;
  Dl_info info{};
  if (!dladdr(native, &info) || !info.dli_fname) return hal::NativeKind::other;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) lib = dlopen(nullptr, RTLD_LAZY);  // the main program
  if (!lib) return hal::NativeKind::other;
  // dlsym on a handle also searches the object's dependencies: Debian's OpenBLAS libblas.so.3 is
  // a thin library over libopenblas.so.0.
  hal::NativeKind kind = hal::NativeKind::other;
  if (dlsym(lib, "openblas_get_config")) {
    kind = hal::NativeKind::openblas;
    below_par = warn_if_below_par(lib);
  } else if (family != Family::none && dlsym(lib, family_c_name(family, "openblas_get_config").c_str())) {
    kind = hal::NativeKind::openblas;
  }
  else if (dlsym(lib, "mkl_get_version") || dlsym(lib, "MKL_Get_Version"))
    kind = hal::NativeKind::mkl;
  else if (dlsym(lib, "bli_info_get_version_str"))
    kind = hal::NativeKind::blis;
  else if (dlsym(lib, "dnnl_version"))  // its dnnl_sgemm: an optimized GEMM
    kind = hal::NativeKind::onednn;
  dlclose(lib);
  return kind;
}

// The size in bytes of a BLAS function's result, for the shims and CBLAS _sub routines that
// return it through a pointer.
size_t result_size(const Node& node) noexcept {
  const bool dbl = node.dtype == DType::f64 || node.dtype == DType::c128;
  switch (node.op) {
    case Op::iamax: return node.ilp64 ? sizeof(int64_t) : sizeof(int);  // an INTEGER
    case Op::sdsdot: return sizeof(float);
    case Op::dsdot: return sizeof(double);
    case Op::dot:
    case Op::dotu:
    case Op::dotc:
      return dtype_size(node.dtype);
    default: return dbl ? sizeof(double) : sizeof(float);  // asum, nrm2, cabs1: real
  }
}

// A backend left a function's result in Fortran terms in node.ret: adapt it to what the
// intercepted API returns.
void deliver_result(Node& node) noexcept {
  if (node.api == Api::dnnl) {
    node.ret.set(0);  // dnnl_success
    return;
  }
  if (node.result) {
    std::memcpy(node.result, node.ret.bytes, result_size(node));
    return;
  }
  if (node.api == Api::cblas && node.op == Op::iamax) {
    const int64_t fortran = node.ret.get<int64_t>();  // 1-based, 0 for an empty vector
    node.ret.set<size_t>(fortran > 0 ? static_cast<size_t>(fortran - 1) : 0);
  }
}

// The program's own Fortran routine `routine` (a plain name) in the name family of the node's
// call, which SOL calls at the call's integer width (verify mode re-runs redirected nodes on it,
// auto measures it).
void* native_routine(const Node& node, Sym routine) noexcept {
  static std::atomic<void*> cache[kNumSymbols];
  static std::atomic<uint8_t> looked[kNumSymbols];
  const Sym own = blas::in_family(routine, symbol_family(node.sym));
  if (own == blas::kNoRoutine) return nullptr;
  const auto i = static_cast<size_t>(own);
  if (!looked[i].load(std::memory_order_acquire)) {
    cache[i].store(find_native(symbol_name(own)), std::memory_order_relaxed);
    looked[i].store(1, std::memory_order_release);
  }
  return cache[i].load(std::memory_order_relaxed);
}

// A column-major node on `backend`, if it takes it: what the executor and auto's measurements run.
struct OnBackend {
  hal::Backend* backend;
  hal::Reason operator()(Node& cm) noexcept {
    if (const hal::Reason r = blas::fits_backend(cm, *backend); r != hal::Reason::ok) return r;
    const hal::Reason why = backend->supports(cm);
    if (why != hal::Reason::ok) return why;
    if (SOL_LIKELY(!measure::slowing())) return backend->run(cm);  // no clock read: 5 % of an 8^3 SGEMM
    const measure::Started t0 = measure::started();
    const hal::Reason r = backend->run(cm);
    measure::slow_down_if_asked(backend->name(), t0);
    return r;
  }
};

// A node a device backend computed (the backend counts the flushes that ran it: hal/transfers.hpp).
void count_device_node(hal::Backend& backend, hal::Reason r) noexcept {
  if (r != hal::Reason::ok || !backend.device_backend()) return;
  hal::transfers::node_ran();
}

// A node about to run on the host (natively, on a CPU backend) while the lazy executor guards
// memory: what its operands need from the device comes first (cause other_backend), rather than
// through faults on whichever threads of the library touch it first. Operands it writes have their
// device copies dropped. One relaxed load when nothing is guarded.
void before_host_node(const Node& node) noexcept {
  if (SOL_LIKELY(!lazy::any_guarded())) return;
  blas::Operand ops[16];
  int n = 0;
  if (node.dnn) {
    if (node.dnn->desc) n = dnn::operands(*node.dnn, ops, 16);
  } else if (is_blas(node.op) && !node.device) {
    n = blas::operands(node, ops);
  }
  for (int i = 0; i < n; ++i)
    lazy::host_access(ops[i].ptr, ops[i].bytes, ops[i].written, hal::transfers::Cause::other_backend);
}

hal::Reason run_on_checked(Executor& ex, hal::Backend& backend, Node& node) noexcept;

hal::Reason run_on(Executor& ex, hal::Backend& backend, Node& node) noexcept {
  if (!backend.device_backend()) before_host_node(node);
  const hal::Reason r = run_on_checked(ex, backend, node);
  count_device_node(backend, r);
  return r;
}

hal::Reason run_on_checked(Executor& ex, hal::Backend& backend, Node& node) noexcept {
  OnBackend body{&backend};
  if (!ex.verify) return blas::with_column_major(node, body);

  verify::Snapshot snapshot;
  const bool snapped = snapshot.take(node);
  const hal::Reason r = blas::with_column_major(node, body);
  if (r != hal::Reason::ok || !snapped) return r;
  // Against the program's own library, or the reference backend when it has none.
  const Sym routine = blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
  void* fn = routine != blas::kNoRoutine ? native_routine(node, routine) : nullptr;
  if (fn) {
    auto native = [&](Node& cm) noexcept {
      blas::call_fortran(routine, fn, cm, cm.ilp64);
      return hal::Reason::ok;
    };
    snapshot.check(node, backend.name(), "native", native);
  } else if (hal::Backend* ref = ex.registry.get("reference"); ref && ref != &backend) {
    auto reference = [&](Node& cm) noexcept { return ref->run(cm); };
    snapshot.check(node, backend.name(), "reference", reference);
  }
  return r;
}

[[noreturn]] void strict_failure(const Node& node, const char* what, const char* why) {
  log::write(log::Level::error, "error: SOL_STRICT=1 and %s %s %s; exiting", symbol_name(node.sym), what,
             why);
  std::fflush(nullptr);
  std::_Exit(70);  // EX_SOFTWARE
}

std::atomic<DeclineListener> g_decline_listener{nullptr};

// A failure or decline of candidate `c` for `node`: the line a user reads, and SOL_STRICT's end.
void declined(Executor& ex, const hal::Candidate& c, const Node& node, hal::Reason r) noexcept {
  if (DeclineListener listen = g_decline_listener.load(std::memory_order_relaxed)) listen(c.backend->name(), node, r);
  const char* what = node.dnn ? op_name(node.op) : symbol_name(node.sym);
  const bool failure =
      r == hal::Reason::device_error || r == hal::Reason::out_of_memory || r == hal::Reason::internal_error;
  if (failure) {
    std::string cause = std::string(c.backend->name()) + ":" + hal::reason_name(r);
    log::once(log::Level::warn, cause, "%s failed on %s (%s); running it elsewhere", c.backend->name(), what,
              hal::reason_text(r));
  } else if (log::enabled(log::Level::debug)) {
    std::string cause = std::string("decline:") + c.backend->name() + ":" + what + ":" + hal::reason_name(r);
    log::once(log::Level::debug, cause, "%s declines %s: %s", c.backend->name(), what, hal::reason_text(r));
  }
  if (ex.strict && (failure || c.requested))
    strict_failure(node, failure ? "failed on" : "was declined by", c.backend->name());
}

hal::Reason run_dnn_on(Executor& ex, hal::Backend& backend, Node& node) noexcept {
  const hal::Reason why = backend.supports(node);
  if (why != hal::Reason::ok) return why;
  if (!backend.device_backend()) before_host_node(node);
  if (!ex.verify) {
    const hal::Reason r = backend.run(node);
    count_device_node(backend, r);
    return r;
  }
  verify::DnnSnapshot snapshot;
  const bool snapped = snapshot.take(node);
  const hal::Reason r = backend.run(node);
  count_device_node(backend, r);
  if (r == hal::Reason::ok && snapped) snapshot.check(node, backend.name());
  return r;
}

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
      if (auto threads = reinterpret_cast<int (*)()>(dlsym(lib, "openblas_get_num_threads")); threads && threads() > 1)
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
    timespec t{static_cast<time_t>((ns - now) / 1'000'000'000), static_cast<long>((ns - now) % 1'000'000'000)};
    nanosleep(&t, nullptr);
  }
}

// Of a race that took `race_ns`, the part that was measuring: when the race made the program's own
// call on `made_call`, that call's time (one run at its measured rate) is the call's, not measuring.
uint64_t measuring_ns(uint64_t race_ns, double flops, const hal::profile::Row& row,
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
bool agree(const hal::profile::Row& a, const hal::profile::Row& b) noexcept {
  if (a.choice != b.choice) return false;
  for (const auto& x : a.rates)
    for (const auto& y : b.rates)
      if (x.candidate == y.candidate && (x.gflops > 1.1 * y.gflops || y.gflops > 1.1 * x.gflops)) return false;
  return true;
}

// `sol tune`'s races are run again, on the copies (the program's call was made), until two in a row
// agree, three at most: `row` becomes the last, each candidate at its best rate of them.
void race_until_agreed(const Node& node, double flops, const std::vector<measure::Candidate>& candidates,
                       const std::string& home, hal::profile::Row& row) noexcept {
  try {
    std::vector<measure::Candidate> copies_only = candidates;
    for (auto& c : copies_only) c.call_itself = {};  // the program's call is made once, already
    for (int race = 1; race < 3; ++race) {
      hal::profile::Row again;
      again.key = row.key;
      const char* made = nullptr;
      if (!measure::run(node, flops, copies_only, -1, home.empty() ? nullptr : home.c_str(), again, made)) return;
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
int native_index(Executor& ex, const Node& node) noexcept {
  auto& slot = g_native_index[static_cast<size_t>(node.sym)];
  int v = slot.load(std::memory_order_acquire);
  if (SOL_UNLIKELY(!v)) {
    try {
      const std::string id = library_identity(node.native);
      v = ex.profile.native_index(id.empty() ? "none" : id) + 2;
    } catch (...) {
      v = 1;
    }
    slot.store(v, std::memory_order_release);
  }
  return v - 2;
}

// After a measurement: the one below-par line (shared with warn_if_below_par) when the native
// library is clearly slower than the best candidate on a call large enough to matter.
void warn_if_measured_slow(const Node& node, double flops, const hal::profile::Row& row,
                           const std::string& home) noexcept {
  // Only calls of a millisecond or more: on a loaded machine a shorter one's rate can be off by
  // as much, and a user told their library is slow deserves a figure that holds. Not from a class
  // measured beside another library's threads (a mixed program's, home not native): native's
  // figure there is charged for the switch, not its speed (OpenBLAS with Zen kernels at 28.7
  // GFLOP/s beside oneDNN's, on a 1024x256x1024 SGEMM it runs at 60).
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
            object_name(node.native), symbol_name(node.sym), row.size.c_str(), native, best, row.choice.c_str());
}

// The program's call on a backend, its result delivered: what measure::run asks of home, or of a
// screen's leader, when native's call was not made.
struct CallOn {
  Executor* ex;
  hal::Backend* backend;
  Node* node;
  hal::Reason operator()() noexcept {
    const hal::Reason r = run_on(*ex, *backend, *node);
    if (r == hal::Reason::ok) deliver_result(*node);
    return r;
  }
};

// Tries `candidate` in use against `incumbent` (either nullptr: native) for class `key`, from the
// call at hand on: the incumbent's turn comes first. `row`: the class's measurement, its choice
// standing until the trial ends. Both are judged by their calls in use alone: the incumbent's
// figure starts at nothing, as the candidate's does.
OpenTrial* open_trial(Executor& ex, int native, uint64_t key, hal::profile::Row row, hal::Backend* candidate,
                      hal::Backend* incumbent, double flops, bool from_home = false) {
  auto t = std::make_unique<OpenTrial>(OpenTrial{native, key, std::move(row), candidate, incumbent, from_home,
                                                 Trial(decision_ns(), flops, spins_ns(candidate), spins_ns(incumbent))});
  std::lock_guard<std::mutex> lock(ex.trials_mu);
  ex.trials.push_back(std::move(t));
  ex.incumbent_beside.store(false, std::memory_order_relaxed);
  ex.trial_incumbent.store(incumbent, std::memory_order_relaxed);
  ex.trial_open.store(true, std::memory_order_relaxed);
  ex.profile.begin_trial(native, key);
  return ex.trials.back().get();
}

// What a candidate's name stands for in this process, for `node` (rules::Kind).
rules::KindOf kind_of(Executor& ex, const Node& node) {
  return [&ex, native = node.native != nullptr](const std::string& name) {
    if (name == "native") return native ? rules::Kind::native : rules::Kind::none;
    const hal::Backend* b = ex.registry.get(name);
    return !b ? rules::Kind::none : b->accelerator() ? rules::Kind::accelerator : rules::Kind::cpu;
  };
}

// A class that earlier processes judged close (Profile::kJudgeAgain): its choice in the profile,
// the incumbent, and the fastest other candidate tried in use again in this process. The
// incumbent's turn comes first: the process's first call of the class goes where the profile
// says, as in any process after the first. Where there is no trial to make (or this call is
// invalid), the class routes by the earlier row as it stands.
const char* judge_again(Executor& ex, const Node& node, int native, uint64_t key, OpenTrial*& trial) noexcept {
  hal::profile::Profile& prof = ex.profile;
  try {
    hal::profile::Row row;
    if (!prof.earlier(native, key, row)) {
      prof.release(native, key);
      return nullptr;
    }
    // An invalid call is no call to time (native's would only report it).
    if (blas::check(node).level != blas::ArgError::none)
      return prof.candidate_name(prof.keep_earlier(native, key));
    const std::string other = rules::rival(row, kind_of(ex, node));
    if (other.empty()) return prof.candidate_name(prof.keep_earlier(native, key));
    hal::Backend* incumbent = row.choice == "native" ? nullptr : ex.registry.get(row.choice);
    hal::Backend* candidate = other == "native" ? nullptr : ex.registry.get(other);
    const bool unconfirmed = hal::profile::unconfirmed(row);
    char by[48] = "kept there by";
    if (!unconfirmed) std::snprintf(by, sizeof by, "judged within %.1fx by", hal::profile::kJudgeAgainRates);
    SOL_LOG(debug, "trying %s in use for %s, between two turns of %s's: %s %d earlier process%s%s",
            other.c_str(), hal::profile::class_text(key).c_str(), row.choice.c_str(), by, row.judged,
            row.judged == 1 ? "" : "es", unconfirmed ? " whose trial did not end" : "");
    prof.judging(native, key);
    trial = open_trial(ex, native, key, std::move(row), candidate, incumbent, blas::flops(node));
    return trial->incumbent_name();
  } catch (...) {
    prof.release(native, key);
    return nullptr;
  }
}

// What auto measured fastest for this node's shape class ("native" or a backend's name), measuring
// it now if nobody has: nullptr when nothing is known (the router's built-in order decides).
// Measuring runs the call itself natively first, timed, as native's sample; with native left out,
// home or a long call's screen leader may make it instead. `ran_on` then names who did ("native" or the
// backend), and the node is done.
// Only valid calls are measured: `err` (with `checked` set) holds the check when one was needed.
// A class on trial: `trial` is set, and the candidate's name returned.
const char* measured_choice(Executor& ex, Node& node, double flops, NativeFn native_call, const char*& ran_on,
                            blas::ArgError& err, bool& checked, OpenTrial*& trial, bool& provisional) noexcept {
  ran_on = nullptr;
  trial = nullptr;
  provisional = false;
  hal::profile::Profile& prof = ex.profile;
  const int native = native_index(ex, node);
  // A class whose candidates measured close, called in other halves of its sizes: its sub-class.
  uint64_t key = hal::profile::class_of(node);
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
    SOL_LOG(debug, "measuring %s again, calm: its figures were provisional", hal::profile::class_text(key).c_str());
    provisional = false;
  } else if (v == hal::profile::Profile::kTrial) {
    std::lock_guard<std::mutex> lock(ex.trials_mu);
    for (const auto& t : ex.trials)
      if (!t->trial.done() && t->native == native && t->key == key) {
        trial = t.get();
        return t->trial.incumbent_turn() ? t->incumbent_name() : t->candidate_name();
      }
    return nullptr;  // decided meanwhile
  }
  if (v == hal::profile::Profile::kJudgeAgain) return judge_again(ex, node, native, key, trial);
  const bool reclaimed = v >= 0;  // claimed again above: the slot says kMeasuring
  if (!reclaimed) {
    if (v != hal::profile::Profile::kUnknown) return nullptr;
    // An accelerator still starting (it may be the fastest for a class this large): the class is
    // measured once it is up, with every candidate; meanwhile the built-in order routes its calls.
    if (flops >= ex.router.accelerator_floor() && !ex.router.accelerators_known()) {
      log::once(log::Level::debug, "auto: accelerator starting",
                "auto: an accelerator is still starting; classes are measured once it is up");
      return nullptr;
    }
    if (!prof.measuring()) {
      prof.unrouted(native, key);
      return nullptr;
    }
  }
  err = blas::check(node);
  checked = true;
  if (err.level != blas::ArgError::none) return nullptr;
  if (!reclaimed && !prof.claim(native, key)) return nullptr;  // another thread measures it right now
  try {
    // The program's own routine (the Fortran one: a CBLAS call's column-major equivalent is what
    // every candidate computes; for dnnl_sgemm, oneDNN's own, on the same equivalent), then each
    // backend.
    const Sym routine = blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
    const bool row_major_own = node.api == Api::dnnl;
    void* own = !node.native || routine == blas::kNoRoutine ? nullptr
                : row_major_own                             ? const_cast<void*>(node.native)
                                                            : native_routine(node, routine);
    auto run_native = [&](Node& cm) noexcept {
      const measure::Started t0 = measure::slowing() ? measure::started() : measure::Started{};
      if (row_major_own) blas::call_dnnl_sgemm(own, cm);
      else blas::call_fortran(routine, own, cm, cm.ilp64);
      measure::native_slowed_if_asked(t0, true);
      return hal::Reason::ok;
    };
    std::vector<hal::Backend*> backends;
    ex.router.auto_candidates(flops, backends);
    std::vector<OnBackend> runs;
    std::vector<CallOn> calls;
    runs.reserve(backends.size());  // the candidates below refer to these: no reallocation
    calls.reserve(backends.size());
    std::vector<measure::Candidate> candidates;
    if (own) candidates.push_back({"native", blas::FunctionRef<hal::Reason(Node&)>(run_native), -1});
    for (hal::Backend* b : backends) {
      if (own && b->runs_native_code(routine, own)) continue;  // native's own code: measured as native
      runs.push_back({b});
      calls.push_back({&ex, b, &node});
      candidates.push_back({b->name(), blas::FunctionRef<hal::Reason(Node&)>(runs.back()),
                            b->accelerator() ? b->estimate_seconds(node, flops) : -1,
                            blas::FunctionRef<hal::Reason()>(calls.back())});
    }
    if (native < 0 || candidates.size() < (own ? 2u : 1u)) {
      prof.release(native, key);
      return nullptr;
    }
    // The program's earlier classes (their first calls ran natively): where most of them went.
    std::string home;
    if (ex.native_ran.load(std::memory_order_relaxed)) {
      home = prof.home(native);
      if (home.empty()) home = "native";
    }
    // A misdetected library (Prescott kernels on an AVX-512 machine), or one that lost each class
    // so far: its call, several times slower than the others', is neither made nor measured; the
    // chosen candidate computes it.
    std::string left_out;
    if (own) {
      const char* outclassing = nullptr;
      for (hal::Backend* b : backends)
        if (!outclassing && b->outclasses_native(routine, own)) outclassing = b->name();
      left_out = rules::native_left_out(flops, outclassing, home, ex.native_outclassed(native));
    }
    const bool outclassed = !left_out.empty();
    if (outclassed) candidates.erase(candidates.begin());  // native is first
    const bool native_in = own && !outclassed;  // native is measured, on the call itself
    // A backend still setting up would be timed on its set-up, and slow the others (native's call
    // too: beside a busy core, or on its own set-up when it is that backend's library, as the
    // program's dnnl_sgemm is oneDNN's).
    ex.measurements.fetch_add(1, std::memory_order_relaxed);
    const uint64_t measuring_from = decision_ns();  // waits for set-ups included: the call's own is not
    warm_up::settle();
    if (g_tuning.load(std::memory_order_relaxed)) wait_until(pools_quiet_ns(node));
    const uint64_t race_from = decision_ns();  // native's call is its first sample
    double native_seconds = -1;
    if (native_in) {
      const uint64_t t0 = decision_ns();
      const measure::Started slow = measure::slowing() ? measure::started() : measure::Started{};
      native_call();
      measure::native_slowed_if_asked(slow, false);
      native_seconds = static_cast<double>(decision_ns() - t0) * 1e-9;
      ran_on = "native";
      ex.note_native();
    }
    const auto native_ns = static_cast<uint64_t>(native_seconds > 0 ? native_seconds * 1e9 : 0);
    hal::profile::Row row;
    row.key = key;
    const char* made_call = nullptr;
    const bool measured =
        measure::run(node, flops, candidates, native_seconds, home.empty() ? nullptr : home.c_str(), row, made_call);
    ex.measurements.fetch_add(1, std::memory_order_relaxed);
    if (made_call) ran_on = made_call;
    if (!measured) {
      hal::one_time::note_measuring(decision_ns() - measuring_from - native_ns);
      prof.release(native, key);
      return nullptr;
    }
    const bool tuning = g_tuning.load(std::memory_order_relaxed);
    if (tuning) race_until_agreed(node, flops, candidates, home, row);
    hal::one_time::note_measuring(
        measuring_ns(decision_ns() - measuring_from - native_ns, flops, row, made_call));
    if (outclassed) ex.note_native();  // the program's calls of other classes come after this one
    if (native >= 0 && native < 16 && !outclassed) ex.natives[native].note(row);
    const std::string disturbed = tuning || assumed_calm()
                                      ? ""
                                      : rules::disturbed(race_from, pools_quiet_ns(node), row, prof.near_calm(native, key));
    row.how = !disturbed.empty() ? hal::profile::How::provisional
              : tuning           ? hal::profile::How::tuned
                                 : hal::profile::How::calm;
    if (!disturbed.empty())
      SOL_LOG(debug, "provisional figures for %s: %s; measured again once calm", hal::profile::class_text(key).c_str(),
              disturbed.c_str());
    if (log::enabled(log::Level::debug)) {
      const auto text = [](const std::vector<hal::profile::Rate>& rates) {
        std::string t;
        for (const auto& r : rates) t += " " + r.candidate + "=" + std::to_string(r.gflops).substr(0, 7);
        return t;
      };
      const std::string rates = text(row.rates), set_up = text(row.set_up);
      SOL_LOG(
          debug, "measured %s (%s, %s):%s GFLOP/s; auto takes %s (measuring took %.1f ms%s%s%s%s%s%s%s%s%s)",
          hal::profile::class_text(key).c_str(), symbol_name(node.sym), row.size.c_str(), rates.c_str(),
          row.choice.c_str(), static_cast<double>(decision_ns() - measuring_from) * 1e-6,
          home.empty() ? "" : ", beside ", home.c_str(), home.empty() ? "" : "'s threads",
          outclassed ? "; native left out: " : "", left_out.c_str(), made_call ? "; the call itself on " : "",
          made_call ? made_call : "", set_up.empty() ? "" : "; first run taken again:", set_up.c_str());
    }
    warn_if_measured_slow(node, flops, row, home);
    const rules::NextTrial next = rules::after_race(row, native_in, home, kind_of(ex, node));
    if (!next.candidate.empty()) {
      hal::Backend* incumbent = next.incumbent == "native" ? nullptr : ex.registry.get(next.incumbent);
      SOL_LOG(debug, "trying %s in use for %s, between two turns of %s's: %s", next.candidate.c_str(),
              hal::profile::class_text(key).c_str(), next.incumbent.c_str(),
              next.from_home ? "measured away from the threads most of the program's calls run on"
                             : "measured beside each other's threads");
      // The choice is recorded first: it stands if the process ends before the trial. One that
      // would leave home stays home's meanwhile: the classes measured during its trial are
      // measured beside the threads the program's calls run on.
      prof.record(native, row);
      // This call, when nobody made it while measuring, and the next go to the incumbent: its
      // first turn, this call included. (Not a call of another class on the incumbent's threads,
      // which would count the candidate's calls as settled from the first, beside those threads
      // still spinning from this one.)
      trial = open_trial(ex, native, key, std::move(row), ex.registry.get(next.candidate), incumbent, flops,
                         next.from_home);
      return ran_on || !incumbent ? nullptr : incumbent->name();
    }
    prof.record(native, row);
  } catch (...) {
    prof.release(native, key);
    return nullptr;
  }
  const int chosen = prof.lookup(native, key);
  return chosen >= 0 ? prof.candidate_name(chosen) : nullptr;
}

// One call of a class on trial, begun at `started_ns`, at `gflops` (< 0: the candidate declined
// it), made by the incumbent in its turn or by the candidate. When it ends the trial, the class goes
// where the trial says (capture/exec/trial.hpp), and the profile keeps both figures in use.
void observe_trial(Executor& ex, OpenTrial& t, double gflops, bool by_incumbent, uint64_t started_ns) noexcept {
  std::lock_guard<std::mutex> lock(ex.trials_mu);
  const Trial::Call call{gflops, by_incumbent, started_ns, decision_ns(), ex.measurements.load(std::memory_order_relaxed),
                         ex.incumbent_beside.load(std::memory_order_relaxed)};
  if (!t.trial.observe(call)) return;
  bool open = false;
  for (const auto& other : ex.trials) open = open || !other->trial.done();
  ex.trial_open.store(open, std::memory_order_relaxed);
  const Trial::Verdict v = t.trial.verdict();
  char steps[96] = "";
  if (v.home_ms >= 0)
    std::snprintf(steps, sizeof steps, "; a call every %.4g ms, %.4g on %s", v.away_ms, v.home_ms, t.incumbent_name());
  try {
    for (auto& r : t.row.rates) {
      if (r.candidate == t.candidate_name()) r.gflops = v.candidate_gflops;
      if (r.candidate == t.incumbent_name()) r.gflops = v.incumbent_gflops;
    }
    t.row.choice = v.wins ? t.candidate_name() : t.incumbent_name();
    t.row.trial.clear();
    t.row.how = g_tuning.load(std::memory_order_relaxed) ? hal::profile::How::tuned : hal::profile::How::trial;
    // The class was measured alone, before the program's other classes settled where its calls
    // mostly run; a trial that ends away from there is measured again beside those threads.
    const std::string home = ex.profile.home(t.native, t.key);
    const bool again =
        !t.from_home && !home.empty() && home != t.row.choice && ex.profile.measure_again(t.native, t.key);
    SOL_LOG(debug, "tried %s in use for %s: %.1f GFLOP/s over %d calls, %s %.1f over %d in %d turns%s; %s%s%s",
            t.candidate_name(), hal::profile::class_text(t.key).c_str(), v.best_gflops, v.calls, t.incumbent_name(),
            v.incumbent_gflops, v.incumbent_calls, v.turns, steps,
            again ? "measuring it again beside " : "auto takes ", again ? home.c_str() : t.row.choice.c_str(),
            again ? "'s threads" : "");
    if (again) return;
    ex.profile.record(t.native, t.row);
  } catch (...) {
    ex.profile.release(t.native, t.key);
  }
}

// A DNN node: the router's plan, except that a node reading state (a workspace, mean and
// variance) runs where the node that wrote it ran (capture/exec/pairing.hpp).
const char* execute_dnn(Executor& ex, Node& node, NativeFn native) noexcept {
  const dnn::Call& call = *node.dnn;
  const dnn::Desc& desc = *call.desc;
  const char* why = desc.unsupported ? desc.unsupported : call.unbound;
  if (why) {
    if (log::enabled(log::Level::debug))
      log::once(log::Level::debug, std::string("dnn-native:") + op_name(node.op) + ":" + desc.shape,
                "%s %s runs natively: %s", op_name(node.op), desc.shape.c_str(), why);
    native();
    return "native";
  }
  const void* state = pairing::state_key(call);
  const bool writes = state && pairing::writes_state(call);
  hal::Plan plan;
  if (state && !writes) {
    hal::Backend* owner = nullptr;
    if (pairing::owner(state, owner) && owner) plan.add(owner, true);
    else plan.add(nullptr, false);
  } else {
    ex.router.plan(node, desc.flops, hal::NativeKind::other, plan);
  }
  for (int i = 0; i < plan.n; ++i) {
    const hal::Candidate& c = plan.at[i];
    if (!c.backend) break;
    const hal::Reason r = run_dnn_on(ex, *c.backend, node);
    if (r == hal::Reason::ok) {
      if (writes) pairing::record(state, c.backend);
      node.ret.set(0);  // dnnl_success
      return c.backend->name();
    }
    declined(ex, c, node, r);
  }
  if (state && !writes && plan.n > 0 && plan.at[0].backend) {
    // The backend that wrote the state cannot run its reader: oneDNN would misread a workspace
    // in another implementation's format.
    log::once(log::Level::warn, std::string("dnn-state:") + op_name(node.op),
              "%s could not run a %s pass whose state it wrote; running it natively, results may be wrong",
              plan.at[0].backend->name(), dnn::prop_name(desc.prop));
  }
  if (writes) pairing::record(state, nullptr);
  native();
  return "native";
}

// Whether this configuration may send nodes to a device backend that runs them lazily: one it
// names (SOL_BACKEND, a [[route]]), or under auto one whose cached inventory says it has an
// accelerator. Only then does the lazy executor start (it serves large allocations and watches
// frees, fork and exit): a process that can only compute on the CPU, or on a backend that runs
// eagerly, pays nothing for SOL_LAZY=1.
bool may_use_device(const config::Config& cfg, hal::Registry& registry) noexcept {
  auto device = [&](const std::string& name) {
    if (name == "native") return false;
    if (name != "auto") return registry.device_backend(name) && registry.runs_lazily(name);
    for (const auto& b : hal::builtin_backends())
      if (registry.device_backend(b.name) && registry.runs_lazily(b.name) &&
          registry.accelerator_hint(b.name) == hal::Backend::Hint::yes)
        return true;
    return false;
  };
  for (const auto& name : cfg.backend)
    if (device(name)) return true;
  for (const auto& r : cfg.routes)
    if (device(r.backend)) return true;
  return false;
}

}  // namespace

bool start_executor(const config::Config& cfg) noexcept {
  // Tracing, the call log and SOL_LOG=info's count per backend look at every call.
  tracing_ = cfg.trace || !cfg.trace_log.empty() || log::enabled(log::Level::info);
  // Pure passthrough needs no executor.
  const bool only_native = cfg.backend.size() == 1 && cfg.backend[0] == "native" && cfg.routes.empty();
  if (only_native && !cfg.verify) return false;
  try {
    g_exec.store(new Executor(cfg), std::memory_order_release);
    // A child forked while a thread wrote the profile must not inherit its lock held.
    pthread_atfork(nullptr, nullptr, [] {
      if (Executor* ex = g_exec.load(std::memory_order_relaxed)) {
        ex->profile.after_fork_child();
        new (&ex->trials_mu) std::mutex;
      }
      hal::transfers::reset();  // the child's line reports its own work
    });
  } catch (...) {
    log::write(log::Level::error, "error: out of memory starting the executor; every call goes to native");
    return false;
  }
  verify::start(cfg);
  // The backends the configuration names may start their devices now, off the first call's path;
  // under auto, so may every device backend that knows an accelerator is here (a GPU the driver
  // lists, an inventory that found one), from the first call that asks the router about
  // accelerators, so that no call waits for a device to come up: the router routes around one
  // that is starting (Router::accelerators).
  Executor* ex = g_exec.load(std::memory_order_relaxed);
  for (const auto& name : cfg.backend)
    if (name != "auto" && name != "native") ex->registry.prepare(name);
  for (const auto& r : cfg.routes)
    if (r.backend != "auto" && r.backend != "native") ex->registry.prepare(r.backend);
  if (cfg.uses_auto())
    for (const auto& b : hal::builtin_backends())
      if (ex->registry.device_backend(b.name) && ex->registry.accelerator_hint(b.name) == hal::Backend::Hint::yes) {
        ex->registry.prepare(b.name, hal::Backend::StartWhen::first_use);
        try {
          ex->start_after_first_call.emplace_back(b.name);
          g_start_devices.store(true, std::memory_order_release);
        } catch (...) {  // out of memory: its first use initialises it, as without a start-up
        }
      }
  if (cfg.lazy && may_use_device(cfg, ex->registry)) lazy::start(cfg);
  // A profile that sends classes to a backend compiling kernels: those compile now, off the path.
  if (ex->measured && std::find(cfg.backend.begin(), cfg.backend.end(), "auto") != cfg.backend.end())
    warm_up::start(ex->registry, ex->profile);
  return true;
}

bool executor_backend_ready(const std::string& name, std::string& why) noexcept {
  Executor* ex = g_exec.load(std::memory_order_acquire);
  if (!ex) return false;
  if (ex->registry.get(name)) return true;
  try {
    why = ex->registry.why(name);
  } catch (...) {
  }
  return false;
}

void set_decline_listener(DeclineListener listener) noexcept {
  g_decline_listener.store(listener, std::memory_order_relaxed);
}

bool executor_active() noexcept {
  return g_exec.load(std::memory_order_relaxed) != nullptr;
}

hal::NativeKind native_kind(Sym sym, const void* native) noexcept {
  auto& k = g_kind[static_cast<size_t>(sym)];
  uint8_t v = k.load(std::memory_order_acquire);
  if (!v) {
    bool below_par = false;
    hal::NativeKind kind = classify(native, symbol_family(sym), below_par);
    // Under auto, an OpenBLAS below par that the openblas backend runs with this CPU's kernels:
    // the built-in order (measurement off, a call too small to measure, an accelerator still
    // starting) then takes the backend over native, and no symbol of it bypasses SOL.
    if (below_par)
      if (Executor* ex = g_exec.load(std::memory_order_acquire); ex && ex->cfg.uses_auto())
        if (hal::Backend* ob = ex->registry.get("openblas"); ob && ob->outclasses_native(sym, native))
          kind = hal::NativeKind::outclassed;
    v = static_cast<uint8_t>(static_cast<uint8_t>(kind) + 1);
    k.store(v, std::memory_order_release);
    if (native)
      SOL_LOG(debug, "%s: native library %s is %s", symbol_name(sym), object_name(native),
              hal::native_kind_name(kind));
  }
  return static_cast<hal::NativeKind>(v - 1);
}

bool executor_always_native(Sym sym, const void* native) noexcept {
  Executor* ex = g_exec.load(std::memory_order_acquire);
  if (!ex) return true;
  // CUDA libraries (cuBLAS, cuBLASLt, cuDNN): device memory, which no backend takes and verify
  // cannot read; only tracing and the call log look at them (capture::always_native asks those
  // first).
  const Api api = symbol_api(sym);
  if (api == Api::cublas || api == Api::cublaslt || api == Api::cudnn) return true;
  if (ex->verify) return false;  // every call is looked at
  const Op op = symbol_op(sym);
  // oneDNN's entry points: every one of them goes through the frontend as soon as a DNN node
  // may run anywhere but natively (primitives must be described when they are created).
  if (!is_blas(op)) return ex->router.dnn_always_native();
  return ex->router.always_native(op, symbol_dtype(sym), native_kind(sym, native));
}

namespace {
// The memo (capture.hpp): a few entries per thread, by a hash of the call's arguments. `changes`:
// Profile::changes() when the call was routed (0: empty).
struct MemoEntry {
  MemoKey key;
  uint32_t changes;
  Sym sym;
};
constexpr size_t kMemoEntries = 8;
SOL_TLS MemoEntry t_memo[kMemoEntries];
SOL_TLS uint32_t t_memo_offer = 0;  // set by execute(): this thread's call stays native, as of then
SOL_TLS bool t_judging = false;     // set by execute(): this thread's call was one of a class on trial

MemoEntry& memo_entry(Sym s, const MemoKey& k) noexcept {
  const uint64_t mixed = k.a ^ k.b * 0x9e3779b97f4a7c15ull ^ k.c ^ static_cast<uint64_t>(s);
  const uint64_t h = mixed * 0xff51afd7ed558ccdull;
  return t_memo[h >> 61];
}
}  // namespace

bool stays_native(Sym s, const MemoKey& key) noexcept {
  const MemoEntry& e = memo_entry(s, key);
  if (e.sym != s || e.key.a != key.a || e.key.b != key.b || e.key.c != key.c || e.changes == 0) return false;
  Executor* ex = g_exec.load(std::memory_order_acquire);
  return ex && e.changes == ex->profile.changes() && !ex->trial_open.load(std::memory_order_relaxed) &&
         !lazy::any_guarded();
}

void memo_keep(Sym s, const MemoKey& key) noexcept {
  const uint32_t changes = t_memo_offer;
  if (!changes) return;
  t_memo_offer = 0;
  memo_entry(s, key) = {key, changes, s};
}

namespace {
const char* execute_call(Node& node, NativeFn program_native) noexcept;

// The devices auto prepared begin their start-up once, after the process's first routed call: the
// start-up's libraries load under the loader's lock (pocl's LLVM, CUDA's cuBLAS), which that call's
// own dladdr and dlsym (its native library's identity, its class) would otherwise wait for.
void start_devices() noexcept {
  if (!g_start_devices.exchange(false, std::memory_order_acq_rel)) return;
  if (Executor* ex = g_exec.load(std::memory_order_acquire))
    for (const auto& name : ex->start_after_first_call) ex->registry.start_now(name);
}
}  // namespace

const char* execute(Node& node, NativeFn program_native) noexcept {
  const char* ran = execute_call(node, program_native);
  if (SOL_UNLIKELY(g_start_devices.load(std::memory_order_relaxed))) start_devices();
  return ran;
}

namespace {
// A thread's plans for its calls that go to a backend, by their exact arguments: a call made as a
// recent one on this thread was (routine, native library, dimensions and flags) is planned as that
// one was. Under auto its class, the profile lookup, a backend looked up by name and the plan ran
// a 32^3 SGEMM on oneDNN at 0.91-0.92 of SOL_BACKEND=onednn (2.97 against 2.71 us a call), 1.01
// with these plans kept. An entry holds while the profile is unchanged (Profile::changes(), as the
// wrappers' memo of native calls); it is kept only for a plan that needed no measurement, trial or
// accelerator (a device whose costs fail stops being one). The key is stricter than the class
// (every size and stride as passed), so it holds whatever the class is made of.
struct PlanKey {
  int64_t m, n, k, kl, ku, incx, incy;
  char layout, transa, transb, uplo, side, diag;
  bool real_alpha;
  Sym sym;
  const void* native;
  bool operator==(const PlanKey&) const noexcept = default;
};
struct PlanEntry {
  PlanKey key;
  uint32_t changes;  // 0: empty
  hal::Plan plan;
};
constexpr size_t kPlanEntries = 4;
SOL_TLS PlanEntry t_plans[kPlanEntries];

PlanKey plan_key(const Node& node) noexcept {
  const BlasArgs& b = node.blas;
  return {b.m,      b.n,      b.k,    b.kl,   b.ku,   b.incx,       b.incy,   b.layout,
          b.transa, b.transb, b.uplo, b.side, b.diag, b.real_alpha, node.sym, node.native};
}
PlanEntry& plan_entry(const PlanKey& k) noexcept {
  const uint64_t h = (static_cast<uint64_t>(k.m) * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.n) ^
                      static_cast<uint64_t>(k.k) << 20 ^ static_cast<uint64_t>(k.sym) << 40) *
                     0xff51afd7ed558ccdull;
  return t_plans[h >> 62];
}

const char* execute_call(Node& node, NativeFn program_native) noexcept {
  t_memo_offer = 0;
  // Every way to the program's own library passes what the lazy executor holds back first.
  auto host_native = [&]() noexcept {
    before_host_node(node);
    program_native();
  };
  NativeFn native(host_native);
  Executor* ex = g_exec.load(std::memory_order_acquire);
  if (ex && node.dnn) return execute_dnn(*ex, node, native);
  // A device BLAS call (cuBLAS): its operands are device memory, so it runs natively.
  if (!ex || !is_blas(node.op) || node.device) {
    if (!node.native) {
      log::write(log::Level::error,
                 "error: %s was called but no loaded library defines it and no SOL backend "
                 "implements it; aborting",
                 symbol_name(node.sym));
      std::abort();
    }
    native();
    return "native";
  }
  const hal::NativeKind kind = native_kind(node.sym, node.native);
  const double flops = blas::flops(node);
  const auto s = static_cast<size_t>(node.sym);
  double below;
  if (SOL_LIKELY(g_below_set[s].load(std::memory_order_acquire))) {
    below = g_below[s].load(std::memory_order_relaxed);
  } else {
    below = ex->router.native_below(node.op, node.dtype, kind);
    // Kept once the accelerators are known; while one is starting, for this call only.
    if (ex->router.accelerators_known()) {
      g_below[s].store(below, std::memory_order_relaxed);
      // Tracing and verify look at every call: then the wrappers must not skip submit().
      if (!tracing_ && !ex->verify) g_native_below[s].store(below, std::memory_order_relaxed);
      g_below_set[s].store(true, std::memory_order_release);
    }
  }
  if (flops < below) {
    native();  // the program's own library, with its own argument checks
    return "native";
  }
  // Measured routing: only valid calls are measured (an invalid one goes where the built-in order
  // says, and is reported as it would be there).
  blas::ArgError err;
  bool checked = false;
  const char* measured = nullptr;
  OpenTrial* trial = nullptr;
  const uint32_t changes = ex->profile.changes();  // before the lookup: a change after it voids a memo
  const PlanKey key = plan_key(node);
  PlanEntry& entry = plan_entry(key);
  hal::Plan plan;
  if (entry.changes == changes && entry.key == key) {
    plan = entry.plan;
  } else {
    bool keep = true;
    if (ex->measured && flops >= hal::Router::measure_flops(kind) && ex->router.automatic(node, flops)) {
      const char* ran_on = nullptr;
      bool provisional = false;  // routed by figures to measure again once calm: every call asks
      measured = measured_choice(*ex, node, flops, native, ran_on, err, checked, trial, provisional);
      t_judging = trial != nullptr;
      if (ran_on) return ran_on;  // the class's first call, made while measuring
      // A class that stays native, the common case: straight there (the library checks arguments).
      if (measured && measured[0] == 'n' && std::strcmp(measured, "native") == 0 && node.native) {
        ex->note_native();
        if (SOL_UNLIKELY(trial != nullptr)) {  // native's turn in a trial: timed
          const uint64_t t0 = decision_ns();
          const measure::Started slow = measure::slowing() ? measure::started() : measure::Started{};
          native();
          measure::native_slowed_if_asked(slow, false);
          measure::native_in_trial_ended();
          observe_trial(*ex, *trial, flops / (static_cast<double>(decision_ns() - t0) * 1e-9) * 1e-9,
                        trial->incumbent == nullptr, t0);
          return "native";
        }
        ex->note_beside(nullptr);
        // Offered to the wrapper's memo: a GEMM's own arguments are its class (node.op), in a
        // process with no trial open, whose calls note_beside() must see.
        if (node.op == Op::gemm && node.api != Api::dnnl && !ex->trial_open.load(std::memory_order_relaxed) &&
            !provisional)
          t_memo_offer = changes;
        native();
        return "native";
      }
      keep = measured && !trial && !provisional;  // known: not measured at this call, nor elsewhere right now
    }
    ex->router.plan(node, flops, kind, plan, measured);
    if (keep && ex->router.without_accelerators()) entry = {key, changes, plan};
  }
  if (plan.n > 0 && plan.at[0].backend == nullptr) {
    native();  // the program's own library, with its own argument checks
    return "native";
  }

  // The backend path checks arguments itself, as the reference does.
  if (!checked) err = blas::check(node);
  if (err.level != blas::ArgError::none) {
    if (node.api == Api::dnnl)
      node.ret.set(2);  // dnnl_invalid_arguments: oneDNN reports, it does not call xerbla
    else
      report_invalid(node, err);
    return "invalid";
  }

  for (int i = 0; i < plan.n; ++i) {
    const hal::Candidate& c = plan.at[i];
    if (!c.backend) {
      native();
      return "native";
    }
    const uint64_t t0 = trial ? decision_ns() : 0;
    const hal::Reason r = run_on(*ex, *c.backend, node);
    if (trial && (c.backend == trial->backend || c.backend == trial->incumbent)) {
      const double seconds = static_cast<double>(decision_ns() - t0) * 1e-9;
      observe_trial(*ex, *trial, r == hal::Reason::ok ? flops / seconds * 1e-9 : -1,
                    c.backend == trial->incumbent, t0);
      trial = nullptr;
    } else if (!trial && r == hal::Reason::ok) {
      ex->note_beside(c.backend);
    }
    if (r == hal::Reason::ok) {
      deliver_result(node);
      return c.backend->name();
    }
    declined(*ex, c, node, r);
  }
  log::write(log::Level::error, "error: no backend could run %s and the program has no native one; aborting",
             symbol_name(node.sym));
  std::abort();
}
}  // namespace

}  // namespace sol::capture

// For SOL's own tune driver (tools/tune/tune_driver.cpp): 1 while the class of this thread's last
// BLAS call is being tried in use (its trial's turns want more of its calls), else 0. `sol tune`
// calls a shape again until its class is decided, so that the profile holds what a trial in use
// judged, not a race alone beside the previous shape's threads.
extern "C" SOL_EXPORT int sol_tune_pending() noexcept {
  return sol::capture::t_judging ? 1 : 0;
}

// For SOL's own tune driver: this process measures for `sol tune`, with nothing else to run. Its
// races wait until the process's pools are quiet and its figures are tuned ones (hal/profile.hpp,
// Row::How), which a program's measurements never replace.
extern "C" SOL_EXPORT void sol_tune_begin() noexcept {
  sol::capture::g_tuning.store(true, std::memory_order_relaxed);
}
