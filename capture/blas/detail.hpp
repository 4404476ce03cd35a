// Internal to capture/blas_*.cpp: the column-major Fortran call that netlib's CBLAS 3.11 makes
// for a row-major call. check() validates that call (its errors are the Fortran routine's) and
// with_column_major() runs it, so the rules live here once.
#pragma once

#include <cstdint>

#include "ir/node.hpp"

namespace sol::capture::blas::detail {

// Which level of the BLAS an op belongs to; 0 for non-BLAS ops.
int level(Op op) noexcept;

// A conjugated copy the reference makes of a vector argument: n elements read from src at stride
// inc, stored contiguously; the Fortran call gets the copy with increment 1 in `field`.
struct ConjugatedCopy {
  void* BlasArgs::*field = nullptr;
  const void* src = nullptr;
  int64_t n = 0;
  int64_t inc = 0;
};

// A vector whose imaginary parts the reference negates in place before the Fortran call and
// again after it: n elements from the lowest address at stride |inc| (once when inc == 0).
struct InPlaceConjugation {
  void* data = nullptr;
  int64_t n = 0;
  int64_t inc = 0;
};

struct FortranCall {
  Op op;          // the Fortran routine called (a row-major cblas_cgerc calls CGERU)
  BlasArgs args;  // its arguments, column-major; copies not made yet (see below)
  ConjugatedCopy copies[2];
  int num_copies = 0;
  InPlaceConjugation in_place;  // data == nullptr: none
};

// The Fortran call for a BLAS node whose CBLAS-level arguments (layout, enums) are valid. For a
// column-major node it is the node's own call.
FortranCall fortran_call(const Node& node) noexcept;

}  // namespace sol::capture::blas::detail
