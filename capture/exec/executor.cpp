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

#include "auto/auto.hpp"
#include "auto/measure.hpp"
#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "capture/dnn/operands.hpp"
#include "capture/exec/pairing.hpp"
#include "capture/exec/verify.hpp"
#include "capture/lazy/coherence.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "common/openblas_core.hpp"
#include "config/config.hpp"
#include "hal/one_time.hpp"
#include "hal/registry.hpp"
#include "hal/transfers.hpp"
#include "ir/dnn.hpp"
#include "route/router.hpp"

namespace sol::capture {

std::atomic<double> g_native_below[kNumSymbols];

namespace {

// The program's call on a backend, its result delivered (auto's races may make it there).
hal::Reason call_on(hal::Backend& backend, Node& node) noexcept;

struct Executor {
  config::Config cfg;
  hal::Registry registry;
  route::Router router;
  autosel::Selector selector;
  bool strict;
  bool verify;
  // Under auto, the device backends prepared for their first use (Backend::StartWhen::first_use):
  // started once the process's first routed call has returned (start_devices()).
  std::vector<std::string> start_after_first_call;
  explicit Executor(const config::Config& c)
      : cfg(c),
        registry(cfg),
        router(cfg, registry),
        selector(cfg, registry, router, call_on),
        strict(c.strict),
        verify(c.verify) {}
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
route::NativeKind classify(const void* native, Family family, bool& below_par) noexcept {
  below_par = false;
  if (!native) return route::NativeKind::missing;
  Dl_info info{};
  if (!dladdr(native, &info) || !info.dli_fname) return route::NativeKind::other;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) lib = dlopen(nullptr, RTLD_LAZY);  // the main program
  if (!lib) return route::NativeKind::other;
  // dlsym on a handle also searches the object's dependencies: Debian's OpenBLAS libblas.so.3 is
  // a thin library over libopenblas.so.0.
  route::NativeKind kind = route::NativeKind::other;
  if (dlsym(lib, "openblas_get_config")) {
    kind = route::NativeKind::openblas;
    below_par = warn_if_below_par(lib);
  } else if (family != Family::none && dlsym(lib, family_c_name(family, "openblas_get_config").c_str())) {
    kind = route::NativeKind::openblas;
  }
  else if (dlsym(lib, "mkl_get_version") || dlsym(lib, "MKL_Get_Version"))
    kind = route::NativeKind::mkl;
  else if (dlsym(lib, "bli_info_get_version_str"))
    kind = route::NativeKind::blis;
  else if (dlsym(lib, "dnnl_version"))  // its dnnl_sgemm: an optimized GEMM
    kind = route::NativeKind::onednn;
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

hal::Reason call_on(hal::Backend& backend, Node& node) noexcept {
  const hal::Reason r = run_on(*g_exec.load(std::memory_order_acquire), backend, node);
  if (r == hal::Reason::ok) deliver_result(node);
  return r;
}

hal::Reason run_on_checked(Executor& ex, hal::Backend& backend, Node& node) noexcept {
  autosel::measure::OnBackend body{&backend};
  if (!ex.verify) return blas::with_column_major(node, body);

  verify::Snapshot snapshot;
  const bool snapped = snapshot.take(node);
  const hal::Reason r = blas::with_column_major(node, body);
  if (r != hal::Reason::ok || !snapped) return r;
  // Against the program's own library, or the reference backend when it has none.
  const Sym routine = blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
  void* fn = routine != blas::kNoRoutine ? blas::native_routine(node, routine) : nullptr;
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
void declined(Executor& ex, const route::Candidate& c, const Node& node, hal::Reason r) noexcept {
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
  route::Plan plan;
  if (state && !writes) {
    hal::Backend* owner = nullptr;
    if (pairing::owner(state, owner) && owner) plan.add(owner, true);
    else plan.add(nullptr, false);
  } else {
    ex.router.plan(node, desc.flops, route::NativeKind::other, plan);
  }
  for (int i = 0; i < plan.n; ++i) {
    const route::Candidate& c = plan.at[i];
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

void set_decline_listener(DeclineListener listener) noexcept {
  g_decline_listener.store(listener, std::memory_order_relaxed);
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
    const hal::Reason r = run_on(*ex, *c.backend, node);
    if (trial) {
      if (sel.observe(*trial, c.backend, r == hal::Reason::ok, flops, t0)) trial = nullptr;
    } else if (r == hal::Reason::ok) {
      sel.note_ran(c.backend);
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
