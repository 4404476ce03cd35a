#include "capture/graph/content.hpp"

#include <algorithm>
#include <cstring>

namespace sol::capture::graph {
namespace {

// Eight bytes a step, through a multiply-xor mix: memory speed for the megabytes of a tensor.
class Hasher {
 public:
  void bytes(const void* data, size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      word(w);
    }
    if (n) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      word(w ^ (uint64_t{n} << 59));
    }
    length_ += n;
  }
  void word(uint64_t w) noexcept {
    h_ = (h_ ^ (w * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    h_ ^= h_ >> 29;
    ++length_;
  }
  uint64_t done() const noexcept {
    uint64_t h = h_ ^ length_ * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
  }

 private:
  uint64_t h_ = 0x736f6c2d67726170ull;  // "sol-grap"
  uint64_t length_ = 0;
};

const unsigned char* at(const blas::Operand& op) noexcept {
  return static_cast<const unsigned char*>(op.ptr);
}

// Whether an operand's elements are all of its bytes, one run: then any view of the same bytes
// (a GEMM's output read as a vector, a tensor read as a matrix) has the same key and content.
bool contiguous(const blas::Operand& op) noexcept {
  using blas::Shape;
  switch (op.shape) {
    case Shape::scalar:
    case Shape::packed: return true;
    case Shape::vector: return op.n <= 1 || op.inc == 1 || op.inc == -1;
    case Shape::general: return op.cols <= 1 || op.ld == op.rows;
    default: return false;
  }
}

uint64_t run_key(const void* p, size_t bytes) noexcept {
  Hasher h;
  h.word(0x72756e);  // "run"
  h.word(reinterpret_cast<uintptr_t>(p));
  h.word(bytes);
  return h.done();
}

}  // namespace

size_t element_size(const blas::Operand& op, DType dtype) noexcept {
  return std::strcmp(op.name, "rc") == 0 ? dtype_real_size(dtype) : dtype_size(dtype);
}

uint64_t content(const blas::Operand& op, DType dtype) noexcept {
  Hasher h;
  if (!op.ptr || !op.bytes) return h.done();
  if (contiguous(op)) {
    h.bytes(op.ptr, op.bytes);
    return h.done();
  }
  each_run(op, dtype, [&](size_t offset, size_t bytes) { h.bytes(at(op) + offset, bytes); });
  return h.done();
}

uint64_t content(const dnn::TensorDesc& t, const void* p) noexcept {
  Hasher h;
  if (!p) return h.done();
  const auto* base = static_cast<const unsigned char*>(p);
  if (dnn::covers(t)) {
    h.bytes(base, dnn::buffer_bytes(t));
    return h.done();
  }
  each_run(t, [&](size_t offset, size_t bytes) { h.bytes(base + offset, bytes); });
  return h.done();
}

uint64_t key(const blas::Operand& op, DType dtype) noexcept {
  if (contiguous(op)) return run_key(op.ptr, op.bytes);
  Hasher h;
  for (int64_t v : {static_cast<int64_t>(reinterpret_cast<uintptr_t>(op.ptr)), static_cast<int64_t>(op.bytes),
                    static_cast<int64_t>(op.shape), op.rows, op.cols, op.ld, op.kl, op.ku, op.n, op.inc,
                    static_cast<int64_t>(op.upper), static_cast<int64_t>(element_size(op, dtype))})
    h.word(static_cast<uint64_t>(v));
  return h.done();
}

uint64_t key(const dnn::TensorDesc& t, const void* p) noexcept {
  if (dnn::covers(t)) return run_key(p, dnn::buffer_bytes(t));
  Hasher h;
  const dnn::Layout& l = t.layout;
  h.word(reinterpret_cast<uintptr_t>(p));
  h.word(static_cast<uint64_t>(t.dtype) << 32 | static_cast<uint32_t>(l.ndims) << 8 |
         static_cast<uint32_t>(l.nblocks));
  h.word(static_cast<uint64_t>(l.offset0));
  h.word(t.bytes);
  for (int d = 0; d < l.ndims; ++d) {
    h.word(static_cast<uint64_t>(l.dims[d]));
    h.word(static_cast<uint64_t>(l.padded[d]));
    h.word(static_cast<uint64_t>(l.strides[d]));
  }
  for (int b = 0; b < l.nblocks; ++b)
    h.word(static_cast<uint64_t>(l.block[b]) << 8 | static_cast<uint8_t>(l.block_dim[b]));
  return h.done();
}

}  // namespace sol::capture::graph
