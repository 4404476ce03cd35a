#include <string>

#include "capture/exec/pairing.hpp"
#include "capture/exec/state.hpp"
#include "capture/exec/verify.hpp"
#include "common/log.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::exec {

namespace {

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

}  // namespace

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

}  // namespace sol::capture::exec
