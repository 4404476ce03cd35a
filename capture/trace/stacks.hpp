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
//
// The loads are most of a recognised call's cost in a big program: between two calls of one site
// PyTorch's own work evicts what the recorder touched. So a lookup is a probe of a flat table
// (one cache line) and then the remembered (slot, return address) pairs of the stack, contiguous
// in one arena, compared with the live stack until the first difference.
class StackCache {
 public:
  // The site of the stack whose innermost return address is stored at `slot` (0 when unknown:
  // then always a miss), or 0 on a miss.
  uint32_t find(uint32_t sym, uintptr_t slot) const noexcept;
  // Remembers a walked stack (ips/slots innermost first, slots[0] == slot).
  void add(uint32_t sym, uintptr_t slot, const uintptr_t* ips, const uintptr_t* slots, int n, uint32_t site);

  size_t size() const noexcept { return used_; }

 private:
  // One remembered stack. Stacks that share their innermost frame (a function called from several
  // places at the same depth: PyTorch's dispatcher) share a key and sit in one probe sequence; a
  // wrong one fails at its first differing frame, cheaply.
  struct Entry {
    uint64_t key = 0;  // of (symbol, innermost slot, innermost return address); 0: empty
    uint32_t sym = 0, site = 0;
    uint32_t at = 0, n = 0;  // its pairs: frames_[at .. at + 2n), slot then return address
  };
  static uint64_t key_of(uint32_t sym, uintptr_t slot, uintptr_t ip) noexcept;
  // Into the first empty entry of its probe sequence (the table has one: at most half full).
  void place(const Entry& e) noexcept;
  // At most this many stacks per thread: past it the cache starts over (a program with more
  // distinct stacks than this is walked more often, and stays correct).
  static constexpr size_t kMaxStacks = 8192;
  std::vector<Entry> table_;  // open addressing, at most half full
  std::vector<uintptr_t> frames_;
  size_t mask_ = 0, used_ = 0;
};

// The name a flame graph shows: the function without its parameter list, or object+0xoffset;
// for a Python frame, "qualname (file.py:line)" with the file's directory left out.
std::string short_frame(const std::string& frame);

// Whether a frame's name is a Python frame's, "qualname (file:line)".
bool is_python_frame(const std::string& frame);

}  // namespace sol::capture::trace
