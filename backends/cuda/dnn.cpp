// DNN nodes on the device (dnn.hpp): cuDNN opened at the first node, the data movement (DnnJob)
// and each kind's sequence of cuDNN and cuBLAS calls, as dnn_plan.hpp translates the node.
#include "backends/cuda/dnn.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/common/dnn_kinds.hpp"
#include "backends/cuda/api.hpp"
#include "backends/cuda/dnn_plan.hpp"
#include "backends/cuda/resident.hpp"
#include "backends/cuda/transfer.hpp"
#include "capture/dnn/validate.hpp"
#include "common/log.hpp"
#include "hal/transfers.hpp"
#include "ir/dnn.hpp"

namespace sol::backends::cuda {

struct CudnnApi {
#define SOL_CUDNN(name) decltype(&::name) name = nullptr;
#include "backends/cuda/cudnn_functions.def"
#undef SOL_CUDNN
};

// cuDNN and what the DNN nodes keep between calls: the handle (on the backend's stream) and a
// memory pool of their own, from which every buffer of a node is taken and to which it returns
// in stream order (freed blocks up to kPoolKeep stay reserved for the next node).
struct Dnn::Library {
  CudnnApi api;
  std::string path;
  cudnnHandle_t handle = nullptr;
  cudaMemPool_t pool = nullptr;
  size_t version = 0;
};

namespace {

using capture::Op;
using dnn::BinPlan;
using dnn::ConvPlan;
using dnn::EltPlan;
using dnn::Gather;
using dnn::PoolPlan;
using dnn::View;
using hal::Reason;
namespace ir = capture::dnn;
using ir::Arg;
using ir::Call;
using ir::Desc;
using ir::Layout;
using ir::PostOp;
using ir::Prop;
using ir::TensorDesc;

constexpr uint64_t kPoolKeep = uint64_t{256} << 20;
constexpr size_t kMaxWorkspace = size_t{1} << 30;  // of one convolution algorithm

Reason reason_of_cudnn(cudnnStatus_t st) {
  if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED || st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    return Reason::out_of_memory;
  if (st >= 3000 && st < 4000) return Reason::op_unsupported;
  if (st >= 2000 && st < 3000) return Reason::internal_error;  // our call was wrong
  return Reason::device_error;
}

// ------------------------------------------------------------------------------------ DnnJob

// One node's trip through the device. The first failure is kept and turns every later call into a
// no-op, so that each kind's sequence reads straight through and is checked once, by download().
// The destructor waits for the stream and gives every buffer back to the pool.
class DnnJob {
 public:
  DnnJob(Device& dev, Dnn::Library& lib, const Call& call)
      : dev_(dev), rt_(dev.rt()), api_(lib.api), lib_(lib), call_(call), d_(*call.desc) {}
  DnnJob(const DnnJob&) = delete;
  DnnJob& operator=(const DnnJob&) = delete;
  ~DnnJob() {
    rt_.cudaStreamSynchronize(dev_.stream());
    for (void* p : buffers_) rt_.cudaFreeAsync(p, dev_.stream());
    for (cudnnTensorDescriptor_t t : tensors_) api_.cudnnDestroyTensorDescriptor(t);
    for (cudnnFilterDescriptor_t f : filters_) api_.cudnnDestroyFilterDescriptor(f);
    for (cudnnConvolutionDescriptor_t c : convs_) api_.cudnnDestroyConvolutionDescriptor(c);
    for (cudnnActivationDescriptor_t a : acts_) api_.cudnnDestroyActivationDescriptor(a);
    for (cudnnOpTensorDescriptor_t o : ops_) api_.cudnnDestroyOpTensorDescriptor(o);
    for (cudnnPoolingDescriptor_t p : pools_) api_.cudnnDestroyPoolingDescriptor(p);
  }

  const Desc& desc() const noexcept { return d_; }
  const Call& call() const noexcept { return call_; }
  const CudnnApi& api() const noexcept { return api_; }
  cudnnHandle_t handle() const noexcept { return lib_.handle; }
  const CublasApi& blas() const noexcept { return dev_.blas(); }
  cublasHandle_t cublas() const noexcept { return dev_.handle(); }
  bool ok() const noexcept { return err_ == Reason::ok; }
  bool has(Arg a, int index = 0) const noexcept { return d_.find(a, index) >= 0; }
  const Layout& layout(Arg a, int index = 0) const noexcept { return d_.desc(a, index)->layout; }

  // A device buffer of `bytes` (not initialised), for this node only.
  void* buffer(size_t bytes) {
    if (!ok()) return nullptr;
    void* p = nullptr;
    const cudaError_t err = rt_.cudaMallocFromPoolAsync(&p, std::max<size_t>(bytes, 4), lib_.pool, dev_.stream());
    if (err != cudaSuccess) {
      fail_cuda(err, "cudaMallocFromPoolAsync");
      return nullptr;
    }
    buffers_.push_back(p);
    return p;
  }
  // A buffer the node can do without (a convolution algorithm's workspace): nullptr, and the job
  // still fine, when the pool cannot give it.
  void* optional_buffer(size_t bytes) {
    if (!ok()) return nullptr;
    void* p = nullptr;
    if (rt_.cudaMallocFromPoolAsync(&p, bytes, lib_.pool, dev_.stream()) != cudaSuccess) {
      rt_.cudaGetLastError();  // an allocation failure is not sticky: clear it
      return nullptr;
    }
    buffers_.push_back(p);
    return p;
  }
  float* temp(int64_t floats) { return static_cast<float*>(buffer(static_cast<size_t>(floats) * sizeof(float))); }
  // `floats` values of `value`.
  float* filled(int64_t floats, float value) {
    float* p = temp(floats);
    if (value == 0)
      zero(p, floats);
    else if (p)
      check(api_.cudnnSetTensor(handle(), flat(floats), p, &value), "cudnnSetTensor");
    return p;
  }
  // Host values on the device (copied from pageable memory: the copy has taken them on return).
  float* upload(const std::vector<float>& values) {
    float* p = temp(static_cast<int64_t>(values.size()));
    if (p)
      check(rt_.cudaMemcpyAsync(p, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice,
                                dev_.stream()),
            "cudaMemcpyAsync");
    return p;
  }

