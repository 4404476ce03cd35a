#include "capture/blas/copies.hpp"

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

bool WrittenCopies::take(const Node& node, size_t max_bytes, Unread unread) noexcept {
  Operand ops[kMaxOperands];
  const int n = operands(node, ops);
  size_t total = 0;
  for (int i = 0; i < n; ++i)
    if (copied(ops[i])) total += rounded(ops[i].bytes);
  if (total > max_bytes) return false;
  if (!buffer_ || capacity_ < total) {
    capacity_ = 0;
    buffer_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, total ? total : 64)));
    if (!buffer_) return false;
    capacity_ = total;
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
