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

  // Copies the node's written operands as they are now. False when it cannot (more than
  // `max_bytes` in all, or no memory); the node is then left alone.
  bool take(const Node& node, size_t max_bytes = SIZE_MAX) noexcept;
  // The node on the copies (its function result and result pointer cleared).
  Node& node() noexcept { return node_; }
  // The copies made equal to the caller's memory again, and the node's result cleared: each
  // candidate starts from the same outputs (beta != 0 reads them).
  Node& refresh() noexcept;

  const Copy* begin() const noexcept { return copies_; }
  const Copy* end() const noexcept { return copies_ + count_; }

 private:
  struct Free {
    void operator()(unsigned char* p) const noexcept { std::free(p); }
  };
  Node node_{Sym{}, Op{}, DType::none};
  std::unique_ptr<unsigned char, Free> buffer_;
  Copy copies_[kMaxOperands];
  int count_ = 0;
};

}  // namespace sol::capture::blas
