// The opencl backend's lazy executor: backends/common/resident.hpp's device copies, in cl_mem
// buffers on the device's in-order queue. The host's data is consumed before the call returns
// (the host may change an input as soon as it has, whatever is still queued): a block of a larger
// matrix by a blocking rectangle write, as eager nodes pack it, anything else by
// clCreateBuffer(COPY_HOST_PTR) from its device image (transfer.hpp's device_image, same_copy),
// which does not wait for the queue.
#pragma once

#include <cstddef>
#include <mutex>

#include "backends/common/resident.hpp"
#include "backends/opencl/transfer.hpp"

namespace sol::config {
struct Config;
}

namespace sol::backends::opencl {

class ClResidentDevice final : public ResidentDevice<Operand> {
 public:
  explicit ClResidentDevice(Device& dev) noexcept : dev_(dev) {}

  const char* name() const noexcept override { return "opencl"; }
  bool exiting() const noexcept override { return process_exiting(); }
  bool on_host(const Operand& o) const noexcept override { return o.shape == Shape::host; }
  bool raw(const Operand& o) const noexcept override { return o.shape == Shape::raw; }
  bool same(const Operand& a, const Operand& b) const noexcept override { return same_copy(a, b); }
  hal::Reason make(Operand& o, size_t es) override;
  hal::Reason zero(Operand& o, size_t es) override;
  void retain(cl_mem b) noexcept override { dev_.cl().clRetainMemObject(b); }
  void release(cl_mem b) noexcept override { dev_.cl().clReleaseMemObject(b); }
  bool read(const Operand& o, void* host) noexcept override;
  bool mark(uint64_t node) noexcept override;
  const char* finish() noexcept override;
  size_t memory_bytes() const noexcept override;
  void store(const Operand& o, unsigned char* host, unsigned char* staged, size_t es) const noexcept override {
    store_into(o, host, staged, es);
  }

 private:
  Device& dev_;
};

namespace detail {
// Constructed before the core that uses it (a base listed first).
struct ClResidentBase {
  explicit ClResidentBase(Device& dev) noexcept : cl_device(dev) {}
  ClResidentDevice cl_device;
};
}  // namespace detail

class Resident final : private detail::ClResidentBase, public backends::Resident<Operand> {
 public:
  Resident(opencl::Device& dev, std::mutex& mu, const config::Config& cfg)
      : detail::ClResidentBase(dev), backends::Resident<Operand>(cl_device, mu, cfg) {}
};

}  // namespace sol::backends::opencl
