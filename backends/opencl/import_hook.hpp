// Redirects one function that a loaded library imports, in that library's own import table (its
// GOT) and nowhere else: the program and every other library keep calling the real function.
// This is how heaptrack attaches to a running process and how plthook works; here it lets the
// backend see the programs CLBlast builds (clblast_programs.hpp).
#pragma once

#include <string>

namespace sol::backends::opencl {

// Makes the library loaded as `handle` (a dlopen handle) call `replacement` wherever it calls
// `symbol` of another library. false with `why` when the library has no such import, or on an
// architecture whose relocations this does not know (then nothing was changed).
bool redirect_import(void* handle, const char* symbol, void* replacement, std::string& why) noexcept;

}  // namespace sol::backends::opencl
