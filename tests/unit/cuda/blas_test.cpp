// Every BLAS routine the cuda backend computes, in the four precisions, against the reference
// BLAS (the calls of blas_calls.hpp), plus the declined routines and device memory. Skips without
// a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "blas_calls.hpp"
#include "device_fixture.hpp"
#include "hal/backend.hpp"

namespace sol::backends::cuda {
std::unique_ptr<hal::Backend> create();
}

namespace sol::test {
namespace {

using hal::Reason;

inline constexpr char kCudaApi[] = "CUDA";

template <class Base>
using WithCuda = WithDevice<Base, backends::cuda::create, kCudaApi>;

bool in_cublas(const char* routine) {
  return std::strcmp(routine, "sdsdot") != 0 && std::strcmp(routine, "dsdot") != 0;
}

std::vector<const char*> cublas_routines() {
  std::vector<const char*> out;
  for (const char* r : kBlasRoutines)
    if (in_cublas(r)) out.push_back(r);
  return out;
}

using BlasRoutine = WithCuda<::testing::TestWithParam<const char*>>;

TEST_P(BlasRoutine, MatchesReference) {
  expect_routine_matches_reference(*backend_, *reference_, GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllRoutines, BlasRoutine, ::testing::ValuesIn(cublas_routines()),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

using Cuda = WithCuda<::testing::Test>;

TEST_F(Cuda, DeclinesWhatCublasLacks) {
  for (const char* r : {"sdsdot", "dsdot", "srotg", "drotmg", "scabs1"}) {
    const capture::Node node = blas_node(r);
    EXPECT_EQ(backend_->supports(node), Reason::op_unsupported) << r;
  }
}

TEST_F(Cuda, DeviceMemoryRoundTrip) {
  expect_device_memory_round_trip(*backend_);
}

TEST_F(Cuda, IsAnAcceleratorWithMeasuredCosts) {
  EXPECT_TRUE(backend_->accelerator());
  EXPECT_GT(backend_->min_flops(), 0);
  EXPECT_NE(backend_->device().find("GB/s"), std::string::npos) << backend_->device();
}

}  // namespace
}  // namespace sol::test
