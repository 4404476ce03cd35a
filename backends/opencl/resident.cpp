#include "backends/opencl/resident.hpp"

#include <vector>

#include "backends/common/resident_impl.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends {
template class Resident<opencl::Operand>;
}

namespace sol::backends::opencl {

hal::Reason ClResidentDevice::make(Operand& o, size_t es) {
  const ClApi& cl = dev_.cl();
  cl_int err = CL_SUCCESS;
  if (o.ext.read && o.shape == Shape::general && o.ld != o.dld) {
    // A block of a larger matrix (a LAPACK update's): one pass over its data, as eagerly, rather
    // than a packed host image first. Blocking: the host's data is consumed before it returns.
    o.buf = cl.clCreateBuffer(dev_.context(), CL_MEM_READ_WRITE, o.device_bytes, nullptr, &err);
    if (err == CL_SUCCESS && (err = write_packed(cl, dev_.queue(), o.buf, o, es, CL_TRUE, nullptr)) != CL_SUCCESS) {
      cl.clReleaseMemObject(o.buf);
      o.buf = nullptr;
    }
  } else if (o.ext.read) {
    std::vector<unsigned char> stage;
    const void* image = device_image(o, stage, es);
    o.buf = cl.clCreateBuffer(dev_.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, o.device_bytes,
                              const_cast<void*>(image), &err);
    if (err == CL_SUCCESS) hal::transfers::to_device(o.device_bytes);
  } else {
    o.buf = cl.clCreateBuffer(dev_.context(), CL_MEM_READ_WRITE, o.device_bytes, nullptr, &err);
    const unsigned char zero[16] = {};
    if (err == CL_SUCCESS && o.shape != Shape::raw)
      err = cl.clEnqueueFillBuffer(dev_.queue(), o.buf, zero, es, 0, o.device_bytes, 0, nullptr, nullptr);
  }
  if (err != CL_SUCCESS) {
    SOL_LOG(debug, "opencl: lazy buffer of %zu bytes failed: %s (%d)", o.device_bytes, status_name(err), err);
    return reason_of(err);
  }
  return hal::Reason::ok;
}

hal::Reason ClResidentDevice::zero(Operand& o, size_t es) {
  const unsigned char zero[16] = {};
  if (cl_int err = dev_.cl().clEnqueueFillBuffer(dev_.queue(), o.buf, zero, es, 0, o.device_bytes, 0, nullptr, nullptr);
      err != CL_SUCCESS)
    return reason_of(err);
  return hal::Reason::ok;
}

bool ClResidentDevice::read(const Operand& o, void* host) noexcept {
  const cl_int err =
      dev_.cl().clEnqueueReadBuffer(dev_.queue(), o.buf, CL_TRUE, 0, o.device_bytes, host, 0, nullptr, nullptr);
  if (err == CL_SUCCESS) return true;
  log::write(log::Level::error, "error: opencl: reading back a result failed (%s): it is lost", status_name(err));
  return false;
}

const char* ClResidentDevice::finish() noexcept {
  const cl_int err = dev_.cl().clFinish(dev_.queue());
  return err == CL_SUCCESS ? nullptr : status_name(err);
}

namespace {
// The runtime's thread, when the marker completes (or fails: the time is then when it gave up).
void CL_CALLBACK node_marker_done(cl_event, cl_int, void* node) {
  hal::transfers::node_done(reinterpret_cast<uintptr_t>(node), monotonic_ns());
}
}  // namespace

// A marker after the node's commands (an in-order queue: it completes when they have), with a
// callback at completion. The event is released at once: the callback still comes.
bool ClResidentDevice::mark(uint64_t node) noexcept {
  const ClApi& cl = dev_.cl();
  if (!cl.clEnqueueMarkerWithWaitList || !cl.clSetEventCallback) return false;
  cl_event ev = nullptr;
  if (cl.clEnqueueMarkerWithWaitList(dev_.queue(), 0, nullptr, &ev) != CL_SUCCESS || !ev) return false;
  const bool ok = cl.clSetEventCallback(ev, CL_COMPLETE, node_marker_done,
                                        reinterpret_cast<void*>(static_cast<uintptr_t>(node))) == CL_SUCCESS;
  cl.clReleaseEvent(ev);
  return ok;
}

size_t ClResidentDevice::memory_bytes() const noexcept {
  cl_ulong global = 0;
  dev_.cl().clGetDeviceInfo(dev_.id(), CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, nullptr);
  return static_cast<size_t>(global);
}

}  // namespace sol::backends::opencl
