// Call stacks for the trace: raw return addresses on the per-call path (libunwind's
// unw_backtrace with its per-thread cache, else glibc's backtrace()), names only when the files are written at exit
// (symbolize.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sol::capture::trace {

class Unwinder {
 public:
  // Opens libunwind (RTLD_LOCAL: its _Unwind_Backtrace and backtrace must not interpose anyone's),
  // or where there is none (or `libunwind` is false) uses glibc's backtrace(); `why` then says so.
  // True when stacks can be captured.
  bool load(std::string& why, bool libunwind = true) noexcept;
  bool loaded() const noexcept { return backtrace_ != nullptr; }

  // Fills `ips` with up to `max` return addresses of the caller's stack, innermost first, starting
  // at the first frame outside libsol (the code that called the intercepted symbol).
  int capture(uintptr_t* ips, int max) const noexcept;

  // Where each return address of a captured stack is stored: slots[0] = `slot` (given by the
  // caller, which knows it), and each further one the first stack word above the previous slot
  // holding that return address, below `stack_hi`. libunwind's cursor API could say it directly
  // but costs about 40 us per stack (a DWARF step per frame); this scan costs a few hundred loads.
  // Returns how many slots were found (fewer than n when one was not).
  static int find_slots(uintptr_t slot, const uintptr_t* ips, int n, uintptr_t stack_hi,
                        uintptr_t* slots) noexcept;

  // The upper end of the calling thread's stack (0 when unknown).
  static uintptr_t stack_top() noexcept;

 private:
  using Walk = int (*)(void**, int);
  Walk backtrace_ = nullptr;
  uintptr_t own_lo_ = 0, own_hi_ = 0;  // libsol's executable range
};

// The stacks a thread has seen, so that a repeated one is recognised without walking it.
//
// A training loop reaches the same primitives from the same stacks over and over. A stack is
// remembered with the stack address of each frame's return address. A new call whose caller's
// return address sits at the same address and has the same value, and whose remembered slots all
// still hold the remembered return addresses, has the same chain of frames: each frame's size,
// hence where its caller's return address is, follows from its code address. (The exception, a
// frame whose size varies at the same code address, alloca, would need a stale code address to
// sit exactly where a return address was: not impossible, but a miss costs only a wrong site.)
// About 30 loads instead of a walk of up to 32 frames through libunwind.
class StackCache {
 public:
  // The site of the stack whose innermost return address is stored at `slot` (0 when unknown:
  // then always a miss), or 0 on a miss.
  uint32_t find(uint32_t sym, uintptr_t slot) const noexcept;
  // Remembers a walked stack (ips/slots innermost first, slots[0] == slot).
  void add(uint32_t sym, uintptr_t slot, const uintptr_t* ips, const uintptr_t* slots, int n, uint32_t site);

 private:
  struct Entry {
    uintptr_t slot = 0, ip = 0;
    uint32_t sym = 0, site = 0;
    std::vector<uintptr_t> ips, slots;
  };
  // Set-associative: one set per (symbol, innermost slot, innermost return address), whose ways
  // hold the stacks that differ further out (a function called from several places, each at the
  // same depth: PyTorch's dispatcher). A wrong way fails at its first differing frame, cheaply.
  static constexpr size_t kSets = 128, kWays = 16;
  static size_t set_of(uint32_t sym, uintptr_t slot, uintptr_t ip) noexcept;
  std::vector<Entry> entries_ = std::vector<Entry>(kSets * kWays);
  std::vector<uint8_t> next_ = std::vector<uint8_t>(kSets);  // round-robin victim per set
};

// The name a flame graph shows: the function without its parameter list, or object+0xoffset;
// for a Python frame, "qualname (file.py:line)" with the file's directory left out.
std::string short_frame(const std::string& frame);

// Whether a frame's name is a Python frame's, "qualname (file:line)".
bool is_python_frame(const std::string& frame);

}  // namespace sol::capture::trace
