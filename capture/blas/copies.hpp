// Private copies of the operands a BLAS node writes, and a copy of the node pointing at them
// instead of the caller's memory: what auto's measurement runs each candidate on (refreshed from
// the caller's memory before each run) and what verify mode recomputes a call on. Operands that
// are only read stay where they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "capture/blas/blas.hpp"

namespace sol::capture::blas {

class WrittenCopies {
 public:
  struct Copy {
    Operand op;           // the caller's operand (op.ptr: its memory)
    unsigned char* copy;  // op.bytes bytes, 64-byte aligned
  };

  // What take() puts in the copy of an output the call only writes (C of a GEMM with beta = 0):
  // the caller's bytes (verify compares whole extents, padding included), or zeros (a
  // measurement: reading the caller's would fault in each page the program has not touched yet,
  // and the program's call would fault it again to write it).
  enum class Unread { copied, zeroed };
  // Copies the node's written operands as they are now, into the memory of the last take() when
  // they fit. False when it cannot (more than `max_bytes` in all, or no memory); the node is then
  // left alone.
  bool take(const Node& node, size_t max_bytes = SIZE_MAX, Unread unread = Unread::copied) noexcept;
  // The node on the copies (its function result and result pointer cleared).
  Node& node() noexcept { return node_; }
  // The copies made equal to the caller's memory again, and the node's result cleared: each
  // candidate starts from the same outputs (beta != 0 reads them).
  Node& refresh() noexcept;
  // refresh() of the copies the call reads only: an output it only writes (C of a GEMM with
  // beta = 0) keeps what the last run left there, which no run reads. What a measurement needs
  // between runs, without copying a large C each time.
  Node& refresh_read() noexcept;

  // The memory given back; a take() keeps it otherwise (a measurement after another then finds
  // its pages mapped).
  void release() noexcept {
    buffer_.reset();
    capacity_ = 0;
    count_ = 0;
  }
  size_t capacity() const noexcept { return capacity_; }

  const Copy* begin() const noexcept { return copies_; }
  const Copy* end() const noexcept { return copies_ + count_; }

 private:
  // Copies of 1 MiB or more are mapped in whole 2 MiB huge pages where the kernel has them: each
  // first touch of the copies then faults in 2 MiB, not 4 KiB (a 4 MB C of a 1024x1024 SGEMM:
  // 0.1-0.7 ms instead of 2 ms of page faults before the measurement can start).
  static constexpr size_t kHuge = size_t{2} << 20, kHugeFrom = size_t{1} << 20;
  struct Free {
    Free() noexcept : mapped(0) {}
    explicit Free(size_t bytes) noexcept : mapped(bytes) {}
    void operator()(unsigned char* p) const noexcept;
    size_t mapped;  // bytes mmap()ed; 0: from aligned_alloc
  };
  static std::unique_ptr<unsigned char, Free> allocate(size_t& bytes) noexcept;
  Node node_{Sym{}, Op{}, DType::none};
  std::unique_ptr<unsigned char, Free> buffer_;
  size_t capacity_ = 0;
  Copy copies_[kMaxOperands];
  int count_ = 0;
};

}  // namespace sol::capture::blas
