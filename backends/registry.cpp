// The one place that knows every backend (hal::builtin_backends(), declared in hal/registry.hpp).
#include "hal/registry.hpp"

#include <memory>

#define SOL_BACKEND(name)                 \
  namespace sol::backends::name {         \
  std::unique_ptr<hal::Backend> create(); \
  }
#include "backends/registry.def"
#undef SOL_BACKEND

namespace sol::hal {

const std::vector<BackendEntry>& builtin_backends() noexcept {
  static const std::vector<BackendEntry> all = {
#define SOL_BACKEND(name) {#name, &sol::backends::name::create},
#include "backends/registry.def"
#undef SOL_BACKEND
  };
  return all;
}

}  // namespace sol::hal
