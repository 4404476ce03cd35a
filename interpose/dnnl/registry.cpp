// capture::dnnl: binding oneDNN's query functions, the table of live primitives, and the operands
// of an execution. What a primitive descriptor says is turned into text in dnnl_describe.cpp.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <unordered_map>
#include <vector>
#include <cstring>

#include "interpose/dnnl/detail.hpp"
#include "common/log.hpp"
#include "common/native.hpp"

namespace sol::interpose::dnnl {
namespace {

using detail::Api;
using detail::Description;
using detail::Use;

std::atomic<const Api*> g_api{nullptr};
std::mutex g_bind_mutex;

// True when `p` is defined in the object loaded at `base`: a lookup through the main program's
// handle searches the global scope, where libsol's wrappers or another oneDNN may come first.
bool same_object(const void* p, const void* base) noexcept {
  Dl_info info{};
  return p && dladdr(p, &info) && info.dli_fbase == base;
}

const Api* api() noexcept {
  return g_api.load(std::memory_order_acquire);
}

// Live primitives, looked up at every dnnl_primitive_execute from any thread: sharded by handle,
// each shard behind a reader-writer lock, so concurrent lookups of different primitives rarely
// touch the same cache line and never allocate (the value is a shared_ptr copy).
class Registry {
 public:
  Registry() noexcept {
    // A fork while another thread holds a shard would leave that lock held forever in the child.
    pthread_atfork([] { instance().lock_all(); }, [] { instance().unlock_all(); },
                   [] { instance().reset_locks(); });
  }

  // Never destroyed: threads may execute primitives while the process runs its exit handlers.
  static Registry& instance() noexcept {
    static Registry* registry = new Registry;
    return *registry;
  }

  void put(const void* key, std::shared_ptr<const Description> value) {
    Shard& s = shard(key);
    std::unique_lock lock(s.mutex);
    // A handle oneDNN reuses after a destroy SOL did not see is simply described anew.
    s.map.insert_or_assign(key, std::move(value));
  }

  void erase(const void* key) noexcept {
    Shard& s = shard(key);
    std::shared_ptr<const Description> old;  // freed after the lock is released
    std::unique_lock lock(s.mutex);
    auto it = s.map.find(key);
    if (it == s.map.end()) return;
    old = std::move(it->second);
    s.map.erase(it);
  }

  std::shared_ptr<const Description> get(const void* key) const noexcept {
    const Shard& s = shard(key);
    std::shared_lock lock(s.mutex);
    auto it = s.map.find(key);
    return it == s.map.end() ? nullptr : it->second;
  }

 private:
  static constexpr int kShardBits = 6;
  struct alignas(64) Shard {
    mutable std::shared_mutex mutex;
    std::unordered_map<const void*, std::shared_ptr<const Description>> map;
  };

  // Handles are heap addresses: multiply to spread their low-entropy low bits over the shards.
  static size_t index(const void* key) noexcept {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >>
                               (64 - kShardBits));
  }
  Shard& shard(const void* key) noexcept { return shards_[index(key)]; }
  const Shard& shard(const void* key) const noexcept { return shards_[index(key)]; }

  void lock_all() noexcept {
    for (Shard& s : shards_) s.mutex.lock();
  }
  void unlock_all() noexcept {
    for (Shard& s : shards_) s.mutex.unlock();
  }
  // In the child of a fork, the only thread left: the locks the parent's thread took cannot be
  // released by another thread id, so they are made anew (a pthread rwlock holds no resources).
  void reset_locks() noexcept {
    for (Shard& s : shards_) new (&s.mutex) std::shared_mutex;
  }

  Shard shards_[1 << kShardBits];
};

}  // namespace

