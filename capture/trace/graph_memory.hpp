// The buffers and versions of a traced process's primitive graph (docs/graph-format.md).
//
// A buffer is memory the program passed to traced calls as operands, from the first call that
// passed it until it is given back (free, realloc, munmap): the disjoint address ranges operands
// fell in. An operand that overlaps several buffers, or reaches past one, makes a new buffer that
// joins them (they become parts of it at their offsets). Each call that writes into a buffer makes
// a new version of it, as does each input the graph records there (bytes the program changed
// without a traced call). With input data on, each buffer also remembers what it is known to hold:
// per element set (an operand's elements by its geometry), the hash of the contents that a write
// or an input left there, so that a later read of the same elements with the same contents needs
// no data.
//
// Not thread-safe: the graph writer serialises its use.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "capture/trace/dataflow.hpp"
#include "capture/trace/node_pool.hpp"

namespace sol::capture::trace {

class GraphMemory {
 public:
  struct Buffer {
    uintptr_t hi;
    uint32_t id, version;
    struct Known {
      uintptr_t lo, hi;
      uint64_t key, content;
    };
    std::vector<Known> known;
  };
  // Where an operand lies: buffer, byte offset, and the buffer's version when it was located; `at`
  // is the buffer itself, valid while generation() stays as it was.
  struct Ref {
    uint32_t buf;
    uint64_t off;
    uint32_t ver;
    Buffer* at;
  };
  // A buffer that locate() made: its id, size, and the earlier buffers it joins.
  struct Part {
    uint32_t buf;
    uint64_t off;
    uint32_t ver;
  };
  struct Born {
    uint32_t buf = 0;  // 0: none made
    uint64_t bytes = 0;
    std::vector<Part> parts;
  };

  // The buffer holding [lo, hi) (hi > lo), made when none does (`born`). Throws std::bad_alloc.
  Ref locate(uintptr_t lo, uintptr_t hi, Born& born);
  // Changes whenever a buffer is made, joined or ends: Refs taken before may point nowhere.
  uint64_t generation() const noexcept { return generation_; }

  // The buffer has a new version (a write, an input). Its version before.
  static uint32_t bump(Buffer* b) noexcept { return b->version++; }

  // Whether the elements `key` of the buffer are known to hold `content`.
  static bool known(const Buffer* b, uint64_t key, uint64_t content) noexcept;
  // [lo, hi) (elements `key`) now holds `content`, as a write or an input left it; what else was
  // known about those bytes no longer holds.
  static void learn(Buffer* b, uintptr_t lo, uintptr_t hi, uint64_t key, uint64_t content);
  // [lo, hi) changed in a way the graph does not know (a write whose result was not hashed).
  static void unknown(Buffer* b, uintptr_t lo, uintptr_t hi) noexcept;

  // [p, p + bytes) was given back: the buffers there end. A few loads when none is there.
  void forget(const void* p, size_t bytes) noexcept;
  // Whether a buffer may lie on the pages of [lo, hi), without the caller's lock.
  bool maybe(uintptr_t lo, uintptr_t hi) const noexcept { return pages_.any(lo, hi); }
  void clear() noexcept;
  size_t buffers() const noexcept { return map_.size(); }

 private:
  using Map =
      std::map<uintptr_t, Buffer, std::less<uintptr_t>, PoolAllocator<std::pair<const uintptr_t, Buffer>>>;
  // Past this many live buffers the map starts over (later operands make new ones).
  static constexpr size_t kMaxBuffers = size_t{1} << 20;

  Map::iterator holder(uintptr_t lo) noexcept;

  NodePool pool_{96};
  Map map_{PoolAllocator<std::pair<const uintptr_t, Buffer>>(&pool_)};
  PageSet pages_;
  uint32_t next_id_ = 1;
  uint64_t generation_ = 1;
};

}  // namespace sol::capture::trace
