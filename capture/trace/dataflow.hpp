// The dataflow graph of a traced process: an edge A -> B when a call of signature B read bytes a
// call of signature A wrote earlier. Memory is tracked as address ranges, last writer wins.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "capture/blas/blas.hpp"

namespace sol::capture::trace {

class Dataflow {
 public:
  struct Edge {
    uint32_t from, to;
    uint64_t count;
  };

  // One call of signature `sig` with its operands. Thread-safe.
  void record(uint32_t sig, const blas::Operand* ops, int n) noexcept;
  std::vector<Edge> edges() const;
  void clear() noexcept;

 private:
  struct Written {
    uintptr_t end;
    uint32_t sig;
  };
  // Bounds the memory of the range map; past it the oldest knowledge is dropped wholesale.
  static constexpr size_t kMaxRanges = size_t{1} << 16;

  struct Seen {
    static constexpr int kMax = 16;
    uint32_t ids[kMax];
    int count = 0;
  };
  void link_reads(uint32_t sig, uintptr_t lo, uintptr_t hi, Seen& seen);
  void write(uint32_t sig, uintptr_t lo, uintptr_t hi);

  void add_edge(uint64_t key) noexcept;
  void flush_edge() const;

  mutable std::mutex mu_;
  std::map<uintptr_t, Written> ranges_;                   // disjoint [start, end) -> last writer
  mutable std::unordered_map<uint64_t, uint64_t> edges_;  // from << 32 | to -> count
  // The edge seen last and how often since: loops repeat one edge (y of one axpy read by the next)
  // call after call, and counting here spares the hash map.
  mutable uint64_t last_edge_ = ~uint64_t{0};
  mutable uint64_t last_count_ = 0;
};

}  // namespace sol::capture::trace