bool bind(const void* native_symbol) noexcept {
  if (api()) return true;
  std::lock_guard lock(g_bind_mutex);
  if (api()) return true;
  // libsol's own dnnl_* are wrappers: binding them would make every query a traced, re-entrant call.
  if (!native_symbol || in_libsol(native_symbol)) return false;
  Dl_info info{};
  if (!dladdr(native_symbol, &info)) return false;
  // The reference is kept: the table points into the library for the life of the process.
  void* handle = info.dli_fname && *info.dli_fname ? dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  // oneDNN linked into the program itself: dlopen cannot name the main program by its path.
  if (!handle) handle = dlopen(nullptr, RTLD_NOW);
  if (!handle) return false;
  static Api table;
  Api t{};
  bool complete = true;
#define SOL_DNNL_BIND(name)                                                                      \
  t.name = reinterpret_cast<decltype(t.name)>(dlsym(handle, "dnnl_" #name));                     \
  if (!same_object(reinterpret_cast<const void*>(t.name), info.dli_fbase)) {                     \
    SOL_LOG(debug, "dnnl: %s has no dnnl_" #name ", primitives go undescribed", info.dli_fname); \
    complete = false;                                                                            \
  }
  SOL_DNNL_FUNCTIONS(SOL_DNNL_BIND)
#undef SOL_DNNL_BIND
  if (!complete) {
    dlclose(handle);
    return false;
  }
  // The op descriptors read in dnnl_describe.cpp are oneDNN 2.x's; 3.x has none.
  const dnnl_version_t* v = t.version();
  if (!v || v->major != 2) {
    SOL_LOG(debug, "dnnl: oneDNN %d.%d is not 2.x, primitives go undescribed", v ? v->major : -1,
            v ? v->minor : -1);
    dlclose(handle);
    return false;
  }
  table = t;
  g_api.store(&table, std::memory_order_release);
  return true;
}

std::shared_ptr<const PrimitiveInfo> describe(const void* primitive_desc) noexcept {
  const Api* a = api();
  if (!a || !primitive_desc) return nullptr;
  auto pd = static_cast<const_dnnl_primitive_desc_t>(primitive_desc);
  try {
    auto info = std::make_shared<Description>();
    if (!detail::describe(*a, pd, *info)) return nullptr;
    auto node = std::make_shared<capture::dnn::Desc>();
    detail::translate(*a, pd, *info, *node, info->bindings);
    info->kind = node->kind != capture::Op::dnnl_execute ? capture::op_name(node->kind)
                                                         : (a->prim_kind2str(info->prim_kind) ?: "?");
    info->op_desc = nullptr;  // oneDNN's, valid only while the descriptor is
    if (node->unsupported) info->why_not = node->unsupported;
    info->node = std::move(node);
    return info;
  } catch (...) {  // out of memory: the primitive goes undescribed
    return nullptr;
  }
}

void on_create(const void* primitive, const void* primitive_desc) noexcept {
  const Api* a = api();
  if (!a || !primitive) return;
  auto pd = static_cast<const_dnnl_primitive_desc_t>(primitive_desc);
  if (!pd &&
      a->primitive_get_primitive_desc(static_cast<const_dnnl_primitive_t>(primitive), &pd) != dnnl_success)
    return;
  auto info = describe(pd);
  if (!info) {
    SOL_LOG(debug, "dnnl: primitive %p: its descriptor cannot be queried", primitive);
    return;
  }
  try {
    Registry::instance().put(primitive, std::static_pointer_cast<const Description>(info));
  } catch (...) {
  }
}

void on_destroy(const void* primitive) noexcept {
  if (primitive && api()) Registry::instance().erase(primitive);
}

std::shared_ptr<const PrimitiveInfo> find(const void* primitive) noexcept {
  if (!primitive || !api()) return nullptr;
  return Registry::instance().get(primitive);
}

namespace {

// The memory passed for DNNL argument `arg`, or nullptr.
dnnl_memory_t memory_of(int nargs, const dnnl_exec_arg_t* args, int arg) noexcept {
  for (int i = 0; i < nargs; ++i)
    if (args[i].arg == arg) return args[i].memory;
  return nullptr;
}

// Whether a memory argument has exactly the layout the node's tensor was described with.
bool matches(const dnnl_memory_desc_t& md, const capture::dnn::TensorDesc& t) noexcept {
  const capture::dnn::Layout& l = t.layout;
  if (md.format_kind != dnnl_blocked || md.ndims != l.ndims || md.offset0 != l.offset0) return false;
  const dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  if (blk.inner_nblks != l.nblocks) return false;
  for (int d = 0; d < l.ndims; ++d)
    if (md.dims[d] != l.dims[d] || md.padded_dims[d] != l.padded[d] || blk.strides[d] != l.strides[d])
      return false;
  for (int b = 0; b < l.nblocks; ++b)
    if (blk.inner_blks[b] != l.block[b] || blk.inner_idxs[b] != l.block_dim[b]) return false;
  return true;
}

// Runs the native primitive with the memory of each tensor moved to data[i]: every argument
// holding a moved tensor is replaced by a temporary memory object over a buffer of its own (the
// argument's untouched bytes copied in, the tensors' bytes from data[i]), and the tensors' bytes
// are copied back out afterwards.
bool rerun(const capture::dnn::Call& call, void* const* data) noexcept {
  const Api* a = api();
  const auto* f = static_cast<const Execution*>(call.frontend);
  if (!a || !f || !f->info || f->nargs > 64) return false;
  const auto& info = static_cast<const Description&>(*f->info);
  const auto* own_args = static_cast<const dnnl_exec_arg_t*>(f->args);
  const capture::dnn::Desc& desc = *call.desc;
  dnnl_exec_arg_t args[64];
  struct Temp {
    dnnl_memory_t memory = nullptr;
    std::vector<unsigned char> bytes;
  };
  std::vector<Temp> temps;
  try {
    temps.resize(static_cast<size_t>(f->nargs));
  } catch (...) {
    return false;
  }
  bool ok = true;
  for (int i = 0; i < f->nargs && ok; ++i) {
    args[i] = own_args[i];
    bool moved = false;
    for (int t = 0; t < desc.ntensors; ++t)
      moved |= info.bindings[t].arg == args[i].arg && data[t] != call.data[t];
    if (!moved) continue;
    const dnnl_memory_desc_t* md = nullptr;
    void* handle = nullptr;
    dnnl_engine_t engine = nullptr;
    if (a->memory_get_memory_desc(args[i].memory, &md) != dnnl_success ||
        a->memory_get_data_handle(args[i].memory, &handle) != dnnl_success ||
        a->memory_get_engine(args[i].memory, &engine) != dnnl_success) {
      ok = false;
      break;
    }
    Temp& tmp = temps[static_cast<size_t>(i)];
    try {
      tmp.bytes.assign(static_cast<const unsigned char*>(handle),
                       static_cast<const unsigned char*>(handle) + a->memory_desc_get_size(md));
    } catch (...) {
      ok = false;
      break;
    }
    for (int t = 0; t < desc.ntensors; ++t)
      if (info.bindings[t].arg == args[i].arg)
        std::memcpy(tmp.bytes.data() + info.bindings[t].offset, data[t], desc.tensors[t].desc.bytes);
    ok = a->memory_create(&tmp.memory, md, engine, tmp.bytes.data()) == dnnl_success;
    args[i].memory = tmp.memory;
  }
  if (ok) ok = a->primitive_execute(static_cast<const_dnnl_primitive_t>(f->primitive),
                                     static_cast<dnnl_stream_t>(f->stream), f->nargs, args) == dnnl_success;
  if (ok && f->stream) ok = a->stream_wait(static_cast<dnnl_stream_t>(f->stream)) == dnnl_success;
  for (int i = 0; i < f->nargs; ++i) {
    Temp& tmp = temps[static_cast<size_t>(i)];
    if (!tmp.memory) continue;
    if (ok)
      for (int t = 0; t < desc.ntensors; ++t)
        if (info.bindings[t].arg == own_args[i].arg)
          std::memcpy(data[t], tmp.bytes.data() + info.bindings[t].offset, desc.tensors[t].desc.bytes);
    a->memory_destroy(tmp.memory);
  }
  return ok;
}

}  // namespace

bool bind_call(const PrimitiveInfo& prim, int nargs, const void* raw_args, capture::dnn::Call& call,
               const char** why) noexcept {
  const Api* a = api();
  const auto& info = static_cast<const Description&>(prim);
  const capture::dnn::Desc* desc = prim.node.get();
  *why = nullptr;
  if (!a || !desc) return *why = "the primitive was not described", false;
  if (desc->unsupported) return *why = desc->unsupported, false;
  const auto* args = static_cast<const dnnl_exec_arg_t*>(raw_args);
  if (nargs < 0 || (nargs > 0 && !args)) return *why = "invalid arguments", false;
  call.desc = desc;
  for (int t = 0; t < desc->ntensors; ++t) {
    const detail::Binding& b = info.bindings[t];
    dnnl_memory_t memory = memory_of(nargs, args, b.arg);
    if (!memory) return *why = "an argument of the primitive is missing", false;
    const dnnl_memory_desc_t* md = nullptr;
    void* handle = nullptr;
    if (a->memory_get_memory_desc(memory, &md) != dnnl_success || !md ||
        a->memory_get_data_handle(memory, &handle) != dnnl_success)
      return *why = "an argument's memory cannot be queried", false;
    // oneDNN rejects a memory whose descriptor differs from the primitive's; so does SOL, by
    // running the call natively, where oneDNN reports it. (A shared scale-and-shift buffer is
    // checked by size only: its tensors are SOL's own view of it.)
    const bool own_view = b.offset != 0 || desc->tensors[t].arg == capture::dnn::Arg::scale ||
                          desc->tensors[t].arg == capture::dnn::Arg::diff_scale;
    if (!own_view && !matches(*md, desc->tensors[t].desc))
      return *why = "an argument's memory has another shape or layout than the primitive's", false;
    if (!handle && desc->tensors[t].desc.bytes > 0) return *why = "an argument has no data", false;
    if (a->memory_desc_get_size(md) < b.offset + desc->tensors[t].desc.bytes)
      return *why = "an argument's memory is smaller than the primitive's", false;
    call.data[t] = static_cast<unsigned char*>(handle) + b.offset;
  }
  return true;
}

bool bind_call(const Execution& exec, capture::dnn::Call& call, const char** why) noexcept {
  if (!exec.info) return *why = "the primitive was not described", false;
  if (!bind_call(*exec.info, exec.nargs, exec.args, call, why)) return false;
  call.frontend = &exec;
  call.rerun_native = rerun;
  return true;
}

}  // namespace sol::interpose::dnnl
