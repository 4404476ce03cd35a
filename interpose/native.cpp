// Resolving the native definition of an intercepted symbol, at its first call (the search itself
// is common/native.cpp). The wrapper caches the result in its slot.
#include "common/native.hpp"

#include <atomic>

#include "common/log.hpp"
#include "interpose/frontend.hpp"

namespace sol::interpose {

constinit std::atomic<uint8_t> g_native_state[capture::kNumSymbols];
constinit std::atomic<void*> g_native[capture::kNumSymbols];

void* resolve_slow(Sym s) noexcept {
  auto& state = g_native_state[static_cast<size_t>(s)];
  if (state.load(std::memory_order_acquire) == 2) return nullptr;
  const char* name = capture::symbol_name(s);
  const char* how = "";
  if (void* p = find_native(name, &how)) {
    SOL_LOG(debug, "native %s: %s (%s)", name, object_name(p), how);
    g_native[static_cast<size_t>(s)].store(p, std::memory_order_relaxed);
    state.store(1, std::memory_order_release);
    return p;
  }
  // From now on the symbol's calls take the slow path, where SOL's backends serve them.
  state.store(2, std::memory_order_release);
  set_passthrough(s, false);
  SOL_LOG(info, "%s: no loaded library defines it; SOL's backends serve its calls", name);
  return nullptr;
}

bool native_missing(Sym s) noexcept {
  return g_native_state[static_cast<size_t>(s)].load(std::memory_order_acquire) == 2;
}

}  // namespace sol::interpose
