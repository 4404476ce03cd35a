// Running a BLAS node through a Fortran BLAS routine given by pointer: how the openblas backend
// calls OpenBLAS and how verify mode re-runs a node on the program's own library. Generated from
// interpose/spec/blas.toml (fortran_call.cpp in the build tree).
#pragma once

#include "capture/ir/node.hpp"

namespace sol::capture::blas {

inline constexpr Sym kNoRoutine = static_cast<Sym>(0xffff);

// The Fortran routine (sgemm_, csscal_...) that computes nodes of this operation and element type,
// or kNoRoutine. `real_alpha` tells csscal from cscal.
Sym fortran_routine(Op op, DType dtype, bool real_alpha) noexcept;

// Calls `fn`, a pointer to Fortran routine `routine` (with the Fortran ABI: arguments by reference,
// hidden string lengths), with the arguments of a valid column-major node. A function's result
// goes to node.ret.
void call_fortran(Sym routine, void* fn, Node& node) noexcept;

}  // namespace sol::capture::blas