  // The device copy of tensor i in its own layout. Read tensors (and outputs whose layout leaves
  // bytes of the buffer unwritten) carry the caller's bytes.
  void* raw(int i) {
    if (raw_[i] || !ok()) return raw_[i];
    const TensorDesc& t = d_.tensors[i].desc;
    const size_t bytes = dnn::buffer_bytes(t);
    raw_[i] = buffer(bytes);
    if (raw_[i] && (d_.read(d_.tensors[i]) || !dnn::covers(t))) {
      const cudaError_t err =
          rt_.cudaMemcpyAsync(raw_[i], call_.data[i], bytes, cudaMemcpyHostToDevice, dev_.stream());
      if (err == cudaSuccess) hal::transfers::to_device(bytes);
      check(err, "cudaMemcpyAsync");
    }
    return raw_[i];
  }

  // Tensor (a, index) as a dense array of its logical dims in the order `perm` (nullptr: as they
  // are), or nullptr when the node lacks it.
  float* dense(Arg a, int index = 0, const int* perm = nullptr) {
    const int i = d_.find(a, index);
    if (i < 0 || !ok()) return nullptr;
    if (dense_[i]) return dense_[i];
    const Layout& l = d_.tensors[i].desc.layout;
    Gather g;
    if (!dnn::plan_gather(l, perm, g)) return fail(Reason::layout_unsupported), nullptr;
    void* from = raw(i);
    if (g.steps == 0) return dense_[i] = static_cast<float*>(from);
    float* out = temp(l.elements());
    if (g.steps == 1) {
      transform(g.first, from, out, true);
    } else {
      float* padded = temp(g.padded_elements);
      transform(g.first, from, padded, true);
      transform(g.second, padded, out, true);
    }
    return dense_[i] = out;
  }

  // Where output (a, index) is computed densely: the device copy itself when its layout is that
  // dense array, unless a sum post-op still needs dst's old values there.
  float* output(Arg a, int index = 0, const int* perm = nullptr) {
    const int i = d_.find(a, index);
    if (i < 0 || !ok()) return nullptr;
    const Layout& l = d_.tensors[i].desc.layout;
    Gather g;
    if (!dnn::plan_gather(l, perm, g)) return fail(Reason::layout_unsupported), nullptr;
    const bool keep_old = a == Arg::dst && d_.has_sum_post_op();
    return g.steps == 0 && !keep_old ? static_cast<float*>(raw(i)) : temp(l.elements());
  }

  // A dense result `y` of output (a, index) into its tensor: the output scale and post-ops (dst of
  // the kinds that take them), then the copy into its layout (blocked padding as zeros).
  void finish(Arg a, float* y, int index = 0, const int* perm = nullptr) {
    const int i = d_.find(a, index);
    if (i < 0 || !ok()) return;
    const Layout& l = d_.tensors[i].desc.layout;
    if (a == Arg::dst && (d_.output_scale != 1 || d_.npost_ops)) y = epilogue(y, l);
    Gather g;
    if (!dnn::plan_gather(l, perm, g)) return fail(Reason::layout_unsupported);
    void* to = raw(i);
    if (!ok()) return;
    if (g.steps == 0) {
      if (y != to) copy(to, y, l.elements());
    } else if (g.steps == 1) {
      transform(g.first, to, y, false);
    } else {
      float* padded = filled(g.padded_elements, 0);  // the blocks' padding is written as zeros
      transform(g.second, padded, y, false);
      transform(g.first, to, padded, false);
    }
    stored_[i] = true;
  }

  // ------------------------------------------------------------------- descriptors (the job's)

