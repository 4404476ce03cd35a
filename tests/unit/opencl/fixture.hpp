// GoogleTest fixtures over the shared backend and reference BLAS (harness.hpp): a test skips when
// the machine has no usable OpenCL device, and fails when the reference BLAS is missing.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backends/opencl/opencl.hpp"
#include "config/config.hpp"
#include "harness.hpp"

namespace sol::test {

// The backend under test, initialised once per process with its program cache in a fresh
// temporary directory. nullptr with `why` when there is no OpenCL device (the tests skip).
inline hal::Backend* shared_backend(std::string& why) {
  static std::string reason;
  static std::unique_ptr<hal::Backend> backend = [] {
    auto b = backends::opencl::create();
    if (!b->init(test_config(make_temp_dir()), reason)) b.reset();
    return b;
  }();
  why = reason;
  return backend.get();
}

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
