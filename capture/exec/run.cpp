#include <cstdio>
#include <cstdlib>
#include <string>

#include "auto/measure.hpp"
#include "capture/blas/blas.hpp"
#include "capture/blas/call.hpp"
#include "capture/dnn/operands.hpp"
#include "capture/exec/state.hpp"
#include "capture/exec/verify.hpp"
#include "capture/lazy/coherence.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "hal/transfers.hpp"

namespace sol::capture::exec {

namespace {

hal::Reason run_checked(Executor& ex, hal::Backend& backend, Node& node) noexcept {
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

}  // namespace

void count_device_node(hal::Backend& backend, hal::Reason r) noexcept {
  if (r != hal::Reason::ok || !backend.device_backend()) return;
  hal::transfers::node_ran();
}

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

hal::Reason run_on(Executor& ex, hal::Backend& backend, Node& node) noexcept {
  if (!backend.device_backend()) before_host_node(node);
  const hal::Reason r = run_checked(ex, backend, node);
  count_device_node(backend, r);
  return r;
}

hal::Reason call_on(hal::Backend& backend, Node& node) noexcept {
  const hal::Reason r = run_on(*g_exec.load(std::memory_order_acquire), backend, node);
  if (r == hal::Reason::ok) deliver_result(node);
  return r;
}

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

}  // namespace sol::capture::exec

namespace sol::capture {

void set_decline_listener(DeclineListener listener) noexcept {
  exec::g_decline_listener.store(listener, std::memory_order_relaxed);
}

}  // namespace sol::capture
