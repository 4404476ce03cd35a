#include "backends/opencl/resident.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "capture/lazy/guard.hpp"
#include "common/clock.hpp"
#include "common/log.hpp"
#include "config/config.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::opencl {
namespace {

using capture::lazy::State;
using hal::Reason;
using hal::transfers::Cause;

// The thread holding the backend's lock for us: a fault it takes on a guarded page (which the
// rules above exclude) must not wait for that lock; the fault handler then lifts the page.
thread_local bool t_holding = false;


uintptr_t addr(const void* p) noexcept {
  return reinterpret_cast<uintptr_t>(p);
}

bool overlaps(const Operand& o, uintptr_t b, uintptr_t e) noexcept {
  const uintptr_t lo = addr(o.ext.ptr);
  return lo < e && lo + o.ext.bytes > b;
}

}  // namespace

Resident::Lock::Lock(std::mutex& mu) : lock_(mu) {
  t_holding = true;
}
Resident::Lock::~Lock() {
  t_holding = false;
}

Resident::Resident(Device& dev, std::mutex& mu, const config::Config& cfg)
    : dev_(dev),
      mu_(mu),
      pid_(::getpid()),
      max_nodes_(static_cast<size_t>(cfg.lazy_max_nodes)),
      max_bytes_(static_cast<size_t>(cfg.lazy_max_bytes)),
      budget_(static_cast<size_t>(cfg.lazy_device_memory)) {
  if (budget_ == 0) {
    cl_ulong global = 0;
    dev.cl().clGetDeviceInfo(dev.id(), CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, nullptr);
    budget_ = global ? static_cast<size_t>(global / 2) : size_t{1} << 30;
  }
}

Resident::~Resident() {
  // Copies are released with the device, or leaked at exit (see process_exiting).
  if (process_exiting()) return;
  for (Copy& c : copies_) dev_.cl().clReleaseMemObject(c.op.buf);
}

bool Resident::active() const noexcept {
  return capture::lazy::enabled() && !process_exiting() && ::getpid() == pid_;
}

Resident::Copy* Resident::find(const Operand& o) noexcept {
  for (Copy& c : copies_)
    if (same_copy(c.op, o)) return &c;
  return nullptr;
}

Reason Resident::bind(Operand& o, size_t es) {
  const ClApi& cl = dev_.cl();
  if (o.shape == Shape::host) {  // read where it is
    host_ready(o.ext.ptr, o.ext.bytes, false);
    return Reason::ok;
  }
  if (o.device_bytes == 0) return Reason::ok;
  Copy* kept = find(o);
  if (o.ext.written) {
    // Other copies of these bytes go stale: drop them, after writing back what only they hold
    // (it must reach the host before this result does).
    const uintptr_t b = addr(o.ext.ptr), e = b + o.ext.bytes;
    bool dirty = false, others = false;
    for (Copy& c : copies_)
      if (&c != kept && overlaps(c.op, b, e)) {
        others = true;
        dirty |= c.dirty;
      }
    if (dirty) flush_locked(Cause::host_write);
    if (others) {
      kept = nullptr;  // the vector is compacted below
      for (size_t i = 0; i < copies_.size();) {
        Copy& c = copies_[i];
        if (!same_copy(c.op, o) && overlaps(c.op, b, e)) {
          const uintptr_t bb = c.block_b, be = c.block_e;
          release(c);
          copies_.erase(copies_.begin() + static_cast<long>(i));
          update_block(bb, be);
        } else {
          ++i;
        }
      }
      kept = find(o);
    }
  }
  const bool raw = o.shape == Shape::raw;
  if (kept) {
    if (o.ext.read) {
      // Nothing else overlapping it can be dirty (a write drops the others, a copy is made from
      // a flushed host), but a stale read would be silent: check, it is a short walk.
      const uintptr_t b = addr(o.ext.ptr), e = b + o.ext.bytes;
      for (const Copy& c : copies_)
        if (c.dirty && &c != kept && overlaps(c.op, b, e)) {
          flush_locked(Cause::host_read);
          break;
        }
    }
    kept->used = ++clock_;
    cl.clRetainMemObject(kept->op.buf);
    o.buf = kept->op.buf;
    if (!o.ext.read && !raw) {  // beta == 0: no NaN of the caller's may survive
      const unsigned char zero[16] = {};
      if (cl_int err = cl.clEnqueueFillBuffer(dev_.queue(), o.buf, zero, es, 0, o.device_bytes, 0, nullptr, nullptr);
          err != CL_SUCCESS)
        return reason_of(err);
    }
    return Reason::ok;
  }

  // A new buffer, from the host (current first) or zero-filled.
  cl_int err = CL_SUCCESS;
  if (o.ext.read) {
    host_ready(o.ext.ptr, o.ext.bytes, false);
    std::vector<unsigned char> stage;
    const void* image = device_image(o, stage, es);
    o.buf = cl.clCreateBuffer(dev_.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, o.device_bytes,
                              const_cast<void*>(image), &err);
    if (err == CL_SUCCESS) hal::transfers::to_device(o.device_bytes);
  } else {
    o.buf = cl.clCreateBuffer(dev_.context(), CL_MEM_READ_WRITE, o.device_bytes, nullptr, &err);
    const unsigned char zero[16] = {};
    if (err == CL_SUCCESS && !raw)
      err = cl.clEnqueueFillBuffer(dev_.queue(), o.buf, zero, es, 0, o.device_bytes, 0, nullptr, nullptr);
  }
  if (err != CL_SUCCESS) {
    SOL_LOG(debug, "opencl: lazy buffer of %zu bytes failed: %s (%d)", o.device_bytes, status_name(err), err);
    return reason_of(err);
  }

  // Kept when the host range can be guarded: an input becomes a clean copy now, a result a dirty
  // one in keep(). A raw result that is not read holds nothing yet: it is kept in keep(), once
  // the node has written it (a node that leaves it unwritten must not leave a copy behind).
  uintptr_t bb, be;
  const char* why = nullptr;
  if (o.ext.bytes >= capture::lazy::min_bytes() && capture::lazy::block_of(o.ext.ptr, o.ext.bytes, bb, be, why)) {
    if (!raw || o.ext.read) adopt(o, es);
  } else if (o.ext.written) {
    host_ready(o.ext.ptr, o.ext.bytes, true);  // its result comes back at once: pages open
    hal::transfers::note_eager(o.ext.bytes < capture::lazy::min_bytes() ? "too small to guard" : why);
  }
  return Reason::ok;
}

