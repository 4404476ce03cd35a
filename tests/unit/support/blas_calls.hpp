// The calls a backend test makes for each BLAS routine, to compare with the reference
// (harness.hpp): transposes, triangles, sides, unit diagonals, increments (positive, > 1,
// negative, zero where the routine reads only), leading dimensions > rows, quick returns (zero
// sizes), and the special scalars (alpha == 0, beta == 0 with NaN in C, beta == 1).
#pragma once

#include <string>
#include <vector>

#include "harness.hpp"

namespace sol::test {

std::vector<Call> blas_calls(const std::string& routine);

// Every Fortran BLAS routine of blas.toml but rotg, rotmg and cabs1.
extern const std::vector<const char*> kBlasRoutines;

}  // namespace sol::test
