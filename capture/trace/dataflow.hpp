// The dataflow graph of a traced process: an edge A -> B when a call of signature B read bytes
// whose latest write was by a call of signature A.
//
// Memory is a map of address ranges to their writer: each write makes a new version of the bytes
// it covers (the writer of the parts it overwrites changes), and a read links to the writer of
// each version it reads. Memory given back starts over: free, realloc and munmap (observed
// through capture/alloc) forget every range in the block, so a block the allocator hands out
// again, which code SOL does not see writes (a ReLU, a copy), links to nothing. What no
// intercepted call wrote has no writer: edges follow only data that intercepted calls passed on.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "capture/blas/blas.hpp"
#include "capture/trace/node_pool.hpp"

namespace sol::capture::trace {

// The 4 KiB pages that hold part of at least one written range, as bits read without the
// dataflow's lock: the free of a block on no such page (most of what an interpreter frees, a
// tensor only PyTorch's own kernels wrote) is settled by a few loads. Two levels, a bitmap per GiB of address space made
// when first needed, so that each bit is one page's and can be cleared once its page holds no
// range. Changed only under the dataflow's lock.
class PageSet {
 public:
  PageSet() = default;
  PageSet(const PageSet&) = delete;
  PageSet& operator=(const PageSet&) = delete;
  ~PageSet();

  // Whether a page of [lo, hi) may hold a range (without the lock).
  bool any(uintptr_t lo, uintptr_t hi) const noexcept;
  void add(uintptr_t lo, uintptr_t hi) noexcept;
  // Clears the pages that lie wholly inside [lo, hi).
  void remove_inside(uintptr_t lo, uintptr_t hi) noexcept;
  void clear() noexcept;

  static constexpr int kPageBits = 12;

 private:
  static constexpr int kRegionBits = 30, kAddressBits = 48;  // user space fits in 48 bits
  static constexpr uint64_t kPagesPerRegion = uint64_t{1} << (kRegionBits - kPageBits);
  static constexpr size_t kRegions = size_t{1} << (kAddressBits - kRegionBits);
  using Word = std::atomic<uint64_t>;
  // Calls f(word, mask) for each bitmap word that covers some of the pages [first, last], the
  // mask selecting those pages, in the regions for which bitmap(region) gives one; stops at the
  // first f that returns true, and says whether one did.
  template <class Get, class F>
  static bool each_word(uint64_t first, uint64_t last, Get bitmap, F f) noexcept;
  Word* bitmap(uint64_t r) const noexcept;
  Word* make_bitmap(uint64_t r) noexcept;

  std::atomic<std::atomic<Word*>*> table_{nullptr};  // kRegions entries, zeroed pages from calloc
  std::vector<uint64_t> made_;                       // regions that have a bitmap
  std::atomic<bool> everywhere_{false};              // a bitmap could not be made: any page may
};

class Dataflow {
 public:
  // The most operands a call has whose part in an edge is told apart (Edge::operands).
  static constexpr int kMaxOperands = 16;

  struct Edge {
    uint32_t from, to;
    uint64_t calls;      // calls of `to` that read what a call of `from` wrote
    uint64_t bytes;      // the bytes they read of it, summed over those calls
    uint32_t operands;   // which of `to`'s operands (by position, bit i: operand i) read it
  };

  // One call of signature `sig` with its operands: reads link, then writes make new versions.
  // Thread-safe.
  void record(uint32_t sig, const blas::Operand* ops, int n) noexcept;
  // [p, p + bytes) was given back: what it held is forgotten. Thread-safe; a few loads when no
  // page of the block holds a range.
  void forget(const void* p, size_t bytes) noexcept;
  std::vector<Edge> edges() const;
  void clear() noexcept;

  // pthread_atfork: held across fork(), so that the child finds the map whole; the child starts
  // over with an empty one.
  void lock_for_fork() noexcept;
  void unlock_in_parent() noexcept;
  void reset_in_child() noexcept;

 private:
  struct Written {
    uintptr_t end;
    uint32_t sig;
  };
  // Bounds the memory of the range map; past it the oldest knowledge is dropped wholesale.
  static constexpr size_t kMaxRanges = size_t{1} << 16;

  struct EdgeStats {
    uint64_t calls = 0, bytes = 0;
    uint32_t operands = 0;
  };
  // What one call read from each of its producers (at most kMax; more are not told apart).
  struct Producers {
    static constexpr int kMax = 16;
    struct Entry {
      uint32_t sig;
      uint32_t operands;
      uint64_t bytes;
    } at[kMax];
    int count = 0;
  };
  void link_reads(int operand, uintptr_t lo, uintptr_t hi, Producers& from) const;
  bool touches(uintptr_t lo, uintptr_t hi) const;
  void cut(uintptr_t lo, uintptr_t hi);
  void write(uint32_t sig, uintptr_t lo, uintptr_t hi);
  void add_edge(uint32_t from, uint32_t to, uint32_t operands, uint64_t bytes);
  void reset() noexcept;

  mutable std::mutex mu_;
  // Disjoint [start, end) -> latest writer, its nodes (32 bytes of tree links, the key, Written)
  // off the program's heap (node_pool.hpp says why).
  using RangeAlloc = PoolAllocator<std::pair<const uintptr_t, Written>>;
  NodePool range_nodes_{64};
  std::map<uintptr_t, Written, std::less<uintptr_t>, RangeAlloc> ranges_{RangeAlloc(&range_nodes_)};
  PageSet pages_;                        // the pages ranges_ covers
  std::unordered_map<uint64_t, EdgeStats> edges_;  // from << 32 | to
  // The edge added last: loops repeat one edge (y of one axpy read by the next) call after call,
  // and this spares them the hash lookup. Elements of an unordered_map stay put when it rehashes.
  uint64_t last_key_ = ~uint64_t{0};
  EdgeStats* last_ = nullptr;
};

}  // namespace sol::capture::trace
