#pragma once

#include <memory>

#include "hal/backend.hpp"

namespace sol::backends::openblas {

// OpenBLAS, opened by SOL (backends.openblas.library) with a function table of its own. When the
// program's own BLAS already is OpenBLAS, that loaded library is used: one thread pool, not two.
std::unique_ptr<hal::Backend> create();

}  // namespace sol::backends::openblas
