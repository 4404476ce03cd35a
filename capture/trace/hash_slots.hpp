// A thread's own map from a 64-bit hash to a small value, for lookups on the per-call path.
//
// A PyTorch training step reaches hundreds of distinct call sites, each about once per step, with
// the framework's own work in between evicting whatever the recorder touched. A direct-mapped
// cache of a few hundred entries then misses on nearly every call, and each miss took the global
// lock and walked a node-based std::unordered_map: several cache misses. Here a lookup is a probe
// of a flat table, at most half full: in the common case one cache line. The table only grows
// (its keys are a program's distinct sites or signatures, bounded by the global tables it mirrors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sol::capture::trace {

template <class V>
class HashSlots {
 public:
  // The value stored under `h` (never 0), or nullptr.
  const V* find(uint64_t h) const noexcept {
    if (slots_.empty()) return nullptr;
    for (size_t i = index(h);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.hash == h) return &s.value;
      if (s.hash == 0) return nullptr;
    }
  }

  // Stores `v` under `h` (never 0), replacing what was there. May throw std::bad_alloc.
  void put(uint64_t h, const V& v) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = index(h);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.hash == h) {
        s.value = v;
        return;
      }
      if (s.hash == 0) {
        s = {h, v};
        ++used_;
        return;
      }
    }
  }

  size_t size() const noexcept { return used_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    V value{};
  };
  size_t index(uint64_t h) const noexcept { return static_cast<size_t>(h ^ (h >> 29)) & mask_; }
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 64 : slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    used_ = 0;
    for (const Slot& s : old)
      if (s.hash) put(s.hash, s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, used_ = 0;
};

}  // namespace sol::capture::trace
