// What `sol backends` says about the native BLAS here: the library a program linked to
// libblas.so.3 gets, and whether that is an OpenBLAS running kernels below this CPU's ability.
#pragma once

#include <cstdio>

namespace sol::tools {

// Prints this CPU (model, instruction level, CPUs), the file libblas.so.3 resolves to, for an
// OpenBLAS its configuration and kernels, and when those are below this CPU's level one line
// saying so with the fix ("below par: set OPENBLAS_CORETYPE=Haswell (...)").
void print_native_blas(std::FILE* out);

}  // namespace sol::tools
