#include "backends/onednn/dnn.hpp"

#include <dlfcn.h>

#include <cstring>

namespace sol::backends::onednn {

bool DnnApi::bind(void* lib, std::string& why) noexcept {
#define SOL_ONEDNN_DNN_BIND(name)                                     \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, "dnnl_" #name)); \
  if (!name) {                                                        \
    why = "has no dnnl_" #name;                                       \
    return false;                                                     \
  }
  SOL_ONEDNN_DNN_FUNCTIONS(SOL_ONEDNN_DNN_BIND)
#undef SOL_ONEDNN_DNN_BIND
  return true;
}

namespace {

namespace dnn = capture::dnn;
using capture::DType;
using capture::Op;
using hal::Reason;
using md_t = dnnl_memory_desc_t;

dnnl_data_type_t to_dt(DType t) noexcept {
  switch (t) {
    case DType::f32: return dnnl_f32;
    case DType::f16: return dnnl_f16;
    case DType::bf16: return dnnl_bf16;
    case DType::s32: return dnnl_s32;
    case DType::s8: return dnnl_s8;
    case DType::u8: return dnnl_u8;
    default: return dnnl_data_type_undef;
  }
}

// The oneDNN algorithm of an IR one (the inverse of interpose/dnnl/translate.cpp's mapping; the
// DNN conformance suite runs every case through both on this backend).
dnnl_alg_kind_t to_alg(dnn::Alg a) noexcept {
  using A = dnn::Alg;
  switch (a) {
    case A::direct: return dnnl_convolution_direct;
    case A::relu: return dnnl_eltwise_relu;
    case A::tanh: return dnnl_eltwise_tanh;
    case A::elu: return dnnl_eltwise_elu;
    case A::square: return dnnl_eltwise_square;
    case A::abs: return dnnl_eltwise_abs;
    case A::sqrt: return dnnl_eltwise_sqrt;
    case A::linear: return dnnl_eltwise_linear;
    case A::bounded_relu: return dnnl_eltwise_bounded_relu;
    case A::soft_relu: return dnnl_eltwise_soft_relu;
    case A::logistic: return dnnl_eltwise_logistic;
    case A::exp: return dnnl_eltwise_exp;
    case A::gelu_tanh: return dnnl_eltwise_gelu_tanh;
    case A::gelu_erf: return dnnl_eltwise_gelu_erf;
    case A::swish: return dnnl_eltwise_swish;
    case A::log: return dnnl_eltwise_log;
    case A::clip: return dnnl_eltwise_clip;
    case A::clip_v2: return dnnl_eltwise_clip_v2;
    case A::pow: return dnnl_eltwise_pow;
    case A::round: return dnnl_eltwise_round;
    case A::logsigmoid: return dnnl_eltwise_logsigmoid;
    case A::mish: return dnnl_eltwise_mish;
    case A::hardswish: return dnnl_eltwise_hardswish;
    case A::relu_dst: return dnnl_eltwise_relu_use_dst_for_bwd;
    case A::tanh_dst: return dnnl_eltwise_tanh_use_dst_for_bwd;
    case A::elu_dst: return dnnl_eltwise_elu_use_dst_for_bwd;
    case A::sqrt_dst: return dnnl_eltwise_sqrt_use_dst_for_bwd;
    case A::logistic_dst: return dnnl_eltwise_logistic_use_dst_for_bwd;
    case A::exp_dst: return dnnl_eltwise_exp_use_dst_for_bwd;
    case A::clip_v2_dst: return dnnl_eltwise_clip_v2_use_dst_for_bwd;
    case A::pool_max: return dnnl_pooling_max;
    case A::pool_avg_include_padding: return dnnl_pooling_avg_include_padding;
    case A::pool_avg_exclude_padding: return dnnl_pooling_avg_exclude_padding;
    case A::add: return dnnl_binary_add;
    case A::mul: return dnnl_binary_mul;
    case A::max: return dnnl_binary_max;
    case A::min: return dnnl_binary_min;
    case A::div: return dnnl_binary_div;
    case A::sub: return dnnl_binary_sub;
    case A::ge: return dnnl_binary_ge;
    case A::gt: return dnnl_binary_gt;
    case A::le: return dnnl_binary_le;
    case A::lt: return dnnl_binary_lt;
    case A::eq: return dnnl_binary_eq;
    case A::ne: return dnnl_binary_ne;
    case A::lrn_across: return dnnl_lrn_across_channels;
    case A::lrn_within: return dnnl_lrn_within_channel;
    case A::nearest: return dnnl_resampling_nearest;
    case A::linear_interp: return dnnl_resampling_linear;
    case A::reduce_max: return dnnl_reduction_max;
    case A::reduce_min: return dnnl_reduction_min;
    case A::reduce_sum: return dnnl_reduction_sum;
    case A::reduce_mul: return dnnl_reduction_mul;
    case A::reduce_mean: return dnnl_reduction_mean;
    case A::reduce_norm_lp_max: return dnnl_reduction_norm_lp_max;
    case A::reduce_norm_lp_sum: return dnnl_reduction_norm_lp_sum;
    case A::reduce_norm_lp_power_p_max: return dnnl_reduction_norm_lp_power_p_max;
    case A::reduce_norm_lp_power_p_sum: return dnnl_reduction_norm_lp_power_p_sum;
    case A::none: return dnnl_alg_kind_undef;
  }
  return dnnl_alg_kind_undef;
}

dnnl_prop_kind_t to_prop(dnn::Prop p) noexcept {
  switch (p) {
    case dnn::Prop::forward_training: return dnnl_forward_training;
    case dnn::Prop::forward_inference: return dnnl_forward_inference;
    case dnn::Prop::backward_data: return dnnl_backward_data;
    case dnn::Prop::backward_weights: return dnnl_backward_weights;
    case dnn::Prop::backward: return dnnl_backward;
    case dnn::Prop::none: return dnnl_prop_kind_undef;
  }
  return dnnl_prop_kind_undef;
}

// The DNNL_ARG_* a tensor of this role is passed as.
int exec_arg(const dnn::Tensor& t) noexcept {
  switch (t.arg) {
    case dnn::Arg::src: return DNNL_ARG_SRC;
    case dnn::Arg::src1: return DNNL_ARG_SRC_1;
    case dnn::Arg::weights: return DNNL_ARG_WEIGHTS;
    case dnn::Arg::bias: return DNNL_ARG_BIAS;
    case dnn::Arg::dst: return DNNL_ARG_DST;
    case dnn::Arg::diff_src: return DNNL_ARG_DIFF_SRC;
    case dnn::Arg::diff_weights: return DNNL_ARG_DIFF_WEIGHTS;
    case dnn::Arg::diff_bias: return DNNL_ARG_DIFF_BIAS;
    case dnn::Arg::diff_dst: return DNNL_ARG_DIFF_DST;
    case dnn::Arg::mean: return DNNL_ARG_MEAN;
    case dnn::Arg::variance: return DNNL_ARG_VARIANCE;
    case dnn::Arg::scale: return DNNL_ARG_SCALE;
    case dnn::Arg::shift: return DNNL_ARG_SHIFT;
    case dnn::Arg::diff_scale: return DNNL_ARG_DIFF_SCALE;
    case dnn::Arg::diff_shift: return DNNL_ARG_DIFF_SHIFT;
    case dnn::Arg::workspace: return DNNL_ARG_WORKSPACE;
    case dnn::Arg::multi_src: return DNNL_ARG_MULTIPLE_SRC + t.index;
    case dnn::Arg::post_op_src: return DNNL_ARG_ATTR_MULTIPLE_POST_OP(t.index) | DNNL_ARG_SRC_1;
  }
  return 0;
}

// A tensor's layout as a oneDNN memory descriptor: plain strides and inner blocks alike.
md_t to_md(const dnn::TensorDesc& t) noexcept {
  md_t md;
  std::memset(&md, 0, sizeof md);
  const dnn::Layout& l = t.layout;
  md.ndims = l.ndims;
  md.data_type = to_dt(t.dtype);
  md.offset0 = l.offset0;
  md.format_kind = dnnl_blocked;
  dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  for (int d = 0; d < l.ndims; ++d) {
    md.dims[d] = l.dims[d];
    md.padded_dims[d] = l.padded[d];
    blk.strides[d] = l.strides[d];
  }
  blk.inner_nblks = l.nblocks;
  for (int b = 0; b < l.nblocks; ++b) {
    blk.inner_blks[b] = l.block[b];
    blk.inner_idxs[b] = l.block_dim[b];
  }
  return md;
}

// The memory descriptors of a description by role, and the geometry in oneDNN's terms.
struct Mds {
  md_t at[dnn::kMaxTensors];
  const dnn::Desc& d;
  dnnl_dims_t strides = {}, dilates = {}, kernel = {}, pad_l = {}, pad_r = {};

