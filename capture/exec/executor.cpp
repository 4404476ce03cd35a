#include "capture/exec/executor.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "auto/auto.hpp"
#include "capture/blas/blas.hpp"
#include "capture/exec/state.hpp"
#include "capture/exec/verify.hpp"
#include "capture/lazy/coherence.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "config/config.hpp"
#include "hal/registry.hpp"
#include "hal/transfers.hpp"
#include "route/router.hpp"

namespace sol::capture {

std::atomic<exec::Executor*> exec::g_exec{nullptr};
using namespace exec;  // the executor's own state and steps (state.hpp)

std::atomic<double> g_native_below[kNumSymbols];

namespace {

bool tracing_ = false;
std::atomic<bool> g_start_devices{false};  // Executor::start_after_first_call is still to be done

// Per symbol: 0 unknown, else NativeKind + 1.
std::atomic<uint8_t> g_kind[kNumSymbols];
// Per symbol: the router's native_below() once known (the wrappers' copy, g_native_below, stays
// 0 while tracing or verifying, which must see every call; this one is the executor's own).
std::atomic<double> g_below[kNumSymbols];
std::atomic<bool> g_below_set[kNumSymbols];

















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
        ex->selector.after_fork_child();
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
  if (ex->selector.measured() &&
      std::find(cfg.backend.begin(), cfg.backend.end(), "auto") != cfg.backend.end())
    ex->selector.start_warm_up();
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


bool executor_active() noexcept {
  return g_exec.load(std::memory_order_relaxed) != nullptr;
}

route::NativeKind native_kind(Sym sym, const void* native) noexcept {
  auto& k = g_kind[static_cast<size_t>(sym)];
  uint8_t v = k.load(std::memory_order_acquire);
  if (!v) {
    bool below_par = false;
    route::NativeKind kind = classify(native, symbol_family(sym), below_par);
    // Under auto, an OpenBLAS below par that the openblas backend runs with this CPU's kernels:
    // the built-in order (measurement off, a call too small to measure, an accelerator still
    // starting) then takes the backend over native, and no symbol of it bypasses SOL.
    if (below_par)
      if (Executor* ex = g_exec.load(std::memory_order_acquire); ex && ex->cfg.uses_auto())
        if (hal::Backend* ob = ex->registry.get("openblas"); ob && ob->outclasses_native(sym, native))
          kind = route::NativeKind::outclassed;
    v = static_cast<uint8_t>(static_cast<uint8_t>(kind) + 1);
    k.store(v, std::memory_order_release);
    if (native)
      SOL_LOG(debug, "%s: native library %s is %s", symbol_name(sym), object_name(native),
              route::native_kind_name(kind));
  }
  return static_cast<route::NativeKind>(v - 1);
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
  return ex && e.changes == ex->selector.changes() && !ex->selector.trial_open() && !lazy::any_guarded();
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
// one was: under auto, planning each small call anew cost 8 % of its time (auto/README.md, R12). An
// entry holds while the profile is unchanged (Profile::changes(), as the
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
  route::Plan plan;
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

// The router's native_below() for the node's symbol, kept once the accelerators are known (while
// one is starting, for this call only).
double native_below(Executor& ex, const Node& node, route::NativeKind kind) noexcept {
  const auto s = static_cast<size_t>(node.sym);
  if (SOL_LIKELY(g_below_set[s].load(std::memory_order_acquire))) return g_below[s].load(std::memory_order_relaxed);
  const double below = ex.router.native_below(node.op, node.dtype, kind);
  if (ex.router.accelerators_known()) {
    g_below[s].store(below, std::memory_order_relaxed);
    // Tracing and verify look at every call: then the wrappers must not skip submit().
    if (!tracing_ && !ex.verify) g_native_below[s].store(below, std::memory_order_relaxed);
    g_below_set[s].store(true, std::memory_order_release);
  }
  return below;
}

// A BLAS node along its plan: its arguments checked as the reference does (`checked`: `err` holds
// that already), then each candidate in turn; a call of a class on trial is timed for auto.
const char* run_plan(Executor& ex, Node& node, const route::Plan& plan, autosel::OpenTrial* trial, double flops,
                     NativeFn native, blas::ArgError err, bool checked) noexcept {
  // The backend path checks arguments itself, as the reference does.
  if (!checked) err = blas::check(node);
  if (err.level != blas::ArgError::none) {
    if (node.api == Api::dnnl)
      node.ret.set(2);  // dnnl_invalid_arguments: oneDNN reports, it does not call xerbla
    else
      blas::report_invalid(node, err);
    return "invalid";
  }

  for (int i = 0; i < plan.n; ++i) {
    const route::Candidate& c = plan.at[i];
    if (!c.backend) {
      native();
      return "native";
    }
    const uint64_t t0 = trial ? decision_ns() : 0;
    const hal::Reason r = run_on(ex, *c.backend, node);
    if (trial) {
      if (ex.selector.observe(*trial, c.backend, r == hal::Reason::ok, flops, t0)) trial = nullptr;
    } else if (r == hal::Reason::ok) {
      ex.selector.note_ran(c.backend);
    }
    if (r == hal::Reason::ok) {
      deliver_result(node);
      return c.backend->name();
    }
    declined(ex, c, node, r);
  }
  log::write(log::Level::error, "error: no backend could run %s and the program has no native one; aborting",
             symbol_name(node.sym));
  std::abort();
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
  const route::NativeKind kind = native_kind(node.sym, node.native);
  const double flops = blas::flops(node);
  if (flops < native_below(*ex, node, kind)) {
    native();  // the program's own library, with its own argument checks
    return "native";
  }
  // Measured routing: only valid calls are measured (an invalid one goes where the built-in order
  // says, and is reported as it would be there).
  blas::ArgError err;
  bool checked = false;
  const char* measured = nullptr;
  autosel::OpenTrial* trial = nullptr;
  autosel::Selector& sel = ex->selector;
  const uint32_t changes = sel.changes();  // before the lookup: a change after it voids a memo
  const PlanKey key = plan_key(node);
  PlanEntry& entry = plan_entry(key);
  route::Plan plan;
  if (entry.changes == changes && entry.key == key) {
    plan = entry.plan;
  } else {
    bool keep = true;
    if (sel.decides(node, flops, kind)) {
      const autosel::Choice choice = sel.choose(node, flops, native, err, checked);
      if (choice.ran_on) return choice.ran_on;  // the class's first call, made while measuring
      measured = choice.backend;
      trial = choice.trial;
      // A class that stays native, the common case: straight there (the library checks arguments).
      if (measured && measured[0] == 'n' && std::strcmp(measured, "native") == 0 && node.native) {
        if (SOL_UNLIKELY(trial != nullptr)) {  // native's turn in a trial: timed
          sel.native_turn(*trial, native, flops);
          return "native";
        }
        sel.note_ran(nullptr);
        // Offered to the wrapper's memo: a GEMM's own arguments are its class (node.op), in a
        // process with no trial open, whose calls note_ran() must see.
        if (node.op == Op::gemm && node.api != Api::dnnl && !sel.trial_open() && !choice.provisional)
          t_memo_offer = changes;
        native();
        return "native";
      }
      keep = measured && !trial &&
             !choice.provisional;  // known: not measured at this call, nor elsewhere right now
    }
    ex->router.plan(node, flops, kind, plan, measured);
    if (keep && ex->router.without_accelerators()) entry = {key, changes, plan};
  }
  if (plan.n > 0 && plan.at[0].backend == nullptr) {
    native();  // the program's own library, with its own argument checks
    return "native";
  }

  return run_plan(*ex, node, plan, trial, flops, native, err, checked);
}
}  // namespace

}  // namespace sol::capture
