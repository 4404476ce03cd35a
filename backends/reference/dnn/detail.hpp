// What the reference backend's DNN kinds share (see dnn.hpp for the scheme): dense gathers of
// inputs, scatters of outputs with the output scale and post-ops, eltwise math, and the entry
// points of each kind family (a check that declines with a reason, and a run that cannot fail
// once the check passed, except by running out of memory before its first write).
#pragma once

#include <cstdint>
#include <vector>

#include "capture/dnn/validate.hpp"
#include "hal/backend.hpp"
#include "ir/dnn.hpp"

namespace sol::backends::reference::dnn {

using capture::DType;
using capture::Op;
using capture::dnn::Alg;
using capture::dnn::broadcasts_to;  // and the other checks every backend shares (capture/dnn/validate.hpp)
using capture::dnn::addressable;
using capture::dnn::count_sources;
using capture::dnn::forward;
using capture::dnn::same_dims;
using capture::dnn::uses_dst;
using capture::dnn::Arg;
using capture::dnn::Call;
using capture::dnn::Desc;
using capture::dnn::kMaxDims;
using capture::dnn::Layout;
using capture::dnn::PostOp;
using capture::dnn::Prop;
using capture::dnn::TensorDesc;
using hal::Reason;

// Logical dims of a tensor and their row-major (canonical, dense) strides.
struct Shape {
  int ndims = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int64_t size = 0;
};
Shape shape_of(const TensorDesc& t) noexcept;

float load(DType dt, const void* base, int64_t offset) noexcept;
void store(DType dt, void* base, int64_t offset, float v) noexcept;

// The tensor's values in canonical order, widened to f32. Empty when the node lacks the tensor.
std::vector<float> gather(const Call& call, Arg arg, int index = 0);

// The output scale and post-ops of a node, applied to each value of its primary output.
class Epilogue {
 public:
  // Gathers the sources of binary post-ops (allocates: construct before the first write).
  explicit Epilogue(const Call& call);
  // v after output scale and post-ops; idx is the value's logical index in dst, old the value dst
  // held before the call.
  float apply(float v, const int64_t* idx, float old) const noexcept;
  bool reads_dst() const noexcept { return reads_dst_; }

 private:
  const Desc& desc_;
  struct Operand {
    std::vector<float> values;
    int64_t strides[kMaxDims] = {};  // 0 along broadcast dims
  };
  std::vector<Operand> binary_;  // per post-op (empty for the others)
  bool reads_dst_ = false;
};

// Writes `values` (canonical order) to the tensor through its layout, zeros to the padding of
// blocked dims, each value through `epilogue` when given. T is float or double.
template <class T>
void scatter(const Call& call, Arg arg, const T* values, const Epilogue* epilogue = nullptr) noexcept;
extern template void scatter<float>(const Call&, Arg, const float*, const Epilogue*) noexcept;
extern template void scatter<double>(const Call&, Arg, const double*, const Epilogue*) noexcept;

// Eltwise math, exactly oneDNN 2.6's (src/common/math_utils.hpp), in float.
float eltwise_fwd(Alg a, float s, float alpha, float beta) noexcept;
// diff_src from diff_dst `dd` and `x`, which is src, or dst for the *_dst algorithms.
float eltwise_bwd(Alg a, float dd, float x, float alpha, float beta) noexcept;
float binary_op(Alg a, float x, float y) noexcept;


// The kind families. *_check: Reason::ok or why not (after dnn.cpp's generic checks: tensors
// addressable, dtypes f32/bf16, post-ops well formed). *_run: computes; may throw std::bad_alloc
// before its first write, nothing else.
Reason conv_check(const Desc& d) noexcept;  // convolution, deconvolution
void conv_run(const Call& c);
Reason ip_check(const Desc& d) noexcept;
void ip_run(const Call& c);
Reason matmul_check(const Desc& d) noexcept;
void matmul_run(const Call& c);
Reason eltwise_check(const Desc& d) noexcept;
void eltwise_run(const Call& c);
Reason pooling_check(const Desc& d) noexcept;
void pooling_run(const Call& c);
Reason norm_check(const Desc& d) noexcept;  // batch_normalization, layer_normalization
void norm_run(const Call& c);
Reason softmax_check(const Desc& d) noexcept;  // softmax, logsoftmax
void softmax_run(const Call& c);
Reason binary_check(const Desc& d) noexcept;
void binary_run(const Call& c);
Reason sum_check(const Desc& d) noexcept;
void sum_run(const Call& c);
Reason concat_check(const Desc& d) noexcept;
void concat_run(const Call& c);
Reason reorder_check(const Desc& d) noexcept;
void reorder_run(const Call& c);
Reason shuffle_check(const Desc& d) noexcept;
void shuffle_run(const Call& c);
Reason lrn_check(const Desc& d) noexcept;
void lrn_run(const Call& c);
Reason prelu_check(const Desc& d) noexcept;
void prelu_run(const Call& c);
Reason reduction_check(const Desc& d) noexcept;
void reduction_run(const Call& c);

}  // namespace sol::backends::reference::dnn
