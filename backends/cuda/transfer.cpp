#include "backends/cuda/transfer.hpp"

#include "backends/cuda/resident.hpp"

#include <algorithm>
#include <cstring>

#include "common/clock.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::cuda {
namespace {

using capture::Node;
using hal::Reason;

void shape_operand(Operand& o) noexcept {
  const capture::blas::Operand& e = o.ext;
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
}

// Element offset of the diagonal entry of column j in the device layout.
int64_t diagonal_at(const Operand& o, int64_t j) noexcept {
  switch (o.shape) {
    case Shape::triangle: return j + j * o.dld;
    case Shape::band: return o.ku + j * o.dld;
    case Shape::packed: return o.upper ? j * (j + 3) / 2 : j * (2 * o.n - j + 1) / 2;
    default: return -1;
  }
}

// Rows [first, last] of column j the routine reads or writes (empty when first > last).
void column_range(const Operand& o, int64_t j, int64_t& first, int64_t& last) noexcept {
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

// A unit diagonal entirely, a Hermitian diagonal's imaginary half, in a copy with the device
// layout: entries the reference does not read.
void clear_diagonal(const Operand& o, unsigned char* data, size_t es) noexcept {
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

// Copies the referenced rows of every column between the caller's layout (o.ld) and the
// device's (o.dld).
void copy_columns(const Operand& o, unsigned char* dst, const unsigned char* src, bool to_device,
                  size_t es) noexcept {
  const int64_t dst_ld = to_device ? o.dld : o.ld, src_ld = to_device ? o.ld : o.dld;
  for (int64_t j = 0; j < o.cols; ++j) {
    int64_t first, last;
    column_range(o, j, first, last);
    if (first > last) continue;
    std::memcpy(dst + static_cast<size_t>(j * dst_ld + first) * es, src + static_cast<size_t>(j * src_ld + first) * es,
                static_cast<size_t>(last - first + 1) * es);
  }
}

void device_layout(Operand& o, size_t es) noexcept {
  switch (o.shape) {
    case Shape::vector: o.device_bytes = static_cast<size_t>(o.n) * es; break;
    case Shape::general:
    case Shape::triangle: o.dld = std::max<int64_t>(o.rows, 1); break;
    case Shape::band: o.dld = o.kl + o.ku + 1; break;
    case Shape::packed: o.device_bytes = static_cast<size_t>(o.n * (o.n + 1) / 2) * es; break;
    case Shape::host: break;
  }
  if (o.dld) o.device_bytes = static_cast<size_t>(o.dld * std::max<int64_t>(o.cols, 0)) * es;
}


}  // namespace

int describe(const Node& node, Operand out[kMaxJobOperands]) {
  capture::blas::Operand ext[capture::blas::kMaxOperands];
  const int count = capture::blas::operands(node, ext);
  const size_t es = capture::dtype_size(node.dtype);
  int n = 0;
  for (int i = 0; i < count && n < kMaxJobOperands; ++i) {
    if (!ext[i].ptr) continue;
    Operand& o = out[n++];
    o = Operand{};
    o.ext = ext[i];
    shape_operand(o);
    device_layout(o, es);
  }
  return n;
}

Reason reason_of(cudaError_t err) noexcept {
  return err == cudaErrorMemoryAllocation ? Reason::out_of_memory : Reason::device_error;
}

Reason reason_of(cublasStatus_t st) noexcept {
  switch (st) {
    case CUBLAS_STATUS_ALLOC_FAILED: return Reason::out_of_memory;
    case CUBLAS_STATUS_NOT_SUPPORTED: return Reason::op_unsupported;
    case CUBLAS_STATUS_INVALID_VALUE: return Reason::internal_error;  // our call was wrong
    default: return Reason::device_error;
  }
}

bool same_copy(const Operand& a, const Operand& b) noexcept {
  return a.ext.ptr == b.ext.ptr && a.ext.bytes == b.ext.bytes && a.shape == b.shape && a.rows == b.rows &&
         a.cols == b.cols && a.ld == b.ld && a.kl == b.kl && a.ku == b.ku && a.n == b.n && a.inc == b.inc &&
         a.upper == b.upper && a.herm == b.herm && a.unit == b.unit && a.dld == b.dld &&
         a.device_bytes == b.device_bytes;
}

const void* device_image(const Operand& o, std::vector<unsigned char>& stage, size_t es) {
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

void store_into(const Operand& o, unsigned char* host, unsigned char* staged, size_t es) noexcept {
  if (o.herm) {  // the reference writes a Hermitian diagonal as real
    const int64_t n = o.shape == Shape::packed ? o.n : o.cols;
    for (int64_t j = 0; j < n; ++j)
      std::memset(staged + static_cast<size_t>(diagonal_at(o, j)) * es + es / 2, 0, es / 2);
  }
  switch (o.shape) {
    case Shape::vector: scatter(host, staged, o.n, o.inc, es); break;
    case Shape::packed: std::memcpy(host, staged, o.device_bytes); break;
    default: copy_columns(o, host, staged, false, es);
  }
}

Job::Job(Device& dev, const Node& node)
    : dev_(dev), res_(dev.resident()), rt_(dev.rt()), stream_(dev.stream()), es_(capture::dtype_size(node.dtype)) {
  count_ = describe(node, ops_);
  if (res_ && !res_->active()) res_ = nullptr;
}

Job::~Job() {
  if (!res_) {
    rt_.cudaStreamSynchronize(stream_);
    return;
  }
  // Our references to the operands' buffers; a buffer freed now is freed in stream order, after
  // the commands queued on it.
  for (int i = 0; i < count_; ++i)
    if (ops_[i].buf) res_->device().release(ops_[i].buf);
}

const Operand* Job::find(char name) const noexcept {
  for (int i = 0; i < count_; ++i)
    if (ops_[i].ext.name[0] == name && ops_[i].ext.name[1] == '\0') return &ops_[i];
  return nullptr;
}

void* Job::ptr(char name) const noexcept {
  const Operand* o = find(name);
  return o ? o->buf : nullptr;
}

int Job::ld(char name) const noexcept {
  const Operand* o = find(name);
  return o ? static_cast<int>(std::max<int64_t>(o->dld, 1)) : 1;
}

// The copy of a read operand to the device: from the caller's memory itself where only the
// leading dimension differs (a 2D copy packs the rectangle), else from a host copy in staging
// slot `slot` (gathered vector, sanitised triangle, band or packed matrix).
cudaError_t Job::write(int slot, Operand& o) {
  const auto* host = static_cast<const unsigned char*>(o.ext.ptr);
  const void* src = host;
  if (o.shape == Shape::general && o.ld != o.dld) {
    const size_t width = static_cast<size_t>(o.rows) * es_;
    const cudaError_t err = rt_.cudaMemcpy2DAsync(o.buf, static_cast<size_t>(o.dld) * es_, host,
                                                  static_cast<size_t>(o.ld) * es_, width,
                                                  static_cast<size_t>(o.cols), cudaMemcpyHostToDevice, stream_);
    if (err == cudaSuccess) hal::transfers::to_device(width * static_cast<size_t>(o.cols));
    return err;
  }
  const bool gathered = o.shape == Shape::vector && o.inc != 1;
  const bool sanitised = o.shape == Shape::triangle || o.shape == Shape::band || o.herm || o.unit;
  if (gathered || sanitised) {
    cudaError_t err = cudaSuccess;
    auto* stage = static_cast<unsigned char*>(dev_.staging(slot, o.device_bytes, err));
    if (!stage) return err;
    if (gathered) {
      gather(stage, host, o.n, o.inc, es_);
    } else if (o.shape == Shape::packed) {
      std::memcpy(stage, host, o.device_bytes);
    } else {
      std::memset(stage, 0, o.device_bytes);
      copy_columns(o, stage, host, true, es_);
    }
    if (sanitised) clear_diagonal(o, stage, es_);
    src = stage;
  }
  const cudaError_t err = rt_.cudaMemcpyAsync(o.buf, src, o.device_bytes, cudaMemcpyHostToDevice, stream_);
  if (err == cudaSuccess) hal::transfers::to_device(o.device_bytes);
  return err;
}

Reason Job::upload() {
  for (int i = 0; i < count_; ++i) {
    Operand& o = ops_[i];
    if (res_) {  // rotm's param, read on the host, must be current there too
      if (Reason r = res_->bind(o, es_); r != Reason::ok) return r;
      continue;
    }
    if (o.shape == Shape::host || o.device_bytes == 0) continue;
    cudaError_t err = cudaSuccess;
    o.buf = dev_.buffer(i, o.device_bytes, err);
    if (!o.buf) return fail(err, "cudaMalloc");
    // C or y with beta == 0 (or copy's y) are not read: zeros, so no NaN of the caller's survives.
    err = o.ext.read ? write(i, o) : rt_.cudaMemsetAsync(o.buf, 0, o.device_bytes, stream_);
    if (err != cudaSuccess) return fail(err, o.ext.read ? "upload" : "cudaMemsetAsync");
  }
  return Reason::ok;
}

Reason Job::check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Reason::ok;
  SOL_LOG(debug, "cuda: cuBLAS %s failed: %s", what, status_text(dev_.blas(), st));
  return reason_of(st);
}

Reason Job::download(bool result) {
  bool waits = result;
  if (res_) {
    for (int i = 0; i < count_; ++i)
      if (ops_[i].ext.written && ops_[i].shape != Shape::host && ops_[i].device_bytes > 0)
        waits |= !(ops_[i].kept = res_->keep(ops_[i]));
    if (!waits) {
      res_->deferred();
      return Reason::ok;
    }
  }
  const uint64_t t0 = res_ ? monotonic_ns() : 0;
  uint64_t back = 0;
  unsigned char* staged[kMaxJobOperands] = {};
  for (int i = 0; i < count_; ++i) {
    Operand& o = ops_[i];
    if (!o.ext.written || o.shape == Shape::host || o.device_bytes == 0 || o.kept) continue;
    back += o.device_bytes;
    cudaError_t err = cudaSuccess;
    staged[i] = static_cast<unsigned char*>(dev_.staging(kStageDown + i, o.device_bytes, err));
    if (!staged[i]) return fail(err, "cudaMallocHost");
    err = rt_.cudaMemcpyAsync(staged[i], o.buf, o.device_bytes, cudaMemcpyDeviceToHost, stream_);
    if (err != cudaSuccess) return fail(err, "cudaMemcpyAsync");
    hal::transfers::to_host(o.device_bytes);
  }
  // Waits for this stream only; an error of any earlier command on it (a kernel's) shows here.
  if (cudaError_t err = rt_.cudaStreamSynchronize(stream_); err != cudaSuccess)
    return fail(err, "cudaStreamSynchronize");
  for (int i = 0; i < count_; ++i)
    if (staged[i]) store_into(ops_[i], static_cast<unsigned char*>(ops_[i].ext.ptr), staged[i], es_);
  if (res_) res_->waited(result ? hal::transfers::Cause::sync : hal::transfers::Cause::eager, t0, back);
  return Reason::ok;
}

Reason Job::fail(cudaError_t err, const char* what) {
  SOL_LOG(debug, "cuda: %s failed: %s", what, error_text(rt_, err).c_str());
  return reason_of(err);
}

}  // namespace sol::backends::cuda
