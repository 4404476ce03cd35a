#include "backends/cuda/resident.hpp"

#include <cstring>
#include <vector>

#include "backends/common/resident_impl.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"

namespace sol::backends {
template class Resident<cuda::Operand>;
}

namespace sol::backends::cuda {

CudaResidentDevice::~CudaResidentDevice() {
  // After exit() began the runtime may be gone: the pool goes with the process.
  if (!pool_ || exiting_()) return;
  const CudartApi& rt = dev_.rt();
  for (const auto& [p, n] : refs_) rt.cudaFreeAsync(p, dev_.stream());
  rt.cudaStreamSynchronize(dev_.stream());
  rt.cudaMemPoolDestroy(pool_);
}

bool CudaResidentDevice::open(std::string& why) noexcept {
  const CudartApi& rt = dev_.rt();
  if (!rt.cudaMemPoolCreate || !rt.cudaMallocFromPoolAsync || !rt.cudaFreeAsync) {
    why = "the CUDA runtime has no stream-ordered allocator";
    return false;
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev_.ordinal();
  if (cudaError_t err = rt.cudaMemPoolCreate(&pool_, &props); err != cudaSuccess) {
    why = "cudaMemPoolCreate: " + error_text(rt, err);
    pool_ = nullptr;
    return false;
  }
  // Freed copies stay in the pool for the next ones (the Resident's budget bounds what it holds).
  uint64_t keep = UINT64_MAX;
  rt.cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep);
  return true;
}

hal::Reason CudaResidentDevice::fail(cudaError_t err, const char* what) {
  SOL_LOG(debug, "cuda: lazy: %s failed: %s", what, error_text(dev_.rt(), err).c_str());
  return reason_of(err);
}

hal::Reason CudaResidentDevice::make(Operand& o, size_t es) {
  const CudartApi& rt = dev_.rt();
  const cudaStream_t s = dev_.stream();
  void* p = nullptr;
  if (cudaError_t err = rt.cudaMallocFromPoolAsync(&p, o.device_bytes, pool_, s); err != cudaSuccess) {
    rt.cudaGetLastError();  // an allocation failure is not sticky: clear it
    SOL_LOG(debug, "cuda: lazy buffer of %zu bytes failed: %s", o.device_bytes, error_text(rt, err).c_str());
    return reason_of(err);
  }
  try {
    refs_.emplace(p, 1);
  } catch (...) {
    rt.cudaFreeAsync(p, s);
    return hal::Reason::out_of_memory;
  }
  o.buf = p;
  cudaError_t err = cudaSuccess;
  if (o.ext.read) {
    if (o.shape == Shape::general && o.ld != o.dld) {  // packed by a 2D copy from the caller's memory
      const size_t width = static_cast<size_t>(o.rows) * es;
      err = rt.cudaMemcpy2DAsync(p, static_cast<size_t>(o.dld) * es, o.ext.ptr, static_cast<size_t>(o.ld) * es, width,
                                 static_cast<size_t>(o.cols), cudaMemcpyHostToDevice, s);
    } else {
      std::vector<unsigned char> stage;
      const void* image = device_image(o, stage, es);
      err = rt.cudaMemcpyAsync(p, image, o.device_bytes, cudaMemcpyHostToDevice, s);
    }
    if (err == cudaSuccess) hal::transfers::to_device(o.device_bytes);
  } else {
    err = rt.cudaMemsetAsync(p, 0, o.device_bytes, s);
  }
  return err == cudaSuccess ? hal::Reason::ok : fail(err, o.ext.read ? "upload" : "cudaMemsetAsync");
}

hal::Reason CudaResidentDevice::zero(Operand& o, size_t) {
  if (cudaError_t err = dev_.rt().cudaMemsetAsync(o.buf, 0, o.device_bytes, dev_.stream()); err != cudaSuccess)
    return fail(err, "cudaMemsetAsync");
  return hal::Reason::ok;
}

void CudaResidentDevice::retain(void* b) noexcept {
  if (auto it = refs_.find(b); it != refs_.end()) ++it->second;
}

void CudaResidentDevice::release(void* b) noexcept {
  auto it = refs_.find(b);
  if (it == refs_.end() || --it->second > 0) return;
  refs_.erase(it);
  if (!exiting_()) dev_.rt().cudaFreeAsync(b, dev_.stream());  // after what is queued on it
}

bool CudaResidentDevice::read(const Operand& o, void* host) noexcept {
  const CudartApi& rt = dev_.rt();
  cudaError_t err = cudaSuccess;
  void* stage = dev_.staging(kStageBack, o.device_bytes, err);
  if (stage) err = rt.cudaMemcpyAsync(stage, o.buf, o.device_bytes, cudaMemcpyDeviceToHost, dev_.stream());
  if (err == cudaSuccess) err = rt.cudaStreamSynchronize(dev_.stream());
  if (err != cudaSuccess) {
    log::write(log::Level::error, "error: cuda: reading back a result failed (%s): it is lost",
               error_text(rt, err).c_str());
    return false;
  }
  std::memcpy(host, stage, o.device_bytes);
  return true;
}

const char* CudaResidentDevice::finish() noexcept {
  const CudartApi& rt = dev_.rt();
  const cudaError_t err = rt.cudaStreamSynchronize(dev_.stream());
  return err == cudaSuccess ? nullptr : rt.cudaGetErrorName(err);
}

}  // namespace sol::backends::cuda
