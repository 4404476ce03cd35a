// Names and data-direction rules of DNN nodes (ir/dnn.hpp).
#include "ir/dnn.hpp"

#include <algorithm>
#include <cstring>

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

namespace {
uint64_t mix(uint64_t h, uint64_t v) noexcept {
  return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
}
uint64_t bits(float f) noexcept {
  const double d = f;
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
uint64_t layout_key(uint64_t h, const Tensor& x) noexcept {
  const Layout& l = x.desc.layout;
  h = mix(h, static_cast<uint64_t>(x.arg) | uint64_t{x.index} << 8 |
                 static_cast<uint64_t>(x.desc.dtype) << 16 | static_cast<uint64_t>(l.ndims) << 24 |
                 static_cast<uint64_t>(l.nblocks) << 32);
  h = mix(mix(h, static_cast<uint64_t>(l.offset0)), x.desc.bytes);
  for (int i = 0; i < l.ndims; ++i)
    h = mix(mix(mix(h, static_cast<uint64_t>(l.dims[i])), static_cast<uint64_t>(l.padded[i])),
            static_cast<uint64_t>(l.strides[i]));
  for (int b = 0; b < l.nblocks; ++b)
    h = mix(h, static_cast<uint64_t>(l.block[b]) << 8 | static_cast<uint8_t>(l.block_dim[b]));
  return h;
}
}  // namespace

uint64_t content_key(const Desc& d) noexcept {
  uint64_t h = mix(0x736f6c2d646e6eull,
                   static_cast<uint64_t>(d.kind) | static_cast<uint64_t>(d.prop) << 8 |
                       static_cast<uint64_t>(d.alg) << 16 | static_cast<uint64_t>(d.dtype) << 24 |
                       static_cast<uint64_t>(d.npost_ops) << 32 | static_cast<uint64_t>(d.ntensors) << 40);
  for (int64_t v :
       {static_cast<int64_t>(d.nsp), d.groups, static_cast<int64_t>(d.axis), d.group_size, d.local_size})
    h = mix(h, static_cast<uint64_t>(v));
  for (float f : {d.alpha, d.beta, d.k, d.epsilon, d.output_scale}) h = mix(h, bits(f));
  h = mix(h, static_cast<uint64_t>(d.global_stats) | static_cast<uint64_t>(d.use_scale) << 1 |
                 static_cast<uint64_t>(d.use_shift) << 2 | static_cast<uint64_t>(d.fuse_relu) << 3);
  for (int i = 0; i < 3; ++i)
    for (int64_t v : {d.kernel[i], d.stride[i], d.dilation[i], d.pad_l[i], d.pad_r[i]})
      h = mix(h, static_cast<uint64_t>(v));
  for (float s : d.sum_scales) h = mix(h, bits(s));
  for (int i = 0; i < d.npost_ops; ++i) {
    const PostOp& p = d.post_ops[i];
    h = mix(h, static_cast<uint64_t>(p.kind) | static_cast<uint64_t>(p.alg) << 8 |
                   static_cast<uint64_t>(p.sum_dtype) << 16);
    h = mix(mix(mix(h, bits(p.scale)), bits(p.alpha)), bits(p.beta));
  }
  for (int i = 0; i < d.ntensors; ++i) h = layout_key(h, d.tensors[i]);
  for (char c : d.shape) h = mix(h, static_cast<unsigned char>(c));
  if (d.unsupported)
    for (const char* c = d.unsupported; *c; ++c) h = mix(h, static_cast<unsigned char>(*c));
  return h;
}

}  // namespace sol::capture::dnn
