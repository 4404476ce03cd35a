#include "common/openblas_core.hpp"

#include <dlfcn.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include "common/clock.hpp"

namespace sol::openblas_core {
namespace {

// The time-stamp counter and the clock when SOL was loaded: spin_ns() times the counter's rate
// from there, without a wait of its own.
struct Stamp {
  uint64_t ticks, ns;
};
Stamp stamp() noexcept {
#if defined(__x86_64__)
  return {__builtin_ia32_rdtsc(), monotonic_ns()};
#else
  return {0, monotonic_ns()};
#endif
}
const Stamp g_loaded = stamp();

using cpu::Isa;

struct Core {
  const char* name;  // as gotoblas_corename() spells it
  Isa isa;           // the instructions its kernels use (SSSE3 and SSE4 count as SSE3: no level between)
};

// Every name OpenBLAS's x86-64 DYNAMIC_ARCH builds report (driver/others/dynamic.c, corename[];
// 0.3.21 ends at Cooperlake, later versions add SapphireRapids). Single-target builds report their
// TARGET in capitals ("HASWELL"), which the case-insensitive lookup also finds. Katmai, Coppermine
// and Athlon are 32-bit SSE kernels that 64-bit builds replace by Prescott; SSE2 is this table's floor.
constexpr Core kCores[] = {
    {"Katmai", Isa::sse2},       {"Coppermine", Isa::sse2},
    {"Northwood", Isa::sse2},    {"Prescott", Isa::sse3},
    {"Banias", Isa::sse2},       {"Atom", Isa::sse3},
    {"Core2", Isa::sse3},        {"Penryn", Isa::sse3},
    {"Dunnington", Isa::sse3},   {"Nehalem", Isa::sse3},
    {"Athlon", Isa::sse2},       {"Opteron", Isa::sse2},
    {"Opteron_SSE3", Isa::sse3}, {"Barcelona", Isa::sse3},
    {"Nano", Isa::sse3},         {"Sandybridge", Isa::avx},
    {"Bobcat", Isa::sse3},       {"Bulldozer", Isa::avx},
    {"Piledriver", Isa::avx},    {"Haswell", Isa::avx2},
    {"Steamroller", Isa::avx},   {"Excavator", Isa::avx},
    {"Zen", Isa::avx2},          {"SkylakeX", Isa::avx512},
    {"Cooperlake", Isa::avx512}, {"SapphireRapids", Isa::avx512},
};

// The first OPENBLAS_CORETYPE value for `cpu`, best first, that `has` accepts; "" when none.
// Only names that OPENBLAS_CORETYPE accepts: force_coretype() of 0.3.21 takes Katmai..Cooperlake
// (and later versions do not take SapphireRapids either; they pick it only by detection).
std::string pick(const cpu::Info& cpu, const std::function<bool(const char*)>& has) {
  std::vector<const char*> names;
  if (cpu.isa >= Isa::avx512) {
    // Cooperlake is SkylakeX plus bfloat16 kernels.
    if (cpu.avx512_bf16) names.push_back("Cooperlake");
    names.push_back("SkylakeX");
  }
  if (cpu.isa >= Isa::avx2) {
    // Zen: Haswell's kernels with blocking sizes for AMD's caches; OpenBLAS picks it for Hygon too.
    if (cpu.vendor == "AuthenticAMD" || cpu.vendor == "HygonGenuine") names.push_back("Zen");
    names.push_back("Haswell");
  }
  if (cpu.isa >= Isa::avx) names.push_back("Sandybridge");
  if (cpu.isa >= Isa::sse3) names.push_back("Prescott");
  for (const char* n : names)
    if (has(n)) return n;
  return "";
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

template <typename Fn>
Fn lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

cpu::Isa core_isa(const std::string& core) noexcept {
  for (const Core& c : kCores)
    if (strcasecmp(core.c_str(), c.name) == 0) return c.isa;
  return Isa::unknown;
}

std::string best_core(const cpu::Info& cpu) {
  return pick(cpu, [](const char*) { return true; });
}

bool check(void* handle, Check& out) {
  out = Check{};
  const auto get_config = lookup<const char* (*)()>(handle, "openblas_get_config");
  const auto get_core = lookup<const char* (*)()>(handle, "openblas_get_corename");
  if (!get_config || !get_core) return false;

  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(get_config), &where) && where.dli_fname) {
    char* real = realpath(where.dli_fname, nullptr);
    out.library = real ? real : where.dli_fname;
    std::free(real);
  }
  const char* config = get_config();
  const char* core = get_core();
  out.config = config ? config : "";
  out.core = core ? core : "";
  out.core_isa = core_isa(out.core);

