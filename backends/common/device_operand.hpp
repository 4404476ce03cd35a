// A BLAS operand as a device backend moves it: its geometry (from capture::blas::operands(), in
// column-major terms whatever the node's layout), the layout of its device copy, and the copies
// between the two (gather and scatter of strided vectors, packing of matrices to the rows the
// routine references, the entries the reference never reads cleared). One copy for opencl and
// cuda: a backend's Operand derives from DeviceOperand and adds its buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/common/blas_args.hpp"
#include "capture/blas/blas.hpp"
#include "capture/ir/node.hpp"
#include "hal/backend.hpp"
#include "hal/transfers.hpp"

namespace sol::backends {

// How an operand is laid out, beyond the extent capture::blas::operands() gives.
enum class Shape : uint8_t {
  vector,    // n elements at increment inc; on the device: contiguous, logical order
  general,   // rows x cols, leading dimension ld
  triangle,  // one triangle (upper) of an n x n matrix (rows = cols = n), ld
  band,      // band storage: cols columns of ld entries; matrix rows `rows`, kl sub- and ku
             // super-diagonals (sbmv/tbmv upper: kl = 0, ku = k; lower: kl = k, ku = 0)
  packed,    // n(n+1)/2 elements, one triangle (upper) column by column
  host,      // read on the host (rotm's param)
  raw,       // a DNN tensor's buffer: ext.bytes from ext.ptr, the same bytes on the device
};

struct DeviceOperand {
  capture::blas::Operand ext;  // pointer, extent, read/written
  Shape shape = Shape::host;
  int64_t rows = 0, cols = 0, ld = 0, kl = 0, ku = 0;
  int64_t n = 0, inc = 1;
  bool upper = false;
  bool herm = false;  // Hermitian: the diagonal's imaginary parts are not read and are written as 0
  bool unit = false;  // unit triangular: the diagonal is not read

