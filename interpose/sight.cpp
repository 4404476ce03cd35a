// What SOL cannot see: a loaded library that holds BLAS or oneDNN code that no call reaches through
// a name SOL intercepts (pip's libtorch_cpu.so calls its static MKL and oneDNN directly) gets one
// `sol:` line per process naming it, so that a user who sees no calls knows why.
//
// It is looked for where libraries appear, never on a call's path: when libsol starts (the
// program's own libraries), at each dlopen (what the previous ones loaded) and when the process
// exits (what the last one loaded). Each look first asks the loader whether anything was loaded
// since the last one (a counter it keeps), and only then surveys the libraries
// (capture/blas/libraries.hpp).
//
// dlopen is interposed by a stub that calls the look and then jumps to libc's dlopen with the
// caller's own return address and arguments: glibc finds a library named without a path through
// the calling object's RUNPATH, so it must see the program's caller, never libsol, as its caller.
// Nothing of the program's dlopen is seen or changed after the look.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "capture/blas/libraries.hpp"
#include "common/log.hpp"
#include "common/macros.hpp"
#include "common/native.hpp"
#include "interpose/frontend.hpp"

namespace sol::interpose {
namespace {

std::atomic<bool> g_looking_on{false};      // after libsol started, unless SOL_DISABLE or SOL_LOG=error
std::atomic<bool> g_told{false};            // the line was written
std::atomic<unsigned long long> g_seen{0};  // the loader's count of loads at the last look
SOL_TLS bool t_looking = false;             // a look under way on this thread

unsigned long long loads_so_far() noexcept {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
          *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}

const char* what_code(const char* code) noexcept {
  const std::string_view c(code);
  if (c == "MKL") return "MKL's BLAS";
  if (c == "BLAS") return "a BLAS";
  return code;  // OpenBLAS, BLIS, oneDNN
}

void look() noexcept {
  if (!g_looking_on.load(std::memory_order_acquire) || g_told.load(std::memory_order_relaxed) || t_looking)
    return;
  const unsigned long long adds = loads_so_far();
  if (g_seen.exchange(adds, std::memory_order_acq_rel) == adds) return;
  t_looking = true;
  try {
    for (const auto& lib : capture::blas::survey(capture::blas::kReach)) {
      if (!lib.out_of_sight() || g_told.exchange(true)) continue;
      SOL_LOG(warn,
              "%s holds %s that no call reaches through a name SOL intercepts (its own code calls it "
              "directly, or callers use pointers they looked up): SOL sees none of that work. A build "
              "linked to the system's libraries shows it to SOL (Debian's python3-torch links "
              "libblas.so.3 and libdnnl.so.2), as does a CUDA build for GPU work (its cuBLAS and cuDNN "
              "calls)",
              lib.path.c_str(), what_code(lib.code));
      break;
    }
  } catch (...) {  // allocation failure: nothing said
  }
  t_looking = false;
}

}  // namespace

void start_looking() noexcept {
  if (!log::enabled(log::Level::warn)) return;
  g_looking_on.store(true, std::memory_order_release);
  look();
  std::atexit([] { look(); });
}

}  // namespace sol::interpose

#if SOL_ASM_ENTRIES
// libc's dlopen, found at the first call (dlsym is safe before libsol's constructor ran).
extern "C" {
__attribute__((used)) void* sol_libc_dlopen = nullptr;
}
// `caller`: the dlopen's return address. SOL's own dlopen calls (its start-up thread's look for
// loaded libraries, several a second at first) need no look.
extern "C" __attribute__((used)) void sol_before_dlopen(const void* caller) noexcept {
  if (SOL_UNLIKELY(!__atomic_load_n(&sol_libc_dlopen, __ATOMIC_ACQUIRE)))
    __atomic_store_n(&sol_libc_dlopen, dlsym(RTLD_NEXT, "dlopen"), __ATOMIC_RELEASE);
  if (!sol::in_libsol(caller)) sol::interpose::look();
}

// dlopen(file, mode): the look, given the return address, with the arguments saved around it
// (16-byte aligned call), then a jump to libc's dlopen, which sees the program's return address as
// its caller's.
// clang-format off
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        ".p2align 4\n"
        "dlopen:\n"
        ".cfi_startproc\n"
        "endbr64\n"
        "push %rdi\n.cfi_adjust_cfa_offset 8\n"
        "push %rsi\n.cfi_adjust_cfa_offset 8\n"
        "sub $8, %rsp\n.cfi_adjust_cfa_offset 8\n"
        "mov 24(%rsp), %rdi\n"
        "call sol_before_dlopen\n"
        "add $8, %rsp\n.cfi_adjust_cfa_offset -8\n"
        "pop %rsi\n.cfi_adjust_cfa_offset -8\n"
        "pop %rdi\n.cfi_adjust_cfa_offset -8\n"
        "jmp *sol_libc_dlopen(%rip)\n"
        ".cfi_endproc\n"
        ".size dlopen, .-dlopen\n");
// clang-format on
#endif