  const cpu::Info& cpu = cpu::info();
  out.below_par = out.core_isa != Isa::unknown && cpu.isa != Isa::unknown && out.core_isa < cpu.isa;
  if (!out.below_par) return true;

  // OPENBLAS_CORETYPE works only in DYNAMIC_ARCH builds, and only for the kernel families the build
  // has. Those export their kernels with the family as suffix (sgemm_kernel_HASWELL); a build
  // that hides them is taken at its word. Before 0.3.22, OPENBLAS_CORETYPE=Cooperlake was not
  // recognised (OpenBLAS pull request 3806), and an unknown name makes OpenBLAS guess from the
  // instruction set alone.
  const bool dynamic = out.config.find("DYNAMIC_ARCH") != std::string::npos;
  const bool exported = dlsym(handle, "sgemm_kernel_PRESCOTT") != nullptr;
  int major = 0, minor = 0, patch = 0;
  const bool versioned = std::sscanf(out.config.c_str(), "OpenBLAS %d.%d.%d", &major, &minor, &patch) == 3;
  const bool takes_cooperlake =
      versioned && std::make_tuple(major, minor, patch) >= std::make_tuple(0, 3, 22);
  if (dynamic) {
    out.best = pick(cpu, [&](const char* name) {
      if (std::strcmp(name, "Cooperlake") == 0 && !takes_cooperlake) return false;
      return !exported || dlsym(handle, ("sgemm_kernel_" + upper(name)).c_str()) != nullptr;
    });
    if (core_isa(out.best) <= out.core_isa) out.best.clear();
  }

  const std::string why =
      "this CPU has " + std::string(cpu::isa_name(cpu.isa)) + "; OpenBLAS runs its " + out.core + " kernels";
  if (!out.best.empty())
    out.fix = "set OPENBLAS_CORETYPE=" + out.best + " (" + why + ")";
  else if (!dynamic)
    out.fix = "use an OpenBLAS built for this CPU or with DYNAMIC_ARCH (" + why + ", the only ones it has)";
  else
    out.fix = "use an OpenBLAS with " + std::string(cpu::isa_name(cpu.isa)) + " kernels (" + why +
              ", the best this build has)";
  return true;
}

uint64_t loaded_ns() noexcept {
  return g_loaded.ns;
}

uint64_t spin_ns() noexcept {
  int exponent = 28;  // OpenBLAS's THREAD_TIMEOUT
  if (const char* v = secure_getenv("OPENBLAS_THREAD_TIMEOUT"); v && std::atoi(v) > 0)
    exponent = std::min(30, std::max(4, std::atoi(v)));
  const double ticks = static_cast<double>(uint64_t{1} << exponent);
  double ticks_per_ns = 1.8;
  const Stamp now = stamp();
  if (now.ticks > g_loaded.ticks && now.ns >= g_loaded.ns + 20'000'000)
    ticks_per_ns =
        static_cast<double>(now.ticks - g_loaded.ticks) / static_cast<double>(now.ns - g_loaded.ns);
  return static_cast<uint64_t>(1.1 * ticks / ticks_per_ns);
}

}  // namespace sol::openblas_core
