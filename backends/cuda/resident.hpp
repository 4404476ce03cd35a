// The cuda backend's lazy executor: backends/common/resident.hpp's device copies, in buffers from
// a memory pool of its own, on the device's stream. Buffers are allocated and freed in stream
// order (cudaMallocFromPoolAsync, cudaFreeAsync), so that a copy released while queued commands
// still use it is freed after them, with no wait; a reference count per buffer stands in for
// OpenCL's retain/release. A copy is made with cudaMemcpyAsync or cudaMemcpy2DAsync from the
// caller's pageable memory (or a host image in the device layout: transfer.hpp's device_image),
// which returns once the source is consumed: the host may change an input as soon as the call
// returns. Results are read back through pinned staging.
//
// Not for caller memory that is page-locked (cudaHostRegister): an asynchronous copy from it
// would return before reading it. SOL keeps copies only of blocks it serves itself (plain mmap).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/common/resident.hpp"
#include "backends/cuda/transfer.hpp"

namespace sol::config {
struct Config;
}

namespace sol::backends::cuda {

class CudaResidentDevice final : public ResidentDevice<Operand> {
 public:
  // `exiting`: whether the process is exiting (the runtime may be gone).
  CudaResidentDevice(Device& dev, bool (*exiting)() noexcept) noexcept : dev_(dev), exiting_(exiting) {}
  ~CudaResidentDevice() override;

  // Creates the pool; false with a one-line `why`.
  bool open(std::string& why) noexcept;

  const char* name() const noexcept override { return "cuda"; }
  bool exiting() const noexcept override { return exiting_(); }
  bool on_host(const Operand& o) const noexcept override { return o.shape == Shape::host; }
  bool raw(const Operand&) const noexcept override { return false; }  // BLAS operands only
  bool same(const Operand& a, const Operand& b) const noexcept override { return same_copy(a, b); }
  hal::Reason make(Operand& o, size_t es) override;
  hal::Reason zero(Operand& o, size_t es) override;
  void retain(void* b) noexcept override;
  void release(void* b) noexcept override;
  bool read(const Operand& o, void* host) noexcept override;
  const char* finish() noexcept override;
  size_t memory_bytes() const noexcept override { return dev_.total_memory(); }
  void store(const Operand& o, unsigned char* host, unsigned char* staged, size_t es) const noexcept override {
    store_into(o, host, staged, es);
  }

 private:
  // Pinned staging slot of the device for write-backs (the Job's downloads use 4..7 only after
  // keep(), and no flush runs between their staging and their store).
  static constexpr int kStageBack = 3;
  hal::Reason fail(cudaError_t err, const char* what);

  Device& dev_;
  bool (*exiting_)() noexcept;
  cudaMemPool_t pool_ = nullptr;
  std::unordered_map<void*, int> refs_;  // live buffers and their references
};

namespace detail {
// Constructed before the core that uses it (a base listed first).
struct CudaResidentBase {
  CudaResidentBase(Device& dev, bool (*exiting)() noexcept) noexcept : cuda_device(dev, exiting) {}
  CudaResidentDevice cuda_device;
};
}  // namespace detail

class Resident final : private detail::CudaResidentBase, public backends::Resident<Operand> {
 public:
  Resident(cuda::Device& dev, std::mutex& mu, const config::Config& cfg, bool (*exiting)() noexcept)
      : detail::CudaResidentBase(dev, exiting), backends::Resident<Operand>(cuda_device, mu, cfg) {}
  CudaResidentDevice& device() noexcept { return cuda_device; }
};

}  // namespace sol::backends::cuda
