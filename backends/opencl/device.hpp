// One OpenCL device as the backend uses it: the libraries, context and in-order queue, a pool of
// device buffers and host staging areas reused from call to call, and our own kernels, built on
// first use and cached on disk.
//
// Not thread-safe: the backend serialises calls (one queue, one set of buffers). Functions that
// are not noexcept may throw std::bad_alloc, which the backend's entry points turn into a reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/common/device_base.hpp"
#include "backends/common/device_costs.hpp"
#include "backends/opencl/api.hpp"
#include "backends/opencl/program_cache.hpp"

namespace sol::config {
struct Config;
}

namespace sol::backends::opencl {

// True once exit() has begun; the device then neither runs work nor releases its objects.
bool process_exiting() noexcept;

// Precisions of our own kernels: one program each, built with -DSOL_PREC_<letter>.
enum class Prec : uint8_t { s, d, c, z };
inline constexpr int kNumPrecs = 4;

// Our own kernels (kernels.cl). Not every kernel exists in every precision (see kernels.cl).
enum class Kernel : uint8_t { rot, rotm, scal_real, asum, nrm2, iamax, dsdot, tsv_n, tsv_t };
inline constexpr int kNumKernels = 9;

// The kernels of DNN nodes (dnn_kernels.cl): one program of its own, so that BLAS programs are not
// rebuilt when it changes and BLAS-only processes never compile it.
enum class DnnKernel : uint8_t {
#define SOL_DNN_KERNEL(name) name,
#include "backends/opencl/dnn_kernels.def"
#undef SOL_DNN_KERNEL
};
inline constexpr int kNumDnnKernels = 0
#define SOL_DNN_KERNEL(name) +1
#include "backends/opencl/dnn_kernels.def"
#undef SOL_DNN_KERNEL
    ;

class Resident;

// The description and identity (backends/common/device_base.hpp) are "Portable Computing Language:
// pthread-haswell-AMD EPYC (driver 3.1+debian)", and the platform and device name and version,
// vendor and driver version.
class Device : public DeviceBase<Resident> {
 public:
  Device() = default;
  ~Device();

  // Loads the libraries, picks the platform and device the configuration names, creates the
  // context and queue. false with `why` when any step fails.
  bool open(const config::Config& cfg, std::string& why);

  const ClApi& cl() const noexcept { return cl_; }
  const ClblastApi& clblast() const noexcept { return clblast_; }
  cl_context context() const noexcept { return context_; }
  cl_command_queue queue() const noexcept { return queue_; }
  cl_device_id id() const noexcept { return device_; }

  bool has_fp64() const noexcept { return fp64_; }
  bool is_accelerator() const noexcept { return accelerator_; }
  size_t max_alloc() const noexcept { return max_alloc_; }
  size_t max_work_group() const noexcept { return max_work_group_; }

  // A device buffer of at least `bytes` for `slot`, reused across calls and grown on demand.
  // CL_SUCCESS, or the allocation error. BLAS nodes use slots below kFirstDnnSlot, DNN nodes the
  // rest (a DNN node has up to two buffers per tensor and a few temporaries).
  static constexpr int kFirstDnnSlot = 10;
  static constexpr int kNumSlots = kFirstDnnSlot + 40;
  cl_int buffer(int slot, size_t bytes, cl_mem& out);

  // Host staging memory for `slot`, grown on demand (std::bad_alloc when it cannot grow).
  void* staging(int slot, size_t bytes);

  // Frees device buffers and staging areas larger than `keep` bytes: small ones are worth
  // reusing call after call, one large call should not pin its memory for the process's life.
  void release_larger_than(size_t keep) noexcept;

  // One of our kernels, building its program on first use. nullptr with `why` on failure; a
  // program that failed to build is not tried again.
  cl_kernel kernel(Prec prec, Kernel k, std::string& why);
  // The same for the DNN program (built on the first DNN node).
  cl_kernel kernel(DnnKernel k, std::string& why);

  // Measures the device's costs (cost.cpp: the link both ways, a round trip, its memory and
  // CLBlast's GEMM rates), its queue idle and nobody else using it meanwhile. false with a one-line
  // `why` ("CLBlast Dgemm: CL_OUT_OF_RESOURCES") when a step fails or gives no usable figure.
  bool measure_costs(DeviceCosts& out, std::string& why);

  // The origin of the most recent program build (compiled or loaded from the disk cache).
  ProgramCache::Origin last_program_origin() const noexcept {
    return cache_ ? cache_->last_origin() : ProgramCache::Origin::none;
  }

 private:
  bool pick(const config::Config& cfg, std::string& why);

  ClApi cl_;
  ClblastApi clblast_;
  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  bool fp64_ = false;
  bool accelerator_ = false;
  size_t max_alloc_ = 0;
  size_t max_work_group_ = 1;

  struct Slot {
    cl_mem mem = nullptr;
    size_t bytes = 0;
  };
  Slot slots_[kNumSlots];
  std::vector<unsigned char> staging_[kNumSlots];

  std::unique_ptr<ProgramCache> cache_;
  cl_program programs_[kNumPrecs] = {};
  std::string program_errors_[kNumPrecs];
  cl_kernel kernels_[kNumPrecs][kNumKernels] = {};
  cl_program dnn_program_ = nullptr;
  std::string dnn_program_error_;
  cl_kernel dnn_kernels_[kNumDnnKernels] = {};
};

}  // namespace sol::backends::opencl
