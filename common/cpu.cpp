#include "common/cpu.hpp"

#include <cpuid.h>
#include <sched.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sol::cpu {
namespace {

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// Leaf `leaf`, sub-leaf `sub`; all zero when the CPU does not have that leaf (its maximum leaf,
// basic or extended, is below it), so absent leaves read as "no feature".
Regs leaf(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return r;
  __cpuid_count(leaf, sub, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(unsigned reg, int n) {
  return (reg >> n) & 1u;
}

// XCR0, the register states the OS saves on a context switch. Only valid when CPUID says the OS
// enabled XSAVE (OSXSAVE); the caller checks that.
uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string trim(std::string s) {
  const size_t first = s.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(' ') - first + 1);
}

// The CPUs this process may run on. The set grows until the kernel accepts it: sched_getaffinity
// fails with EINVAL when the set is smaller than the kernel's CPU mask (more than 1024 CPUs).
int affinity_cpus() {
  for (int n = CPU_SETSIZE; n <= (1 << 16); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) break;
    const size_t size = CPU_ALLOC_SIZE(n);
    const bool ok = sched_getaffinity(0, size, set) == 0;
    const int count = ok ? CPU_COUNT_S(size, set) : 0;
    const int error = ok ? 0 : errno;
    CPU_FREE(set);
    if (ok) return count > 0 ? count : 1;
    if (error != EINVAL) break;
  }
  return 1;
}

Info read() {
  Info info;
  const Regs l0 = leaf(0);
  char vendor[13] = {};
  std::memcpy(vendor, &l0.ebx, 4);
  std::memcpy(vendor + 4, &l0.edx, 4);
  std::memcpy(vendor + 8, &l0.ecx, 4);
  info.vendor = vendor;

  // The brand string: 48 bytes over leaves 0x80000002..4, NUL-padded and often space-padded.
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const Regs r = leaf(0x80000002u + i);
    std::memcpy(brand + 16 * i, &r, 16);
  }
  info.model = trim(brand);

  const Regs l1 = leaf(1);
  // Family and model as Intel's and AMD's manuals combine them (the extended fields count only
  // for family 0xf, and for the model also for family 6).
  const int base_family = static_cast<int>((l1.eax >> 8) & 0xf);
  const int base_model = static_cast<int>((l1.eax >> 4) & 0xf);
  info.family = base_family == 0xf ? base_family + static_cast<int>((l1.eax >> 20) & 0xff) : base_family;
  info.model_number = base_family == 0x6 || base_family == 0xf
                          ? base_model + (static_cast<int>((l1.eax >> 16) & 0xf) << 4)
                          : base_model;
  info.stepping = static_cast<int>(l1.eax & 0xf);
  info.sse3 = bit(l1.ecx, 0);
  info.fma = bit(l1.ecx, 12);
  info.avx = bit(l1.ecx, 28);
  const bool osxsave = bit(l1.ecx, 27);

  const Regs l7 = leaf(7);
  info.avx2 = bit(l7.ebx, 5);
  info.avx512f = bit(l7.ebx, 16);
  info.avx512dq = bit(l7.ebx, 17);
  info.avx512cd = bit(l7.ebx, 28);
  info.avx512bw = bit(l7.ebx, 30);
  info.avx512vl = bit(l7.ebx, 31);
  // AMX-TILE and AMX-BF16 as the CPU reports them; Linux grants AMX state per process on request.
  info.amx = bit(l7.edx, 24) && bit(l7.edx, 22);
  // Sub-leaf 1 exists when sub-leaf 0 says so in EAX.
  if (l7.eax >= 1) info.avx512_bf16 = bit(leaf(7, 1).eax, 5);

  if (osxsave) {
    const uint64_t x = xcr0();
    info.os_avx = (x & 0x6) == 0x6;                      // SSE and AVX (YMM) state
    info.os_avx512 = info.os_avx && (x & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper, ZMM16-31
  }

  // SSE2 is part of x86-64, so every CPU this runs on has it.
  info.isa = Isa::sse2;
  if (info.sse3) info.isa = Isa::sse3;
  if (info.sse3 && info.avx && info.os_avx) info.isa = Isa::avx;
  if (info.isa == Isa::avx && info.avx2 && info.fma) info.isa = Isa::avx2;
  // The subset OpenBLAS's SkylakeX kernels use (Skylake-SP and later; not Knights Landing).
  if (info.isa == Isa::avx2 && info.avx512f && info.avx512cd && info.avx512bw && info.avx512dq &&
      info.avx512vl && info.os_avx512)
    info.isa = Isa::avx512;

  info.cpus = affinity_cpus();
  // secure_getenv: a set-user-ID process reads no SOL_* variable (see fs_safety.hpp).
  if (const char* model = secure_getenv("SOL_TEST_CPU_MODEL"); model && *model) info.model = model;
  return info;
}

}  // namespace

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::sse2: return "SSE2";
    case Isa::sse3: return "SSE3";
    case Isa::avx: return "AVX";
    case Isa::avx2: return "AVX2";
    case Isa::avx512: return "AVX-512";
    case Isa::unknown: break;
  }
  return "unknown";
}

const Info& info() noexcept {
  // A function-local static: initialised once, thread-safe (the compiler guards it).
  static const Info cached = read();
  return cached;
}

}  // namespace sol::cpu