  // A dense tensor of `n` dims (4 at least: trailing 1s added).
  cudnnTensorDescriptor_t tensor(int n, const int* dims) {
    int d[dnn::kViewDims], s[dnn::kViewDims];
    int m = 0;
    for (; m < n; ++m) d[m] = dims[m];
    for (; m < 4; ++m) d[m] = 1;
    for (int k = m - 1, stride = 1; k >= 0; --k) s[k] = stride, stride *= d[k];
    return strided(m, d, s);
  }
  cudnnTensorDescriptor_t strided(int n, const int* dims, const int* strides) {
    if (!ok()) return nullptr;
    cudnnTensorDescriptor_t t = nullptr;
    if (!check(api_.cudnnCreateTensorDescriptor(&t), "cudnnCreateTensorDescriptor")) return nullptr;
    tensors_.push_back(t);
    check(api_.cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, n, dims, strides), "cudnnSetTensorNdDescriptor");
    return t;
  }
  // `count` elements as one dense tensor (the elementwise operations' shape).
  cudnnTensorDescriptor_t flat(int64_t count) {
    const int dims[1] = {static_cast<int>(count)};
    return tensor(1, dims);
  }
  // The logical dims of a layout as a dense tensor (at most 8 dims).
  cudnnTensorDescriptor_t dims_of(const Layout& l) {
    int dims[ir::kMaxDims];
    for (int k = 0; k < l.ndims; ++k) dims[k] = static_cast<int>(l.dims[k]);
    return tensor(l.ndims, dims);
  }
  cudnnFilterDescriptor_t filter(int n, const int* dims) {
    if (!ok()) return nullptr;
    cudnnFilterDescriptor_t f = nullptr;
    if (!check(api_.cudnnCreateFilterDescriptor(&f), "cudnnCreateFilterDescriptor")) return nullptr;
    filters_.push_back(f);
    check(api_.cudnnSetFilterNdDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, n, dims),
          "cudnnSetFilterNdDescriptor");
    return f;
  }
  cudnnConvolutionDescriptor_t convolution(const ConvPlan& p) {
    if (!ok()) return nullptr;
    cudnnConvolutionDescriptor_t c = nullptr;
    if (!check(api_.cudnnCreateConvolutionDescriptor(&c), "cudnnCreateConvolutionDescriptor")) return nullptr;
    convs_.push_back(c);
    check(api_.cudnnSetConvolutionNdDescriptor(c, p.nsp, p.pad, p.stride, p.dilation, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT),
          "cudnnSetConvolutionNdDescriptor");
    if (ok()) check(api_.cudnnSetConvolutionGroupCount(c, p.groups), "cudnnSetConvolutionGroupCount");
    // FMA math: no TF32 tensor-core shortcut, which CUDNN_DEFAULT_MATH allows on Ampere and later.
    if (ok()) check(api_.cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
    return c;
  }
  cudnnActivationDescriptor_t activation(const EltPlan& e) {
    if (!ok()) return nullptr;
    cudnnActivationDescriptor_t a = nullptr;
    if (!check(api_.cudnnCreateActivationDescriptor(&a), "cudnnCreateActivationDescriptor")) return nullptr;
    acts_.push_back(a);
    check(api_.cudnnSetActivationDescriptor(a, e.mode, CUDNN_PROPAGATE_NAN, e.coef), "cudnnSetActivationDescriptor");
    if (ok() && e.mode == CUDNN_ACTIVATION_SWISH)
      check(api_.cudnnSetActivationDescriptorSwishBeta(a, e.swish_beta), "cudnnSetActivationDescriptorSwishBeta");
    return a;
  }
  cudnnOpTensorDescriptor_t op_tensor(cudnnOpTensorOp_t op) {
    if (!ok()) return nullptr;
    cudnnOpTensorDescriptor_t o = nullptr;
    if (!check(api_.cudnnCreateOpTensorDescriptor(&o), "cudnnCreateOpTensorDescriptor")) return nullptr;
    ops_.push_back(o);
    check(api_.cudnnSetOpTensorDescriptor(o, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN), "cudnnSetOpTensorDescriptor");
    return o;
  }
  cudnnPoolingDescriptor_t pooling(const PoolPlan& p) {
    if (!ok()) return nullptr;
    cudnnPoolingDescriptor_t d = nullptr;
    if (!check(api_.cudnnCreatePoolingDescriptor(&d), "cudnnCreatePoolingDescriptor")) return nullptr;
    pools_.push_back(d);
    check(api_.cudnnSetPoolingNdDescriptor(d, p.mode, CUDNN_PROPAGATE_NAN, p.nsp, p.window, p.pad, p.stride),
          "cudnnSetPoolingNdDescriptor");
    return d;
  }

  // ---------------------------------------------------------------------------- operations

  // c = op(alpha1 a, alpha2 b) (b broadcast), into a fresh buffer: cuDNN does not promise that
  // cudnnOpTensor may write over its operands.
  float* op(cudnnOpTensorOp_t o, float alpha1, const float* a, cudnnTensorDescriptor_t ad, float alpha2,
            const float* b, cudnnTensorDescriptor_t bd, int64_t count) {
    float* c = temp(count);
    cudnnOpTensorDescriptor_t od = op_tensor(o);
    const float zero = 0;
    if (ok()) check(api_.cudnnOpTensor(handle(), od, &alpha1, ad, a, &alpha2, bd, b, &zero, ad, c), "cudnnOpTensor");
    return c;
  }

  // f(x) of an eltwise plan over `count` elements into y (activations, which cuDNN computes in
  // place when x == y) or a fresh buffer (the others); returns where the values are.
  float* eltwise(const EltPlan& e, float* x, float* y, int64_t count) {
    if (!ok()) return y;
    cudnnTensorDescriptor_t t = flat(count);
    const float one = 1, zero = 0;
    using Kind = EltPlan::Kind;
    switch (e.kind) {
      case Kind::activation: {
        cudnnActivationDescriptor_t a = activation(e);
        if (ok()) check(api_.cudnnActivationForward(handle(), a, &one, t, x, &zero, t, y), "cudnnActivationForward");
        return y;
      }
      case Kind::max_scaled: return op(CUDNN_OP_TENSOR_MAX, 1, x, t, e.alpha, x, t, count);
      case Kind::min_scaled: return op(CUDNN_OP_TENSOR_MIN, 1, x, t, e.alpha, x, t, count);
      case Kind::square: return op(CUDNN_OP_TENSOR_MUL, 1, x, t, 1, x, t, count);
      case Kind::sqrt: return op(CUDNN_OP_TENSOR_SQRT, 1, x, t, 1, x, t, count);
      case Kind::linear: return op(CUDNN_OP_TENSOR_ADD, e.alpha, x, t, 1, upload({e.beta}), flat(1), count);
      case Kind::clip: {
        float* low = op(CUDNN_OP_TENSOR_MAX, 1, x, t, 1, upload({e.alpha}), flat(1), count);
        return op(CUDNN_OP_TENSOR_MIN, 1, low, t, 1, upload({e.beta}), flat(1), count);
      }
    }
    return y;
  }

  void zero(float* y, int64_t floats) {
    if (ok() && y)
      check(rt_.cudaMemsetAsync(y, 0, static_cast<size_t>(floats) * sizeof(float), dev_.stream()), "cudaMemsetAsync");
  }

  // Whether sum or concat has source i.
  bool find_source(int i) const noexcept { return d_.find(Arg::multi_src, i) >= 0; }

  // Dense values into the elements of a view (a slab of a larger dense array).
  void scatter(const View& v, float* dense_values, float* layout_side) { transform(v, layout_side, dense_values, false); }

  void scale(float* y, int64_t count, float s) {
    if (ok() && s != 1) check(api_.cudnnScaleTensor(handle(), flat(count), y, &s), "cudnnScaleTensor");
  }

  // dst (x) += bias broadcast over it, both as dense arrays of their dims.
  void add_broadcast(float* y, const Layout& yl, const float* b, const Layout& bl) {
    const float one = 1;
    cudnnTensorDescriptor_t yd = dims_of(yl), bd = dims_of(bl);
    if (ok()) check(api_.cudnnAddTensor(handle(), &one, bd, b, &one, yd, y), "cudnnAddTensor");
  }

  void copy(void* to, const void* from, int64_t floats) {
    if (ok())
      check(rt_.cudaMemcpyAsync(to, from, static_cast<size_t>(floats) * sizeof(float), cudaMemcpyDeviceToDevice,
                                dev_.stream()),
            "cudaMemcpyAsync");
  }

  // Reads every stored tensor into pinned staging, waits for the stream, and only then copies
  // them into the caller's memory.
  Reason download() {
    unsigned char* staged[ir::kMaxTensors] = {};
    int slot = 0;
    for (int i = 0; i < d_.ntensors && ok(); ++i) {
      const size_t bytes = dnn::buffer_bytes(d_.tensors[i].desc);
      if (!stored_[i] || !raw_[i] || bytes == 0) continue;
      if (slot == Device::kSlots) return fail(Reason::internal_error), err_;
      cudaError_t err = cudaSuccess;
      staged[i] = static_cast<unsigned char*>(dev_.staging(slot++, bytes, err));
      if (!staged[i]) return fail_cuda(err, "cudaMallocHost"), err_;
      err = rt_.cudaMemcpyAsync(staged[i], raw_[i], bytes, cudaMemcpyDeviceToHost, dev_.stream());
      if (err == cudaSuccess) hal::transfers::to_host(bytes);
      check(err, "cudaMemcpyAsync");
    }
    check(rt_.cudaStreamSynchronize(dev_.stream()), "cudaStreamSynchronize");
    if (!ok()) return err_;
    for (int i = 0; i < d_.ntensors; ++i)
      if (staged[i]) std::memcpy(call_.data[i], staged[i], dnn::buffer_bytes(d_.tensors[i].desc));
    return Reason::ok;
  }

  bool check(cudnnStatus_t st, const char* what) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    SOL_LOG(debug, "cuda: %s failed: %s", what, api_.cudnnGetErrorString(st));
    fail(reason_of_cudnn(st));
    return false;
  }
  bool check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return true;
    fail_cuda(err, what);
    return false;
  }
  bool check(cublasStatus_t st, const char* what) {
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    SOL_LOG(debug, "cuda: %s failed: %s", what, status_text(dev_.blas(), st));
    fail(reason_of(st));
    return false;
  }
  void fail(Reason r) {
    if (ok()) err_ = r;
  }

 private:
  void fail_cuda(cudaError_t err, const char* what) {
    SOL_LOG(debug, "cuda: %s failed: %s", what, error_text(rt_, err).c_str());
    fail(reason_of(err));
  }

  // One strided copy of a view: from the tensor's layout to the dense array (`to_dense`) or back.
  void transform(const View& v, void* layout_side, float* dense_side, bool to_dense) {
    cudnnTensorDescriptor_t l = strided(v.ndims, v.dims, v.strides), d = strided(v.ndims, v.dims, v.dense);
    if (!ok()) return;
    float* at = static_cast<float*>(layout_side) + v.offset;
    const float one = 1, zero = 0;
    if (to_dense)
      check(api_.cudnnTransformTensor(handle(), &one, l, at, &zero, d, dense_side), "cudnnTransformTensor");
    else
      check(api_.cudnnTransformTensor(handle(), &one, d, dense_side, &zero, l, at), "cudnnTransformTensor");
  }

  // The output scale, then each post-op, on dense dst values y of layout l's dims.
  float* epilogue(float* y, const Layout& l) {
    const int64_t n = l.elements();
    scale(y, n, d_.output_scale);
    for (int p = 0; p < d_.npost_ops && ok(); ++p) {
      const PostOp& po = d_.post_ops[p];
      switch (po.kind) {
        case PostOp::Kind::sum: {
          const float one = 1;
          cudnnTensorDescriptor_t t = flat(n);
          const float* old = dense(Arg::dst);
          if (ok()) check(api_.cudnnAddTensor(handle(), &po.scale, t, old, &one, t, y), "cudnnAddTensor");
          break;
        }
        case PostOp::Kind::eltwise: {
          EltPlan e;
          dnn::plan_eltwise(po.alg, po.alpha, po.beta, false, e);
          y = eltwise(e, y, y, n);
          scale(y, n, po.scale);
          break;
        }
        case PostOp::Kind::binary: {
          BinPlan b;
          dnn::plan_binary(po.alg, b);
          const Layout& sl = layout(Arg::post_op_src, p);
          y = op(b.op, 1, y, dims_of(l), b.alpha2, dense(Arg::post_op_src, p), dims_of(sl), n);
          break;
        }
      }
    }
    return y;
  }

  Device& dev_;
  const CudartApi& rt_;
  const CudnnApi& api_;
  Dnn::Library& lib_;
  const Call& call_;
  const Desc& d_;
  Reason err_ = Reason::ok;
  void* raw_[ir::kMaxTensors] = {};
  float* dense_[ir::kMaxTensors] = {};
  bool stored_[ir::kMaxTensors] = {};
  std::vector<void*> buffers_;
  std::vector<cudnnTensorDescriptor_t> tensors_;
  std::vector<cudnnFilterDescriptor_t> filters_;
  std::vector<cudnnConvolutionDescriptor_t> convs_;
  std::vector<cudnnActivationDescriptor_t> acts_;
  std::vector<cudnnOpTensorDescriptor_t> ops_;
  std::vector<cudnnPoolingDescriptor_t> pools_;
};

