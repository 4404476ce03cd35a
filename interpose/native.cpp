// Resolving the native definition of an intercepted symbol, at its first call (the search itself
// is common/native.cpp). The wrapper caches the result in its slot.
#include <cstdlib>

#include "common/log.hpp"
#include "common/native.hpp"
#include "interpose/frontend.hpp"

namespace sol::interpose {

void* resolve(Sym s) noexcept {
  const char* name = capture::symbol_name(s);
  const char* how = "";
  if (void* p = find_native(name, &how)) {
    SOL_LOG(debug, "native %s: %s (%s)", name, object_name(p), how);
    return p;
  }
  log::write(log::Level::error,
             "error: %s was called but no loaded library defines it, so there is nothing to forward "
             "it to; aborting",
             name);
  std::abort();
}

}  // namespace sol::interpose
