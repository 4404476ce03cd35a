// Test harness for backends: one BLAS call described in BLAS terms, run through a backend and
// through the reference BLAS on identical inputs, every buffer compared.
//
// Inputs are random, and every element the reference does not read is NaN: leading-dimension
// gaps, increment gaps, the other triangle, band corners, a unit diagonal, the imaginary part of
// a Hermitian diagonal, C or y when beta == 0, A, B and x when alpha == 0 makes the reference
// skip them. A backend that reads any of them produces NaN where the reference has a number.
// Each buffer has a NaN guard zone after its extent, compared too.
#pragma once

#include <string>

#include "hal/backend.hpp"
#include "ir/node.hpp"
#include "reference_blas.hpp"

namespace sol::config {
struct Config;
}

namespace sol::test {

struct Call {
  std::string routine;  // "cgemm"
  char transa = 'N', transb = 'N', uplo = 'U', side = 'L', diag = 'N';
  int64_t m = 0, n = 0, k = 0, kl = 0, ku = 0;
  int64_t pad = 0;  // leading dimensions are max(1, rows) + pad
  int64_t incx = 1, incy = 1;
  capture::Scalar alpha = capture::Scalar(0.7, 0.3);
  capture::Scalar beta = capture::Scalar(1.3, -0.2);
  capture::Scalar cs = capture::Scalar(0.6), sn = capture::Scalar(0.8);
  double param[5] = {-1, 0.5, -0.25, 1.5, 0.75};  // rotm: flag, h11, h21, h12, h22

  std::string describe() const;
};

// Empty when the backend matches the reference, else what differs.
std::string compare_with_reference(hal::Backend& backend, ReferenceBlas& reference, const Call& call,
                                   unsigned seed);

// The reference BLAS, opened once per process. nullptr with `why` when it is missing.
ReferenceBlas* shared_reference(std::string& why);

// The defaults of every key (the environment ignored), with the opencl program cache in
// `cache_dir`.
config::Config test_config(const std::string& cache_dir);

// A fresh directory under $TMPDIR (or /tmp).
std::string make_temp_dir();

const char* reason_string(hal::Reason r);

}  // namespace sol::test
