// GoogleTest fixtures for a device backend (opencl, cuda) over the reference BLAS (harness.hpp): a
// test skips when the machine has no usable device for it, and fails when the reference BLAS is
// missing. The backend is initialised once per process, with its caches in a fresh temporary
// directory, and shared by every test of the process.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "blas_calls.hpp"
#include "config/config.hpp"
#include "hal/backend.hpp"
#include "harness.hpp"

namespace sol::test {

using BackendCreate = std::unique_ptr<hal::Backend> (*)();

// The backend `create` makes, initialised once per process. nullptr with `why` when it has no
// device here (the tests skip).
template <BackendCreate create>
hal::Backend* shared_device_backend(std::string& why) {
  static std::string reason;
  static std::unique_ptr<hal::Backend> backend = [] {
    auto b = create();
    if (!b->init(test_config(make_temp_dir()), reason)) b.reset();
    return b;
  }();
  why = reason;
  return backend.get();
}

// `api` names the device in a skip: "no usable OpenCL device: ...".
template <class Base, BackendCreate create, const char* api>
class WithDevice : public Base {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = shared_device_backend<create>(why);
    if (!backend_) GTEST_SKIP() << "no usable " << api << " device: " << why;
    reference_ = shared_reference(why);
    ASSERT_NE(reference_, nullptr) << why;
  }
  hal::Backend* backend_ = nullptr;
  ReferenceBlas* reference_ = nullptr;
};

// Every call blas_calls.hpp has of `routine`, on the backend and on the reference BLAS; the first
// ten that differ are reported.
inline void expect_routine_matches_reference(hal::Backend& backend, ReferenceBlas& reference,
                                             const char* routine) {
  const std::vector<Call> calls = blas_calls(routine);
  ASSERT_FALSE(calls.empty());
  int failures = 0;
  unsigned seed = 1;
  for (const Call& call : calls) {
    const std::string diff = compare_with_reference(backend, reference, call, seed++);
    if (!diff.empty()) {
      ADD_FAILURE() << call.describe() << "\n  " << diff;
      if (++failures == 10) break;
    }
  }
}

// The backend's hal::DeviceMemory: 1000 doubles up and back, unchanged.
inline void expect_device_memory_round_trip(hal::Backend& backend) {
  hal::DeviceMemory* mem = backend.memory();
  ASSERT_NE(mem, nullptr);
  std::vector<double> up(1000), down(1000, 0.0);
  for (size_t i = 0; i < up.size(); ++i) up[i] = 0.5 * static_cast<double>(i);
  void* d = mem->alloc(up.size() * sizeof(double));
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(mem->copy_to_device(d, up.data(), up.size() * sizeof(double)));
  EXPECT_TRUE(mem->copy_to_host(down.data(), d, down.size() * sizeof(double)));
  EXPECT_TRUE(mem->sync());
  mem->free(d);
  EXPECT_EQ(up, down);
}

}  // namespace sol::test
