// Every BLAS routine the opencl backend supports, in the four precisions, against the reference
// BLAS: transposes, triangles, sides, unit diagonals, increments (positive, > 1, negative, zero
// where the routine reads only), leading dimensions > rows, quick returns (zero sizes), and the
// special scalars (alpha == 0, beta == 0 with NaN in C, beta == 1).
#include <gtest/gtest.h>

#include <string>

#include "blas_calls.hpp"
#include "fixture.hpp"
#include "harness.hpp"

namespace sol::test {
namespace {

using BlasRoutine = WithOpencl<::testing::TestWithParam<const char*>>;

TEST_P(BlasRoutine, MatchesReference) {
  expect_routine_matches_reference(*backend_, *reference_, GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllRoutines, BlasRoutine, ::testing::ValuesIn(kBlasRoutines),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace sol::test
