// The lazy executor as a device backend sees it. A device backend running lazily (the holder) keeps
// device copies of host ranges and says here what each block of host memory needs; the lazy layer
// (capture/lazy/coherence.hpp, which implements Layer) protects the pages and calls the holder back
// when the host touches them. Declared here so that backends reach lazy execution through the
// backend contract alone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "hal/transfers.hpp"

namespace sol::hal::coherence {

// What a device backend that keeps results on the device implements.
class Holder {
 public:
  virtual ~Holder() = default;
  // Runs what is pending and writes back every dirty range: afterwards no block is dirty. May be
  // called on any thread, from a fault handler included, with no lock of SOL's held.
  virtual void flush(transfers::Cause cause) noexcept = 0;
  // Drops every device copy overlapping [b, e): the host is about to change it (flushed first, so
  // nothing dirty is lost) or has given it back (`discard`: results there are dropped unwritten).
  virtual void drop(uintptr_t b, uintptr_t e, bool discard) noexcept = 0;
  // In a forked child: forgets every copy without touching the device.
  virtual void forget() noexcept = 0;
};

// A block's state: dirty (the device holds its only current copy: pages inaccessible), clean (both
// copies current: read-only), none (read-write, as the program left it).
enum class State : uint8_t { none, clean, dirty };

// What the lazy layer offers a holder (capture/lazy/coherence.hpp documents each).
class Layer {
 public:
  virtual bool enabled() const noexcept = 0;  // false once the process's exit lifted every guard
  virtual size_t min_bytes() const noexcept = 0;
  virtual void attach(Holder* holder) noexcept = 0;
  virtual bool block_of(const void* p, size_t n, uintptr_t& b, uintptr_t& e, const char*& why) noexcept = 0;
  virtual bool set_state(uintptr_t b, uintptr_t e, State s, const char*& why) noexcept = 0;
  virtual bool write_guarded(void* dst, const void* src, size_t n) noexcept = 0;
  virtual bool read_guarded(void* dst, const void* src, size_t n) noexcept = 0;
  virtual void at_exit() noexcept = 0;

 protected:
  ~Layer() = default;
};

// The lazy layer, registered once when lazy execution starts; nullptr while it is off.
inline std::atomic<Layer*> g_layer{nullptr};
inline Layer* layer() noexcept {
  return g_layer.load(std::memory_order_acquire);
}
// The lazy layer when it is on and the process has not begun to exit, else nullptr.
inline Layer* active() noexcept {
  Layer* l = layer();
  return l && l->enabled() ? l : nullptr;
}

}  // namespace sol::hal::coherence