// ------------------------------------------------------------------------------ convolutions

// The algorithms that sum products directly, as the reference does, in cuDNN's heuristic order.
// FFT and Winograd variants transform the data and round differently (errors well above a BLAS
// tolerance in f32); they are never used.
bool direct(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool direct(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool direct(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// Tries the candidates `perf` (cuDNN's heuristic order) until one runs: `call(algo, workspace,
// bytes)`. A candidate cuDNN does not support here, or whose workspace cannot be allocated, makes
// way for the next.
template <class Perf, class Call>
void run_algorithms(DnnJob& job, const Perf* perf, int count, Call call) {
  if (!job.ok()) return;
  bool ran = false;
  for (int i = 0; i < count && !ran; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || !direct(perf[i].algo) || perf[i].memory > kMaxWorkspace) continue;
    if (perf[i].mathType != CUDNN_DEFAULT_MATH && perf[i].mathType != CUDNN_FMA_MATH) continue;
    void* ws = perf[i].memory ? job.optional_buffer(perf[i].memory) : nullptr;
    if (!job.ok()) return;
    if (perf[i].memory && !ws) continue;
    const cudnnStatus_t st = call(perf[i].algo, ws, perf[i].memory);
    if (st == CUDNN_STATUS_SUCCESS) {
      ran = true;
    } else if (st < 3000 || st >= 4000) {  // anything but "not supported" ends the node
      job.check(st, "a cuDNN convolution");
      return;
    }
  }
  if (!ran) {
    SOL_LOG(debug, "cuda: no direct convolution algorithm of cuDNN runs this node");
    job.fail(Reason::op_unsupported);
  }
}

void run_conv(DnnJob& job) {
  const Desc& d = job.desc();
  const CudnnApi& api = job.api();
  ConvPlan p;
  dnn::plan_conv(d, p);
  const int* wperm = p.transpose_w ? p.wperm : nullptr;
  const int nd = p.nsp + 2;
  cudnnTensorDescriptor_t xd = job.tensor(nd, p.xdims), yd = job.tensor(nd, p.ydims);
  cudnnFilterDescriptor_t wd = job.filter(nd, p.wdims);
  cudnnConvolutionDescriptor_t cd = job.convolution(p);
  if (!job.ok()) return;
  cudnnHandle_t h = job.handle();
  const float one = 1, zero = 0;
  constexpr int kMax = 16;
  int count = 0;
  // Bias: over the tensor with the node's output channels (dst forward, diff_dst backward).
  int bdims[5] = {1, p.bias_channels, 1, 1, 1};
  auto add_bias = [&](float* y, cudnnTensorDescriptor_t ydesc) {
    if (!p.bias_channels || !job.ok()) return;
    cudnnTensorDescriptor_t bd = job.tensor(nd, bdims);
    const float* b = job.dense(Arg::bias);
    if (job.ok()) job.check(api.cudnnAddTensor(h, &one, bd, b, &one, ydesc, y), "cudnnAddTensor");
  };
  switch (p.pass) {
    case ConvPlan::Pass::forward: {
      const float *x = job.dense(p.x), *w = job.dense(p.w, 0, wperm);
      float* y = job.output(p.y);
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      if (!job.check(api.cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, kMax, &count, perf),
                     "cudnnGetConvolutionForwardAlgorithm_v7"))
        return;
      run_algorithms(job, perf, count, [&](cudnnConvolutionFwdAlgo_t a, void* ws, size_t bytes) {
        return api.cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, a, ws, bytes, &zero, yd, y);
      });
      if (p.y == Arg::dst) add_bias(y, yd);
      job.finish(p.y, y);
      return;
    }
    case ConvPlan::Pass::backward_data: {
      const float *w = job.dense(p.w, 0, wperm), *dy = job.dense(p.y);
      float* dx = job.output(p.x);
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      if (!job.check(api.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wd, yd, cd, xd, kMax, &count, perf),
                     "cudnnGetConvolutionBackwardDataAlgorithm_v7"))
        return;
      run_algorithms(job, perf, count, [&](cudnnConvolutionBwdDataAlgo_t a, void* ws, size_t bytes) {
        return api.cudnnConvolutionBackwardData(h, &one, wd, w, yd, dy, cd, a, ws, bytes, &zero, xd, dx);
      });
      if (p.x == Arg::dst) add_bias(dx, xd);  // a deconvolution's forward pass
      job.finish(p.x, dx);
      return;
    }
    case ConvPlan::Pass::backward_filter: {
      const float *x = job.dense(p.x), *dy = job.dense(p.y);
      float* dw = job.output(p.w, 0, wperm);
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      if (!job.check(api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, kMax, &count, perf),
                     "cudnnGetConvolutionBackwardFilterAlgorithm_v7"))
        return;
      run_algorithms(job, perf, count, [&](cudnnConvolutionBwdFilterAlgo_t a, void* ws, size_t bytes) {
        return api.cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, dy, cd, a, ws, bytes, &zero, wd, dw);
      });
      job.finish(p.w, dw, 0, wperm);
      if (p.bias_channels) {  // sums of diff_dst per channel: the convolution's y, a deconvolution's x
        float* db = job.output(Arg::diff_bias);
        cudnnTensorDescriptor_t bd = job.tensor(nd, bdims);
        const bool deconv = d.kind == Op::deconvolution;
        if (job.ok())
          job.check(api.cudnnConvolutionBackwardBias(h, &one, deconv ? xd : yd, deconv ? x : dy, &zero, bd, db),
                    "cudnnConvolutionBackwardBias");
        job.finish(Arg::diff_bias, db);
      }
      return;
    }
  }
}

