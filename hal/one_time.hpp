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
// The kinds noted on this thread since the last take (a mask of Kind), and clears them.
uint8_t take() noexcept;
// "kernel compile, auto's measuring": the kinds of a mask, for people and trace files.
std::string names(uint8_t kinds);

}  // namespace sol::hal::one_time
