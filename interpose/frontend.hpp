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
#include <cstring>
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
#define SOL_ENTRY_HEAD(name)         \
  ".text\n"                          \
  ".globl " #name "\n"               \
  ".type " #name ", @function\n"     \
  ".p2align 4\n" #name ":\n"         \
  ".cfi_startproc\n"                 \
  "endbr64\n"
#define SOL_ENTRY_TAIL(name) ".cfi_endproc\n.size " #name ", .-" #name "\n"
#define SOL_ENTRY(name, index)                     \
  __asm__(SOL_ENTRY_HEAD(name)                     \
          "cmpb $0, sol_modes+" #index "(%rip)\n"  \
          "jne sol_slow_" #name "\n"               \
          "jmp *sol_slot_" #name "(%rip)\n"        \
          SOL_ENTRY_TAIL(name));
// The same, for a symbol whose size check has its own function, sol_small_<name> (a predicate over
// the register arguments only): mode 2 asks the stub to call it, with the argument registers
// saved around the call, and to go straight to the native symbol when it says the call is small
// (under auto, small calls stay with an optimized native library). That costs a few instructions
// where the slow path's frame would copy every stack argument. SOL_ENTRY_SIZED_XMM also saves
// xmm0-7, for functions that take floating-point arguments by value (CBLAS's alpha, beta).
#define SOL_SIZED_SAVE                                                                  \
  "push %rdi\n.cfi_adjust_cfa_offset 8\npush %rsi\n.cfi_adjust_cfa_offset 8\n"          \
  "push %rdx\n.cfi_adjust_cfa_offset 8\npush %rcx\n.cfi_adjust_cfa_offset 8\n"          \
  "push %r8\n.cfi_adjust_cfa_offset 8\npush %r9\n.cfi_adjust_cfa_offset 8\n"
#define SOL_SIZED_RESTORE                                                               \
  "pop %r9\n.cfi_adjust_cfa_offset -8\npop %r8\n.cfi_adjust_cfa_offset -8\n"           \
  "pop %rcx\n.cfi_adjust_cfa_offset -8\npop %rdx\n.cfi_adjust_cfa_offset -8\n"         \
  "pop %rsi\n.cfi_adjust_cfa_offset -8\npop %rdi\n.cfi_adjust_cfa_offset -8\n"
#define SOL_ENTRY_SIZED_IMPL(name, index, fast, save_xmm, restore_xmm) \
  __asm__(SOL_ENTRY_HEAD(name)                                       \
          "cmpb $0, sol_modes+" #index "(%rip)\n"                      \
          "jne 1f\n"                                                   \
          "jmp *sol_slot_" #name "(%rip)\n"                            \
          "1:\n"                                                       \
          "cmpb $2, sol_modes+" #index "(%rip)\n"                      \
          "jne sol_slow_" #name "\n"                                   \
          fast                                                         \
          SOL_SIZED_SAVE                                               \
          "sub $72, %rsp\n.cfi_adjust_cfa_offset 72\n"                  \
          save_xmm                                                     \
          "call sol_small_" #name "\n"                                 \
          restore_xmm                                                  \
          "add $72, %rsp\n.cfi_adjust_cfa_offset -72\n"                 \
          SOL_SIZED_RESTORE                                            \
          "test %al, %al\n"                                            \
          "jz sol_slow_" #name "\n"                                    \
          "jmp *sol_slot_" #name "(%rip)\n"                            \
          SOL_ENTRY_TAIL(name));
#define SOL_ENTRY_SIZED(name, index) SOL_ENTRY_SIZED_IMPL(name, index, "", "", "")
#define SOL_XMM_SAVE                                                                              \
  "movq %xmm0, 0(%rsp)\nmovq %xmm1, 8(%rsp)\nmovq %xmm2, 16(%rsp)\n"                              \
  "movq %xmm3, 24(%rsp)\nmovq %xmm4, 32(%rsp)\nmovq %xmm5, 40(%rsp)\n"                            \
  "movq %xmm6, 48(%rsp)\nmovq %xmm7, 56(%rsp)\n"
#define SOL_XMM_RESTORE                                                                           \
  "movq 0(%rsp), %xmm0\nmovq 8(%rsp), %xmm1\nmovq 16(%rsp), %xmm2\n"                              \
  "movq 24(%rsp), %xmm3\nmovq 32(%rsp), %xmm4\nmovq 40(%rsp), %xmm5\n"                            \
  "movq 48(%rsp), %xmm6\nmovq 56(%rsp), %xmm7\n"
