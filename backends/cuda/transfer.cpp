#include "backends/cuda/transfer.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cuda/resident.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends::cuda {

using capture::Node;
using hal::Reason;

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
    : DeviceJob(dev.resident(), node), dev_(dev), rt_(dev.rt()), stream_(dev.stream()) {}

Job::~Job() {
  if (!res_ || slots_) rt_.cudaStreamSynchronize(stream_);  // the slot buffers are the next node's
  if (!res_) return;
  // Our references to the operands' buffers; a buffer freed now is freed in stream order, after
  // the commands queued on it.
  for (int i = 0; i < count_; ++i)
    if (ops_[i].buf && !ops_[i].slot) res_->device().release(ops_[i].buf);
}

void* Job::ptr(char name) const noexcept {
  const Operand* o = find(name);
  return o ? o->buf : nullptr;
}

// The copy of a read operand to the device: from the caller's memory itself where only the
// leading dimension differs (a 2D copy packs the rectangle), else from its host image in staging
// slot `slot` where it needs one (device_operand.hpp).
cudaError_t Job::write(int slot, Operand& o) {
  const void* src = o.ext.ptr;
  if (o.shape == Shape::general && o.ld != o.dld) {
    const size_t width = static_cast<size_t>(o.rows) * es_;
    const cudaError_t err =
        rt_.cudaMemcpy2DAsync(o.buf, static_cast<size_t>(o.dld) * es_, src, static_cast<size_t>(o.ld) * es_,
                              width, static_cast<size_t>(o.cols), cudaMemcpyHostToDevice, stream_);
    if (err == cudaSuccess) hal::transfers::to_device(width * static_cast<size_t>(o.cols));
    return err;
  }
  if (needs_image(o)) {
    cudaError_t err = cudaSuccess;
    auto* stage = static_cast<unsigned char*>(dev_.staging(slot, o.device_bytes, err));
    if (!stage) return err;
    fill_image(o, stage, es_);
    src = stage;
  }
  const cudaError_t err = rt_.cudaMemcpyAsync(o.buf, src, o.device_bytes, cudaMemcpyHostToDevice, stream_);
  if (err == cudaSuccess) hal::transfers::to_device(o.device_bytes);
  return err;
}

Reason Job::upload() {
  return upload_operands([&](int i, Operand& o) {
    if (o.device_bytes == 0) return Reason::ok;
    cudaError_t err = cudaSuccess;
    o.buf = dev_.buffer(i, o.device_bytes, err);
    if (!o.buf) return fail(err, "cudaMalloc");
    // C or y with beta == 0 (or copy's y) are not read: zeros, so no NaN of the caller's survives.
    err = o.ext.read ? write(i, o) : rt_.cudaMemsetAsync(o.buf, 0, o.device_bytes, stream_);
    return err == cudaSuccess ? Reason::ok : fail(err, o.ext.read ? "upload" : "cudaMemsetAsync");
  });
}

Reason Job::check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Reason::ok;
  SOL_LOG(debug, "cuda: cuBLAS %s failed: %s", what, status_text(dev_.blas(), st));
  return reason_of(st);
}

Reason Job::download(bool result) {
  auto read = [&](int i, Operand& o, unsigned char*& staged) {
    cudaError_t err = cudaSuccess;
    staged = static_cast<unsigned char*>(dev_.staging(kStageDown + i, o.device_bytes, err));
    if (!staged) return fail(err, "cudaMallocHost");
    err = rt_.cudaMemcpyAsync(staged, o.buf, o.device_bytes, cudaMemcpyDeviceToHost, stream_);
    if (err != cudaSuccess) return fail(err, "cudaMemcpyAsync");
    hal::transfers::to_host(o.device_bytes);
    return Reason::ok;
  };
  // Waits for this stream only; an error of any earlier command on it (a kernel's) shows here.
  auto finish = [&] {
    const cudaError_t err = rt_.cudaStreamSynchronize(stream_);
    return err == cudaSuccess ? Reason::ok : fail(err, "cudaStreamSynchronize");
  };
  return download_results(result, read, finish);
}

Reason Job::fail(cudaError_t err, const char* what) {
  SOL_LOG(debug, "cuda: %s failed: %s", what, error_text(rt_, err).c_str());
  return reason_of(err);
}

}  // namespace sol::backends::cuda
