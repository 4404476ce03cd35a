#include "backends/cuda/transfer.hpp"

#include "backends/cuda/resident.hpp"

#include <algorithm>
#include <cstring>

#include "common/clock.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::cuda {

using capture::Node;
using hal::Reason;

int describe(const Node& node, Operand out[kMaxJobOperands]) {
  return describe_operands<Operand, kMaxJobOperands>(node, out);
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

Job::Job(Device& dev, const Node& node)
    : dev_(dev), res_(dev.resident()), rt_(dev.rt()), stream_(dev.stream()), es_(capture::dtype_size(node.dtype)) {
  count_ = describe(node, ops_);
  if (res_ && !res_->active()) res_ = nullptr;
}

Job::~Job() {
  if (!res_ || slots_) rt_.cudaStreamSynchronize(stream_);  // the slot buffers are the next node's
  if (!res_) return;
  // Our references to the operands' buffers; a buffer freed now is freed in stream order, after
  // the commands queued on it.
  for (int i = 0; i < count_; ++i)
    if (ops_[i].buf && !ops_[i].slot) res_->device().release(ops_[i].buf);
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
  // Lazily: whether a result comes back at once (the node then waits), and why.
  const char* waits = res_ ? result_comes_back(*res_, ops_, count_) : nullptr;
  for (int i = 0; i < count_; ++i) {
    Operand& o = ops_[i];
    if (res_) {
      if (Reason r = bind_lazily(*res_, o, es_, waits); r != Reason::ok) return r;
      if (!o.slot) continue;
      slots_ = true;  // neither held nor keepable, in a node that waits: as eagerly
    }
    if (o.shape == Shape::host || o.device_bytes == 0) continue;
    cudaError_t err = cudaSuccess;
    o.buf = dev_.buffer(i, o.device_bytes, err);
    if (!o.buf) return fail(err, "cudaMalloc");
    // C or y with beta == 0 (or copy's y) are not read: zeros, so no NaN of the caller's survives.
    err = o.ext.read ? write(i, o) : rt_.cudaMemsetAsync(o.buf, 0, o.device_bytes, stream_);
    if (err != cudaSuccess) return fail(err, o.ext.read ? "upload" : "cudaMemsetAsync");
  }
  if (slots_) drop_copies_of_slots(*res_, ops_, count_);
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
    waits |= !keep_on_device(*res_, ops_, count_);
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
