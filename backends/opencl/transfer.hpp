// One BLAS node's data on the OpenCL device: backends/common/device_job.hpp's trip with OpenCL's
// calls. See blas.hpp for the rules; blas.cpp issues the commands in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/common/blas_args.hpp"
#include "backends/common/device_job.hpp"
#include "backends/opencl/device.hpp"
#include "capture/blas/blas.hpp"
#include "hal/backend.hpp"
#include "ir/node.hpp"

namespace sol::backends::opencl {

// The reason for an OpenCL or CLBlast status.
hal::Reason reason_of(int status) noexcept;

// An operand and its device layout (backends/common/device_operand.hpp), with its buffer.
using Operand = JobOperand<cl_mem>;

// Enqueues the rectangle copy that packs a general matrix whose leading dimension exceeds its
// rows (o.ld > o.dld) from the caller's memory into `buf`, counted as bytes to the device.
// `blocking`: the caller's memory has been read when it returns.
cl_int write_packed(const ClApi& cl, cl_command_queue queue, cl_mem buf, const Operand& o, size_t es, cl_bool blocking,
                    cl_event* ev) noexcept;

class Resident;

// Device buffer slots: operands use 0..3 (kMaxJobOperands), scratch the ones below. Host staging
// slots: uploads 0..3, downloads 4..7, fetched results 8 and 9.
inline constexpr int kSlotResult = 4;
inline constexpr int kSlotResult2 = 5;
inline constexpr int kSlotTemp = 6;

// A local-memory kernel argument of `bytes`.
struct Local {
  size_t bytes;
};

// One node's trip through the device: upload, commands, download. Eagerly, the destructor waits
// for the queue, so nothing the device does outlives the call (the uploads read the caller's
// memory asynchronously); lazily the node stays pending until a flush (device_job.hpp). Methods
// returning a Reason log the OpenCL status at debug level.
class Job : public DeviceJob<Operand, Resident> {
 public:
  Job(Device& dev, const capture::Node& node);
  ~Job();

  // CLBlast 1.5.3 takes a band with kl = ku = 0 for a full matrix (its matrix-vector kernels test
  // kl == 0 && ku == 0 for "not banded") and then rejects lda < n. Such an operand goes to the
  // device with one zero diagonal more (above for gbmv and upper triangles, below for lower).
  // Call before upload(); returns 1 when it applies, to be added to the call's ku or k.
  int64_t widen_diagonal_band() noexcept;

  // Device buffers for every operand, filled as blas.hpp describes.
  hal::Reason upload();

  // The device buffer of operand `name` ('a', 'x'...), after upload(), and its leading
  // dimension there (see Operand::dld).
  cl_mem buf(char name) const noexcept;
  size_t ld(char name) const noexcept { return static_cast<size_t>(device_ld(name)); }
  cl_command_queue* queue() noexcept { return &queue_; }

  // A scratch device buffer (results, partial sums, CLBlast's temporary).
  hal::Reason scratch(int slot, size_t bytes, cl_mem& out);

  // Reads `bytes` of `mem` back with the outputs (two at most); the returned host copy is valid
  // once download() returned Reason::ok.
  const void* fetch(cl_mem mem, size_t bytes);

  // Sets a kernel's arguments in order (Local{bytes} for local memory).
  template <class... A>
  cl_int args(cl_kernel k, const A&... a) {
    cl_uint index = 0;
    cl_int err = CL_SUCCESS;
    ((err = err == CL_SUCCESS ? set_arg(k, index++, a) : err), ...);
    return err;
  }

  hal::Reason launch(cl_kernel k, size_t global, size_t local, const char* what);

  // After a CLBlast call: its status and completion event.
  hal::Reason clblast(CLBlastStatusCode status, cl_event ev, const char* what);

  // Reads every written operand and fetched result into host staging, waits, checks every
  // command, and only then stores the written elements into the caller's memory.
  hal::Reason download();

  hal::Reason fail(int status, const char* what);

 private:
  struct Fetch {
    cl_mem mem;
    size_t bytes;
    void* host;
  };

  template <class A>
  cl_int set_arg(cl_kernel k, cl_uint index, const A& a) {
    if constexpr (std::is_same_v<A, Local>)
      return cl_.clSetKernelArg(k, index, a.bytes, nullptr);
    else
      return cl_.clSetKernelArg(k, index, sizeof a, &a);
  }
  cl_int write(int slot, Operand& o, cl_event* ev);
  hal::Reason read(cl_mem mem, size_t bytes, void* host);
  void track(cl_event ev);

  static constexpr int kMaxEvents = 16;
  static constexpr int kStageDown = 4;
  static constexpr int kStageResult = 8;
  Device& dev_;
  const ClApi& cl_;
  cl_command_queue queue_;
  cl_event event_[kMaxEvents] = {};
  int events_ = 0;
  Fetch fetches_[2] = {};
  int fetch_count_ = 0;
};

}  // namespace sol::backends::opencl
