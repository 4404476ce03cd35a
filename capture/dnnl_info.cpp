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

#include "capture/dnnl_detail.hpp"
#include "common/log.hpp"
#include "common/native.hpp"

namespace sol::capture::dnnl {
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

void on_create(const void* primitive, const void* primitive_desc) noexcept {
  const Api* a = api();
  if (!a || !primitive) return;
  auto pd = static_cast<const_dnnl_primitive_desc_t>(primitive_desc);
  if (!pd &&
      a->primitive_get_primitive_desc(static_cast<const_dnnl_primitive_t>(primitive), &pd) != dnnl_success)
    return;
  try {
    auto info = std::make_shared<Description>();
    if (!detail::describe(*a, pd, *info)) {
      SOL_LOG(debug, "dnnl: primitive %p: its descriptor cannot be queried", primitive);
      return;
    }
    Registry::instance().put(primitive, std::move(info));
  } catch (...) {  // out of memory: the primitive goes undescribed
    SOL_LOG(debug, "dnnl: primitive %p: no memory to describe it", primitive);
  }
}

void on_destroy(const void* primitive) noexcept {
  if (primitive && api()) Registry::instance().erase(primitive);
}

std::shared_ptr<const PrimitiveInfo> find(const void* primitive) noexcept {
  if (!primitive || !api()) return nullptr;
  return Registry::instance().get(primitive);
}

int operands(const DnnlExec& exec, blas::Operand* out, int max) noexcept {
  const Api* a = api();
  if (!a || !out || max <= 0 || !exec.args || exec.nargs <= 0) return 0;
  const auto* args = static_cast<const dnnl_exec_arg_t*>(exec.args);
  // The primitive's description, looked up only for arguments whose direction depends on it.
  std::shared_ptr<const Description> info;
  bool looked_up = false;
  auto primitive_info = [&]() -> const Description* {
    if (!looked_up) {
      info = Registry::instance().get(exec.primitive);
      looked_up = true;
    }
    return info.get();
  };
  int n = 0;
  for (int i = 0; i < exec.nargs && n < max; ++i) {
    const detail::ArgKind kind = detail::arg_kind(args[i].arg);
    if (kind.use == Use::skip || !args[i].memory) continue;
    void* handle = nullptr;
    const dnnl_memory_desc_t* md = nullptr;
    if (a->memory_get_data_handle(args[i].memory, &handle) != dnnl_success || !handle) continue;
    if (a->memory_get_memory_desc(args[i].memory, &md) != dnnl_success || !md) continue;
    size_t bytes = a->memory_desc_get_size(md);
    if (bytes == DNNL_RUNTIME_SIZE_VAL) bytes = 0;
    bool read = false, written = false;
    switch (kind.use) {
      case Use::read: read = true; break;
      case Use::write:
        written = true;
        if (args[i].arg == DNNL_ARG_DST) {
          const Description* d = primitive_info();
          read = d && d->dst_read;
        }
        break;
      case Use::workspace: read = written = true; break;
      case Use::stats: {
        const Description* d = primitive_info();
        written = d && d->stats_written;
        read = !written;
        break;
      }
      case Use::skip: break;
    }
    out[n++] = blas::Operand{kind.name, handle, bytes, read, written};
  }
  return n;
}

}  // namespace sol::capture::dnnl
