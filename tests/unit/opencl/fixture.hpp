// The opencl backend under test (support/device_fixture.hpp): shared by the tests of a process,
// skipped where the machine has no usable OpenCL device.
#pragma once

#include <string>

#include "backends/opencl/opencl.hpp"
#include "device_fixture.hpp"

namespace sol::test {

inline constexpr char kOpenclApi[] = "OpenCL";

inline hal::Backend* shared_backend(std::string& why) {
  return shared_device_backend<backends::opencl::create>(why);
}

template <class Base>
using WithOpencl = WithDevice<Base, backends::opencl::create, kOpenclApi>;

}  // namespace sol::test
