// The reference backend: every BLAS node, computed with plain loops exactly as netlib's
// reference BLAS 3.11 computes it (same loop order, same arithmetic, same quick returns), so its
// results are bit-identical to Debian's libblas.so.3. It is the test oracle for other backends
// and the last resort of the router.
#pragma once

#include <memory>

#include "hal/backend.hpp"

namespace sol::backends::reference {

std::unique_ptr<hal::Backend> create();

}  // namespace sol::backends::reference
