// One node's data on the device: how each operand of a BLAS node is laid out, how it goes up
// (gathered, sanitised, zero-filled) and how the elements the routine writes come back. See
// blas.hpp for the rules; blas.cpp issues the commands in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/opencl/device.hpp"
#include "backends/common/blas_args.hpp"
#include "backends/common/device_operand.hpp"
#include "capture/blas/blas.hpp"
#include "capture/ir/node.hpp"
#include "hal/backend.hpp"

namespace sol::backends::opencl {

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

// The reason for an OpenCL or CLBlast status.
hal::Reason reason_of(int status) noexcept;

// A node has at most four memory operands on the device (gemm: a, b, c; rotm's param stays on
// the host).
inline constexpr int kMaxJobOperands = 4;

// An operand and its device layout (backends/common/device_operand.hpp), with its buffer.
struct Operand : DeviceOperand {
  cl_mem buf = nullptr;
  bool kept = false;  // lazy: the result stays on the device (Resident), not downloaded
  bool slot = false;  // lazy, in a node that waits: moved as eagerly, in the Job's slot buffer
};

// Enqueues the rectangle copy that packs a general matrix whose leading dimension exceeds its
// rows (o.ld > o.dld) from the caller's memory into `buf`, counted as bytes to the device.
// `blocking`: the caller's memory has been read when it returns.
cl_int write_packed(const ClApi& cl, cl_command_queue queue, cl_mem buf, const Operand& o, size_t es, cl_bool blocking,
                    cl_event* ev) noexcept;

// The operands of a valid column-major BLAS node (pointer, extent and access from
// capture::blas::operands, plus shape and device layout). Returns how many.
int describe(const capture::Node& node, Operand out[kMaxJobOperands]);

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

// One node's trip through the device: upload, commands, download. The destructor waits for the
// queue, so nothing the device does outlives the call (the uploads read the caller's memory
// asynchronously). Methods returning a Reason log the OpenCL status at debug level.
//
// Lazily (the device has a Resident), operands come from and results stay in the device copies
// the Resident keeps: upload() copies only what the device does not have (synchronously, so that
// the host may change its memory as soon as the call returns), download() fetches only what
// cannot stay (scalar results, results in memory that cannot be guarded), and the destructor does
// not wait: the node is pending until a flush. In a node that waits anyway (a result that cannot
// stay), an operand the Resident neither holds nor could keep moves as eagerly: slot buffers,
// asynchronous writes; the node waits for them in download().
class Job {
 public:
  Job(Device& dev, const capture::Node& node);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
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
  size_t ld(char name) const noexcept;
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
  const Operand* find(char name) const noexcept;
  cl_int write(int slot, Operand& o, cl_event* ev);
  hal::Reason read(cl_mem mem, size_t bytes, void* host);
  void track(cl_event ev);
  void store(Operand& o, unsigned char* staged);

  static constexpr int kMaxEvents = 16;
  static constexpr int kStageDown = 4;
  static constexpr int kStageResult = 8;
  Device& dev_;
  Resident* res_;
  const ClApi& cl_;
  cl_command_queue queue_;
  size_t es_;
  Operand ops_[kMaxJobOperands];
  int count_ = 0;
  cl_event event_[kMaxEvents] = {};
  int events_ = 0;
  Fetch fetches_[2] = {};
  int fetch_count_ = 0;
  bool slots_ = false;  // lazily, some operand moved as eagerly (Operand::slot)
};

}  // namespace sol::backends::opencl
