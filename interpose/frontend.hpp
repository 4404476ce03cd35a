// What the generated wrappers (build/generated/*.cpp) are made of. Not for other code.
//
// Hot path: each symbol has a mode byte; when it is 0 the call jumps to the native symbol
// through the wrapper's slot. The slot starts at a resolver with the wrapper's own signature,
// so it is never null and needs no check.
//
// On x86-64 the exported entry point is a four-instruction stub (SOL_ENTRY): a C++ function
// cannot tail-call through a pointer once arguments live on the stack (sgemm_ has 15), and the
// compiler then copies every stack argument twice, which costs more than the call it forwards.
// The stub never touches the stack, so arguments, hidden Fortran string lengths included, reach
// the native symbol or the slow path exactly as the caller passed them. Elsewhere the wrapper is
// plain C++ with the same logic.
//
// Slow path (SlowCall): the re-entry guard, then a capture::Node handed to capture::submit().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "capture/capture.hpp"
#include "common/macros.hpp"

#define SOL_ASM_NAME(sym) __asm__(#sym)
// A wrapper's slot and slow path are referenced only from its assembly stub, which the
// compiler cannot see: "used" keeps them.
#define SOL_SLOT(sym) __attribute__((used)) constinit
#define SOL_SLOW __attribute__((used, noinline))

#if defined(__x86_64__) && defined(__ELF__)
#define SOL_ASM_ENTRIES 1
// The stack address of the slow path's return address, which is the caller's (the stub jumped):
// frame pointer + 8. The generated wrappers are compiled with frame pointers for this.
#define SOL_RET_SLOT() (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + 8)
// endbr64 marks the stub as an indirect-branch target under CET and is a no-op elsewhere.
// clang-format off
#define SOL_ENTRY(name, index)                     \
  __asm__(".text\n"                                \
          ".globl " #name "\n"                     \
          ".type " #name ", @function\n"           \
          ".p2align 4\n" #name ":\n"               \
          ".cfi_startproc\n"                       \
          "endbr64\n"                              \
          "cmpb $0, sol_modes+" #index "(%rip)\n"  \
          "jne sol_slow_" #name "\n"               \
          "jmp *sol_slot_" #name "(%rip)\n"        \
          ".cfi_endproc\n"                         \
          ".size " #name ", .-" #name "\n");
#define SOL_ALIAS(alias, name)                     \
  __asm__(".globl " #alias "\n"                    \
          ".type " #alias ", @function\n"          \
          ".set " #alias ", " #name "\n");
// clang-format on
#else
#define SOL_ASM_ENTRIES 0
#define SOL_RET_SLOT() uintptr_t{0}
#endif

namespace sol::interpose {

using capture::Sym;

namespace dnnl {
void submit(capture::Node& node, capture::NativeFn native) noexcept;
}

// Process-wide state. 0: initialised, nothing to capture. Otherwise a set of these bits.
enum ModeBits : uint32_t {
  kNeedsInit = 1u << 0,  // configuration not read yet
  kCapture = 1u << 1,    // calls go through capture::submit()
};
extern std::atomic<uint32_t> g_mode;

// One byte per symbol, what its entry point tests: 0 sends calls straight to the native symbol,
// anything else to the slow path. All start at 1 (nothing is known before the configuration is
// read). A symbol goes to 0 when the whole process is in passthrough, or, under auto, once its
// native library turned out to be the right place for all its calls.
extern uint8_t g_modes[] SOL_ASM_NAME(sol_modes);

inline bool passthrough(Sym s) noexcept {
  return std::atomic_ref<uint8_t>(g_modes[static_cast<size_t>(s)]).load(std::memory_order_relaxed) == 0;
}
inline void set_passthrough(Sym s, bool on) noexcept {
  std::atomic_ref<uint8_t>(g_modes[static_cast<size_t>(s)]).store(on ? 0 : 1, std::memory_order_relaxed);
}

// Reads the configuration and sets the modes, once per process; called by libsol's constructor
// and by any call that arrives before it ran.
void ensure_init() noexcept;

// Per symbol: 0 not looked up yet, 1 found (in g_native), 2 no loaded library defines it.
extern std::atomic<uint8_t> g_native_state[];
extern std::atomic<void*> g_native[];
void* resolve_slow(Sym s) noexcept;

// The native definition of `s` (see native.cpp), or nullptr when no loaded library defines it;
// the answer is remembered either way.
inline void* resolve(Sym s) noexcept {
  const auto i = static_cast<size_t>(s);
  if (SOL_LIKELY(g_native_state[i].load(std::memory_order_acquire) == 1))
    return g_native[i].load(std::memory_order_relaxed);
  return resolve_slow(s);
}
// Whether `s` was found to have no native definition.
bool native_missing(Sym s) noexcept;

// Resolves `s` into its wrapper's slot. nullptr when there is no native definition: the slot
// keeps its resolver, the symbol's mode byte sends later calls to the slow path, and SOL's
// backends serve them.
template <class Fn>
Fn resolve_slot(Sym s, std::atomic<Fn>& slot) noexcept {
  Fn fn = reinterpret_cast<Fn>(resolve(s));
  if (fn) slot.store(fn, std::memory_order_release);
  return fn;
}

// One call on the slow path. Holds the re-entry guard for its lifetime: a call made while SOL
// handles another on the same thread (a backend calling BLAS, the reference CBLAS calling the
// Fortran BLAS) is not captured and goes to native, unless there is no native to go to.
class SlowCall {
 public:
  SlowCall(Sym sym, capture::Op op, capture::DType dtype) noexcept;
  ~SlowCall() noexcept;
  SlowCall(const SlowCall&) = delete;
  SlowCall& operator=(const SlowCall&) = delete;

  bool capturing() const noexcept { return capturing_; }
  capture::Node& node() noexcept { return *std::launder(reinterpret_cast<capture::Node*>(storage_)); }

  // oneDNN calls: through the oneDNN frontend (interpose/dnnl), which describes primitives and
  // makes executions DNN nodes.
  template <class F>
  void run_dnnl(F&& native) noexcept {
    dnnl::submit(node(), capture::NativeFn(native));
  }

  template <class F>
  void run(F&& native) noexcept {
    // Small calls that go to native anyway (auto with an unoptimized library) skip the executor.
    if (capture::native_first(node()))
      native();
    else
      capture::submit(node(), capture::NativeFn(native));
  }

 private:
  bool capturing_;
  alignas(capture::Node) unsigned char storage_[sizeof(capture::Node)];
};

}  // namespace sol::interpose
