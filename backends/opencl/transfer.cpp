#include "backends/opencl/transfer.hpp"

#include "backends/opencl/resident.hpp"

#include <algorithm>
#include <cstring>

#include "common/clock.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::opencl {

using capture::DType;
using capture::Node;
using hal::Reason;

int describe(const Node& node, Operand out[kMaxJobOperands]) {
  return describe_operands<Operand, kMaxJobOperands>(node, out);
}

Reason reason_of(int status) noexcept {
  switch (status) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_HOST_MEMORY: return Reason::out_of_memory;
    case CLBlastNotImplemented: return Reason::op_unsupported;
    default: return Reason::device_error;
  }
}

Job::Job(Device& dev, const Node& node)
    : dev_(dev), res_(dev.resident()), cl_(dev.cl()), queue_(dev.queue()), es_(capture::dtype_size(node.dtype)) {
  count_ = describe(node, ops_);
  if (res_ && !res_->active()) res_ = nullptr;
}

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

const Operand* Job::find(char name) const noexcept {
  for (int i = 0; i < count_; ++i)
    if (ops_[i].ext.name[0] == name && ops_[i].ext.name[1] == '\0') return &ops_[i];
  return nullptr;
}

cl_mem Job::buf(char name) const noexcept {
  const Operand* o = find(name);
  return o ? o->buf : nullptr;
}

size_t Job::ld(char name) const noexcept {
  const Operand* o = find(name);
  return o ? static_cast<size_t>(std::max<int64_t>(o->dld, 1)) : 1;
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
// agree (a rectangle copy packs a general matrix with ld > rows), else a host copy in staging
// slot `slot` (gathered vector, sanitised triangle, band or packed matrix).
cl_int Job::write(int slot, Operand& o, cl_event* ev) {
  const auto* host = static_cast<const unsigned char*>(o.ext.ptr);
  const void* src = host;
  if (o.shape == Shape::general && o.ld != o.dld) return write_packed(cl_, queue_, o.buf, o, es_, CL_FALSE, ev);
  if (o.shape == Shape::vector && o.inc != 1) {
    auto* stage = static_cast<unsigned char*>(dev_.staging(slot, o.device_bytes));
    gather(stage, host, o.n, o.inc, es_);
    src = stage;
  } else if (o.shape == Shape::triangle || o.shape == Shape::band || o.herm || o.unit) {
    auto* stage = static_cast<unsigned char*>(dev_.staging(slot, o.device_bytes));
    if (o.shape == Shape::packed) {
      std::memcpy(stage, host, o.device_bytes);
    } else {
      std::memset(stage, 0, o.device_bytes);
      copy_columns(o, stage, host, true, es_);
    }
    clear_diagonal(o, stage, es_);
    src = stage;
  }
  const cl_int err = cl_.clEnqueueWriteBuffer(queue_, o.buf, CL_FALSE, 0, o.device_bytes, src, 0, nullptr, ev);
  if (err == CL_SUCCESS) hal::transfers::to_device(o.device_bytes);
  return err;
}

Reason Job::upload() {
  // Lazily: whether a result comes back at once (the node then waits), and why.
  const char* waits = res_ ? result_comes_back(*res_, ops_, count_) : nullptr;
  for (int i = 0; i < count_; ++i) {
    Operand& o = ops_[i];
    if (res_) {
      if (Reason r = bind_lazily(*res_, o, es_, waits); r != Reason::ok) return r;
      if (!o.slot) continue;
      slots_ = true;  // neither held nor keepable, in a node that waits: as eagerly
    }
    if (o.shape == Shape::host) continue;
    if (cl_int err = dev_.buffer(i, o.device_bytes, o.buf); err != CL_SUCCESS) return fail(err, "allocation");
    if (o.device_bytes == 0) continue;
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
  }
  if (slots_) drop_copies_of_slots(*res_, ops_, count_);
  return Reason::ok;
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
  bool waits = fetch_count_ > 0;
  if (res_) {
    waits |= !keep_on_device(*res_, ops_, count_);
    if (!waits) {
      res_->deferred();
      return Reason::ok;
    }
  }
  const uint64_t t0 = res_ ? monotonic_ns() : 0;
  uint64_t back = 0;
  unsigned char* staged[kMaxJobOperands] = {};
  for (int i = 0; i < count_; ++i) {
    Operand& o = ops_[i];
    if (!o.ext.written || o.shape == Shape::host || o.device_bytes == 0 || o.kept) continue;
    back += o.device_bytes;
    staged[i] = static_cast<unsigned char*>(dev_.staging(kStageDown + i, o.device_bytes));
    if (Reason r = read(o.buf, o.device_bytes, staged[i]); r != Reason::ok) return r;
  }
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
  for (int i = 0; i < count_; ++i)
    if (staged[i]) store(ops_[i], staged[i]);
  if (res_) res_->waited(fetch_count_ > 0 ? hal::transfers::Cause::sync : hal::transfers::Cause::eager, t0, back);
  return Reason::ok;
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

void Job::store(Operand& o, unsigned char* staged) {
  store_into(o, static_cast<unsigned char*>(o.ext.ptr), staged, es_);
}

}  // namespace sol::backends::opencl
