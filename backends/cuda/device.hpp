// The CUDA device the cuda backend runs on: the libraries, device 0 of those CUDA_VISIBLE_DEVICES
// leaves, a non-blocking stream of the backend's own, a cuBLAS handle bound to it, and the device
// buffers and pinned host staging kept between calls. Used under the backend's lock only.
#pragma once

#include <cstddef>
#include <string>

#include "backends/common/device_base.hpp"
#include "backends/common/device_costs.hpp"
#include "backends/cuda/api.hpp"

namespace sol::backends::cuda {

class Resident;

// The description and identity (backends/common/device_base.hpp) are "NVIDIA H100 80GB HBM3
// (sm_90, 79.1 GiB), CUDA runtime 13.0, driver 13.0, cuBLAS 13.0.2", and the name, memory, PCI slot
// (the link), driver and library versions.
class Device : public DeviceBase<Resident> {
 public:
  Device() = default;
  ~Device();

  // Loads the libraries, finds the device, creates the stream and the cuBLAS handle (host
  // pointer mode: scalars and results in host memory; CUBLAS_DEFAULT_MATH: no TF32 or other
  // reduced-precision shortcut, so results compare with the CPU's within BLAS tolerance).
  // false with a one-line `why` ("no CUDA device: cudaGetDeviceCount: cudaErrorNoDevice: ...").
  bool open(std::string& why);

  const CudartApi& rt() const noexcept { return libs_.rt; }
  const CublasApi& blas() const noexcept { return libs_.blas; }
  cudaStream_t stream() const noexcept { return stream_; }
  cublasHandle_t handle() const noexcept { return handle_; }

  // Makes the device current for the calling thread (the runtime's current device is per thread,
  // and the program may have chosen another). Cheap: no context switch when it already is.
  cudaError_t make_current() const noexcept { return libs_.rt.cudaSetDevice(ordinal_); }

  size_t total_memory() const noexcept { return total_memory_; }
  int ordinal() const noexcept { return ordinal_; }
  const Libraries& libraries() const noexcept { return libs_; }

  // Device buffer `slot` (kSlots of them) of at least `bytes`, reused between calls; nullptr with
  // the runtime's error in `err`.
  static constexpr int kSlots = 8;
  void* buffer(int slot, size_t bytes, cudaError_t& err) noexcept;
  // Pinned host staging `slot` of at least `bytes`, reused; nullptr when it cannot be allocated.
  void* staging(int slot, size_t bytes, cudaError_t& err) noexcept;
  // Frees buffers and staging larger than `bytes` (after a large call, so that its memory does
  // not stay held by an idle backend). Waits for the stream only when there is one to free.
  void release_larger_than(size_t bytes) noexcept;

  // Measures the device's costs (cost.cpp: the link both ways, a round trip, its memory and
  // cuBLAS's GEMM rates; about 0.45 s on an H200), its stream idle and nobody else using it
  // meanwhile. false with a one-line `why` when a step fails.
  bool measure_costs(DeviceCosts& out, std::string& why);

 private:
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  Libraries libs_;
  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  size_t total_memory_ = 0;
  Block device_[kSlots], host_[kSlots];
};

}  // namespace sol::backends::cuda
