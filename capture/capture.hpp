// What the interposition frontends call: the capture layer's entry points.
#pragma once

#include "capture/node.hpp"

namespace sol::config {
struct Config;
}

namespace sol::capture {

// A borrowed reference to the thunk that calls the native symbol with the caller's original
// arguments. It lives on the wrapper's stack for the duration of one call.
class NativeFn {
 public:
  template <class F>
  explicit NativeFn(F& f) noexcept : obj_(&f), call_([](void* o) noexcept { (*static_cast<F*>(o))(); }) {}
  void operator()() const noexcept { call_(obj_); }

 private:
  void* obj_;
  void (*call_)(void*) noexcept;
};

// Reads the configuration into the capture layer (tracing, routing). Returns true when calls
// must go through submit(), false when every call can go straight to native.
bool start(const config::Config& cfg) noexcept;

// One intercepted call that must be captured: record it, route it, run it. Never throws; any
// failure inside falls back to `native`, so the caller always gets its result.
void submit(Node& node, NativeFn native) noexcept;

}  // namespace sol::capture
