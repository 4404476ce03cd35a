// The executor: runs one node where the router (or auto, auto/auto.hpp) says, falling back along
// the plan. Each node is handed to its backend as it is submitted; under SOL_LAZY a device backend
// may keep the results on the device and run its work later (hal/coherence.hpp), and the executor
// first brings back what a node that runs on the host needs (capture/lazy).
#pragma once

#include <string>

#include "capture/blas/blas.hpp"
#include "capture/capture.hpp"
#include "route/router.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture {

// Process-wide routing state, created by start() when any call may leave native.
bool start_executor(const config::Config& cfg) noexcept;
bool executor_active() noexcept;

// Runs `node`; `native` calls the program's own symbol with the caller's arguments. Returns the
// name of what ran it ("native", a backend's name, or "invalid" for a call the argument checks
// rejected, which was reported through the program's xerbla_ / cblas_xerbla).
const char* execute(Node& node, NativeFn native) noexcept;

// Whether the executor's backend of this name can run nodes (initialising it, as a first node
// would); `why` says why not.
bool executor_backend_ready(const std::string& name, std::string& why) noexcept;

// Told of each backend that declined or failed a node, the executor going on along its plan
// (`sol replay` counts them per op). One listener per process; nullptr: none.
using DeclineListener = void (*)(const char* backend, const Node& node, hal::Reason why) noexcept;
void set_decline_listener(DeclineListener listener) noexcept;

// Whether every call of `sym` goes to native under the current configuration (see
// capture::always_native).
bool executor_always_native(Sym sym, const void* native) noexcept;

// The program's own library for a native definition, classified once per symbol.
route::NativeKind native_kind(Sym sym, const void* native) noexcept;

}  // namespace sol::capture
