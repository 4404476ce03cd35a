// The BLAS and oneDNN libraries loaded in this process: which name families each defines, how
// wide its INTEGERs are, and which hold such code out of SOL's sight. Read from the loader's own
// tables (dlsym on each object, its dynamic relocations in memory): no file is opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/symbols.hpp"

namespace sol::capture::blas {

// The width of the INTEGERs of the routines that `family` spells, in the object behind dlopen
// handle `lib` (dlsym also searches its dependencies): 64 or 32; 0 when it defines none of them.
// OpenBLAS says so itself (USE64BITINT in openblas_get_config()); any other library is asked with
// a call of IDAMAX whose N reads 2 at 32 bits and is negative at 64: an LP64 library answers 2, an
// ILP64 one 0, and neither reads past the two elements it is given.
int int_bits(void* lib, Family family) noexcept;

struct Library {
  std::string path;
  uintptr_t base = 0;               // load address
  size_t names[kNumFamilies] = {};  // BLAS and CBLAS names of each family it defines (kNames)
  size_t dnnl_names = 0;            // oneDNN C API functions it defines (kNames)
  bool own = false;                 // SOL loaded it for a backend (kOwn)
  int plain_bits = 0;               // the width of the plain names it defines; 0: none (kWidths)
  // Whose BLAS or DNN code it holds ("OpenBLAS", "MKL", "BLIS", "oneDNN", "BLAS"), or nullptr.
  const char* code = nullptr;
  bool reaches_sol = false;  // one of its relocations names an intercepted function (kReach)
  bool called = false;       // another object's relocation names an intercepted function it defines (kReach)

  // BLAS or DNN code that neither calls, nor is called, through any name SOL intercepts: its own
  // code calls it directly (pip's libtorch_cpu.so and its static MKL and oneDNN).
  bool out_of_sight() const noexcept { return code && !reaches_sol && !called; }
};

enum SurveyParts : unsigned {
  kWidths = 1u << 0,  // plain_bits (a probe call into each library defining plain names)
  kNames = 1u << 1,   // names, dnnl_names (a lookup per intercepted name and object)
  kReach = 1u << 2,   // reaches_sol, called (every object's dynamic relocations)
  kOwn = 1u << 3,     // SOL's own libraries too
};

// The loaded libraries that define BLAS or oneDNN names or hold their code, in load order: not
// libsol, the main program, or (without kOwn) a library SOL loaded for a backend
// (common/native.hpp).
std::vector<Library> survey(unsigned parts);

}  // namespace sol::capture::blas
