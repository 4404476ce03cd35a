// One node's data on the device: how each operand of a BLAS node is laid out there, how it goes
// up and how the elements the routine writes come back. The rules are opencl's (transfer.hpp
// there), so that the lazy residency layer plugs into both the same way:
//
//   up    matrices packed to the rows the routine references (leading dimension = rows on the
//         device; a 2D copy from the caller's leading dimension), so a block of a big matrix moves
//         only its data. Triangular, symmetric, Hermitian and band matrices go through pinned
//         staging in which every entry the reference does not read (the other triangle, band
//         corners, a unit diagonal, the imaginary part of a Hermitian diagonal) is zero. Vectors
//         are gathered into contiguous logical order, which makes negative and zero (read-only)
//         increments unit strides on the device. An output the routine does not read (C or y with
//         beta == 0) is zero-filled on the device instead of copied.
//   down  each written operand into pinned staging; only once the stream has finished every
//         command without error are the elements the reference writes copied into the caller's
//         memory (strided vector elements, the m-by-n part of C, one triangle). A failure
//         therefore leaves the caller's memory untouched.
//
// Everything runs on the device's own stream; the only wait is on that stream.
//
// Lazily (the device has an active Resident, resident.hpp), operands come from and results stay
// in the device copies the Resident keeps, as opencl's Job does: upload() copies only what the
// device does not have (the host data is consumed before it returns), download() fetches only
// what cannot stay, and the destructor does not wait: the node is pending until a flush. In a node
// that waits anyway (a result that cannot stay), an operand the Resident neither holds nor could
// keep moves as eagerly: slot buffers, asynchronous copies; download() waits for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/device.hpp"
#include "backends/common/blas_args.hpp"
#include "backends/common/device_operand.hpp"
#include "capture/blas/blas.hpp"
#include "capture/ir/node.hpp"
#include "hal/backend.hpp"

namespace sol::backends::cuda {

// BLAS arguments read as the reference reads them (backends/common/blas_args.hpp).
using backends::DeviceOperand;
using backends::device_image;
using backends::gather;
using backends::same_copy;
using backends::Shape;
using backends::store_into;
using backends::is_left;
using backends::is_one;
using backends::is_unit;
using backends::is_upper;
using backends::is_zero;
using backends::kComplex;
using backends::notrans;
using backends::RealOf;
using backends::scatter;
using backends::upper_case;
using backends::vector_at;

hal::Reason reason_of(cudaError_t err) noexcept;
hal::Reason reason_of(cublasStatus_t st) noexcept;

// A node has at most three memory operands on the device (gemm: a, b, c; rotm's param stays on
// the host).
inline constexpr int kMaxJobOperands = 4;

// An operand and its device layout (backends/common/device_operand.hpp), with its buffer.
struct Operand : DeviceOperand {
  void* buf = nullptr;  // the device buffer
  bool kept = false;  // lazy: the result stays on the device (Resident), not downloaded
  bool slot = false;  // lazy, in a node that waits: moved as eagerly, in the Job's slot buffer
};

// The operands of a valid column-major BLAS node with their device layout. Returns how many.
int describe(const capture::Node& node, Operand out[kMaxJobOperands]);

class Resident;

// One node's trip through the device: upload, commands (the caller's cuBLAS calls on
// device.stream()), download. Methods returning a Reason log the CUDA error at debug level.
class Job {
 public:
  Job(Device& dev, const capture::Node& node);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  // Waits for the stream: nothing the device does with the caller's memory or the staging
  // outlives the call, whatever failed.
  ~Job();

  // Device buffers for every operand, filled as described above.
  hal::Reason upload();

  // The device pointer of operand `name` ('a', 'x'...) after upload(), and its leading dimension
  // there.
  void* ptr(char name) const noexcept;
  int ld(char name) const noexcept;

  // After a cuBLAS call: its status.
  hal::Reason check(cublasStatus_t st, const char* what);

  // Reads every written operand into staging, waits for the stream, and only then stores the
  // written elements into the caller's memory. `result`: the node returns a scalar the host
  // needs now (a dot product), so it waits lazily too.
  hal::Reason download(bool result = false);

  hal::Reason fail(cudaError_t err, const char* what);

 private:
  const Operand* find(char name) const noexcept;
  cudaError_t write(int slot, Operand& o);

  static constexpr int kStageDown = 4;
  Device& dev_;
  Resident* res_;
  const CudartApi& rt_;
  cudaStream_t stream_;
  size_t es_;
  Operand ops_[kMaxJobOperands];
  int count_ = 0;
  bool slots_ = false;  // lazily, some operand moved as eagerly (Operand::slot)
};

}  // namespace sol::backends::cuda
