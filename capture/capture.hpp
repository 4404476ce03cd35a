// What the interposition frontends call: the capture layer's entry points.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "ir/native_fn.hpp"
#include "ir/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture {

// Reads the configuration into the capture layer (tracing, routing, verify). Returns true when
// calls must go through submit(), false when every call can go straight to native.
bool start(const config::Config& cfg) noexcept;

// Asked once per symbol when capture is on: true when every call of `sym` may go straight to its
// native definition `native` (under auto, when the program's own library is the best place for
// all of them and nothing traces or verifies them). The symbol then bypasses SOL entirely.
bool always_native(Sym sym, const void* native) noexcept;

// The end of the process (exit(), _exit()...): trace summaries, the verify line. Idempotent.
void finish_process(const char* how) noexcept;

// One intercepted call that must be captured: record it, route it, run it. Never throws; any
// failure inside falls back to `native`, so the caller always gets its result.
void submit(Node& node, NativeFn native) noexcept;

// Per symbol, from the router once its native library is known: nodes doing less work than this
// go to native whatever else, and nothing is traced (0 until known, and whenever every node must
// be planned or recorded). Lets the wrappers skip submit() for small calls on the default path.
extern std::atomic<double> g_native_below[] __asm__("sol_native_below");  // read by GEMM entry stubs too
inline double native_below(Sym s) noexcept {
  return g_native_below[static_cast<size_t>(s)].load(std::memory_order_relaxed);
}

// A thread's memo of its GEMM calls that stay native. Under auto, a call of a class measured
// native costs the routed path (a node, its class, a profile lookup: about 75 ns, 5 % of a 40^3
// SGEMM) only at its first call on a thread: the executor offers such a call to the memo, and the
// wrapper keeps it by its arguments, exactly (memo_keep); the entry stub then sends the same call
// straight to native, as it does a small one (stays_native). Only GEMM, whose class the register
// arguments determine. An entry holds while the profile is unchanged (Profile::changes()), no
// trial in use is open and no device holds data; tracing and verify never ask (native_below() is
// 0 then).
struct MemoKey {
  uint64_t a, b, c;
};
inline MemoKey memo_key(int m, int n, int k, int f0, int f1, int f2) noexcept {
  auto pair = [](int x, int y) {
    return static_cast<uint64_t>(static_cast<uint32_t>(x)) << 32 | static_cast<uint32_t>(y);
  };
  return {pair(m, n), pair(k, f0), pair(f1, f2)};
}
bool stays_native(Sym s, const MemoKey& key) noexcept;
void memo_keep(Sym s, const MemoKey& key) noexcept;

// A BLAS size argument as the flop counts use it: negative counts as 0.
template <class I>
inline double dim(I v) noexcept {
  return v > 0 ? static_cast<double>(v) : 0.0;
}

namespace blas {
double flops(const Node& node) noexcept;  // generated from the spec's flops expressions
}

inline bool native_first(const Node& node) noexcept {
  const double below = native_below(node.sym);
  return below > 0 && blas::flops(node) < below;
}

}  // namespace sol::capture
