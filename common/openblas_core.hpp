// Whether a loaded OpenBLAS runs kernels below this CPU's ability, and which OPENBLAS_CORETYPE
// would fix it. OpenBLAS builds with DYNAMIC_ARCH pick their kernels once, when they load, from
// the CPU model they recognise; a CPU newer than the build falls back to old kernels
// (OpenBLAS 0.3.21 on recent AVX-512 Xeons runs its Prescott ones). OPENBLAS_CORETYPE=Prescott
// reproduces that anywhere.
#pragma once

#include <cstdint>
#include <string>

#include "common/cpu.hpp"

namespace sol::openblas_core {

// The instruction level an OpenBLAS core name's kernels use ("Prescott" -> sse3, "Haswell" and
// "Zen" -> avx2, "SkylakeX" -> avx512). Case-insensitive; unknown names give Isa::unknown.
cpu::Isa core_isa(const std::string& core) noexcept;

// The OPENBLAS_CORETYPE value whose kernels fit this CPU best, spelt as openblas_get_corename()
// reports it (OPENBLAS_CORETYPE ignores case): "Cooperlake" (AVX-512 with bfloat16), "SkylakeX",
// "Zen" (AMD, Hygon), "Haswell", "Sandybridge" or "Prescott"; "" for a CPU below SSE3, where
// nothing beats what OpenBLAS detects itself. What a given library accepts can be less: see
// Check::best.
std::string best_core(const cpu::Info& cpu);

struct Check {
  std::string library;  // the file that holds OpenBLAS (realpath)
  std::string config;  // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"
  std::string core;    // openblas_get_corename(): "Prescott"
  cpu::Isa core_isa = cpu::Isa::unknown;
  // When below par, the OPENBLAS_CORETYPE value that fixes it: best_core() for this CPU, or the
  // best family this build has kernels for and accepts by name ("SkylakeX" where best_core() is
  // Cooperlake: OpenBLAS before 0.3.22 does not take that name). Empty when
  // not below par or when this library has nothing better: a build without DYNAMIC_ARCH ignores
  // OPENBLAS_CORETYPE, and one built without the newer families has none.
  std::string best;
  bool below_par = false;  // core_isa < the CPU's isa, both known
  // For a user: "set OPENBLAS_CORETYPE=Haswell (this CPU has AVX2; OpenBLAS runs its Prescott
  // kernels)", or which OpenBLAS to use instead when `best` is empty. Empty when not below par.
  std::string fix;
};

// `handle`: a dlopen handle of a library that is or depends on OpenBLAS (dlsym searches its
// dependencies). false when it is not OpenBLAS.
bool check(void* handle, Check& out);

// How long OpenBLAS's workers spin after their last work before they sleep, in nanoseconds:
// 2^OPENBLAS_THREAD_TIMEOUT time-stamp counter ticks (2^28 by default, the exponent clamped to
// 4..30 as OpenBLAS does), at the counter's rate timed over this process's life so far, plus a
// tenth: 0.15 s for a counter at 2 GHz, 0.21 s at 1.4 GHz. Before the process has lived 20 ms,
// and off x86-64, the figure for a 1.8 GHz counter.
// When libsol was loaded (monotonic ns): about when the program's libraries were, at its start.
uint64_t loaded_ns() noexcept;
uint64_t spin_ns() noexcept;

}  // namespace sol::openblas_core