  explicit Mds(const dnn::Desc& desc) noexcept : d(desc) {
    for (int i = 0; i < d.ntensors; ++i) at[i] = to_md(d.tensors[i].desc);
    for (int i = 0; i < d.nsp && i < 3; ++i) {
      strides[i] = d.stride[i];
      dilates[i] = d.dilation[i] - 1;
      kernel[i] = d.kernel[i];
      pad_l[i] = d.pad_l[i];
      pad_r[i] = d.pad_r[i];
    }
  }
  const md_t* get(dnn::Arg a, int index = 0) const noexcept {
    const int i = d.find(a, index);
    return i < 0 ? nullptr : &at[i];
  }
  // The first of these roles the description has (a forward pass's src, or its diff_src).
  const md_t* either(dnn::Arg a, dnn::Arg b) const noexcept { return get(a) ? get(a) : get(b); }
};

unsigned norm_flags(const dnn::Desc& d) noexcept {
  unsigned f = 0;
  if (d.global_stats) f |= dnnl_use_global_stats;
  if (d.use_scale) f |= dnnl_use_scale;
  if (d.use_shift) f |= dnnl_use_shift;
  if (d.fuse_relu) f |= dnnl_fuse_norm_relu;
  return f;
}

bool is_backward(dnn::Prop p) noexcept {
  return p == dnn::Prop::backward_data || p == dnn::Prop::backward_weights || p == dnn::Prop::backward;
}

}  // namespace

struct DnnPrimitives::Entry {
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t primitive = nullptr;
  int args[dnn::kMaxTensors] = {};              // the DNNL_ARG_* of each tensor
  dnnl_memory_t memory[dnn::kMaxTensors] = {};  // one per tensor, its handle set per execution
  int n = 0;
};

bool DnnPrimitives::init(void* lib, std::string& why) noexcept {
  if (!dnn_.bind(lib, why)) return false;
  if (api_.engine_create(&engine_, dnnl_cpu, 0) != dnnl_success ||
      api_.stream_create(&stream_, engine_, dnnl_stream_default_flags) != dnnl_success) {
    why = "cannot create a oneDNN CPU engine and stream";
    return false;
  }
  return true;
}

namespace {

// The op descriptors of each kind (and of the forward pass a backward one is hinted with).
union OpDesc {
  dnnl_convolution_desc_t conv;
  dnnl_deconvolution_desc_t deconv;
  dnnl_inner_product_desc_t ip;
  dnnl_matmul_desc_t matmul;
  dnnl_eltwise_desc_t eltwise;
  dnnl_pooling_v2_desc_t pool;
  dnnl_batch_normalization_desc_t bnorm;
  dnnl_layer_normalization_desc_t lnorm;
  dnnl_softmax_v2_desc_t softmax;
  dnnl_binary_desc_t binary;
  dnnl_lrn_desc_t lrn;
  dnnl_shuffle_desc_t shuffle;
  dnnl_resampling_desc_t resampling;
  dnnl_reduction_desc_t reduction;
  dnnl_prelu_desc_t prelu;
};

// The primitives with weights: convolution, deconvolution, inner product, matmul.
dnnl_status_t weighted_desc(const Api& api, const DnnApi& f, const Mds& m, bool forward,
                            OpDesc& op) noexcept {
  const dnn::Desc& d = m.d;
  using dnn::Arg;
  const dnnl_prop_kind_t prop = forward ? dnnl_forward_training : to_prop(d.prop);
  const md_t* src = m.either(Arg::src, Arg::diff_src);
  const md_t* dst = m.either(Arg::dst, Arg::diff_dst);
  const md_t* wei = m.either(Arg::weights, Arg::diff_weights);
  const md_t* bias = m.either(Arg::bias, Arg::diff_bias);
  const bool fwd = forward || !is_backward(d.prop);
  switch (d.kind) {
    case Op::convolution:
    case Op::deconvolution: {
      const bool de = d.kind == Op::deconvolution;
      const dnnl_alg_kind_t alg = de ? dnnl_deconvolution_direct : dnnl_convolution_direct;  // IR: direct
      if (fwd)
        return (de ? f.dilated_deconvolution_forward_desc_init : f.dilated_convolution_forward_desc_init)(
            &op.conv, prop, alg, src, wei, forward ? nullptr : bias, dst, m.strides, m.dilates, m.pad_l,
            m.pad_r);
      if (d.prop == dnn::Prop::backward_data)
        return (de ? f.dilated_deconvolution_backward_data_desc_init
                   : f.dilated_convolution_backward_data_desc_init)(&op.conv, alg, src, wei, dst, m.strides,
                                                                    m.dilates, m.pad_l, m.pad_r);
      return (de ? f.dilated_deconvolution_backward_weights_desc_init
                 : f.dilated_convolution_backward_weights_desc_init)(&op.conv, alg, src, wei, bias, dst,
                                                                     m.strides, m.dilates, m.pad_l, m.pad_r);
    }
    case Op::inner_product:
      if (fwd)
        return f.inner_product_forward_desc_init(&op.ip, prop, src, wei, forward ? nullptr : bias, dst);
      if (d.prop == dnn::Prop::backward_data)
        return f.inner_product_backward_data_desc_init(&op.ip, src, wei, dst);
      return f.inner_product_backward_weights_desc_init(&op.ip, src, wei, bias, dst);
    case Op::matmul: return api.matmul_desc_init(&op.matmul, src, wei, bias, dst);
    default: return dnnl_unimplemented;
  }
}

// The normalizations: batch and layer.
dnnl_status_t norm_desc(const DnnApi& f, const Mds& m, bool forward, OpDesc& op) noexcept {
  const dnn::Desc& d = m.d;
  using dnn::Arg;
  const dnnl_prop_kind_t prop = forward ? dnnl_forward_training : to_prop(d.prop);
  const bool fwd = forward || !is_backward(d.prop);
  if (d.kind == Op::batch_normalization)
    return fwd ? f.batch_normalization_forward_desc_init(&op.bnorm, prop, m.get(Arg::src), d.epsilon,
                                                         norm_flags(d))
               : f.batch_normalization_backward_desc_init(&op.bnorm, prop, m.get(Arg::diff_dst),
                                                          m.get(Arg::src), d.epsilon, norm_flags(d));
  const md_t* stat = m.get(Arg::mean);
  return fwd ? f.layer_normalization_forward_desc_init(&op.lnorm, prop, m.get(Arg::src), stat, d.epsilon,
                                                       norm_flags(d))
             : f.layer_normalization_backward_desc_init(&op.lnorm, prop, m.get(Arg::diff_dst),
                                                        m.get(Arg::src), stat, d.epsilon, norm_flags(d));
}

// The element-wise and data-movement kinds.
dnnl_status_t other_desc(const DnnApi& f, const Mds& m, bool forward, OpDesc& op) noexcept {
  const dnn::Desc& d = m.d;
  using dnn::Arg;
  const dnnl_prop_kind_t prop = forward ? dnnl_forward_training : to_prop(d.prop);
  const dnnl_alg_kind_t alg = to_alg(d.alg);
  const md_t* src = m.either(Arg::src, Arg::diff_src);
  const md_t* dst = m.either(Arg::dst, Arg::diff_dst);
  const bool fwd = forward || !is_backward(d.prop);
  switch (d.kind) {
    case Op::eltwise: {
      // The data a backward pass reads: dst for the *_dst algorithms, else src.
      const md_t* data = m.get(Arg::src) ? m.get(Arg::src) : m.get(Arg::dst);
      return fwd ? f.eltwise_forward_desc_init(&op.eltwise, prop, alg, forward ? data : src, d.alpha, d.beta)
                 : f.eltwise_backward_desc_init(&op.eltwise, alg, m.get(Arg::diff_dst), data, d.alpha,
                                                d.beta);
    }
    case Op::pooling:
      return fwd ? f.pooling_v2_forward_desc_init(&op.pool, prop, alg, src, dst, m.strides, m.kernel,
                                                  m.dilates, m.pad_l, m.pad_r)
                 : f.pooling_v2_backward_desc_init(&op.pool, alg, src, dst, m.strides, m.kernel, m.dilates,
                                                   m.pad_l, m.pad_r);
    case Op::softmax:
    case Op::logsoftmax: {
      const dnnl_alg_kind_t sm = d.kind == Op::logsoftmax ? dnnl_softmax_log : dnnl_softmax_accurate;
      return fwd ? f.softmax_v2_forward_desc_init(&op.softmax, prop, sm,
                                                  forward ? m.get(Arg::dst) : m.get(Arg::src),
                                                  m.get(Arg::dst), d.axis)
                 : f.softmax_v2_backward_desc_init(&op.softmax, sm, m.get(Arg::diff_src),
                                                   m.get(Arg::diff_dst), m.get(Arg::dst), d.axis);
    }
    case Op::binary:
      return f.binary_desc_init(&op.binary, alg, m.get(Arg::src), m.get(Arg::src1), m.get(Arg::dst));
    case Op::lrn:
      return fwd ? f.lrn_forward_desc_init(&op.lrn, prop, alg, m.get(Arg::src), d.local_size, d.alpha, d.beta,
                                           d.k)
                 : f.lrn_backward_desc_init(&op.lrn, alg, m.get(Arg::diff_dst), m.get(Arg::src), d.local_size,
                                            d.alpha, d.beta, d.k);
    case Op::shuffle:
      return fwd ? f.shuffle_forward_desc_init(&op.shuffle, prop, forward ? dst : m.get(Arg::src), d.axis,
                                               d.group_size)
                 : f.shuffle_backward_desc_init(&op.shuffle, m.get(Arg::diff_dst), d.axis, d.group_size);
    case Op::resampling:
      return fwd ? f.resampling_forward_desc_init(&op.resampling, prop, alg, nullptr, src, dst)
                 : f.resampling_backward_desc_init(&op.resampling, alg, nullptr, src, dst);
    case Op::reduction:
      return f.reduction_desc_init(&op.reduction, alg, m.get(Arg::src), m.get(Arg::dst), d.alpha, d.beta);
    case Op::prelu:
      return fwd ? f.prelu_forward_desc_init(&op.prelu, prop, m.get(Arg::src), m.get(Arg::weights))
                 : f.prelu_backward_desc_init(&op.prelu, m.get(Arg::src), m.get(Arg::weights),
                                              m.get(Arg::diff_src), m.get(Arg::diff_weights));
    default: return dnnl_unimplemented;
  }
}

// Fills `op` with the description's operation descriptor (`forward`: the forward pass of a
// backward one, for its hint). false when oneDNN refuses it (sum, concat and reorder are made
// directly, without one).
bool op_desc(const Api& api, const DnnApi& f, const Mds& m, bool forward, OpDesc& op) noexcept {
  switch (m.d.kind) {
    case Op::convolution:
    case Op::deconvolution:
    case Op::inner_product:
    case Op::matmul: return weighted_desc(api, f, m, forward, op) == dnnl_success;
    case Op::batch_normalization:
    case Op::layer_normalization: return norm_desc(f, m, forward, op) == dnnl_success;
    default: return other_desc(f, m, forward, op) == dnnl_success;
  }
}

// Output scale and post-ops, as the frontend read them. nullptr (and `ok`) when there are none.
dnnl_primitive_attr_t attributes(const Api& api, const DnnApi& f, const Mds& m, bool& ok) noexcept {
  const dnn::Desc& d = m.d;
  ok = true;
  if (d.output_scale == 1 && d.npost_ops == 0) return nullptr;
  dnnl_primitive_attr_t attr = nullptr;
  if (api.primitive_attr_create(&attr) != dnnl_success) return ok = false, nullptr;
  if (d.output_scale != 1 &&
      api.primitive_attr_set_output_scales(attr, 1, 0, &d.output_scale) != dnnl_success)
    ok = false;
  if (d.npost_ops > 0) {
    dnnl_post_ops_t po = nullptr;
    if (api.post_ops_create(&po) != dnnl_success) ok = false;
    for (int i = 0; ok && i < d.npost_ops; ++i) {
      const dnn::PostOp& p = d.post_ops[i];
      dnnl_status_t s = dnnl_unimplemented;
      if (p.kind == dnn::PostOp::Kind::sum)
        s = f.post_ops_append_sum_v2(po, p.scale, to_dt(p.sum_dtype));
      else if (p.kind == dnn::PostOp::Kind::eltwise)
        s = f.post_ops_append_eltwise(po, p.scale, to_alg(p.alg), p.alpha, p.beta);
      else if (const md_t* src1 = m.get(dnn::Arg::post_op_src, i))
        s = f.post_ops_append_binary(po, to_alg(p.alg), src1);
      ok = s == dnnl_success;
    }
    if (ok && api.primitive_attr_set_post_ops(attr, po) != dnnl_success) ok = false;
    if (po) api.post_ops_destroy(po);
  }
  return attr;
}

}  // namespace

std::shared_ptr<DnnPrimitives::Entry> DnnPrimitives::create(const dnn::Desc& d) noexcept {
  if (d.unsupported || d.kind == Op::rnn) return nullptr;
  for (int i = 0; i < d.ntensors; ++i)
    if (to_dt(d.tensors[i].desc.dtype) == dnnl_data_type_undef) return nullptr;
  const Mds m(d);
  bool ok = true;
  dnnl_primitive_attr_t attr = attributes(api_, dnn_, m, ok);
  auto e = std::make_shared<Entry>();
  dnnl_primitive_desc_t hint = nullptr;
  if (ok) {
    if (d.kind == Op::sum || d.kind == Op::concat) {
      md_t srcs[dnn::kMaxTensors];
      float scales[dnn::kMaxTensors];
      int n = 0;
      for (int i = 0; i < d.ntensors; ++i)
        if (d.tensors[i].arg == dnn::Arg::multi_src) {
          scales[n] = d.sum_scales[d.tensors[i].index];
          srcs[n++] = m.at[i];
        }
      ok = (d.kind == Op::sum
                ? dnn_.sum_primitive_desc_create(&e->pd, m.get(dnn::Arg::dst), n, scales, srcs, attr, engine_)
                : dnn_.concat_primitive_desc_create(&e->pd, m.get(dnn::Arg::dst), n, d.axis, srcs, attr,
                                                    engine_)) == dnnl_success;
    } else if (d.kind == Op::reorder) {
      ok = dnn_.reorder_primitive_desc_create(&e->pd, m.get(dnn::Arg::src), engine_, m.get(dnn::Arg::dst),
                                              engine_, attr) == dnnl_success;
    } else {
      OpDesc op, fwd;
      ok = op_desc(api_, dnn_, m, false, op);
      if (ok && is_backward(d.prop))
        ok = op_desc(api_, dnn_, m, true, fwd) &&
             api_.primitive_desc_create(&hint, &fwd, nullptr, engine_, nullptr) == dnnl_success;
      ok = ok && api_.primitive_desc_create(&e->pd, &op, attr, engine_, hint) == dnnl_success;
    }
  }
  if (hint) api_.primitive_desc_destroy(hint);
  if (attr) api_.primitive_attr_destroy(attr);
  if (!ok || api_.primitive_create(&e->primitive, e->pd) != dnnl_success) {
    if (e->pd) api_.primitive_desc_destroy(e->pd);
    return nullptr;
  }
  // A memory object per tensor: the description's layout, the primitive's own for its workspace
  // (whose format only the implementation knows), which must fit in the node's buffer.
  for (int i = 0; i < d.ntensors; ++i) {
    const dnn::Tensor& t = d.tensors[i];
    md_t md = to_md(t.desc);
    if (t.arg == dnn::Arg::workspace) {
      const md_t* ws = dnn_.primitive_desc_query_md(e->pd, dnnl_query_workspace_md, 0);
      if (!ws || dnn_.memory_desc_get_size(ws) > t.desc.bytes) return nullptr;
      md = *ws;
    }
    e->args[e->n] = exec_arg(t);
    if (api_.memory_create(&e->memory[e->n], &md, engine_, DNNL_MEMORY_NONE) != dnnl_success) return nullptr;
    ++e->n;
  }
  return e;
}

std::shared_ptr<DnnPrimitives::Entry> DnnPrimitives::entry(const dnn::Desc& desc) noexcept {
  // A primitive divides its work by the caller's OpenMP team as it is when it is made, and a
  // reduction split that way gives other bits than one split for another team: one per team size.
  const int team = api_.omp_get_max_threads ? api_.omp_get_max_threads() : 0;
  const uint64_t key = dnn::content_key(desc) ^ (static_cast<uint64_t>(team) * 0x9e3779b97f4a7c15ull);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::shared_ptr<Entry> e = create(desc);
  try {
    if (cache_.size() >= 4096) cache_.clear();  // primitives stay alive while an execution holds them
    cache_.emplace(key, e);                     // a failure too: asked again, it fails at once
  } catch (...) {
  }
  return e;
}

Reason DnnPrimitives::supports(const dnn::Desc& desc) noexcept {
  if (desc.unsupported || desc.kind == Op::rnn) return Reason::op_unsupported;
  for (int i = 0; i < desc.ntensors; ++i)
    if (to_dt(desc.tensors[i].desc.dtype) == dnnl_data_type_undef) return Reason::dtype_unsupported;
  return entry(desc) ? Reason::ok : Reason::desc_invalid;
}

Reason DnnPrimitives::run(const dnn::Call& call) noexcept {
  std::shared_ptr<Entry> e = entry(*call.desc);
  if (!e) return Reason::desc_invalid;
  dnnl_exec_arg_t args[dnn::kMaxTensors];
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < e->n; ++i) {
    if (dnn_.memory_set_data_handle(e->memory[i], call.data[i]) != dnnl_success)
      return Reason::internal_error;
    args[i] = {e->args[i], e->memory[i]};
  }
  if (api_.primitive_execute(e->primitive, stream_, e->n, args) != dnnl_success)
    return Reason::internal_error;
  return api_.stream_wait(stream_) == dnnl_success ? Reason::ok : Reason::internal_error;
}

}  // namespace sol::backends::onednn