// ------------------------------------------------------------------------------ matrix kinds

// Row-major dense arrays are column-major transposes: a row-major product Y = A B is the
// column-major Y^T = B^T A^T, which is what each cuBLAS call below computes.
void run_ip(DnnJob& job) {
  const Desc& d = job.desc();
  const CublasApi& b = job.blas();
  cublasHandle_t h = job.cublas();
  const bool bwd_data = d.prop == Prop::backward_data, bwd_w = d.prop == Prop::backward_weights;
  const Layout& xl = job.layout(bwd_data ? Arg::diff_src : Arg::src);
  const int n = static_cast<int>(xl.dims[0]);
  const int o = static_cast<int>(job.layout(bwd_w ? Arg::diff_weights : Arg::weights).dims[0]);
  const int k = static_cast<int>(xl.elements() / xl.dims[0]);
  const float one = 1, zero = 0;
  const int ydims[2] = {n, o}, bdims[2] = {1, o};
  if (bwd_data) {  // diff_src (N x K) = diff_dst (N x O) W (O x K)
    const float *w = job.dense(Arg::weights), *dy = job.dense(Arg::diff_dst);
    float* dx = job.output(Arg::diff_src);
    if (job.ok())
      job.check(b.cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, k, n, o, &one, w, k, dy, o, &zero, dx, k), "cublasSgemm");
    job.finish(Arg::diff_src, dx);
    return;
  }
  if (bwd_w) {  // diff_weights (O x K) = diff_dst^T (O x N) src (N x K)
    const float *x = job.dense(Arg::src), *dy = job.dense(Arg::diff_dst);
    float* dw = job.output(Arg::diff_weights);
    if (job.ok())
      job.check(b.cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, k, o, n, &one, x, k, dy, o, &zero, dw, k), "cublasSgemm");
    job.finish(Arg::diff_weights, dw);
    if (job.has(Arg::diff_bias)) {  // sums of diff_dst's columns
      float* db = job.output(Arg::diff_bias);
      cudnnTensorDescriptor_t yd = job.tensor(2, ydims), bd = job.tensor(2, bdims);
      if (job.ok())
        job.check(job.api().cudnnConvolutionBackwardBias(job.handle(), &one, yd, dy, &zero, bd, db),
                  "cudnnConvolutionBackwardBias");
      job.finish(Arg::diff_bias, db);
    }
    return;
  }
  // dst (N x O) = src (N x K) W^T (K x O) + bias
  const float *x = job.dense(Arg::src), *w = job.dense(Arg::weights);
  float* y = job.output(Arg::dst);
  if (job.ok())
    job.check(b.cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, o, n, k, &one, w, k, x, k, &zero, y, o), "cublasSgemm");
  if (job.has(Arg::bias)) {
    cudnnTensorDescriptor_t yd = job.tensor(2, ydims), bd = job.tensor(2, bdims);
    const float* bias = job.dense(Arg::bias);
    if (job.ok()) job.check(job.api().cudnnAddTensor(job.handle(), &one, bd, bias, &one, yd, y), "cudnnAddTensor");
  }
  job.finish(Arg::dst, y);
}

