// A BLAS operand as a device backend moves it: its geometry (from capture::blas::operands(), in
// column-major terms whatever the node's layout), the layout of its device copy, the copies
// between the two (gather and scatter of strided vectors, packing of matrices to the rows the
// routine references, the entries the reference never reads cleared), and what a node costs on a
// device from its measured figures. One copy for opencl and cuda: a backend's operand derives from
// DeviceOperand and adds its buffer (device_job.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/common/blas_args.hpp"
#include "backends/common/device_costs.hpp"
#include "capture/blas/blas.hpp"
#include "ir/node.hpp"

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

// A node has at most four memory operands on the device (gemm: a, b, c; rotm's param stays on
// the host).
inline constexpr int kMaxJobOperands = 4;

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

// Whether an upload of `o` goes through a host image in its device layout (a gathered vector; a
// triangle, band or diagonal of which the reference does not read everything, sanitised) rather
// than straight from the caller's memory (a general matrix, packed by a 2-D copy where its leading
// dimension exceeds its rows).
inline bool needs_image(const DeviceOperand& o) noexcept {
  return (o.shape == Shape::vector && o.inc != 1) || o.shape == Shape::triangle || o.shape == Shape::band ||
         o.herm || o.unit;
}

// Fills `image` (o.device_bytes) with the operand's data in its device layout: gathered, packed to
// the rows the routine references, every entry the reference does not read zero.
inline void fill_image(const DeviceOperand& o, unsigned char* image, size_t es) noexcept {
  const auto* host = static_cast<const unsigned char*>(o.ext.ptr);
  if (o.shape == Shape::vector) return gather(image, host, o.n, o.inc, es);
  if (o.shape == Shape::packed) {
    std::memcpy(image, host, o.device_bytes);
  } else {
    std::memset(image, 0, o.device_bytes);
    copy_columns(o, image, host, true, es);
  }
  clear_diagonal(o, image, es);
}

// The operand's data in its device layout, as an upload makes it: the caller's memory itself
// where the layouts agree, else `stage`, filled.
inline const void* device_image(const DeviceOperand& o, std::vector<unsigned char>& stage, size_t es) {
  const bool packs = o.shape == Shape::general && o.ld != o.dld;
  if (!packs && !needs_image(o)) return o.ext.ptr;
  stage.resize(o.device_bytes);
  fill_image(o, stage.data(), es);
  return stage.data();
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

// The predicted seconds of a valid BLAS node of `flops` work (capture::blas::flops) on a device of
// `costs`, its operands moved as above (packed to the referenced rows, an output that is not read
// zero-filled on the device instead of uploaded):
//
//     latency + bytes up / to_device + bytes down / to_host
//             + max(flops / GEMM rate of its precision, bytes read and written / on_device)
//
// The last term is a roofline: level 3 routines are bound by the rate, level 1 and 2 by device
// memory. Complex types use the rate of their real type (flops count real operations). Kernel
// launches beyond the first round trip are not counted: the model is optimistic for nodes of a
// few microseconds. < 0 for a node it cannot tell (no rate for its type: f64 without fp64).
inline double predict_seconds(const DeviceCosts& costs, const capture::Node& node, double flops) noexcept {
  double rate = 0;
  switch (node.dtype) {
    case capture::DType::f32:
    case capture::DType::c64: rate = costs.gemm_f32; break;
    case capture::DType::f64:
    case capture::DType::c128: rate = costs.gemm_f64; break;
    default: break;
  }
  if (!(rate > 0) || !(costs.to_device > 0) || !(costs.to_host > 0) || !(costs.on_device > 0)) return -1;
  DeviceOperand ops[kMaxJobOperands];
  const int count = describe_operands<DeviceOperand, kMaxJobOperands>(node, ops);
  double up = 0, down = 0;
  for (int i = 0; i < count; ++i) {
    if (ops[i].shape == Shape::host) continue;  // rotm's param: read on the host
    const double bytes = static_cast<double>(ops[i].device_bytes);
    if (ops[i].ext.read) up += bytes;
    if (ops[i].ext.written) down += bytes;
  }
  const double compute = std::max(std::max(flops, 0.0) / rate, (up + down) / costs.on_device);
  return costs.latency + up / costs.to_device + down / costs.to_host + compute;
}

}  // namespace sol::backends
