// The opencl backend: BLAS on any OpenCL device (a GPU's ICD in production, pocl's CPU device in
// tests) through CLBlast and kernels of our own. See README.md.
#pragma once

#include <memory>

#include "hal/backend.hpp"

namespace sol::backends::opencl {

std::unique_ptr<hal::Backend> create();

}  // namespace sol::backends::opencl
