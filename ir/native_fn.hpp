// How SOL calls the program's own definition of an intercepted function: the frontends' thunk,
// which the executor and auto call when a node runs natively.
#pragma once

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

}  // namespace sol::capture
