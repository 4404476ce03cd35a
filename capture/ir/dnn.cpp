// Names and data-direction rules of DNN nodes (capture/ir/dnn.hpp).
#include "capture/ir/dnn.hpp"

#include <algorithm>

namespace sol::capture::dnn {

const char* arg_name(Arg a) noexcept {
  switch (a) {
    case Arg::src: return "src";
    case Arg::src1: return "src1";
    case Arg::weights: return "wei";
    case Arg::bias: return "bia";
    case Arg::dst: return "dst";
    case Arg::diff_src: return "diff_src";
    case Arg::diff_weights: return "diff_wei";
    case Arg::diff_bias: return "diff_bia";
    case Arg::diff_dst: return "diff_dst";
    case Arg::mean: return "mean";
    case Arg::variance: return "var";
    case Arg::scale: return "scale";
    case Arg::shift: return "shift";
    case Arg::diff_scale: return "diff_scale";
    case Arg::diff_shift: return "diff_shift";
    case Arg::workspace: return "ws";
    case Arg::multi_src: return "src_n";
    case Arg::post_op_src: return "po_src";
  }
  return "?";
}

const char* prop_name(Prop p) noexcept {
  switch (p) {
    case Prop::none: return "undef";
    case Prop::forward_training: return "forward_training";
    case Prop::forward_inference: return "forward_inference";
    case Prop::backward_data: return "backward_data";
    case Prop::backward_weights: return "backward_weights";
    case Prop::backward: return "backward";
  }
  return "?";
}

const char* alg_name(Alg a) noexcept {
  static constexpr const char* kNames[] = {
#define SOL_DNN_ALG_NAME(name) #name,
      SOL_DNN_ALGS(SOL_DNN_ALG_NAME)
#undef SOL_DNN_ALG_NAME
  };
  const auto i = static_cast<size_t>(a);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "?";
}

namespace {
bool stats_computed(const Desc& d) noexcept {
  return d.prop == Prop::forward_training && !d.global_stats;
}
bool forward(const Desc& d) noexcept {
  return d.prop == Prop::forward_training || d.prop == Prop::forward_inference;
}
// Backward passes read dst (softmax, eltwise's *_dst algorithms) and write only diff_* tensors.
bool backward(const Desc& d) noexcept {
  return d.prop == Prop::backward_data || d.prop == Prop::backward_weights || d.prop == Prop::backward;
}
}  // namespace

bool Desc::written(const Tensor& t) const noexcept {
  switch (t.arg) {
    case Arg::dst: return !backward(*this);
    case Arg::diff_src:
    case Arg::diff_weights:
    case Arg::diff_bias:
    case Arg::diff_scale:
    case Arg::diff_shift: return true;
    case Arg::mean:
    case Arg::variance: return stats_computed(*this);
    case Arg::workspace: return forward(*this);
    default: return false;
  }
}

bool Desc::read(const Tensor& t) const noexcept {
  switch (t.arg) {
    case Arg::dst: return backward(*this) || has_sum_post_op();
    case Arg::diff_src:
    case Arg::diff_weights:
    case Arg::diff_bias:
    case Arg::diff_scale:
    case Arg::diff_shift: return false;
    case Arg::mean:
    case Arg::variance: return !stats_computed(*this);
    case Arg::workspace: return !forward(*this);
    default: return true;
  }
}

int64_t padded_elements(const Layout& l) noexcept {
  int64_t n = 1;
  for (int d = 0; d < l.ndims; ++d) n *= l.padded[d];
  return l.ndims ? n : 0;
}

int64_t extent(const Layout& l) noexcept {
  int64_t last[kMaxDims];
  for (int d = 0; d < l.ndims; ++d) {
    if (l.padded[d] == 0) return 0;
    last[d] = l.padded[d] - 1;
  }
  return l.offset(last) + 1;
}

bool dense_canonical(const Layout& l) noexcept {
  if (!l.plain() || l.offset0 != 0) return false;
  int64_t stride = 1;
  for (int d = l.ndims - 1; d >= 0; --d) {
    if (l.dims[d] > 1 && l.strides[d] != stride) return false;
    stride *= l.dims[d];
  }
  return true;
}

size_t buffer_bytes(const TensorDesc& t) noexcept {
  return std::max(t.bytes, static_cast<size_t>(extent(t.layout)) * dtype_size(t.dtype));
}

bool covers(const TensorDesc& t) noexcept {
  const int64_t count = padded_elements(t.layout);
  return t.layout.offset0 == 0 && extent(t.layout) == count &&
         buffer_bytes(t) == static_cast<size_t>(count) * dtype_size(t.dtype);
}

}  // namespace sol::capture::dnn
