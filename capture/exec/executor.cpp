#include "capture/exec/executor.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "capture/exec/pairing.hpp"
#include "capture/exec/verify.hpp"
#include "capture/ir/dnn.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "config/config.hpp"
#include "hal/registry.hpp"
#include "hal/router.hpp"

namespace sol::capture {

std::atomic<double> g_native_below[kNumSymbols];

namespace {

// Created by start_executor() and never destroyed: calls may arrive while the process exits.
struct Executor {
  config::Config cfg;
  hal::Registry registry;
  hal::Router router;
  bool strict;
  bool verify;
  explicit Executor(const config::Config& c)
      : cfg(c), registry(cfg), router(cfg, registry), strict(c.strict), verify(c.verify) {}
};
std::atomic<Executor*> g_exec{nullptr};
bool tracing_ = false;

// Per symbol: 0 unknown, else NativeKind + 1.
std::atomic<uint8_t> g_kind[kNumSymbols];
// Per symbol: the router's native_below() once known (the wrappers' copy, g_native_below, stays
// 0 while tracing or verifying, which must see every call; this one is the executor's own).
std::atomic<double> g_below[kNumSymbols];
std::atomic<bool> g_below_set[kNumSymbols];

bool is_blas(Op op) noexcept {
  return op_family(op)[0] == 'b';
}
bool is_dnn(Op op) noexcept {
  return std::strcmp(op_family(op), "dnn") == 0;
}

hal::NativeKind classify(const void* native) noexcept {
  if (!native) return hal::NativeKind::missing;
  Dl_info info{};
  if (!dladdr(native, &info) || !info.dli_fname) return hal::NativeKind::other;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) lib = dlopen(nullptr, RTLD_LAZY);  // the main program
  if (!lib) return hal::NativeKind::other;
  // dlsym on a handle also searches the object's dependencies: Debian's OpenBLAS libblas.so.3 is
  // a thin library over libopenblas.so.0.
  hal::NativeKind kind = hal::NativeKind::other;
  if (dlsym(lib, "openblas_get_config"))
    kind = hal::NativeKind::openblas;
  else if (dlsym(lib, "mkl_get_version") || dlsym(lib, "MKL_Get_Version"))
    kind = hal::NativeKind::mkl;
  else if (dlsym(lib, "bli_info_get_version_str"))
    kind = hal::NativeKind::blis;
  dlclose(lib);
  return kind;
}

// The size in bytes of a BLAS function's result, for the shims and CBLAS _sub routines that
// return it through a pointer.
size_t result_size(const Node& node) noexcept {
  const bool dbl = node.dtype == DType::f64 || node.dtype == DType::c128;
  switch (node.op) {
    case Op::iamax: return sizeof(int);
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
    const int fortran = node.ret.get<int>();  // 1-based, 0 for an empty vector
    node.ret.set<size_t>(fortran > 0 ? static_cast<size_t>(fortran - 1) : 0);
  }
}

// The program's own Fortran routine for a node (verify mode re-runs redirected nodes on it).
void* native_routine(Sym routine) noexcept {
  static std::atomic<void*> cache[kNumSymbols];
  static std::atomic<uint8_t> looked[kNumSymbols];
  const auto i = static_cast<size_t>(routine);
  if (!looked[i].load(std::memory_order_acquire)) {
    cache[i].store(find_native(symbol_name(routine)), std::memory_order_relaxed);
    looked[i].store(1, std::memory_order_release);
  }
  return cache[i].load(std::memory_order_relaxed);
}

hal::Reason run_on(Executor& ex, hal::Backend& backend, Node& node) noexcept {
  auto body = [&](Node& cm) noexcept {
    const hal::Reason why = backend.supports(cm);
    return why == hal::Reason::ok ? backend.run(cm) : why;
  };
  if (!ex.verify) return blas::with_column_major(node, body);

  verify::Snapshot snapshot;
  const bool snapped = snapshot.take(node);
  const hal::Reason r = blas::with_column_major(node, body);
  if (r != hal::Reason::ok || !snapped) return r;
  // Against the program's own library, or the reference backend when it has none.
  const Sym routine = blas::fortran_routine(node.op, node.dtype, node.blas.real_alpha);
  void* fn = routine != blas::kNoRoutine ? native_routine(routine) : nullptr;
  if (fn) {
    auto native = [&](Node& cm) noexcept {
      blas::call_fortran(routine, fn, cm);
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

// A failure or decline of candidate `c` for `node`: the line a user reads, and SOL_STRICT's end.
void declined(Executor& ex, const hal::Candidate& c, const Node& node, hal::Reason r) noexcept {
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
  if (!ex.verify) return backend.run(node);
  verify::DnnSnapshot snapshot;
  const bool snapped = snapshot.take(node);
  const hal::Reason r = backend.run(node);
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

}  // namespace

bool start_executor(const config::Config& cfg) noexcept {
  tracing_ = cfg.trace;
  // Pure passthrough needs no executor.
  const bool only_native = cfg.backend.size() == 1 && cfg.backend[0] == "native" && cfg.routes.empty();
  if (only_native && !cfg.verify) return false;
  try {
    g_exec.store(new Executor(cfg), std::memory_order_release);
  } catch (...) {
    log::write(log::Level::error, "error: out of memory starting the executor; every call goes to native");
    return false;
  }
  verify::start(cfg);
  return true;
}

bool executor_active() noexcept {
  return g_exec.load(std::memory_order_relaxed) != nullptr;
}

hal::NativeKind native_kind(Sym sym, const void* native) noexcept {
  auto& k = g_kind[static_cast<size_t>(sym)];
  uint8_t v = k.load(std::memory_order_acquire);
  if (!v) {
    const hal::NativeKind kind = classify(native);
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
  if (ex->verify) return false;  // every call is looked at
  const Op op = symbol_op(sym);
  // oneDNN's entry points: every one of them goes through the frontend as soon as a DNN node
  // may run anywhere but natively (primitives must be described when they are created).
  if (!is_blas(op)) return ex->router.dnn_always_native();
  return ex->router.always_native(op, symbol_dtype(sym), native_kind(sym, native));
}

const char* execute(Node& node, NativeFn native) noexcept {
  Executor* ex = g_exec.load(std::memory_order_acquire);
  if (ex && node.dnn) return execute_dnn(*ex, node, native);
  if (!ex || !is_blas(node.op)) {
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
  if (SOL_UNLIKELY(!g_below_set[s].load(std::memory_order_acquire))) {
    const double below = ex->router.native_below(node.op, node.dtype, kind);
    g_below[s].store(below, std::memory_order_relaxed);
    // Tracing and verify look at every call: then the wrappers must not skip submit().
    if (!tracing_ && !ex->verify) g_native_below[s].store(below, std::memory_order_relaxed);
    g_below_set[s].store(true, std::memory_order_release);
  }
  if (flops < g_below[s].load(std::memory_order_relaxed)) {
    native();  // the program's own library, with its own argument checks
    return "native";
  }
  hal::Plan plan;
  ex->router.plan(node, flops, kind, plan);
  if (plan.n > 0 && plan.at[0].backend == nullptr) {
    native();  // the program's own library, with its own argument checks
    return "native";
  }

  // The backend path checks arguments itself, as the reference does.
  const blas::ArgError err = blas::check(node);
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
    const hal::Reason r = run_on(*ex, *c.backend, node);
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

}  // namespace sol::capture
