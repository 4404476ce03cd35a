#include "route/router.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log.hpp"
#include "config/config.hpp"

namespace sol::route {

const char* native_kind_name(NativeKind k) noexcept {
  switch (k) {
    case NativeKind::missing: return "missing";
    case NativeKind::other: return "unoptimized or unknown";
    case NativeKind::openblas: return "OpenBLAS";
    case NativeKind::mkl: return "MKL";
    case NativeKind::blis: return "BLIS";
    case NativeKind::onednn: return "oneDNN";
    case NativeKind::outclassed:
      return "OpenBLAS below this CPU's kernels, outclassed by the openblas backend";
  }
  return "?";
}

void Plan::add(Backend* b, bool requested) noexcept {
  if (closed()) return;
  for (int i = 0; i < n; ++i)
    if (at[i].backend == b) return;
  if (n < kMax) at[n++] = {b, requested};
}

namespace {
// The process SOL started in (the router is built at start-up); a forked child differs.
const pid_t g_started_pid = ::getpid();
}  // namespace

Backend* Router::Lazy::get(Registry& registry) noexcept {
  if (SOL_LIKELY(done_.load(std::memory_order_acquire))) return backend_.load(std::memory_order_relaxed);
  Backend* b = registry.get(name_);  // initialises it, once
  if (!b && named_ && registry.built(name_)) {
    try {
      // A forked child: a device backend's state does not survive fork, by design (info, not a
      // warning the user must act on).
      const bool child = ::getpid() != g_started_pid;
      const std::string why = registry.why(name_);
      log::once(child ? log::Level::info : log::Level::warn, "unavailable " + name_,
                "backend %s is unavailable: %s; its nodes run elsewhere", name_.c_str(), why.c_str());
    } catch (...) {  // out of memory: no line
    }
  }
  backend_.store(b, std::memory_order_relaxed);
  done_.store(true, std::memory_order_release);
  return b;
}

// See min_accelerator_flops_.
static double configured_floor(const config::Config& cfg) noexcept {
  double floor = 0;
  for (int64_t explicit_flops : {cfg.opencl_min_flops, cfg.cuda_min_flops})
    if (explicit_flops > 0 && (floor == 0 || static_cast<double>(explicit_flops) < floor))
      floor = static_cast<double>(explicit_flops);
  return floor > 0 ? floor : Router::kSmallFlops;
}

Router::Target Router::target(const std::string& name) {
  if (name == "auto") return {Target::automatic, Lazy()};
  if (name == "native") return {Target::native, Lazy()};
  return {Target::backend, Lazy(name, true)};
}

Router::Router(const config::Config& cfg, Registry& registry)
    : rule_config_(cfg.routes),
      registry_(registry),
      // An explicit floor (the lowest of the devices' configured thresholds), else the least work
      // any device could be worth (see kSmallFlops); each accelerator's own threshold comes from
      // its measured costs or its configuration (Backend::min_flops).
      min_accelerator_flops_(configured_floor(cfg)) {
  for (const auto& name : cfg.backend) preference_.push_back(target(name));
  for (const auto& r : rule_config_) rules_.push_back(Rule{&r, target(r.backend)});
}

Router::Found Router::accelerators() noexcept {
  if (SOL_LIKELY(accelerators_done_.load(std::memory_order_acquire)))
    return {accelerators_, naccelerators_.load(std::memory_order_relaxed)};
  std::lock_guard<std::mutex> lock(accelerators_mu_);
  if (!accelerators_done_.load(std::memory_order_relaxed)) {
    bool all = true;
    try {
      const auto& list = hal::builtin_backends();
      for (size_t i = 0; i < list.size() && i < kMaxBackends; ++i) {
        if (looked_ & (1u << i)) continue;
        const char* name = list[i].name;
        if (!hints_[i]) hints_[i] = static_cast<uint8_t>(registry_.accelerator_hint(name)) + 1;
        // Initialise only what may be an accelerator: a CPU backend costs nothing until used.
        if (static_cast<Backend::Hint>(hints_[i] - 1) != Backend::Hint::no) {
          if (registry_.starting(name)) {  // a later call looks again
            all = false;
            continue;
          }
          Backend* b = registry_.get(name);
          const int n = naccelerators_.load(std::memory_order_relaxed);
          if (b && b->accelerator() && n < kMaxAccelerators) {
            accelerators_[n] = b;
            naccelerators_.store(n + 1, std::memory_order_release);
          }
        }
        looked_ |= 1u << i;
      }
    } catch (...) {
      all = true;  // out of memory: what was found is what there is
    }
    if (all) accelerators_done_.store(true, std::memory_order_release);
  }
  return {accelerators_, naccelerators_.load(std::memory_order_acquire)};
}

Router::Rule* Router::rule_for(const capture::Node& node, double flops) noexcept {
  for (auto& r : rules_) {
    const config::RouteRule& c = *r.rule;
    if (c.op != "*" && c.op != capture::op_name(node.op) && c.op != capture::op_family(node.op)) continue;
    if (c.dtype != "*" && c.dtype != capture::dtype_name(node.dtype)) continue;
    if (flops < c.min_flops || flops > c.max_flops) continue;
    return &r;
  }
  return nullptr;
}

namespace {
bool is_dnn(const capture::Node& node) noexcept {
  return node.dnn != nullptr;
}
// Whether a [[route]] op names DNN nodes: the family, or one of its kinds.
bool names_dnn(const std::string& op) noexcept {
  if (op == "*" || op == "dnn") return true;
  for (size_t i = 0; i < capture::kNumOps; ++i) {
    const auto o = static_cast<capture::Op>(i);
    if (op == capture::op_name(o)) return std::strcmp(capture::op_family(o), "dnn") == 0;
  }
  return false;
}
}  // namespace

// auto: what was measured fastest for the node's class; else accelerators above their threshold,
// then the fastest CPU place, then native. For DNN nodes the fastest CPU place is the program's
// own oneDNN. What follows the measured choice is where the node goes if that choice declines it.
void Router::add_auto(const capture::Node& node, double flops, NativeKind native, const char* measured,
                      Plan& out) {
  if (measured) {
    if (std::strcmp(measured, "native") == 0) {
      if (native != NativeKind::missing) out.add(nullptr, false);
      return;
    }
    // A device chosen by an earlier process's measurement, still starting here: the calls before
    // it is up route as if nothing were known.
    if (accelerators_done_.load(std::memory_order_acquire) || !registry_.starting(measured))
      if (Backend* b = registry_.get(measured)) out.add(b, false);
  }
  if (flops >= min_accelerator_flops_)
    for (Backend* a : accelerators())
      // accelerator() again: a device whose cost measurement failed stops being one.
      if (a->accelerator() && flops >= a->min_flops()) out.add(a, false);
  if (is_dnn(node)) {
    out.add(nullptr, false);
    return;
  }
  // The program's own library when it is as fast as any, or when the call is so small that a
  // library's fixed cost decides (the reference BLAS beats OpenBLAS on 2x2 matrices).
  if (native != NativeKind::missing && (optimized(native) || flops < kSmallFlops)) {
    out.add(nullptr, false);
    return;
  }
  if (Backend* b = openblas_.get(registry_)) out.add(b, false);
  if (node.op == capture::Op::gemm && node.dtype == capture::DType::f32)
    if (Backend* b = onednn_.get(registry_)) out.add(b, false);
  if (native != NativeKind::missing) out.add(nullptr, false);
}

void Router::add_target(Target& t, bool requested, const capture::Node& node, double flops, NativeKind native,
                        const char* measured, Plan& out) {
  switch (t.kind) {
    case Target::automatic: add_auto(node, flops, native, measured, out); break;
    case Target::native:
      if (native != NativeKind::missing) out.add(nullptr, requested);
      break;
    case Target::backend:
      if (Backend* b = t.lazy.get(registry_))
        out.add(is_dnn(node) && b->dnn_is_native() ? nullptr : b, requested);
      break;
  }
}

void Router::plan(const capture::Node& node, double flops, NativeKind native, Plan& out,
                  const char* measured) {
  out.n = 0;
  out.rule = nullptr;
  if (!rules_.empty())
    if (Rule* r = rule_for(node, flops)) {
      out.rule = r->rule->where.c_str();
      add_target(r->target, true, node, flops, native, measured, out);
    }
  for (auto& t : preference_) {
    if (out.closed()) return;
    add_target(t, t.kind != Target::automatic, node, flops, native, measured, out);
  }
  if (out.closed()) return;
  // Whatever was asked for, the program's own library and then the reference backend close every
  // plan: a node is never left without somewhere to run.
  if (native != NativeKind::missing) out.add(nullptr, false);
  if (Backend* ref = reference_.get(registry_)) out.add(ref, false);
}

bool Router::automatic(const capture::Node& node, double flops) noexcept {
  if (!rules_.empty())
    if (Rule* r = rule_for(node, flops)) return r->target.kind == Target::automatic;
  return !preference_.empty() && preference_.front().kind == Target::automatic;
}

bool Router::dnn_always_native() {
  for (const auto& r : rule_config_) {
    if (r.backend == "native" || r.backend == "onednn") continue;
    if (names_dnn(r.op)) return false;
  }
  for (const auto& t : preference_) {
    switch (t.kind) {
      case Target::native: return true;
      case Target::backend:
        if (t.lazy.name() != "onednn") return false;
        break;
      case Target::automatic: return accelerators().empty() && accelerators_known();
    }
  }
  return true;
}

double Router::native_below(capture::Op op, capture::DType dtype, NativeKind native) {
  if (native == NativeKind::missing || preference_.empty()) return 0;
  for (const auto& r : rule_config_)
    if ((r.op == "*" || r.op == capture::op_name(op) || r.op == capture::op_family(op)) &&
        (r.dtype == "*" || r.dtype == capture::dtype_name(dtype)) && r.backend != "native")
      return 0;
  switch (preference_.front().kind) {
    case Target::native: return 1e300;
    case Target::backend: return 0;
    case Target::automatic:
      // See add_auto(): no accelerator takes less than min_accelerator_flops_, and below that an
      // optimized native library, or a small call, stays native. Measured routing sees every call
      // it could measure (measure_flops(): an optimized library keeps the calls under
      // kMeasureFlops, one below par those under kMeasureBelowParFlops). While an accelerator is
      // starting, as if there were none: the caller keeps the answer only once
      // accelerators_known().
      if (measured_)
        return optimized(native) && accelerators().empty()
                   ? kMeasureFlops
                   : std::min(measure_flops(native), min_accelerator_flops_);
      return optimized(native) ? min_accelerator_flops_ : std::min(kSmallFlops, min_accelerator_flops_);
  }
  return 0;
}

bool Router::always_native(capture::Op op, capture::DType dtype, NativeKind native) {
  if (native == NativeKind::missing) return false;
  for (const auto& r : rule_config_)
    if ((r.op == "*" || r.op == capture::op_name(op) || r.op == capture::op_family(op)) &&
        (r.dtype == "*" || r.dtype == capture::dtype_name(dtype)) && r.backend != "native")
      return false;
  if (preference_.empty()) return true;
  switch (preference_.front().kind) {
    case Target::native: return true;
    case Target::backend: return false;
    case Target::automatic:
      // Native first at every size when it is an optimized library and no accelerator could take
      // the large calls, unless auto measures: then the native library has to prove it.
      return !measured_ && optimized(native) && accelerators().empty() && accelerators_known();
  }
  return false;
}

}  // namespace sol::route
