// The trap this exists for: frameworks load their libraries after libsol and with RTLD_LOCAL
// (Python extension modules). libtorch_cpu.so's call to dnnl_primitive_execute binds to libsol's
// wrapper through the global scope, but libdnnl.so.2 sits in the extension's local scope, where
// dlsym(RTLD_NEXT, ...) does not look: it returns NULL, and a naive wrapper calls NULL.
//
// So: RTLD_NEXT first (the library the program would have bound to in the global scope), then
// every loaded object in load order, opened by path with RTLD_NOLOAD (which only takes a
// reference) and searched with dlsym. libsol's own definitions are skipped wherever they appear.
#include "common/native.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace sol {
namespace {

// libsol's loaded segments, found once. A range check, not dladdr: in_libsol() is asked while
// dl_iterate_phdr holds the loader's list lock, where dladdr, which takes the loader's other lock,
// could deadlock against a dlopen on another thread (glibc takes that one first).
struct Range {
  uintptr_t self, lo, hi;
};
const Range& own_range() noexcept {
  static const Range range = [] {
    Range r{reinterpret_cast<uintptr_t>(&own_range), 0, 0};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
          auto& r = *static_cast<Range*>(data);
          uintptr_t lo = UINTPTR_MAX, hi = 0;
          for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
            if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
            const uintptr_t at = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            lo = std::min(lo, at);
            hi = std::max(hi, at + info->dlpi_phdr[i].p_memsz);
          }
          if (lo > r.self || r.self >= hi) return 0;
          r.lo = lo, r.hi = hi;
          return 1;
        },
        &r);
    return r;
  }();
  return range;
}

void* search_loaded_objects(const char* name) {
  for (const auto& path : loaded_objects())
    if (void* p = find_in_object(path, name)) return p;
  return nullptr;
}

}  // namespace

// Collected first and opened afterwards: dlopen inside the dl_iterate_phdr callback would run
// under the loader's lock.
std::vector<std::string> loaded_objects() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

void* find_in_object(const std::string& path, const char* name) noexcept {
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  void* p = dlsym(handle, name);
  dlclose(handle);  // drops the reference RTLD_NOLOAD took, nothing more
  return p && !in_libsol(p) ? p : nullptr;
}

namespace {
constexpr size_t kMaxOwn = 16;
std::atomic<uintptr_t> g_own[kMaxOwn];
}  // namespace

void note_own_library(void* handle) noexcept {
  link_map* map = nullptr;
  if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return;
  for (auto& slot : g_own) {
    uintptr_t expected = 0;
    if (slot.compare_exchange_strong(expected, map->l_addr) || expected == map->l_addr) return;
  }
}

bool own_library(uintptr_t base) noexcept {
  for (const auto& slot : g_own) {
    const uintptr_t v = slot.load(std::memory_order_acquire);
    if (!v) return false;
    if (v == base) return true;
  }
  return false;
}

bool in_libsol(const void* address) noexcept {
  const Range& r = own_range();
  const auto a = reinterpret_cast<uintptr_t>(address);
  return r.lo <= a && a < r.hi;
}

const char* object_name(const void* address) noexcept {
  Dl_info info{};
  if (dladdr(address, &info) && info.dli_fname && *info.dli_fname) return info.dli_fname;
  return "the main program";
}

void* find_native(const char* name, const char** how) noexcept {
  void* p = dlsym(RTLD_NEXT, name);
  if (p && !in_libsol(p)) {
    if (how) *how = "RTLD_NEXT";
    return p;
  }
  try {
    p = search_loaded_objects(name);
  } catch (...) {  // allocation failure: report "not found" rather than throw through C
    p = nullptr;
  }
  if (how) *how = "search of loaded objects";
  return p;
}

std::string file_identity(const std::string& path) {
  char real[PATH_MAX];
  struct stat st;
  if (!::realpath(path.c_str(), real) || ::stat(real, &st) != 0) return "";
  return std::string(real) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec);
}

std::string library_identity(const void* address) {
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "";
  return file_identity(info.dli_fname);
}

}  // namespace sol
