// One BLAS node's trip through a device, as opencl's and cuda's Job make it (their transfer.hpp):
// the order of things once, the device calls theirs. Up, each operand in its device layout
// (device_operand.hpp) goes to a buffer of the backend's, uploaded, or zero-filled when the routine
// does not read it. Down, after the node's commands, each written operand is read into staging and
// stored into the caller's memory only once the device has finished every command without error:
// a failure leaves the caller's memory untouched.
//
// Lazily (the device has an active Resident, resident.hpp), operands come from and results stay
// in the device copies the Resident keeps: the upload copies only what the device does not have
// (the host's data is consumed before it returns), the download fetches only what cannot stay, and
// when everything stays nothing waits: the node is pending until a flush. In a node that waits
// anyway (a result that cannot stay), an operand the Resident neither holds nor could keep moves
// as eagerly (JobOperand::slot: the backend's buffer, an asynchronous copy the download waits for).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/common/device_operand.hpp"
#include "common/clock.hpp"
#include "hal/backend.hpp"
#include "hal/transfers.hpp"
#include "ir/node.hpp"

namespace sol::backends {

// An operand of a node's trip through the device: its device layout and the device buffer it has
// there (a cl_mem, a device pointer).
template <class Buffer>
struct JobOperand : DeviceOperand {
  Buffer buf = nullptr;
  bool kept = false;  // lazy: the result stays on the device (Resident), not downloaded
  bool slot = false;  // lazy, in a node that waits: moved as eagerly, in the Job's own buffer
};

// The base of a backend's Job over its Operand (a JobOperand) and Resident (resident.hpp).
template <class Operand, class Resident>
class DeviceJob {
 public:
  DeviceJob(const DeviceJob&) = delete;
  DeviceJob& operator=(const DeviceJob&) = delete;

 protected:
  // `res`: the device's Resident, or nullptr when nodes run eagerly.
  DeviceJob(Resident* res, const capture::Node& node) noexcept
      : res_(res && res->active() ? res : nullptr), es_(capture::dtype_size(node.dtype)) {
    count_ = describe_operands<Operand, kMaxJobOperands>(node, ops_);
  }
  ~DeviceJob() = default;

  // The operand named `name` ('a', 'x'...), or nullptr.
  const Operand* find(char name) const noexcept {
    for (int i = 0; i < count_; ++i)
      if (ops_[i].ext.name[0] == name && ops_[i].ext.name[1] == '\0') return &ops_[i];
    return nullptr;
  }
  // Its leading dimension on the device (1 for a vector or an absent operand).
  int64_t device_ld(char name) const noexcept {
    const Operand* o = find(name);
    return o ? std::max<int64_t>(o->dld, 1) : 1;
  }

  // Every operand bound to the Resident's copy, or moved by `put(i, o)` (a hal::Reason: its
  // buffer, filled), rotm's param (read on the host) excepted.
  template <class Put>
  hal::Reason upload_operands(Put&& put) {
    // Lazily: whether a result comes back at once (the node then waits), and why.
    const char* waits = res_ ? result_comes_back() : nullptr;
    for (int i = 0; i < count_; ++i) {
      Operand& o = ops_[i];
      if (res_) {
        if (hal::Reason r = bind_lazily(o, waits); r != hal::Reason::ok) return r;
        if (!o.slot) continue;
        slots_ = true;  // neither held nor keepable, in a node that waits: as eagerly
      }
      if (o.shape == Shape::host) continue;
      if (hal::Reason r = put(i, o); r != hal::Reason::ok) return r;
    }
    if (slots_) drop_copies_of_slots();
    return hal::Reason::ok;
  }

  // After the node's commands: lazily, nothing when every result stays on the device (the node is
  // deferred); else each written operand read into staging by `read(i, o, staged)` (a hal::Reason;
  // it counts the bytes back), `finish()` (a hal::Reason) waiting for the device and checking every
  // command, and only then the results stored into the caller's memory. `result`: the node returns
  // a scalar the host needs now, so it waits lazily too.
  template <class Read, class Finish>
  hal::Reason download_results(bool result, Read&& read, Finish&& finish) {
    // Lazily, each result is offered to the Resident even in a node that waits: one it keeps
    // does not come back.
    if (res_ && keep_on_device() && !result) {
      res_->deferred();
      return hal::Reason::ok;
    }
    const uint64_t t0 = res_ ? monotonic_ns() : 0;
    uint64_t back = 0;
    unsigned char* staged[kMaxJobOperands] = {};
    for (int i = 0; i < count_; ++i) {
      Operand& o = ops_[i];
      if (!on_device_result(o) || o.kept) continue;
      back += o.device_bytes;
      if (hal::Reason r = read(i, o, staged[i]); r != hal::Reason::ok) return r;
    }
    if (hal::Reason r = finish(); r != hal::Reason::ok) return r;
    for (int i = 0; i < count_; ++i)
      if (staged[i]) store_into(ops_[i], static_cast<unsigned char*>(ops_[i].ext.ptr), staged[i], es_);
    if (res_) res_->waited(result ? hal::transfers::Cause::sync : hal::transfers::Cause::eager, t0, back);
    return hal::Reason::ok;
  }

  Resident* res_;
  const size_t es_;
  Operand ops_[kMaxJobOperands];
  int count_ = 0;
  bool slots_ = false;  // lazily, some operand moved as eagerly (Operand::slot)

 private:
  // A result the node writes into a device copy (rotm's param is written on the host).
  static bool on_device_result(const Operand& o) noexcept {
    return o.ext.written && o.shape != Shape::host && o.device_bytes > 0;
  }

  // Lazily, before the upload: why a result comes back at once (the node then waits), or nullptr
  // when all of them may stay.
  const char* result_comes_back() noexcept {
    const char* why = nullptr;
    for (int i = 0; i < count_ && !why; ++i)
      if (on_device_result(ops_[i])) why = res_->comes_back(ops_[i]);
    return why;
  }

  // Lazily, one operand's upload in a node for which result_comes_back() said `waits`: bound to
  // the Resident's copy (found, or made to be kept; rotm's param, read on the host, made current
  // there too), or, in a node that waits, when the Resident neither holds nor could keep it, left
  // to move as eagerly (`slot`: written once the host's bytes are current, which they are on
  // return).
  hal::Reason bind_lazily(Operand& o, const char* waits) {
    const char* why = waits && o.shape != Shape::host && o.device_bytes > 0 ? res_->comes_back(o) : nullptr;
    if (!why) return res_->bind(o, es_);
    res_->host_ready(o.ext.ptr, o.ext.bytes, o.ext.written);
    if (o.ext.written) hal::transfers::note_eager(why);
    o.slot = true;
    return hal::Reason::ok;
  }

  // Lazily, after an upload that moved some operands as eagerly: a copy made in this node of
  // memory that such an operand writes (C aliasing A) goes, since the host's bytes will be the only
  // current ones.
  void drop_copies_of_slots() noexcept {
    for (int i = 0; i < count_; ++i)
      if (ops_[i].slot && ops_[i].ext.written) res_->host_ready(ops_[i].ext.ptr, ops_[i].ext.bytes, true);
  }

  // Lazily: offers each result to the Resident, which keeps it on the device (`kept`) or not.
  // True when all of them stay there, and none must come back now.
  bool keep_on_device() {
    bool all = true;
    for (int i = 0; i < count_; ++i)
      if (on_device_result(ops_[i])) all &= (ops_[i].kept = res_->keep(ops_[i]));
    return all;
  }
};

}  // namespace sol::backends
