// What the generated wrappers (build/generated/*.cpp) are made of. Not for other code.
//
// Hot path, taken whenever the process is in passthrough (native backend, no tracing): test the
// mode word, jump to the native symbol through the wrapper's slot. The slot starts at a resolver
// with the wrapper's own signature, so it is never null and needs no check.
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
// endbr64 marks the stub as an indirect-branch target under CET and is a no-op elsewhere.
#define SOL_ENTRY(name)           \
  __asm__(                        \
      ".text\n"                   \
      ".globl " #name             \
      "\n"                        \
      ".type " #name              \
      ", @function\n"             \
      ".p2align 4\n" #name        \
      ":\n"                       \
      ".cfi_startproc\n"          \
      "endbr64\n"                 \
      "cmpl $0, sol_mode(%rip)\n" \
      "jne sol_slow_" #name       \
      "\n"                        \
      "jmp *sol_slot_" #name      \
      "(%rip)\n"                  \
      ".cfi_endproc\n"            \
      ".size " #name ", .-" #name "\n");
#define SOL_ALIAS(alias, name) \
  __asm__(".globl " #alias     \
          "\n"                 \
          ".type " #alias      \
          ", @function\n"      \
          ".set " #alias ", " #name "\n");
#else
#define SOL_ASM_ENTRIES 0
#endif

namespace sol::interpose {

using capture::Sym;

// Process-wide mode. 0: passthrough. Otherwise a set of these bits.
enum ModeBits : uint32_t {
  kNeedsInit = 1u << 0,  // configuration not read yet
  kCapture = 1u << 1,    // calls go through capture::submit()
};
extern std::atomic<uint32_t> g_mode SOL_ASM_NAME(sol_mode);

inline bool passthrough() noexcept {
  return g_mode.load(std::memory_order_relaxed) == 0;
}

// Reads the configuration and sets g_mode, once per process; called by libsol's constructor and
// by any call that arrives before it ran.
void ensure_init() noexcept;

// The native definition of `s` (see native.cpp). Does not return when there is none.
void* resolve(Sym s) noexcept;

template <class Fn>
Fn resolve_slot(Sym s, std::atomic<Fn>& slot) noexcept {
  Fn fn = reinterpret_cast<Fn>(resolve(s));
  slot.store(fn, std::memory_order_release);
  return fn;
}

// One call on the slow path. Holds the re-entry guard for its lifetime: a call made while SOL
// handles another on the same thread (a backend calling BLAS, the reference CBLAS calling the
// Fortran BLAS) is not captured and goes to native.
class SlowCall {
 public:
  SlowCall(Sym sym, capture::Op op, capture::DType dtype) noexcept;
  ~SlowCall() noexcept;
  SlowCall(const SlowCall&) = delete;
  SlowCall& operator=(const SlowCall&) = delete;

  bool capturing() const noexcept { return capturing_; }
  capture::Node& node() noexcept { return *std::launder(reinterpret_cast<capture::Node*>(storage_)); }

  template <class F>
  void run(F&& native) noexcept {
    capture::submit(node(), capture::NativeFn(native));
  }

 private:
  bool capturing_;
  alignas(capture::Node) unsigned char storage_[sizeof(capture::Node)];
};

}  // namespace sol::interpose