// A GEMM's own check first, in the stub, with no call: m * n * k from where the arguments are
// (`m`, `n`, `k`: "(%rdx)" for a Fortran pointer, "%ecx" for a CBLAS value), times `scale` (2,
// complex 8), against native_below() (g_native_below, by the symbol's index). A product that
// overflows or is negative (an invalid dimension) goes on to sol_small_<name>, as does a call of
// that size or more (the memo, stays_native). rax, r10, r11 and xmm8 are the caller's scratch.
#define SOL_GEMM_SMALL(name, index, m, n, k, scale)                                               \
  "movslq " m ", %rax\nmovslq " n ", %r10\nimul %r10, %rax\n"                                     \
  "movslq " k ", %r11\nimul %r11, %rax\njo 2f\ntest %rax, %rax\njs 2f\n"                          \
  "imul $" #scale ", %rax, %rax\njo 2f\n"                                                          \
  "pxor %xmm8, %xmm8\ncvtsi2sdq %rax, %xmm8\nucomisd sol_native_below+8*" #index "(%rip), %xmm8\njae 2f\n"           \
  "jmp *sol_slot_" #name "(%rip)\n"                                                               \
  "2:\n"
#define SOL_ENTRY_GEMM(name, index, m, n, k, scale) \
  SOL_ENTRY_SIZED_IMPL(name, index, SOL_GEMM_SMALL(name, index, m, n, k, scale), "", "")
#define SOL_ENTRY_GEMM_XMM(name, index, m, n, k, scale) \
  SOL_ENTRY_SIZED_IMPL(name, index, SOL_GEMM_SMALL(name, index, m, n, k, scale), SOL_XMM_SAVE, SOL_XMM_RESTORE)
#define SOL_ENTRY_SIZED_XMM(name, index) SOL_ENTRY_SIZED_IMPL(name, index, "", SOL_XMM_SAVE, SOL_XMM_RESTORE)
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
namespace cublas {
void submit(capture::Node& node, capture::NativeFn native) noexcept;
}
namespace cudnn {
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
// For a symbol whose entry stub can check a call's size itself (SOL_ENTRY_SIZED), once its native
// library keeps the small calls (capture::native_below() > 0): mode 2, the stub asks first.
inline void check_size_at_entry(Sym s) noexcept {
  std::atomic_ref<uint8_t> mode(g_modes[static_cast<size_t>(s)]);
  uint8_t slow = 1;
  if (mode.load(std::memory_order_relaxed) == 1) mode.compare_exchange_strong(slow, 2, std::memory_order_relaxed);
}

// Reads the configuration and sets the modes, once per process; called by libsol's constructor
// and by any call that arrives before it ran.
void ensure_init() noexcept;

// From initialisation on, looks for libraries whose BLAS or oneDNN work SOL cannot see, and says
// so once (sight.cpp).
void start_looking() noexcept;

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

// How wide the INTEGERs of the plain names (dgemm_, cblas_dgemm) are in this process: those of
// the libraries that define them (Debian's libblas64 and openblas64 are ILP64). Decided once, at
// the first call of a plain name that SOL looks at (native.cpp). mixed: libraries of both widths
// define them, and no call says which one its caller meant.
enum class PlainWidth : uint8_t { lp64, ilp64, mixed };
PlainWidth plain_width() noexcept;

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

  // An INTEGER argument at the call's width (capture::Node::ilp64): a Fortran one by its address,
  // a CBLAS one as the 64-bit register or stack slot it came in, whose upper half an LP64 caller
  // leaves undefined.
  int64_t integer(const int* p) const noexcept {
    if (!ilp64_) return *p;
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  int64_t integer(int64_t reg) const noexcept { return ilp64_ ? reg : static_cast<int32_t>(reg); }

  // oneDNN calls: through the oneDNN frontend (interpose/dnnl), which describes primitives and
  // makes executions DNN nodes.
  template <class F>
  void run_dnnl(F&& native) noexcept {
    dnnl::submit(node(), capture::NativeFn(native));
  }

  // cuBLAS / cuBLASLt calls: through the cuBLAS frontend (interpose/cublas), which completes the
  // node, keeps cuBLASLt's descriptors and times GEMMs on the device.
  template <class F>
  void run_cublas(F&& native) noexcept {
    cublas::submit(node(), capture::NativeFn(native));
  }

  // cuDNN calls: through the cuDNN frontend (interpose/cudnn), which keeps the backend
  // descriptors and makes executions DNN nodes timed on the device.
  template <class F>
  void run_cudnn(F&& native) noexcept {
    cudnn::submit(node(), capture::NativeFn(native));
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
  bool ilp64_;
  alignas(capture::Node) unsigned char storage_[sizeof(capture::Node)];
};

}  // namespace sol::interpose
