// The cuDNN frontend's part of every captured cuDNN call: backend descriptors recorded as the
// program builds them, operation graphs described when finalized, executions of their plans
// traced as DNN nodes and timed on the device.
//
// How a plan leads back to its graph: the program sets an engine's operation graph, an engine
// configuration's engine and a plan's engine configuration (cudnnBackendSetAttribute), or cuDNN
// fills descriptors the program hands it (cudnnBackendGetAttribute: the engine configurations of
// heuristics results, an engine configuration's engine). Either way the descriptor learns the
// graph of the one it came from, and once the graph is finalized its description itself: the
// cuDNN frontend (PyTorch's) destroys the operation graph, its operations and tensors as soon as
// heuristics have handed back engine configurations, before it builds a plan from one of them, so
// a plan must not need its graph's descriptor alive.
#include <cstring>
#include <utility>

#include "capture/trace/trace.hpp"
#include "common/log.hpp"
#include "cudnn_slots.hpp"
#include "interpose/cuda/device_time.hpp"
#include "interpose/cudnn/detail.hpp"

namespace sol::interpose::cudnn {
namespace {

namespace dnn = capture::dnn;
using capture::NativeFn;
using capture::Node;
using capture::Sym;
using detail::Attr;
using detail::Record;
using detail::Table;

template <class T>
T arg(const Node& n, int i) noexcept {
  return n.dnnl_call.arg<T>(i);
}

// The operation graph behind descriptor `r` (itself when it is one).
const void* graph_key(const void* d, const Record& r) noexcept {
  return r.type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR ? d : r.graph;
}

// Descriptor `r` derives from `from` (record `src`): it learns the graph's key and, when the graph
// is already finalized, its description, which outlives the graph's descriptor.
void inherit(Record& r, const void* from, const Record& src) noexcept {
  r.graph = graph_key(from, src);
  if (src.described) r.described = src.described;
}

void on_create(const Node& node) {
  using S = slot::cudnnBackendCreateDescriptor;
  auto* const* d = arg<void* const*>(node, S::descriptor);
  if (!d || !*d) return;
  Record r;
  r.type = arg<cudnnBackendDescriptorType_t>(node, S::descriptorType);
  Table& t = Table::instance();
  std::lock_guard lock(t.mu);
  // A handle cuDNN reuses after a destroy SOL did not see starts afresh.
  t.records.insert_or_assign(*d, std::move(r));
}

void on_set(const Node& node) {
  using S = slot::cudnnBackendSetAttribute;
  const void* d = arg<const void*>(node, S::descriptor);
  const auto type = arg<cudnnBackendAttributeType_t>(node, S::attributeType);
  const auto count = arg<int64_t>(node, S::elementCount);
  const auto* elements = arg<const unsigned char*>(node, S::arrayOfElements);
  const size_t size = detail::attr_size(type);
  if (count < 0 || count > (1 << 20) || (count > 0 && !elements)) return;
  Attr a{arg<cudnnBackendAttributeName_t>(node, S::attributeName), type, count,
         std::vector<unsigned char>(elements, elements + static_cast<size_t>(count) * size)};
  Table& t = Table::instance();
  std::lock_guard lock(t.mu);
  Record* r = t.find(d);
  if (!r) return;
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR && count == 1) {
    switch (a.name) {
      case CUDNN_ATTR_ENGINE_OPERATION_GRAPH:
      case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
      case CUDNN_ATTR_ENGINECFG_ENGINE:
      case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: {
        const void* from = a.get<const void*>();
        if (const Record* src = t.find(from)) inherit(*r, from, *src);
        break;
      }
      default: break;
    }
  }
  r->set(std::move(a));
}

// Descriptors cuDNN filled for the program inherit the graph of the one they came from.
void on_get(const Node& node) {
  using S = slot::cudnnBackendGetAttribute;
  if (arg<cudnnBackendAttributeType_t>(node, S::attributeType) != CUDNN_TYPE_BACKEND_DESCRIPTOR) return;
  const void* d = arg<const void*>(node, S::descriptor);
  const auto* count = arg<const int64_t*>(node, S::elementCount);
  const int64_t requested = arg<int64_t>(node, S::requestedElementCount);
  const auto* out = arg<void* const*>(node, S::arrayOfElements);
  if (!out || requested <= 0) return;
  const int64_t n = count ? std::min(*count, requested) : requested;
  Table& t = Table::instance();
  std::lock_guard lock(t.mu);
  const Record* src = t.find(d);
  if (!src) return;
  if (!graph_key(d, *src)) return;
  for (int64_t i = 0; i < n; ++i)
    if (Record* r = t.find(out[i]); r && r->type != CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) inherit(*r, d, *src);
}

void on_finalize(const Node& node) {
  const void* d = arg<const void*>(node, slot::cudnnBackendFinalize::descriptor);
  Table& t = Table::instance();
  std::shared_ptr<const Graph> g;
  {
    std::lock_guard lock(t.mu);
    Record* r = t.find(d);
    if (!r) return;
    r->finalized = true;
    if (r->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) {
      r->described = detail::describe_graph(t, *r);
      g = r->described;
    } else if (r->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
      // Inherited from its engine configuration, or (an engine set up before its graph was
      // finalized) looked up in the graph, which is then still alive.
      if (!r->described) {
        const Record* gr = r->graph ? t.find(r->graph) : nullptr;
        if (gr && gr->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) r->described = gr->described;
      }
      if (!r->described) SOL_LOG(debug, "cudnn: execution plan %p: its operation graph was not seen built", d);
      return;
    } else {
      return;
    }
  }
  if (g && log::enabled(log::Level::debug))
    SOL_LOG(debug, "cudnn: operation graph %p: %s %s", d, capture::op_name(g->node->kind), g->node->shape.c_str());
}

void on_destroy(const Node& node) {
  Table& t = Table::instance();
  Record old;  // freed after the lock is released
  std::lock_guard lock(t.mu);
  auto it = t.records.find(arg<const void*>(node, slot::cudnnBackendDestroyDescriptor::descriptor));
  if (it == t.records.end()) return;
  old = std::move(it->second);
  t.records.erase(it);
}

// Runs the call natively, timed on the handle's stream when tracing (a handle whose stream cannot
// be read is not timed: its work may be on any stream).
void run_timed(Node& node, NativeFn native, cudnnHandle_t handle) noexcept {
  cudaStream_t stream = nullptr;
  if (!capture::trace::active() || !handle || !detail::native().getStream ||
      detail::native().getStream(handle, &stream) != CUDNN_STATUS_SUCCESS)
    return capture::submit(node, native);
  cuda::DeviceTimer timer(static_cast<void*>(stream));
  capture::submit(node, native);
  timer.finish();
}

void execute(Node& node, NativeFn native) noexcept {
  using S = slot::cudnnBackendExecute;
  const void* plan = arg<const void*>(node, S::executionPlan);
  const void* pack = arg<const void*>(node, S::variantPack);
  std::shared_ptr<const Graph> g;
  dnn::Call call;
  {
    Table& t = Table::instance();
    std::lock_guard lock(t.mu);
    if (const Record* r = t.find(plan)) g = r->described;
    if (g) {
      call.desc = g->node.get();
      const Record* vp = t.find(pack);
      const Attr* uids = vp ? vp->find(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) : nullptr;
      const Attr* ptrs = vp ? vp->find(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS) : nullptr;
      if (!uids || !ptrs || uids->count != ptrs->count) {
        call.unbound = "a variant pack SOL did not see built";
      } else {
        for (size_t i = 0; i < g->uids.size() && i < dnn::kMaxTensors && !call.unbound; ++i) {
          int64_t k = 0;
          while (k < uids->count && uids->get<int64_t>(k) != g->uids[i]) ++k;
          if (k == uids->count)
            call.unbound = "a tensor missing from the variant pack";
          else
            call.data[i] = ptrs->get<void*>(k);
        }
      }
    }
  }
  if (g) {
    node.op = g->node->kind;
    node.dtype = g->node->dtype;
    node.dnn = &call;
  }
  run_timed(node, native, arg<cudnnHandle_t>(node, S::handle));
}

void legacy(Node& node, NativeFn native) noexcept {
  dnn::Desc desc;
  dnn::Call call;
  if (detail::describe_legacy(node, desc, call.data)) {
    call.desc = &desc;
    node.op = desc.kind;
    node.dtype = desc.dtype;
    node.dnn = &call;
  }
  // Every legacy compute entry point takes the handle first.
  run_timed(node, native, arg<cudnnHandle_t>(node, 0));
}

}  // namespace

void submit(Node& node, NativeFn native) noexcept {
  if (node.sym == Sym::cudnnBackendExecute) return execute(node, native);
  if (node.op == capture::Op::cudnn_legacy) return legacy(node, native);
  // Forgotten before cuDNN frees it: another thread may get the same address from a create.
  if (node.sym == Sym::cudnnBackendDestroyDescriptor) {
    try {
      on_destroy(node);
    } catch (...) {
    }
    return capture::submit(node, native);
  }
  capture::submit(node, native);
  if (node.ret.get<cudnnStatus_t>() != CUDNN_STATUS_SUCCESS) return;
  try {
    switch (node.sym) {
      case Sym::cudnnBackendCreateDescriptor: return on_create(node);
      case Sym::cudnnBackendSetAttribute: return on_set(node);
      case Sym::cudnnBackendGetAttribute: return on_get(node);
      case Sym::cudnnBackendFinalize: return on_finalize(node);
      default: return;
    }
  } catch (...) {
    // Out of memory: the descriptor goes undescribed, the program runs on.
  }
}

}  // namespace sol::interpose::cudnn
