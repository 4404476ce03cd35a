// BLAS nodes on a CUDA device with cuBLAS: every routine cuBLAS has, in all four precisions, with
// the reference's quick returns and alpha == 0 cases on the host (where the data already is) and
// data moved as transfer.hpp describes. Scalars are passed and results returned in host memory
// (CUBLAS_POINTER_MODE_HOST); iamax is 1-based in both. Declined: rotg, rotmg and cabs1 (scalars
// only: nothing for a device to do), sdsdot and dsdot (not in cuBLAS), a written vector at
// increment 0 (a sequential recurrence), and dimensions beyond cuBLAS's 32-bit interface.
#pragma once

#include "backends/cuda/device.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::cuda {

// Reason::ok when blas_run() computes `node` as the reference BLAS does, else why not.
hal::Reason blas_supports(const Device& device, const capture::Node& node) noexcept;

// Computes a valid column-major BLAS node. Anything but Reason::ok means the caller's memory was
// not written.
hal::Reason blas_run(Device& device, capture::Node& node);

}  // namespace sol::backends::cuda
