// Call stacks for the trace: raw return addresses on the per-call path (libunwind's
// unw_backtrace with its per-thread cache), names only when the files are written at exit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sol::capture::trace {

class Unwinder {
 public:
  // Opens libunwind (RTLD_LOCAL: its _Unwind_Backtrace and backtrace must not interpose anyone's).
  bool load(std::string& why) noexcept;
  bool loaded() const noexcept { return backtrace_ != nullptr; }

  // Fills `ips` with up to `max` return addresses of the caller's stack, innermost first, starting
  // at the first frame outside libsol (the code that called the intercepted symbol).
  int capture(uintptr_t* ips, int max) const noexcept;

 private:
  int (*backtrace_)(void**, int) = nullptr;
  uintptr_t own_lo_ = 0, own_hi_ = 0;  // libsol's executable range
};

// "function (object+0xoffset)" for a return address, or "object+0xoffset" when the address has no
// dynamic symbol. C++ names are demangled. Looks up `ip - 1`: the call, not the next instruction.
std::string describe_frame(uintptr_t ip);

// The name a flame graph shows: the function without its parameter list, or object+0xoffset.
std::string short_frame(const std::string& frame);

}  // namespace sol::capture::trace
