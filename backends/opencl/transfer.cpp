#include "backends/opencl/transfer.hpp"

#include <algorithm>
#include <cstring>

#include "backends/opencl/resident.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::opencl {

using capture::DType;
using capture::Node;
using hal::Reason;

Reason reason_of(int status) noexcept {
  switch (status) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_HOST_MEMORY: return Reason::out_of_memory;
    case CLBlastNotImplemented: return Reason::op_unsupported;
    default: return Reason::device_error;
  }
}

Job::Job(Device& dev, const Node& node)
    : DeviceJob(dev.resident(), node), dev_(dev), cl_(dev.cl()), queue_(dev.queue()) {}

Job::~Job() {
  if (!res_ || slots_) cl_.clFinish(queue_);  // asynchronous writes from the caller's memory
  for (int i = 0; i < events_; ++i) cl_.clReleaseEvent(event_[i]);
  if (res_)  // our references to the operands' buffers; the queue keeps them while it needs them
    for (int i = 0; i < count_; ++i)
      if (ops_[i].buf && !ops_[i].slot) cl_.clReleaseMemObject(ops_[i].buf);
}

int64_t Job::widen_diagonal_band() noexcept {
  for (int i = 0; i < count_; ++i) {
    Operand& o = ops_[i];
    if (o.shape != Shape::band || o.kl + o.ku != 0) continue;
    o.widened = true;
    device_layout(o, es_);
    return 1;
  }
  return 0;
}

cl_mem Job::buf(char name) const noexcept {
  const Operand* o = find(name);
  return o ? o->buf : nullptr;
}

cl_int write_packed(const ClApi& cl, cl_command_queue queue, cl_mem buf, const Operand& o, size_t es, cl_bool blocking,
                    cl_event* ev) noexcept {
  const size_t origin[3] = {0, 0, 0};
  const size_t region[3] = {static_cast<size_t>(o.rows) * es, static_cast<size_t>(o.cols), 1};
  const cl_int err = cl.clEnqueueWriteBufferRect(queue, buf, blocking, origin, origin, region, o.dld * es, 0, o.ld * es,
                                                 0, o.ext.ptr, 0, nullptr, ev);
  if (err == CL_SUCCESS) hal::transfers::to_device(region[0] * region[1]);
  return err;
}

// Enqueues the copy of a read operand to the device: the caller's memory itself where the layouts
// agree (a rectangle copy packs a general matrix with ld > rows), else its host image in staging
// slot `slot` where it needs one (device_operand.hpp).
cl_int Job::write(int slot, Operand& o, cl_event* ev) {
  const void* src = o.ext.ptr;
  if (o.shape == Shape::general && o.ld != o.dld) return write_packed(cl_, queue_, o.buf, o, es_, CL_FALSE, ev);
  if (needs_image(o)) {
    auto* stage = static_cast<unsigned char*>(dev_.staging(slot, o.device_bytes));
    fill_image(o, stage, es_);
    src = stage;
  }
  const cl_int err = cl_.clEnqueueWriteBuffer(queue_, o.buf, CL_FALSE, 0, o.device_bytes, src, 0, nullptr, ev);
  if (err == CL_SUCCESS) hal::transfers::to_device(o.device_bytes);
  return err;
}

Reason Job::upload() {
  return upload_operands([&](int i, Operand& o) {
    if (cl_int err = dev_.buffer(i, o.device_bytes, o.buf); err != CL_SUCCESS) return fail(err, "allocation");
    if (o.device_bytes == 0) return Reason::ok;
    cl_event ev = nullptr;
    cl_int err;
    if (o.ext.read) {
      err = write(i, o, &ev);
    } else {  // C or y with beta == 0 (or copy's y): not read, and no NaN of the caller's may survive
      const unsigned char zero[16] = {};
      err = cl_.clEnqueueFillBuffer(queue_, o.buf, zero, es_, 0, o.device_bytes, 0, nullptr, &ev);
    }
    if (err != CL_SUCCESS) return fail(err, o.ext.read ? "clEnqueueWriteBuffer" : "clEnqueueFillBuffer");
    track(ev);
    return Reason::ok;
  });
}

Reason Job::scratch(int slot, size_t bytes, cl_mem& out) {
  if (cl_int err = dev_.buffer(slot, bytes, out); err != CL_SUCCESS) return fail(err, "allocation");
  return Reason::ok;
}

const void* Job::fetch(cl_mem mem, size_t bytes) {
  Fetch& f = fetches_[fetch_count_];
  f.mem = mem;
  f.bytes = bytes;
  f.host = dev_.staging(kStageResult + fetch_count_, bytes);
  ++fetch_count_;
  return f.host;
}

Reason Job::launch(cl_kernel k, size_t global, size_t local, const char* what) {
  cl_event ev = nullptr;
  const cl_int err =
      cl_.clEnqueueNDRangeKernel(queue_, k, 1, nullptr, &global, local ? &local : nullptr, 0, nullptr, &ev);
  if (err != CL_SUCCESS) return fail(err, what);
  track(ev);
  return Reason::ok;
}

Reason Job::clblast(CLBlastStatusCode status, cl_event ev, const char* what) {
  if (ev) track(ev);
  if (status != CLBlastSuccess) return fail(status, what);
  return Reason::ok;
}

Reason Job::download() {
  auto read_result = [&](int i, Operand& o, unsigned char*& staged) {
    staged = static_cast<unsigned char*>(dev_.staging(kStageDown + i, o.device_bytes));
    return read(o.buf, o.device_bytes, staged);
  };
  // The fetched results too, then the wait, then every command's status.
  auto finish = [&] {
    for (int f = 0; f < fetch_count_; ++f)
      if (Reason r = read(fetches_[f].mem, fetches_[f].bytes, fetches_[f].host); r != Reason::ok) return r;
    if (cl_int err = cl_.clFinish(queue_); err != CL_SUCCESS) return fail(err, "clFinish");
    for (int e = 0; e < events_; ++e) {
      cl_int status = CL_COMPLETE;
      cl_int err =
          cl_.clGetEventInfo(event_[e], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
      if (err != CL_SUCCESS) return fail(err, "clGetEventInfo");
      if (status < 0) return fail(status, "a device command");
    }
    return Reason::ok;
  };
  return download_results(fetch_count_ > 0, read_result, finish);
}

Reason Job::fail(int status, const char* what) {
  SOL_LOG(debug, "opencl: %s failed: %s (%d)", what, status_name(status), status);
  return reason_of(status);
}

Reason Job::read(cl_mem mem, size_t bytes, void* host) {
  cl_event ev = nullptr;
  const cl_int err = cl_.clEnqueueReadBuffer(queue_, mem, CL_FALSE, 0, bytes, host, 0, nullptr, &ev);
  if (err != CL_SUCCESS) return fail(err, "clEnqueueReadBuffer");
  hal::transfers::to_host(bytes);
  track(ev);
  return Reason::ok;
}

void Job::track(cl_event ev) {
  if (!ev) return;
  if (events_ == kMaxEvents) {  // more commands than a node issues: keep the newest
    cl_.clReleaseEvent(event_[0]);
    std::memmove(event_, event_ + 1, sizeof(cl_event) * (kMaxEvents - 1));
    --events_;
  }
  event_[events_++] = ev;
}

}  // namespace sol::backends::opencl
