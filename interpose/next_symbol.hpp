// The next definition of a symbol libsol interposes (libc's, or a library preloaded after
// libsol), looked up once with dlsym(RTLD_NEXT) and cached. nullptr when there is none.
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace sol::interpose {

template <class Fn>
Fn next_symbol(std::atomic<Fn>& cache, const char* name) noexcept {
  Fn fn = cache.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}

}  // namespace sol::interpose
