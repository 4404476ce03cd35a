// Running a BLAS node through a Fortran BLAS routine given by pointer: how the openblas backend
// calls OpenBLAS and how verify mode re-runs a node on the program's own library. Generated from
// interpose/spec/blas.toml (fortran_call.cpp in the build tree).
#pragma once

#include "ir/node.hpp"

namespace sol::capture::blas {

inline constexpr Sym kNoRoutine = static_cast<Sym>(0xffff);

// The Fortran routine (sgemm_, csscal_...) that computes nodes of this operation and element type,
// or kNoRoutine. `real_alpha` tells csscal from cscal.
Sym fortran_routine(Op op, DType dtype, bool real_alpha) noexcept;

// The Fortran routine `routine` (a plain name, as fortran_routine() gives) as name family `family`
// spells it (dgemm_ -> dgemm_64_, scipy_dgemm_64_...); kNoRoutine for Family::none.
Sym in_family(Sym routine, Family family) noexcept;

// The program's own Fortran routine `routine` (a plain name) in the name family of the node's
// call, which SOL calls at the call's integer width (verify mode re-runs redirected nodes on it,
// auto measures it); nullptr when the program has none. Looked up once per symbol. (libraries.cpp)
void* native_routine(const Node& node, Sym routine) noexcept;

// Calls `fn`, a pointer to Fortran routine `routine` (with the Fortran ABI: arguments by reference,
// hidden string lengths) in any family, with the arguments of a valid column-major node, as
// INTEGERs of 64 bits where `ilp64` (the library `fn` is in is ILP64) and of 32 otherwise. A
// function's result goes to node.ret.
void call_fortran(Sym routine, void* fn, Node& node, bool ilp64 = false) noexcept;

// Calls `fn`, a pointer to oneDNN's dnnl_sgemm (row-major), with the arguments of a valid
// column-major SGEMM node: column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T, the
// operands swapped. A real matrix's conjugate transpose is its transpose (dnnl_sgemm takes N and
// T). Returns its dnnl_status_t. How the onednn backend runs GEMM, and how auto times a program's
// own dnnl_sgemm. (layout.cpp)
int call_dnnl_sgemm(const void* fn, Node& node) noexcept;

}  // namespace sol::capture::blas
