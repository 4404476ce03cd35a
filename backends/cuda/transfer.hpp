// One BLAS node's data on the CUDA device: backends/common/device_job.hpp's trip (the layout and
// the order of things are opencl's too, so that the lazy residency layer plugs into both the same
// way), with the CUDA runtime's calls. Up: a general matrix packed by a 2-D copy from the caller's
// memory, anything that needs a host image (a gathered vector, a sanitised triangle or band)
// through pinned staging, an output the routine does not read zero-filled on the device. Down:
// each written operand into pinned staging. Everything runs on the device's own stream; the only
// wait is on that stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/common/blas_args.hpp"
#include "backends/common/device_job.hpp"
#include "backends/cuda/device.hpp"
#include "capture/blas/blas.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::cuda {

hal::Reason reason_of(cudaError_t err) noexcept;
hal::Reason reason_of(cublasStatus_t st) noexcept;

// An operand and its device layout (backends/common/device_operand.hpp), with its buffer.
using Operand = JobOperand<void*>;

class Resident;

// One node's trip through the device: upload, commands (the caller's cuBLAS calls on
// device.stream()), download. Methods returning a Reason log the CUDA error at debug level.
class Job : public DeviceJob<Operand, Resident> {
 public:
  Job(Device& dev, const capture::Node& node);
  // Waits for the stream: nothing the device does with the caller's memory or the staging
  // outlives the call, whatever failed.
  ~Job();

  // Device buffers for every operand, filled as described above.
  hal::Reason upload();

  // The device pointer of operand `name` ('a', 'x'...) after upload(), and its leading dimension
  // there.
  void* ptr(char name) const noexcept;
  int ld(char name) const noexcept { return static_cast<int>(device_ld(name)); }

  // After a cuBLAS call: its status.
  hal::Reason check(cublasStatus_t st, const char* what);

  // Reads every written operand into staging, waits for the stream, and only then stores the
  // written elements into the caller's memory. `result`: the node returns a scalar the host
  // needs now (a dot product), so it waits lazily too.
  hal::Reason download(bool result = false);

  hal::Reason fail(cudaError_t err, const char* what);

 private:
  cudaError_t write(int slot, Operand& o);

  static constexpr int kStageDown = 4;
  Device& dev_;
  const CudartApi& rt_;
  cudaStream_t stream_;
};

}  // namespace sol::backends::cuda
