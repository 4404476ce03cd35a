// Every backend SOL is built with, created and initialised on first use.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hal/backend.hpp"

namespace sol::config {
struct Config;
}

namespace sol::hal {

struct BackendEntry {
  const char* name;
  BackendFactory create;
};

// The backends this build has, in preference order for documentation. Defined by
// backends/registry.cpp from backends/registry.def: adding a backend is a folder and one line.
const std::vector<BackendEntry>& builtin_backends() noexcept;

class Registry {
 public:
  explicit Registry(const config::Config& cfg);

  // The backend of this name, initialised at the first request (once, thread-safe). nullptr when
  // it does not exist in this build or could not be initialised (see why()).
  Backend* get(std::string_view name) noexcept;
  // The backend's prepare() (see Backend), without initialising it.
  void prepare(std::string_view name, Backend::StartWhen when = Backend::StartWhen::library_loaded) noexcept;
  // The backend's start_now() (see Backend).
  void start_now(std::string_view name) noexcept;
  // Whether get(name) would wait for the backend's start-up (Backend::starting): false once it is
  // initialised, or when it was never prepared.
  bool starting(std::string_view name) noexcept;
  // Why get(name) returned nullptr ("" otherwise).
  std::string why(std::string_view name);
  // The backend's accelerator_hint(), asked without initialising it.
  Backend::Hint accelerator_hint(std::string_view name) noexcept;
  // The backend's device_backend(), asked without initialising it.
  bool device_backend(std::string_view name) noexcept;
  // The backend's runs_lazily(), asked without initialising it.
  bool runs_lazily(std::string_view name) noexcept;
  // The backend's compiles_kernels(), asked without initialising it.
  bool compiles_kernels(std::string_view name) noexcept;
  // Whether a backend of this name was built in.
  bool built(std::string_view name) const noexcept;

 private:
  struct Slot {
    const BackendEntry* entry;
    std::once_flag create_once, init_once;
    std::unique_ptr<Backend> object;  // created, maybe not initialised
    Backend* ready = nullptr;         // initialised successfully
    std::atomic<bool> initialised{false};  // init() ran, whatever came of it
    std::string why;
  };
  Slot* find(std::string_view name) noexcept;
  Backend* object(Slot& slot) noexcept;

  const config::Config& cfg_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace sol::hal
