// What an operand holds, as a 64-bit hash over exactly its elements: those a BLAS routine reads or
// writes by its geometry (not the bytes between columns that a leading dimension skips, nor a
// triangle it leaves alone), those of a DNN tensor by its layout (padding included where the
// layout covers its buffer). The trace's graph writer hashes what a call read, to tell whether the
// program changed it since the graph last knew it, and what it wrote; `sol replay` hashes what a
// node wrote to tell whether it reproduced the program's output bit for bit. Stable across
// processes and builds: the graph file stores the hashes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "capture/blas/blas.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::graph {

// The elements of BLAS operand `op` of a node of element type `dtype`.
uint64_t content(const blas::Operand& op, DType dtype) noexcept;
// The elements of DNN tensor `t` held at `p`.
uint64_t content(const dnn::TensorDesc& t, const void* p) noexcept;
// What identifies an operand's element set (its address and geometry, not its contents): a read
// is known when an earlier write or input had the same key and the same content.
uint64_t key(const blas::Operand& op, DType dtype) noexcept;
uint64_t key(const dnn::TensorDesc& t, const void* p) noexcept;

// The bytes of one element of BLAS operand `op` (rotg's c is real for complex data).
size_t element_size(const blas::Operand& op, DType dtype) noexcept;

// Calls f(byte offset from op.ptr, bytes) for each run of bytes the operand's elements occupy,
// column by column: what content() hashes, and what a replay compares with the program's bytes.
template <class F>
void each_run(const blas::Operand& op, DType dtype, F f) {
  using blas::Shape;
  const size_t es = element_size(op, dtype);
  auto run = [&](int64_t first, int64_t count) {
    if (count > 0) f(static_cast<size_t>(first) * es, static_cast<size_t>(count) * es);
  };
  switch (op.shape) {
    case Shape::scalar: return run(0, op.n);
    case Shape::packed: return run(0, op.n * (op.n + 1) / 2);
    case Shape::vector: {
      const int64_t step = op.inc < 0 ? -op.inc : op.inc;
      if (step == 1) return run(0, op.n);
      for (int64_t i = 0; i < op.n; ++i) run(i * step, 1);
      return;
    }
    case Shape::general:
      if (op.ld == op.rows) return run(0, op.rows * op.cols);
      for (int64_t j = 0; j < op.cols; ++j) run(j * op.ld, op.rows);
      return;
    case Shape::triangle:
      for (int64_t j = 0; j < op.cols; ++j) {
        if (op.upper)
          run(j * op.ld, std::min(j + 1, op.rows));
        else if (j < op.rows)
          run(j * op.ld + j, op.rows - j);
      }
      return;
    case Shape::band:
      // Column j holds rows max(0, j - ku) .. min(rows - 1, j + kl), row i at ku + i - j.
      for (int64_t j = 0; j < op.cols; ++j) {
        const int64_t first = std::max<int64_t>(0, j - op.ku), last = std::min(op.rows - 1, j + op.kl);
        if (last >= first) run(j * op.ld + op.ku + first - j, last - first + 1);
      }
      return;
  }
}

// The same for a DNN tensor: its whole buffer where its layout covers it, else each element.
template <class F>
void each_run(const dnn::TensorDesc& t, F f) {
  if (dnn::covers(t)) return f(size_t{0}, dnn::buffer_bytes(t));
  const dnn::Layout& l = t.layout;
  if (l.elements() <= 0) return;
  const size_t es = dtype_size(t.dtype);
  int64_t idx[dnn::kMaxDims] = {};
  while (true) {
    f(static_cast<size_t>(l.offset(idx)) * es, es);
    int d = l.ndims - 1;
    while (d >= 0 && ++idx[d] == l.dims[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace sol::capture::graph
