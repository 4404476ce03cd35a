// The CPU SOL runs on, as far as routing and library checks care: its model, the instruction
// sets it offers, and which OpenBLAS kernels fit it. Read once with cpuid; no allocation after
// the first call.
#pragma once

#include <string>

namespace sol::cpu {

// Vector instruction levels, in the order OpenBLAS's kernel families use them.
// SSSE3 and SSE4 count as sse3 (no kernel family needs the distinction); avx2 includes FMA;
// avx512 is the Skylake-SP subset (F, CD, BW, DQ, VL) that OpenBLAS's SkylakeX kernels use.
enum class Isa : int { unknown = 0, sse2, sse3, avx, avx2, avx512 };
// As a user reads it: "SSE2", "SSE3", "AVX", "AVX2", "AVX-512", "unknown".
const char* isa_name(Isa isa) noexcept;

struct Info {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel"
  std::string model;   // the brand string, trimmed: "AMD EPYC 7B13 64-Core Processor"
  int family = 0, model_number = 0, stepping = 0;
  bool sse3 = false, avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false, amx = false;
  bool os_avx = false, os_avx512 = false;  // XCR0: the kernel saves the registers
  Isa isa = Isa::unknown;                  // the best level usable here (CPU and OS agree)
  int cpus = 1;                            // CPUs this process may run on (sched_getaffinity)
};

// This machine's CPU. SOL_TEST_CPU_MODEL replaces the brand string (tests of profile invalidation).
const Info& info() noexcept;

}  // namespace sol::cpu