void run_matmul(DnnJob& job) {
  const CublasApi& b = job.blas();
  cublasHandle_t h = job.cublas();
  const Layout &al = job.layout(Arg::src), &bl = job.layout(Arg::weights), &yl = job.layout(Arg::dst);
  const int nd = yl.ndims;
  const int m = static_cast<int>(yl.dims[nd - 2]), n = static_cast<int>(yl.dims[nd - 1]),
            k = static_cast<int>(al.dims[nd - 1]);
  const float *a = job.dense(Arg::src), *w = job.dense(Arg::weights);
  float* y = job.output(Arg::dst);
  const float one = 1, zero = 0;
  // Batch dims: an operand either has all of dst's (stride of one matrix) or none (stride 0) in
  // one strided batched call; other broadcasts (some dims of each) take a call per matrix.
  int64_t batches = 1;
  bool a_full = true, a_none = true, b_full = true, b_none = true;
  for (int i = 0; i < nd - 2; ++i) {
    batches *= yl.dims[i];
    a_full = a_full && al.dims[i] == yl.dims[i], a_none = a_none && al.dims[i] == 1;
    b_full = b_full && bl.dims[i] == yl.dims[i], b_none = b_none && bl.dims[i] == 1;
  }
  const int64_t asize = int64_t{m} * k, bsize = int64_t{k} * n, ysize = int64_t{m} * n;
  if (job.ok() && (a_full || a_none) && (b_full || b_none)) {
    job.check(b.cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w, n, b_full ? bsize : 0, a, k,
                                          a_full ? asize : 0, &zero, y, n, ysize, static_cast<int>(batches)),
              "cublasSgemmStridedBatched");
  } else {
    for (int64_t t = 0; t < batches && job.ok(); ++t) {
      int64_t rest = t, aoff = 0, boff = 0, astride = asize, bstride = bsize;
      for (int i = nd - 3; i >= 0; --i) {  // t's index along each batch dim, innermost first
        const int64_t idx = rest % yl.dims[i];
        rest /= yl.dims[i];
        if (al.dims[i] != 1) aoff += idx * astride;
        if (bl.dims[i] != 1) boff += idx * bstride;
        astride *= al.dims[i], bstride *= bl.dims[i];
      }
      job.check(b.cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w + boff, n, a + aoff, k, &zero,
                              y + t * ysize, n),
                "cublasSgemm");
    }
  }
  if (job.has(Arg::bias)) job.add_broadcast(y, yl, job.dense(Arg::bias), job.layout(Arg::bias));
  job.finish(Arg::dst, y);
}

// ------------------------------------------------------------------------ elementwise kinds

void run_eltwise(DnnJob& job) {
  const Desc& d = job.desc();
  EltPlan e;
  if (forward(d)) {
    dnn::plan_eltwise(d.alg, d.alpha, d.beta, false, e);
    const int64_t count = job.layout(Arg::dst).elements();
    float* x = job.dense(Arg::src);
    float* y = job.output(Arg::dst);
    job.finish(Arg::dst, job.eltwise(e, x, y, count));
    return;
  }
  dnn::plan_eltwise(d.alg, d.alpha, d.beta, true, e);
  const int64_t count = job.layout(Arg::diff_src).elements();
  float* x = job.dense(capture::dnn::uses_dst(d.alg) ? Arg::dst : Arg::src);
  const float* dy = job.dense(Arg::diff_dst);
  float* dx = job.output(Arg::diff_src);
  // cuDNN's backward pass reads y = f(x) and x; the node has one of them. ReLU's only needs signs,
  // which x and y share.
  float* y = e.recompute_y ? job.eltwise(e, x, job.temp(count), count) : x;
  cudnnTensorDescriptor_t t = job.flat(count);
  cudnnActivationDescriptor_t a = job.activation(e);
  const float one = 1, zero = 0;
  if (job.ok())
    job.check(job.api().cudnnActivationBackward(job.handle(), a, &one, t, y, t, dy, t, x, &zero, t, dx),
              "cudnnActivationBackward");
  job.finish(Arg::diff_src, dx);
}

void run_binary(DnnJob& job) {
  const Desc& d = job.desc();
  BinPlan p;
  dnn::plan_binary(d.alg, p);
  const Layout &yl = job.layout(Arg::dst), &bl = job.layout(Arg::src1);
  const float *a = job.dense(Arg::src), *b = job.dense(Arg::src1);
  job.finish(Arg::dst, job.op(p.op, 1, a, job.dims_of(yl), p.alpha2, b, job.dims_of(bl), yl.elements()));
}

void run_sum(DnnJob& job) {
  const Desc& d = job.desc();
  const int n = static_cast<int>(job.layout(Arg::dst).elements());
  float* y = job.filled(n, 0);
  for (int i = 0; job.find_source(i) && job.ok(); ++i) {
    const float* x = job.dense(Arg::multi_src, i);
    if (job.ok()) job.check(job.blas().cublasSaxpy(job.cublas(), n, &d.sum_scales[i], x, 1, y, 1), "cublasSaxpy");
  }
  job.finish(Arg::dst, y);
}

// Each source into its slab of dense dst: the slab is a strided view of dst.
void run_concat(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout& yl = job.layout(Arg::dst);
  float* y = job.temp(yl.elements());
  int64_t ystrides[ir::kMaxDims];
  for (int k = yl.ndims - 1, s = 1; k >= 0; --k) ystrides[k] = s, s *= static_cast<int>(yl.dims[k]);
  int64_t at = 0;
  for (int i = 0; job.find_source(i) && job.ok(); ++i) {
    const Layout& l = job.layout(Arg::multi_src, i);
    Layout slab{};
    slab.ndims = l.ndims;
    for (int k = 0; k < l.ndims; ++k) slab.dims[k] = slab.padded[k] = l.dims[k], slab.strides[k] = ystrides[k];
    slab.offset0 = at * ystrides[d.axis];
    at += l.dims[d.axis];
    Gather g;
    if (!dnn::plan_gather(slab, nullptr, g) || g.steps > 1) return job.fail(Reason::layout_unsupported);
    float* x = job.dense(Arg::multi_src, i);
    if (g.steps == 0)
      job.copy(y, x, l.elements());
    else
      job.scatter(g.first, x, y);
  }
  job.finish(Arg::dst, y);
}

