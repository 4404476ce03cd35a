// Finding a symbol's definition outside libsol: the library the program itself would use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sol {

// The definition of `name` in a loaded object other than libsol, or nullptr. Tries
// dlsym(RTLD_NEXT) first, then every loaded object in load order, which also finds libraries a
// framework loaded with RTLD_LOCAL (see native.cpp). `how` (optional) says which way it was found.
void* find_native(const char* name, const char** how = nullptr) noexcept;

// The paths of the loaded objects but the main program, in load order.
std::vector<std::string> loaded_objects();
// The definition of `name` in the loaded object at `path` or the libraries it depends on, outside
// libsol; nullptr when there is none (or the object is no longer loaded).
void* find_in_object(const std::string& path, const char* name) noexcept;

// Libraries SOL loaded for its own backends (fs_safety::open_library notes each one it loads
// afresh): not the program's, so surveys of the program's libraries leave them out. `base` is the
// object's load address (dl_phdr_info::dlpi_addr).
void note_own_library(void* handle) noexcept;
bool own_library(uintptr_t base) noexcept;

// True when `address` lies in libsol itself.
bool in_libsol(const void* address) noexcept;

// The path of the object containing `address`, or "the main program".
const char* object_name(const void* address) noexcept;

// What identifies a file's build for caches keyed by it: "realpath:size:mtime", or "" when it
// cannot be read. A library upgraded or swapped in place gets another identity.
std::string file_identity(const std::string& path);
// The same for the loaded object that contains `address` ("" when none does).
std::string library_identity(const void* address);

}  // namespace sol