Resident::Copy* Resident::adopt(const Operand& o, size_t es) noexcept {
  uintptr_t bb, be;
  const char* why = nullptr;
  if (o.ext.bytes < capture::lazy::min_bytes() || !capture::lazy::block_of(o.ext.ptr, o.ext.bytes, bb, be, why))
    return nullptr;
  try {
    Copy c;
    c.op = o;
    c.es = es;
    c.block_b = bb;
    c.block_e = be;
    c.used = ++clock_;
    copies_.push_back(c);
  } catch (...) {  // out of memory: not kept
    return nullptr;
  }
  dev_.cl().clRetainMemObject(o.buf);  // the copy's own reference
  held_bytes_ += o.device_bytes;
  if (o.ext.read) update_block(bb, be);
  evict_beyond_budget();  // never the copy just made; the others may move
  return find(o);
}

bool Resident::keep(Operand& o) {
  Copy* c = find(o);
  if (!c && o.shape == Shape::raw && o.buf && !o.ext.read) {
    c = adopt(o, 1);
    if (!c) {  // not guarded (bind said why where it knew): it comes back into open pages
      host_ready(o.ext.ptr, o.ext.bytes, true);
      return false;
    }
  }
  if (!c || c->op.buf != o.buf) return false;
  if (!c->dirty) {
    c->dirty = true;
    dirty_bytes_ += c->op.device_bytes;
  }
  const char* why = nullptr;
  if (!capture::lazy::set_state(c->block_b, c->block_e, State::dirty, why)) {
    SOL_LOG(debug, "opencl: lazy: result at %p comes back at once: %s", o.ext.ptr, why ? why : "");
    hal::transfers::note_eager(why ? why : "its pages could not be protected");
    c->dirty = false;
    dirty_bytes_ -= c->op.device_bytes;
    // The Job downloads it into open pages: the block's copies go.
    drop_locked(c->block_b, c->block_e, false);
    return false;
  }
  return true;
}

void Resident::deferred() {
  ++pending_;
  if (pending_ >= max_nodes_ || dirty_bytes_ > max_bytes_) flush_locked(Cause::limit);
}

void Resident::waited(Cause cause, uint64_t start_ns, uint64_t bytes_back) {
  const uint64_t nodes = pending_ + 1;  // the pending ones and the node that waited
  pending_ = 0;
  hal::transfers::flushed(cause);
  hal::transfers::flush_span(cause, start_ns, monotonic_ns(), nodes, bytes_back);
}

void Resident::flush(Cause cause) noexcept {
  if (t_holding) return;
  Lock lock(mu_);
  flush_locked(cause);
}

void Resident::drop(uintptr_t b, uintptr_t e, bool discard) noexcept {
  if (t_holding) return;
  Lock lock(mu_);
  drop_locked(b, e, discard);
}

void Resident::forget() noexcept {
  // A forked child (no device) or exit: the handles are leaked, never released.
  std::vector<Copy>().swap(copies_);
  pending_ = dirty_bytes_ = held_bytes_ = 0;
}

void Resident::flush_locked(Cause cause) noexcept {
  if (pending_ == 0 && dirty_bytes_ == 0) return;
  if (::getpid() != pid_ || process_exiting()) return;
  const uint64_t t0 = monotonic_ns();
  const uint64_t nodes = pending_;
  uint64_t back = 0;
  const cl_int err = dev_.cl().clFinish(dev_.queue());
  if (err != CL_SUCCESS)
    log::write(log::Level::error, "error: opencl: the device failed deferred work (%s): results may be wrong",
               status_name(err));
  std::vector<std::pair<uintptr_t, uintptr_t>> blocks;
  for (Copy& c : copies_) {
    if (!c.dirty) continue;
    write_back(c);
    back += c.op.device_bytes;
    c.dirty = false;
    blocks.emplace_back(c.block_b, c.block_e);
  }
  pending_ = 0;
  dirty_bytes_ = 0;
  for (const auto& [b, e] : blocks) update_block(b, e);
  hal::transfers::flushed(cause);
  hal::transfers::flush_span(cause, t0, monotonic_ns(), nodes, back);
}

