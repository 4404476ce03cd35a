// Memory for the nodes of the tracer's per-call containers, kept off the program's heap.
//
// The dataflow's range map allocates and frees a node for most writes of a traced call. Taken
// from malloc, those 56-byte blocks landed among the program's own and, in some processes,
// changed how glibc grew and trimmed the top of the heap: PyTorch's CNN then made 40 % more brk
// calls in traced blocks than in untraced ones, each faulting in pages afresh, and traced blocks
// took 1.15-1.19x the untraced ones instead of 1.04-1.06x. A pool of fixed slots in mappings of
// its own leaves the program's heap as it would be untraced.
//
// Not thread-safe: the container's owner serialises its use (the dataflow's lock).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace sol::capture::trace {

class NodePool {
 public:
  explicit NodePool(size_t slot) noexcept : slot_((slot + 15) & ~size_t{15}) {}
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;
  ~NodePool() {
    while (slabs_) {
      Slab* next = slabs_->next;
      ::munmap(slabs_, kSlab);
      slabs_ = next;
    }
  }

  size_t slot() const noexcept { return slot_; }

  // A slot, or nullptr when no memory can be mapped.
  void* take() noexcept {
    if (free_) {
      Free* f = free_;
      free_ = f->next;
      return f;
    }
    if (next_ + slot_ > end_ && !grow()) return nullptr;
    void* p = next_;
    next_ += slot_;
    return p;
  }
  void give(void* p) noexcept {
    auto* f = static_cast<Free*>(p);
    f->next = free_;
    free_ = f;
  }

 private:
  static constexpr size_t kSlab = 256 << 10;
  struct Free {
    Free* next;
  };
  struct Slab {
    Slab* next;
  };
  bool grow() noexcept {
    void* m = ::mmap(nullptr, kSlab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    auto* slab = static_cast<Slab*>(m);
    slab->next = slabs_;
    slabs_ = slab;
    next_ = static_cast<char*>(m) + ((sizeof(Slab) + 15) & ~size_t{15});
    end_ = static_cast<char*>(m) + kSlab;
    return true;
  }

  size_t slot_;
  Free* free_ = nullptr;
  char* next_ = nullptr;
  char* end_ = nullptr;
  Slab* slabs_ = nullptr;
};

// A node-based container's allocator drawing single nodes from a NodePool (anything larger than
// a slot, or an array, from operator new).
template <class T>
struct PoolAllocator {
  using value_type = T;
  NodePool* pool;

  explicit PoolAllocator(NodePool* p) noexcept : pool(p) {}
  template <class U>
  PoolAllocator(const PoolAllocator<U>& other) noexcept : pool(other.pool) {}

  T* allocate(size_t n) {
    if (n != 1 || sizeof(T) > pool->slot()) return static_cast<T*>(::operator new(n * sizeof(T)));
    if (void* p = pool->take()) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n != 1 || sizeof(T) > pool->slot()) ::operator delete(p);
    else pool->give(p);
  }
  template <class U>
  bool operator==(const PoolAllocator<U>& other) const noexcept {
    return pool == other.pool;
  }
  template <class U>
  bool operator!=(const PoolAllocator<U>& other) const noexcept {
    return pool != other.pool;
  }
};

}  // namespace sol::capture::trace
