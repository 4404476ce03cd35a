// CLBlast's programs through the backend's program cache.
//
// CLBlast 1.5.3 compiles a routine's kernels from source at the routine's first call in each
// process and keeps them in memory only: its C API has ClearCache and FillCache, nothing that saves
// or loads a binary. On pocl that first call costs about 100 ms even when pocl's own kernel cache
// holds the compiled code, because pocl runs clang's preprocessor over the source (130 KB for
// GEMM) to find its cache entry; a binary loads in about 10 ms. So the backend takes over the two
// calls with which CLBlast builds a program, clCreateProgramWithSource and clBuildProgram, in the
// import table of the libclblast it loaded (import_hook.hpp):
//
//   create  the file for (device, CLBlast library, CLBLAST_BUILD_OPTIONS, source) is on disk: the
//           program is created from it and built with the options stored beside it; else
//           CLBlast's call goes through as it was
//   build   of a program created from disk with the same options: nothing left to do; of one
//           created from source: the build goes through and the binary is stored
//
// A file is named after the routine whose call built it (Routine below) and the device, so that
// the start-up can find and load a routine's program before CLBlast asks for it (preload()):
// <dir>/clblast_<routine>_<device tag>-<hash>.clbin.
//
// Only for contexts the backend registered (add()), and only in a libclblast that SOL loaded
// itself: when the program had loaded one first, that copy is the program's and stays untouched,
// and CLBlast compiles as before.
#pragma once

#include <string>

#include "backends/opencl/api.hpp"

namespace sol::backends::opencl {

class ProgramCache;

namespace clblast_programs {

// Once per process, before SOL loads `library` (libclblast.so.1): whether the program has it
// loaded already, which leaves it unpatched for the life of the process.
void note_preexisting(const char* library) noexcept;

// Once per process, after SOL loaded `library` with `cl` already resolved: redirects the two
// imports. false with `why` when it cannot (CLBlast then compiles as before).
bool install(const char* library, const ClApi& cl, std::string& why) noexcept;

// Programs CLBlast creates in `context` go through `cache` (whose entries are keyed by `key` too:
// what CLBlast's source and options depend on besides the device) until remove().
void add(cl_context context, ProgramCache* cache, std::string key);
void remove(cl_context context) noexcept;

// Loads the program that `routine` ("sgemm") had CLBlast build in an earlier process, if the disk
// cache has it for this device, and keeps it for CLBlast's next request: true if it did. Never
// compiles, so that CLBlast may then be called for the routine at no more cost than a launch.
bool preload(cl_context context, const char* routine);

// Names the programs CLBlast builds on this thread while it lives (one BLAS call): the routine,
// its precision first ("sgemm"). Unnamed ones are "other".
class Routine {
 public:
  Routine(char precision, const char* op) noexcept;
  ~Routine();
  Routine(const Routine&) = delete;
  Routine& operator=(const Routine&) = delete;
};

}  // namespace clblast_programs
}  // namespace sol::backends::opencl