bool Resident::write_back(Copy& c) noexcept {
  const Operand& o = c.op;
  try {
    std::vector<unsigned char> staged(o.device_bytes);
    const cl_int err =
        dev_.cl().clEnqueueReadBuffer(dev_.queue(), o.buf, CL_TRUE, 0, o.device_bytes, staged.data(), 0, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      log::write(log::Level::error, "error: opencl: reading back a result failed (%s): it is lost", status_name(err));
      return false;
    }
    hal::transfers::to_host(o.device_bytes);
    // A raw copy is the host's bytes themselves: straight into its pages.
    if (o.shape == Shape::raw) return capture::lazy::write_guarded(o.ext.ptr, staged.data(), o.ext.bytes);
    // The host's bytes around the elements written (other elements of a strided vector, the rows
    // beyond a matrix's, a triangle's other half) are kept: the result is stored into an image of
    // the whole range, which goes back in one write.
    std::vector<unsigned char> image(o.ext.bytes);
    if (!capture::lazy::read_guarded(image.data(), o.ext.ptr, o.ext.bytes)) return false;
    Operand at = o;
    at.ext.ptr = image.data();
    store_into(at, image.data(), staged.data(), c.es);
    return capture::lazy::write_guarded(o.ext.ptr, image.data(), o.ext.bytes);
  } catch (...) {
    log::write(log::Level::error, "error: opencl: out of memory writing back a result: it is lost");
    return false;
  }
}

void Resident::host_ready(const void* p, size_t n, bool writes) noexcept {
  if (!p || !n) return;
  const uintptr_t b = addr(p), e = b + n;
  bool dirty = false, any = false;
  for (const Copy& c : copies_)
    if (c.block_b < e && c.block_e > b) {
      any = true;
      dirty |= c.dirty;
    }
  if (dirty) flush_locked(writes ? Cause::host_write : Cause::host_read);
  if (writes && any) drop_locked(b, e, false);
}

void Resident::drop_locked(uintptr_t b, uintptr_t e, bool discard) noexcept {
  bool dirty = false;
  for (const Copy& c : copies_)
    if (c.block_b < e && c.block_e > b) dirty |= c.dirty;
  if (dirty && !discard) flush_locked(Cause::host_write);
  // Whole blocks go: the pages of a block open only when no copy is left in it.
  std::vector<std::pair<uintptr_t, uintptr_t>> blocks;
  for (size_t i = 0; i < copies_.size();) {
    Copy& c = copies_[i];
    if (c.block_b < e && c.block_e > b) {
      if (c.dirty) dirty_bytes_ -= c.op.device_bytes;
      blocks.emplace_back(c.block_b, c.block_e);
      release(c);
      copies_.erase(copies_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  for (const auto& [bb, be] : blocks) update_block(bb, be);
}

void Resident::release(Copy& c) noexcept {
  held_bytes_ -= c.op.device_bytes;
  if (::getpid() == pid_ && !process_exiting()) dev_.cl().clReleaseMemObject(c.op.buf);
  c.op.buf = nullptr;
}

void Resident::update_block(uintptr_t b, uintptr_t e) noexcept {
  State s = State::none;
  for (const Copy& c : copies_)
    if (c.block_b == b) s = c.dirty ? State::dirty : (s == State::dirty ? s : State::clean);
  const char* why = nullptr;
  if (capture::lazy::set_state(b, e, s, why) || s == State::dirty) return;
  // A clean block that cannot be made read-only: its copies cannot be trusted to stay current.
  SOL_LOG(debug, "opencl: lazy: device copies at %p dropped: %s", reinterpret_cast<void*>(b), why ? why : "");
  for (size_t i = 0; i < copies_.size();) {
    if (copies_[i].block_b == b) {
      release(copies_[i]);
      copies_.erase(copies_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  capture::lazy::set_state(b, e, State::none, why);
}

void Resident::evict_beyond_budget() noexcept {
  while (held_bytes_ > budget_ && copies_.size() > 1) {
    // The least recently used copy, not the one just made.
    size_t victim = 0;
    for (size_t i = 1; i + 1 < copies_.size(); ++i)
      if (copies_[i].used < copies_[victim].used) victim = i;
    if (copies_[victim].dirty) flush_locked(Cause::limit);
    const uintptr_t bb = copies_[victim].block_b, be = copies_[victim].block_e;
    release(copies_[victim]);
    copies_.erase(copies_.begin() + static_cast<long>(victim));
    update_block(bb, be);
  }
}

}  // namespace sol::backends::opencl
