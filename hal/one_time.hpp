// Work a call does once for the calls after it: a kernel compiled or loaded from the disk cache, a
// backend started (a device opened), auto measuring a shape class's candidates. The code that does
// it notes it on the calling thread; the trace recorder takes the notes when the call ends, so that
// a report can tell that call's time from the steady state (sol diff). A thread-local byte: nothing
// on the paths that never note.
#pragma once

#include <cstdint>
#include <string>

namespace sol::hal::one_time {

enum Kind : uint8_t { kernel_compile = 1, kernel_load = 2, backend_start = 4, measuring = 8 };

void note(Kind kind) noexcept;
// Auto measured inside this call for `ns`: noted as `measuring`, the time kept apart so that a
// trace can tell the call's own time (a 0.1 ms SGEMM) from the race it paid for (tens of ms).
void note_measuring(uint64_t ns) noexcept;

struct Work {
  uint8_t kinds = 0;          // a mask of Kind
  uint64_t measuring_ns = 0;  // of the call's time, what auto's measuring took
};
// The work noted on this thread since the last take, and clears it.
Work take() noexcept;
// "kernel compile, auto's measuring": the kinds of a mask, for people and trace files.
std::string names(uint8_t kinds);

}  // namespace sol::hal::one_time
