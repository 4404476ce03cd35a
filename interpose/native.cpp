// Resolving the native definition of an intercepted symbol, at its first call (the search itself
// is common/native.cpp). The wrapper caches the result in its slot.
#include "common/native.hpp"

#include <atomic>
#include <mutex>
#include <string>

#include "capture/blas/libraries.hpp"
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

namespace {

std::once_flag g_plain_once;
std::atomic<PlainWidth> g_plain{PlainWidth::lp64};

void decide_plain_width() noexcept {
  try {
    std::string lp64, ilp64;
    for (const auto& lib : capture::blas::survey(capture::blas::kWidths)) {
      if (lib.plain_bits == 32 && lp64.empty()) lp64 = lib.path;
      if (lib.plain_bits == 64 && ilp64.empty()) ilp64 = lib.path;
    }
    if (!ilp64.empty() && !lp64.empty()) {
      g_plain.store(PlainWidth::mixed, std::memory_order_release);
      SOL_LOG(warn,
              "both %s (32-bit integers) and %s (64-bit) define the plain BLAS names, and a call does not "
              "say which its caller meant: SOL passes those calls through untouched",
              lp64.c_str(), ilp64.c_str());
    } else if (!ilp64.empty()) {
      g_plain.store(PlainWidth::ilp64, std::memory_order_release);
      SOL_LOG(info, "the plain BLAS names take 64-bit integers here (%s)", ilp64.c_str());
    }
  } catch (...) {  // allocation failure: the plain names stay LP64, as SOL took them before
  }
}

}  // namespace

PlainWidth plain_width() noexcept {
  std::call_once(g_plain_once, decide_plain_width);
  return g_plain.load(std::memory_order_acquire);
}

}  // namespace sol::interpose
