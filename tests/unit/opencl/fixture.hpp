// GoogleTest fixtures over the shared backend and reference BLAS (harness.hpp): a test skips when
// the machine has no usable OpenCL device, and fails when the reference BLAS is missing.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "harness.hpp"

namespace sol::test {

template <class Base>
class WithOpencl : public Base {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = shared_backend(why);
    if (!backend_) GTEST_SKIP() << "no usable OpenCL device: " << why;
    reference_ = shared_reference(why);
    ASSERT_NE(reference_, nullptr) << why;
  }
  hal::Backend* backend_ = nullptr;
  ReferenceBlas* reference_ = nullptr;
};

}  // namespace sol::test
