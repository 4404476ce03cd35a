#include "capture/blas/copies.hpp"

#include <sys/mman.h>

#include <cstring>

namespace sol::capture::blas {
namespace {

size_t rounded(size_t bytes) noexcept {
  return (bytes + 63) & ~size_t{63};
}

bool copied(const Operand& op) noexcept {
  return op.written && op.bytes && operand_field(op.name);
}

}  // namespace

void WrittenCopies::Free::operator()(unsigned char* p) const noexcept {
  if (mapped) ::munmap(p, mapped);
  else std::free(p);
}

// `bytes` rounded up to whole huge pages when the copies are large enough for them.
std::unique_ptr<unsigned char, WrittenCopies::Free> WrittenCopies::allocate(size_t& bytes) noexcept {
  if (bytes >= kHugeFrom) {
    const size_t whole = (bytes + kHuge - 1) & ~(kHuge - 1);
    // Over-mapped by one huge page and trimmed to an aligned range: the kernel backs a range with
    // huge pages only where it covers them whole.
    void* p = ::mmap(nullptr, whole + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(p), aligned = (at + kHuge - 1) & ~uintptr_t{kHuge - 1};
      if (aligned > at) ::munmap(p, aligned - at);
      if (const size_t tail = kHuge - (aligned - at))
        ::munmap(reinterpret_cast<void*>(aligned + whole), tail);
      ::madvise(reinterpret_cast<void*>(aligned), whole, MADV_HUGEPAGE);  // a hint: 4 KiB pages otherwise
      bytes = whole;
      return std::unique_ptr<unsigned char, Free>(reinterpret_cast<unsigned char*>(aligned), Free{whole});
    }
  }
  return std::unique_ptr<unsigned char, Free>(
      static_cast<unsigned char*>(std::aligned_alloc(64, bytes ? bytes : 64)));
}

bool WrittenCopies::take(const Node& node, size_t max_bytes, Unread unread) noexcept {
  Operand ops[kMaxOperands];
  const int n = operands(node, ops);
  size_t total = 0;
  for (int i = 0; i < n; ++i)
    if (copied(ops[i])) total += rounded(ops[i].bytes);
  if (total > max_bytes) return false;
  if (!buffer_ || capacity_ < total) {
    capacity_ = 0;
    buffer_.reset();
    size_t bytes = total;
    buffer_ = allocate(bytes);
    if (!buffer_) return false;
    capacity_ = bytes;
  }
  node_ = node;
  node_.ret = {};
  node_.result = nullptr;
  count_ = 0;
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    if (!copied(ops[i])) continue;
    unsigned char* copy = buffer_.get() + at;
    if (ops[i].read || unread == Unread::copied) std::memcpy(copy, ops[i].ptr, ops[i].bytes);
    else std::memset(copy, 0, ops[i].bytes);
    copies_[count_++] = {ops[i], copy};
    node_.blas.*operand_field(ops[i].name) = copy;
    at += rounded(ops[i].bytes);
  }
  return true;
}

Node& WrittenCopies::refresh() noexcept {
  for (int i = 0; i < count_; ++i) std::memcpy(copies_[i].copy, copies_[i].op.ptr, copies_[i].op.bytes);
  node_.ret = {};
  return node_;
}

Node& WrittenCopies::refresh_read() noexcept {
  for (int i = 0; i < count_; ++i)
    if (copies_[i].op.read) std::memcpy(copies_[i].copy, copies_[i].op.ptr, copies_[i].op.bytes);
  node_.ret = {};
  return node_;
}

}  // namespace sol::capture::blas