void run_reorder(DnnJob& job) {
  const Layout& l = job.layout(Arg::dst);
  float* x = job.dense(Arg::src);
  float* y = job.output(Arg::dst);
  if (x != y) job.copy(y, x, l.elements());
  job.finish(Arg::dst, y);
}

// ------------------------------------------------------------------------ the other kinds

void run_pooling(DnnJob& job) {
  const Desc& d = job.desc();
  PoolPlan p;
  dnn::plan_pool(d, p);
  const int nd = p.nsp + 2;
  cudnnTensorDescriptor_t xd = job.tensor(nd, p.xdims), yd = job.tensor(nd, p.ydims);
  cudnnPoolingDescriptor_t pd = job.pooling(p);
  const float one = 1, zero = 0;
  if (forward(d)) {
    const float* x = job.dense(Arg::src);
    float* y = job.output(Arg::dst);
    if (job.ok()) job.check(job.api().cudnnPoolingForward(job.handle(), pd, &one, xd, x, &zero, yd, y), "cudnnPoolingForward");
    job.finish(Arg::dst, y);
    return;
  }
  // Average pooling (max backward needs the forward pass's workspace: declined): cuDNN's call
  // takes y and x, which averaging does not read; dy and dx stand in for them.
  const float* dy = job.dense(Arg::diff_dst);
  float* dx = job.output(Arg::diff_src);
  if (job.ok())
    job.check(job.api().cudnnPoolingBackward(job.handle(), pd, &one, yd, dy, yd, dy, xd, dx, &zero, xd, dx),
              "cudnnPoolingBackward");
  job.finish(Arg::diff_src, dx);
}

void run_softmax(DnnJob& job) {
  const Desc& d = job.desc();
  const Layout& l = job.layout(Arg::dst);
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < d.axis; ++k) outer *= l.dims[k];
  for (int k = d.axis + 1; k < l.ndims; ++k) inner *= l.dims[k];
  // The axis as cuDNN's channels: softmax over C for each (N, H).
  const int dims[3] = {static_cast<int>(outer), static_cast<int>(l.dims[d.axis]), static_cast<int>(inner)};
  cudnnTensorDescriptor_t t = job.tensor(3, dims);
  const cudnnSoftmaxAlgorithm_t algo = d.kind == Op::logsoftmax ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
  const float one = 1, zero = 0;
  if (forward(d)) {
    const float* x = job.dense(Arg::src);
    float* y = job.output(Arg::dst);
    if (job.ok())
      job.check(job.api().cudnnSoftmaxForward(job.handle(), algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, t, x, &zero, t, y),
                "cudnnSoftmaxForward");
    job.finish(Arg::dst, y);
    return;
  }
  const float *y = job.dense(Arg::dst), *dy = job.dense(Arg::diff_dst);
  float* dx = job.output(Arg::diff_src);
  if (job.ok())
    job.check(job.api().cudnnSoftmaxBackward(job.handle(), algo, CUDNN_SOFTMAX_MODE_CHANNEL, &one, t, y, t, dy,
                                             &zero, t, dx),
              "cudnnSoftmaxBackward");
  job.finish(Arg::diff_src, dx);
}

// The C values of a per-channel tensor in the caller's memory (mean, variance: inputs).
std::vector<float> host_channels(const Call& call, Arg a) {
  const Layout& l = call.desc->desc(a)->layout;
  const auto* p = static_cast<const float*>(call.ptr(a));
  std::vector<float> out(static_cast<size_t>(l.elements()));
  int64_t idx[ir::kMaxDims] = {};
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = p[l.offset(idx)];
    for (int k = l.ndims - 1; k >= 0 && ++idx[k] == l.dims[k]; --k) idx[k] = 0;  // the next index
  }
  return out;
}

void run_bnorm(DnnJob& job) {
  const Desc& d = job.desc();
  const Call& call = job.call();
  const CudnnApi& api = job.api();
  const Layout& xl = job.layout(Arg::src);
  const int64_t c = xl.dims[1], s = xl.elements() / (xl.dims[0] * c);
  const int xdims[3] = {static_cast<int>(xl.dims[0]), static_cast<int>(c), static_cast<int>(s)};
  const int cdims[2] = {1, static_cast<int>(c)};
  cudnnTensorDescriptor_t xd = job.tensor(3, xdims), cd = job.tensor(2, cdims);
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  const float one = 1, zero = 0;
  const double eps = d.epsilon;
  const float* x = job.dense(Arg::src);
  const float* scale = d.use_scale ? job.dense(Arg::scale) : job.filled(c, 1);
  if (forward(d)) {
    const float* shift = d.use_shift ? job.dense(Arg::shift) : job.filled(c, 0);
    float* y = job.output(Arg::dst);
    if (d.global_stats) {
      const float *mean = job.dense(Arg::mean), *var = job.dense(Arg::variance);
      if (job.ok())
        job.check(api.cudnnBatchNormalizationForwardInference(job.handle(), mode, &one, &zero, xd, x, xd, y, cd, scale,
                                                              shift, mean, var, eps),
                  "cudnnBatchNormalizationForwardInference");
    } else {
      // The batch statistics as cuDNN's running averages with factor 1: the mean, and the
      // variance times m / (m - 1) (unbiased), scaled back here. The running buffers start at 0:
      // cuDNN computes (1 - factor) * old + factor * new, and 0 * NaN would be NaN.
      const bool has_stats = job.has(Arg::mean) && job.has(Arg::variance);
      float* mean = has_stats ? job.output(Arg::mean) : job.temp(c);
      float* var = has_stats ? job.output(Arg::variance) : job.temp(c);
      job.zero(mean, c);
      job.zero(var, c);
      if (job.ok())
        job.check(api.cudnnBatchNormalizationForwardTraining(job.handle(), mode, &one, &zero, xd, x, xd, y, cd, scale,
                                                             shift, 1.0, mean, var, eps, nullptr, nullptr),
                  "cudnnBatchNormalizationForwardTraining");
      const int64_t m = xl.dims[0] * s;
      job.scale(var, c, static_cast<float>(static_cast<double>(m - 1) / static_cast<double>(m)));
      if (has_stats) {
        job.finish(Arg::mean, mean);
        job.finish(Arg::variance, var);
      }
    }
    if (d.fuse_relu) {  // inference only (training needs the mask: declined)
      EltPlan relu;
      dnn::plan_eltwise(ir::Alg::relu, 0, 0, false, relu);
      y = job.eltwise(relu, y, y, xl.elements());
    }
    job.finish(Arg::dst, y);
    return;
  }
  // Backward, with the statistics the node gives: the mean as it is, 1 / sqrt(variance + eps)
  // computed here (C values) as cuDNN's saved inverse deviation.
  std::vector<float> inv = host_channels(call, Arg::variance);
  for (float& v : inv) v = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v) + eps));
  const float *mean = job.dense(Arg::mean), *invstd = job.upload(inv), *dy = job.dense(Arg::diff_dst);
  float* dx = job.output(Arg::diff_src);
  const bool params = d.prop == Prop::backward;
  float* dscale = params && job.has(Arg::diff_scale) ? job.output(Arg::diff_scale) : job.temp(c);
  float* dshift = params && job.has(Arg::diff_shift) ? job.output(Arg::diff_shift) : job.temp(c);
  if (job.ok())
    job.check(api.cudnnBatchNormalizationBackward(job.handle(), mode, &one, &zero, &one, &zero, xd, x, xd, dy, xd, dx,
                                                  cd, scale, dscale, dshift, eps, mean, invstd),
              "cudnnBatchNormalizationBackward");
  job.finish(Arg::diff_src, dx);
  if (params && job.has(Arg::diff_scale)) job.finish(Arg::diff_scale, dscale);
  if (params && job.has(Arg::diff_shift)) job.finish(Arg::diff_shift, dshift);
}

