// The oneDNN frontend's part of every captured oneDNN call: primitives are described when they
// are created and forgotten when destroyed, and each dnnl_primitive_execute of a described
// primitive reaches the capture layer as a DNN node.
#include <oneapi/dnnl/dnnl.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/native.hpp"
#include "interpose/dnnl/detail.hpp"

namespace sol::interpose::dnnl {
namespace {

using capture::Node;
using capture::NativeFn;
using capture::Sym;

void bind_once() noexcept {
  static std::once_flag bound;
  std::call_once(bound, [] { bind(find_native("dnnl_primitive_desc_query")); });
}

// The scales a sum primitive descriptor was created with: oneDNN 2.x has no query for them.
// Kept from dnnl_sum_primitive_desc_create until the descriptor is destroyed.
class SumScales {
 public:
  static SumScales& instance() noexcept {
    static SumScales* s = new SumScales;  // never destroyed: calls may come during exit
    return *s;
  }
  void put(const void* pd, const float* scales, int n) noexcept {
    try {
      std::lock_guard lock(mu_);
      map_[pd].assign(scales, scales + n);
    } catch (...) {
    }
  }
  void erase(const void* pd) noexcept {
    std::lock_guard lock(mu_);
    map_.erase(pd);
  }
  bool get(const void* pd, float* out, int n) noexcept {
    std::lock_guard lock(mu_);
    auto it = map_.find(pd);
    if (it == map_.end() || static_cast<int>(it->second.size()) != n) return false;
    for (int i = 0; i < n; ++i) out[i] = it->second[static_cast<size_t>(i)];
    return true;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, std::vector<float>> map_;
};

void execute(Node& node, NativeFn native) noexcept {
  bind_once();
  Execution exec;
  exec.primitive = node.dnnl.primitive;
  exec.stream = node.dnnl.stream;
  exec.nargs = node.dnnl.nargs;
  exec.args = node.dnnl.args;
  exec.info = find(node.dnnl.primitive);
  capture::dnn::Call call;
  if (exec.info && exec.info->node) {
    // A call that cannot be bound is still a node of its kind, for the trace, with no tensors:
    // the executor runs it natively and says why (SOL_LOG=debug).
    const char* why = nullptr;
    if (!bind_call(exec, call, &why)) {
      call.desc = exec.info->node.get();
      call.unbound = why;
    }
    node.op = call.desc->kind;
    node.dtype = call.desc->dtype;
    node.dnn = &call;
  }
  capture::submit(node, native);
}

}  // namespace

void record_sum_scales(const void* primitive_desc, const float* scales, int n) noexcept {
  if (primitive_desc && scales && n > 0 && n < capture::dnn::kMaxTensors)
    SumScales::instance().put(primitive_desc, scales, n);
}

namespace detail {
bool sum_scales(const_dnnl_primitive_desc_t pd, float* scales, int n) noexcept {
  return SumScales::instance().get(pd, scales, n);
}
}  // namespace detail

void submit(Node& node, NativeFn native) noexcept {
  switch (node.sym) {
    case Sym::dnnl_primitive_execute: return execute(node, native);
    case Sym::dnnl_primitive_destroy:
      on_destroy(node.dnnl_call.arg<const void*>(0));
      return capture::submit(node, native);
    case Sym::dnnl_primitive_desc_destroy:
      SumScales::instance().erase(node.dnnl_call.arg<const void*>(0));
      return capture::submit(node, native);
    default: break;
  }
  capture::submit(node, native);
  if (node.ret.get<int>() != dnnl_success) return;
  switch (node.sym) {
    case Sym::dnnl_primitive_create:
    case Sym::dnnl_primitive_create_from_cache_blob: {
      auto* const* primitive = node.dnnl_call.arg<void* const*>(0);
      if (!primitive || !*primitive) return;
      // From a cache blob, the primitive itself is asked for its descriptor.
      const void* pd = node.sym == Sym::dnnl_primitive_create ? node.dnnl_call.arg<const void*>(1) : nullptr;
      bind_once();
      on_create(*primitive, pd);
      return;
    }
    case Sym::dnnl_sum_primitive_desc_create: {
      // (dnnl_primitive_desc_t* pd, const dnnl_memory_desc_t* dst, int n, const float* scales, ...)
      auto* const* pd = node.dnnl_call.arg<void* const*>(0);
      const int n = node.dnnl_call.arg<int>(2);
      const auto* scales = node.dnnl_call.arg<const float*>(3);
      if (pd) record_sum_scales(*pd, scales, n);
      return;
    }
    default: return;
  }
}

}  // namespace sol::interpose::dnnl
