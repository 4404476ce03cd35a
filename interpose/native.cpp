// Finding the native definition of an intercepted symbol.
//
// The trap: frameworks load their libraries after libsol and with RTLD_LOCAL (Python extension
// modules). libtorch_cpu.so's call to dnnl_primitive_execute binds to libsol's wrapper through
// the global scope, but libdnnl.so.2 sits in the extension's local scope, where
// dlsym(RTLD_NEXT, ...) does not look: it returns NULL and a naive wrapper calls NULL.
//
// So, lazily at a symbol's first call: RTLD_NEXT first (the library the program would have bound
// to in the global scope), then every loaded object in load order, opened by path with
// RTLD_NOLOAD (which only takes a reference) and searched with dlsym. libsol's own definitions
// are skipped wherever they turn up. The caller caches the result in the wrapper's slot.
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "interpose/frontend.hpp"

namespace sol::interpose {
namespace {

const void* own_base() noexcept {
  static const void* base = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<const void*>(&own_base), &info);
    return static_cast<const void*>(info.dli_fbase);
  }();
  return base;
}

bool is_ours(void* p) noexcept {
  Dl_info info{};
  return dladdr(p, &info) && info.dli_fbase == own_base();
}

const char* object_of(void* p) noexcept {
  Dl_info info{};
  if (dladdr(p, &info) && info.dli_fname && *info.dli_fname) return info.dli_fname;
  return "the main program";
}

// Paths of the loaded objects, in load order. Collected first and opened afterwards: dlopen
// inside the dl_iterate_phdr callback would run under the loader's lock.
std::vector<std::string> loaded_objects() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* out = static_cast<std::vector<std::string>*>(data);
        if (info->dlpi_name && *info->dlpi_name) out->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

void* search_loaded_objects(const char* name) {
  for (const auto& path : loaded_objects()) {
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    void* p = dlsym(handle, name);
    dlclose(handle);
    if (p && !is_ours(p)) return p;
  }
  return nullptr;
}

}  // namespace

void* resolve(Sym s) noexcept {
  const char* name = capture::symbol_name(s);
  void* p = dlsym(RTLD_NEXT, name);
  const char* how = "RTLD_NEXT";
  if (!p || is_ours(p)) {
    try {
      p = search_loaded_objects(name);
    } catch (...) {
      p = nullptr;
    }
    how = "search of loaded objects";
  }
  if (p) {
    SOL_LOG(debug, "native %s: %s (%s)", name, object_of(p), how);
    return p;
  }
  log::write(log::Level::error,
             "error: %s was called but no loaded library defines it, so there is nothing to forward "
             "it to; aborting",
             name);
  std::abort();
}

}  // namespace sol::interpose