constexpr DnnKinds<void (*)(DnnJob&)> kRuns{
    .conv = run_conv,
    .ip = run_ip,
    .matmul = run_matmul,
    .eltwise = run_eltwise,
    .pooling = run_pooling,
    .bnorm = run_bnorm,
    .softmax = run_softmax,
    .binary = run_binary,
    .sum = run_sum,
    .concat = run_concat,
    .reorder = run_reorder,
};

}  // namespace

// ----------------------------------------------------------------------------------- Dnn

Dnn::Dnn(Device& device) : device_(device) {}

Dnn::~Dnn() {
  // Owned by the backend, which releases its device without destroying anything once exit()
  // began or in a forked child (backend.cpp): the same holds for cuDNN's handle and the pool.
  if (!lib_) return;
  if (lib_->handle) lib_->api.cudnnDestroy(lib_->handle);
  if (lib_->pool) device_.rt().cudaMemPoolDestroy(lib_->pool);
}

bool Dnn::open() {
  auto lib = std::make_unique<Library>();
  const Libraries& cuda = device_.libraries();
  const std::string beside[] = {cuda.cublas_path, cuda.cudart_path};
  void* h = open_cuda_library("libcudnn.so.9", lib->path, why_, beside, 2);
  if (!h) return false;
#define SOL_CUDNN(name)                                                                 \
  lib->api.name = reinterpret_cast<decltype(lib->api.name)>(dlsym(h, SOL_CUDA_STR(name))); \
  if (!lib->api.name) {                                                                 \
    why_ = "libcudnn.so.9 has no " SOL_CUDA_STR(name) " (an older cuDNN than 9?)";      \
    return false;                                                                       \
  }
#include "backends/cuda/cudnn_functions.def"
#undef SOL_CUDNN
  lib->version = lib->api.cudnnGetVersion();
  if (cudnnStatus_t st = lib->api.cudnnCreate(&lib->handle); st != CUDNN_STATUS_SUCCESS) {
    why_ = std::string("cudnnCreate: ") + lib->api.cudnnGetErrorString(st);
    lib->handle = nullptr;
    return false;
  }
  if (cudnnStatus_t st = lib->api.cudnnSetStream(lib->handle, device_.stream()); st != CUDNN_STATUS_SUCCESS) {
    why_ = std::string("cudnnSetStream: ") + lib->api.cudnnGetErrorString(st);
    lib->api.cudnnDestroy(lib->handle);
    return false;
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_.ordinal();
  const CudartApi& rt = device_.rt();
  if (cudaError_t err = rt.cudaMemPoolCreate(&lib->pool, &props); err != cudaSuccess) {
    why_ = "cudaMemPoolCreate: " + error_text(rt, err);
    lib->api.cudnnDestroy(lib->handle);
    return false;
  }
  uint64_t keep = kPoolKeep;
  rt.cudaMemPoolSetAttribute(lib->pool, cudaMemPoolAttrReleaseThreshold, &keep);
  lib_ = std::move(lib);
  return true;
}

std::string Dnn::describe() const {
  if (failed_) return "DNN nodes elsewhere: " + why_;
  if (!lib_) return "";
  const size_t v = lib_->version;  // major * 10000 + minor * 100 + patch
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         " (" + lib_->path + ")";
}

Reason Dnn::supports(const capture::Node& node) const noexcept {
  if (failed_) return Reason::unavailable;
  return dnn::check(node, device_.total_memory());
}

Reason Dnn::run(capture::Node& node) {
  Resident* res = device_.resident();
  const bool lazy = res && res->active();
  if (lazy) res->settle();
  const Reason r = run_eagerly(node);
  if (r == Reason::ok && lazy) hal::transfers::flushed(hal::transfers::Cause::eager);
  return r;
}

Reason Dnn::run_eagerly(capture::Node& node) {
  if (Reason r = supports(node); r != Reason::ok) return r;
  if (!lib_) {
    if (!open()) {
      failed_ = true;
      log::once(log::Level::warn, "cuda: cudnn", "cuda: DNN nodes run elsewhere: %s", why_.c_str());
      return Reason::unavailable;
    }
    SOL_LOG(info, "cuda: DNN nodes on %s", describe().c_str());
  }
  const auto* run = kRuns.of(node.op);
  if (!run) return Reason::op_unsupported;  // excluded by check()
  DnnJob job(device_, *lib_, *node.dnn);
  (*run)(job);
  return job.download();
}

}  // namespace sol::backends::cuda
