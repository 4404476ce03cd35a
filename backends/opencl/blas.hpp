// BLAS nodes on an OpenCL device: CLBlast for the routines it implements with the reference's
// semantics, our kernels (kernels.cl) for the rest, the reference's quick returns and
// alpha == 0 cases on the host.
//
// Data movement, per node:
//   up    matrices packed to the rows the routine references (leading dimension = rows on the
//         device; a rectangle copy when the caller's is larger), so a block of a big matrix moves
//         only its data. Triangular, symmetric, Hermitian and band matrices go through a host
//         copy in which every entry the reference does not read (the other triangle, band
//         corners, a unit diagonal, the imaginary part of a Hermitian diagonal) is zero, so that
//         no NaN or garbage there reaches a result whatever CLBlast's kernels touch. Vectors are
//         gathered into contiguous logical order, which makes negative and zero (read-only)
//         increments plain unit strides on the device. An output the routine does not read (C or
//         y with beta == 0) is zero-filled instead of copied.
//   down  each written operand into host staging; only after every command succeeded are the
//         elements the reference writes copied into the caller's memory (strided vector
//         elements, the m-by-n part of C, one triangle). A failure therefore leaves the
//         caller's memory untouched, and elements the routine does not write are never stored to.
#pragma once

#include <atomic>

#include "backends/opencl/device.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::opencl {

// Reason::ok when blas_run() computes `node` as the reference BLAS does, else why not.
hal::Reason blas_supports(const Device& device, const capture::Node& node) noexcept;

// Computes a valid column-major BLAS node. Anything but Reason::ok means the caller's memory
// was not written. May throw std::bad_alloc (host staging).
hal::Reason blas_run(Device& device, capture::Node& node);

// Readies what a first BLAS call most likely needs, CLBlast's GEMM in each precision, where the
// disk cache has its program (clblast_programs::preload): never compiles. Stops between programs
// once `stop` is set. For the start-up thread, before anyone else uses the device.
void blas_warm_up(Device& device, const std::atomic<bool>& stop);

}  // namespace sol::backends::opencl
