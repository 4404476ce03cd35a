// Names for the return addresses of the trace's stacks, found when the files are written at exit.
//
// dladdr() knows only a library's exported (.dynsym) names, so the static and hidden functions of
// NumPy's and PyTorch's libraries showed as object+offset. elfutils' libdwfl reads every table an
// ELF file has: .symtab, .dynsym, the LZMA-compressed .gnu_debugdata (MiniDebugInfo) and separate
// debug files (build-id under /usr/lib/debug, .gnu_debuglink). libsol is preloaded into every
// process, so it does not link libdw: the library is opened here, at exit, and only when a stack
// is to be named; without it frames keep dladdr's names (one warning per process).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sol::capture::trace {

class Symbolizer {
 public:
  // Opens `libdw` and reports this process's mappings to it once; on failure, dladdr alone.
  explicit Symbolizer(const char* libdw = "libdw.so.1") noexcept;
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // "function (object+0xoffset)", or "object+0xoffset" when no table names the address; the
  // object is the file's basename, C++ names are demangled. Looks up `ip - 1`: the call, not the
  // instruction after it.
  std::string describe(uintptr_t ip);

  // "file:line" of the call when the object has DWARF line information, else "".
  std::string source(uintptr_t ip);

 private:
  // A function of a module's symbol tables: [lo, hi) in this process, the name in libdw's memory.
  struct Function {
    uintptr_t lo, hi;
    const char* name;
  };
  // The name of the function holding `at` in the tables libdw found for its module, or null;
  // `known`: whether libdw read tables for that module (then dladdr cannot know more).
  const char* function_at(uintptr_t at, bool& known);

  void* dwfl_ = nullptr;  // Dwfl*: elfutils types stay out of this header
  // Per module (Dwfl_Module*) that a frame falls in, its functions sorted by address. libdw's own
  // lookup (dwfl_module_addrinfo) scans the whole table per address: 33,000 symbols of
  // libtorch_cpu for each of a few hundred frames made seconds.
  std::unordered_map<void*, std::vector<Function>> functions_;
};

}  // namespace sol::capture::trace
