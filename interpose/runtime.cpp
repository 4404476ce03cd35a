// Process start-up, the mode bytes and the re-entry guard.
#include <unistd.h>

#include <mutex>

#include "capture/capture.hpp"
#include "capture/lazy/served.hpp"
#include "common/log.hpp"
#include "common/own_work.hpp"
#include "config/config.hpp"
#include "interpose/frontend.hpp"

namespace sol::interpose {

constinit std::atomic<uint32_t> g_mode{kNeedsInit};

constinit uint8_t g_modes[] = {
#define SOL_SYMBOL(id, api, op, dtype, fields, family) 1,
#include "symbols.inc"
#undef SOL_SYMBOL
};
static_assert(sizeof g_modes == capture::kNumSymbols);

namespace {

// Under auto, whether a symbol's routing was decided (see SlowCall).
std::atomic<uint8_t> g_decided[capture::kNumSymbols];

// Exit status of SOL_STRICT=1 on a configuration problem (sysexits.h: EX_CONFIG).
constexpr int kStrictExit = 78;

std::once_flag g_once;

void init_process() noexcept {
  // Anything this thread calls while initialising goes straight to native (and cannot re-enter
  // call_once, which would deadlock).
  ++t_own_depth;
  uint32_t mode = 0;
  try {
    const config::Config cfg = config::load();
    log::set_level(cfg.log);
    if (!cfg.disable) {
      for (const auto& p : cfg.problems) log::write(log::Level::warn, "%s", p.c_str());
      if (cfg.strict && !cfg.problems.empty()) {
        log::write(log::Level::error, "error: SOL_STRICT=1 and the configuration has problems; exiting");
        ::_exit(kStrictExit);
      }
      // Test-only: the allocation tests serve large blocks from SOL's pages without the lazy
      // executor (before it, so that its own call changes nothing).
      capture::lazy::serve_from_test_env();
      if (capture::start(cfg)) mode = kCapture;
      start_looking();
    }
  } catch (...) {
    // Only allocation can throw here. Staying in passthrough keeps the program running.
    log::write(log::Level::error, "error: initialisation failed; every call goes to native");
    mode = 0;
  }
  // Nothing to capture: every symbol's entry point jumps straight to native.
  if (!(mode & kCapture))
    for (size_t i = 0; i < capture::kNumSymbols; ++i) set_passthrough(static_cast<Sym>(i), true);
  g_mode.store(mode, std::memory_order_release);
  --t_own_depth;
}

// Runs before main() for a preloaded or linked libsol, so SOL_STRICT can stop a misconfigured
// program before it starts. Calls that arrive earlier (other libraries' constructors) initialise
// through ensure_init() themselves: nothing here depends on constructor order.
__attribute__((constructor)) void init_at_load() {
  ensure_init();
}

}  // namespace

void ensure_init() noexcept {
  if (SOL_LIKELY(!(g_mode.load(std::memory_order_acquire) & kNeedsInit))) return;
  std::call_once(g_once, init_process);
}

SlowCall::SlowCall(Sym sym, capture::Op op, capture::DType dtype) noexcept
    : capturing_(false), ilp64_(false) {
  const bool outer = t_own_depth++ == 0;
  if (outer) ensure_init();
  // With no native definition there is nowhere else to go: SOL serves the call, even one made
  // while it handles another.
  void* native = resolve(sym);
  if (native) {
    if (!outer || !(g_mode.load(std::memory_order_acquire) & kCapture)) return;
    // The first call of each symbol asks whether all its calls may go straight to native (under
    // auto, when the program's own library is the best place for them): then its entry point
    // stops coming here.
    auto& decided = g_decided[static_cast<size_t>(sym)];
    if (!decided.load(std::memory_order_acquire)) {
      const bool direct = capture::always_native(sym, native);
      decided.store(1, std::memory_order_release);
      if (direct) {
        set_passthrough(sym, true);
        return;
      }
    }
  }
  const capture::Family family = capture::symbol_family(sym);
  if (family == capture::Family::plain) {
    const PlainWidth width = plain_width();
    // Libraries of both widths: a call's integers cannot be read, so it goes where it would have
    // gone without SOL, untouched, and so does every later call of the symbol.
    if (width == PlainWidth::mixed && native) {
      set_passthrough(sym, true);
      return;
    }
    ilp64_ = width == PlainWidth::ilp64;
  } else {
    ilp64_ = capture::family_bits(family) == 64;
  }
  auto* node = new (storage_) capture::Node(sym, op, dtype);
  node->native = native;
  node->ilp64 = ilp64_;
  capturing_ = true;
}

SlowCall::~SlowCall() noexcept {
  --t_own_depth;
}

}  // namespace sol::interpose