  // On the device, matrices are packed to the rows the routine references: leading dimension
  // dld (rows, n, or kl + ku + 1 for a band). Only the data moves, however large the caller's
  // leading dimension (a block of a big matrix in a LAPACK-style update). A widened band has one
  // zero diagonal more (opencl: CLBlast needs one), above (band rows shifted down by `shift` = 1)
  // or below.
  bool widened = false;
  int64_t dld = 0, shift = 0;
  size_t device_bytes = 0;
};

// Where the device copy of an operand lives and how large it is (again after `widened` changes).
inline void device_layout(DeviceOperand& o, size_t es) noexcept {
  switch (o.shape) {
    case Shape::vector: o.device_bytes = static_cast<size_t>(o.n) * es; break;
    case Shape::general:
    case Shape::triangle: o.dld = std::max<int64_t>(o.rows, 1); break;
    case Shape::band:
      o.shift = o.widened && o.upper ? 1 : 0;
      o.dld = o.kl + o.ku + 1 + (o.widened ? 1 : 0);
      break;
    case Shape::packed: o.device_bytes = static_cast<size_t>(o.n * (o.n + 1) / 2) * es; break;
    case Shape::host:
    case Shape::raw: break;
  }
  if (o.dld) o.device_bytes = static_cast<size_t>(o.dld * std::max<int64_t>(o.cols, 0)) * es;
}

// The device-side view of an operand that capture::blas::operands() described.
inline void lay_out(DeviceOperand& o, const capture::blas::Operand& e, size_t es) noexcept {
  o.ext = e;
  switch (e.shape) {
    case capture::blas::Shape::scalar: o.shape = Shape::host; break;  // rotm's param
    case capture::blas::Shape::vector: o.shape = Shape::vector; break;
    case capture::blas::Shape::general: o.shape = Shape::general; break;
    case capture::blas::Shape::triangle: o.shape = Shape::triangle; break;
    case capture::blas::Shape::band: o.shape = Shape::band; break;
    case capture::blas::Shape::packed: o.shape = Shape::packed; break;
  }
  o.rows = e.rows;
  o.cols = e.cols;
  o.ld = e.ld;
  o.kl = e.kl;
  o.ku = e.ku;
  o.n = e.n;
  o.inc = e.inc;
  o.upper = e.upper;
  o.herm = e.hermitian;
  o.unit = e.unit;
  device_layout(o, es);
}

// The memory operands of a valid column-major BLAS node, at most kMax, as a backend's Operand
// (derived from DeviceOperand). Returns how many.
template <class Operand, int kMax>
int describe_operands(const capture::Node& node, Operand* out) {
  capture::blas::Operand ext[capture::blas::kMaxOperands];
  const int count = capture::blas::operands(node, ext);
  const size_t es = capture::dtype_size(node.dtype);
  int n = 0;
  for (int i = 0; i < count && n < kMax; ++i) {
    if (!ext[i].ptr) continue;
    Operand& o = out[n++];
    o = Operand{};
    lay_out(o, ext[i], es);
  }
  return n;
}

// Element offset of the diagonal entry of column j in the device layout.
inline int64_t diagonal_at(const DeviceOperand& o, int64_t j) noexcept {
  switch (o.shape) {
    case Shape::triangle: return j + j * o.dld;
    case Shape::band: return o.shift + o.ku + j * o.dld;
    case Shape::packed: return o.upper ? j * (j + 3) / 2 : j * (2 * o.n - j + 1) / 2;
    default: return -1;
  }
}

// Rows [first, last] of column j the routine reads or writes (empty when first > last).
inline void column_range(const DeviceOperand& o, int64_t j, int64_t& first, int64_t& last) noexcept {
  switch (o.shape) {
    case Shape::general:
      first = 0;
      last = o.rows - 1;
      break;
    case Shape::triangle:
      first = o.upper ? 0 : j;
      last = o.upper ? j : o.rows - 1;
      break;
    case Shape::band:  // in band-storage rows: matrix row i is stored at row ku + i - j
      first = std::max<int64_t>(0, o.ku - j);
      last = std::min<int64_t>(o.kl + o.ku, o.ku + o.rows - 1 - j);
      break;
    default: first = 0; last = -1;
  }
}

// Entries the reference does not read, in a copy with the device layout: a unit diagonal
// entirely, a Hermitian diagonal's imaginary half.
inline void clear_diagonal(const DeviceOperand& o, unsigned char* data, size_t es) noexcept {
  if (!o.herm && !o.unit) return;
  const int64_t n = o.shape == Shape::packed ? o.n : o.cols;
  for (int64_t j = 0; j < n; ++j) {
    unsigned char* d = data + static_cast<size_t>(diagonal_at(o, j)) * es;
    if (o.unit)
      std::memset(d, 0, es);
    else
      std::memset(d + es / 2, 0, es / 2);
  }
}

// Copies the referenced rows of every column between the caller's layout (leading dimension
// o.ld) and the device's (o.dld, rows shifted by o.shift).
inline void copy_columns(const DeviceOperand& o, unsigned char* dst, const unsigned char* src, bool to_device,
                         size_t es) noexcept {
  const int64_t dst_ld = to_device ? o.dld : o.ld, src_ld = to_device ? o.ld : o.dld;
  const int64_t dst_shift = to_device ? o.shift : 0, src_shift = to_device ? 0 : o.shift;
  for (int64_t j = 0; j < o.cols; ++j) {
    int64_t first, last;
    column_range(o, j, first, last);
    if (first > last) continue;
    std::memcpy(dst + static_cast<size_t>(j * dst_ld + first + dst_shift) * es,
                src + static_cast<size_t>(j * src_ld + first + src_shift) * es,
                static_cast<size_t>(last - first + 1) * es);
  }
}

// Whether two operands are the same host data in the same device layout (a device copy made for
// one serves the other).
inline bool same_copy(const DeviceOperand& a, const DeviceOperand& b) noexcept {
  return a.ext.ptr == b.ext.ptr && a.ext.bytes == b.ext.bytes && a.shape == b.shape && a.rows == b.rows &&
         a.cols == b.cols && a.ld == b.ld && a.kl == b.kl && a.ku == b.ku && a.n == b.n && a.inc == b.inc &&
         a.upper == b.upper && a.herm == b.herm && a.unit == b.unit && a.widened == b.widened && a.dld == b.dld &&
         a.shift == b.shift && a.device_bytes == b.device_bytes;
}

// The operand's data in its device layout (gathered, packed, sanitised as an upload does): the
// caller's memory itself where the layouts agree, else `stage`, filled.
inline const void* device_image(const DeviceOperand& o, std::vector<unsigned char>& stage, size_t es) {
  const auto* host = static_cast<const unsigned char*>(o.ext.ptr);
  const bool packs = o.shape == Shape::general && o.ld != o.dld;
  const bool gathers = o.shape == Shape::vector && o.inc != 1;
  const bool sanitises = o.shape == Shape::triangle || o.shape == Shape::band || o.herm || o.unit;
  if (!packs && !gathers && !sanitises) return host;
  stage.assign(o.device_bytes, 0);
  unsigned char* d = stage.data();
  if (gathers)
    gather(d, host, o.n, o.inc, es);
  else if (o.shape == Shape::packed)
    std::memcpy(d, host, o.device_bytes);
  else
    copy_columns(o, d, host, true, es);
  if (sanitises) clear_diagonal(o, d, es);
  return d;
}

// Stores the elements the routine writes from `staged` (device layout) into `host`, laid out as
// the caller's memory at o.ext.ptr (host may be a copy of it).
inline void store_into(const DeviceOperand& o, unsigned char* host, unsigned char* staged, size_t es) noexcept {
  if (o.herm) {  // the reference writes a Hermitian diagonal as real
    const int64_t n = o.shape == Shape::packed ? o.n : o.cols;
    for (int64_t j = 0; j < n; ++j) std::memset(staged + static_cast<size_t>(diagonal_at(o, j)) * es + es / 2, 0, es / 2);
  }
  switch (o.shape) {
    case Shape::vector: scatter(host, staged, o.n, o.inc, es); break;
    case Shape::packed:
    case Shape::raw: std::memcpy(host, staged, o.device_bytes); break;
    default: copy_columns(o, host, staged, false, es);
  }
}

// Lazily (a resident set, backends/common/resident.hpp), before a node's upload: why a result it
// writes comes back at once (the node then waits), or nullptr when all of them may stay.
template <class Resident, class Operand>
const char* result_comes_back(Resident& res, const Operand* ops, int count) noexcept {
  const char* why = nullptr;
  for (int i = 0; i < count && !why; ++i)
    if (ops[i].ext.written && ops[i].shape != Shape::host && ops[i].device_bytes > 0) why = res.comes_back(ops[i]);
  return why;
}

// Lazily, one operand's upload in a node for which result_comes_back() said `waits`: bound to the
// resident set's copy (found, or made to be kept; rotm's param, read on the host, made current
// there too), or, in a node that waits, when the set neither holds nor could keep it, left to
// move as eagerly (the operand's `slot`: the backend's slot buffer, written once the host's bytes
// are current, which they are on return).
template <class Resident, class Operand>
hal::Reason bind_lazily(Resident& res, Operand& o, size_t es, const char* waits) {
  const char* why = waits && o.shape != Shape::host && o.device_bytes > 0 ? res.comes_back(o) : nullptr;
  if (!why) return res.bind(o, es);
  res.host_ready(o.ext.ptr, o.ext.bytes, o.ext.written);
  if (o.ext.written) hal::transfers::note_eager(why);
  o.slot = true;
  return hal::Reason::ok;
}

// Lazily, after an upload that moved some operands as eagerly (bind_lazily()): a copy made in
// this node of memory that such an operand writes (C aliasing A) goes, since the host's bytes will
// be the only current ones.
template <class Resident, class Operand>
void drop_copies_of_slots(Resident& res, const Operand* ops, int count) noexcept {
  for (int i = 0; i < count; ++i)
    if (ops[i].slot && ops[i].ext.written) res.host_ready(ops[i].ext.ptr, ops[i].ext.bytes, true);
}

// Lazily (a resident set, backends/common/resident.hpp): offers each result the node writes to
// the resident set, which keeps it on the device (the operand's `kept`) or not. True when all of
// them stay there, and none must come back now.
template <class Resident, class Operand>
bool keep_on_device(Resident& res, Operand* ops, int count) {
  bool all = true;
  for (int i = 0; i < count; ++i)
    if (ops[i].ext.written && ops[i].shape != Shape::host && ops[i].device_bytes > 0)
      all &= (ops[i].kept = res.keep(ops[i]));
  return all;
}

}  // namespace sol::backends
