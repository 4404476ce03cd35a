// A oneDNN 2.x primitive descriptor as a framework-neutral DNN node (ir/dnn.hpp).
//
// The op descriptor says what the program asked for (geometry, flags, algorithm); the layouts are
// the primitive descriptor's own (dnnl_query_exec_arg_md), since the op descriptor may say "any".
// Everything oneDNN-specific ends here: zero-based dilations become factors, the 2x C
// "scaleshift" weights of normalizations become a scale and a shift tensor, v1 and v2 descriptors
// of one kind become one node kind.
#include <cmath>
#include <cstring>

#include "interpose/dnnl/detail.hpp"

namespace sol::interpose::dnnl::detail {
namespace {

namespace dnn = capture::dnn;
using capture::Op;
using md_t = dnnl_memory_desc_t;

DType to_dtype(dnnl_data_type_t t) noexcept {
  switch (t) {
    case dnnl_f32: return DType::f32;
    case dnnl_f16: return DType::f16;
    case dnnl_bf16: return DType::bf16;
    case dnnl_s32: return DType::s32;
    case dnnl_s8: return DType::s8;
    case dnnl_u8: return DType::u8;
    default: return DType::none;
  }
}

dnn::Alg eltwise_alg(dnnl_alg_kind_t a) noexcept {
  switch (a) {
    case dnnl_eltwise_relu: return dnn::Alg::relu;
    case dnnl_eltwise_tanh: return dnn::Alg::tanh;
    case dnnl_eltwise_elu: return dnn::Alg::elu;
    case dnnl_eltwise_square: return dnn::Alg::square;
    case dnnl_eltwise_abs: return dnn::Alg::abs;
    case dnnl_eltwise_sqrt: return dnn::Alg::sqrt;
    case dnnl_eltwise_linear: return dnn::Alg::linear;
    case dnnl_eltwise_bounded_relu: return dnn::Alg::bounded_relu;
    case dnnl_eltwise_soft_relu: return dnn::Alg::soft_relu;
    case dnnl_eltwise_logistic: return dnn::Alg::logistic;
    case dnnl_eltwise_exp: return dnn::Alg::exp;
    case dnnl_eltwise_gelu_tanh: return dnn::Alg::gelu_tanh;
    case dnnl_eltwise_gelu_erf: return dnn::Alg::gelu_erf;
    case dnnl_eltwise_swish: return dnn::Alg::swish;
    case dnnl_eltwise_log: return dnn::Alg::log;
    case dnnl_eltwise_clip: return dnn::Alg::clip;
    case dnnl_eltwise_clip_v2: return dnn::Alg::clip_v2;
    case dnnl_eltwise_pow: return dnn::Alg::pow;
    case dnnl_eltwise_round: return dnn::Alg::round;
    case dnnl_eltwise_logsigmoid: return dnn::Alg::logsigmoid;
    case dnnl_eltwise_mish: return dnn::Alg::mish;
    case dnnl_eltwise_hardswish: return dnn::Alg::hardswish;
    case dnnl_eltwise_relu_use_dst_for_bwd: return dnn::Alg::relu_dst;
    case dnnl_eltwise_tanh_use_dst_for_bwd: return dnn::Alg::tanh_dst;
    case dnnl_eltwise_elu_use_dst_for_bwd: return dnn::Alg::elu_dst;
    case dnnl_eltwise_sqrt_use_dst_for_bwd: return dnn::Alg::sqrt_dst;
    case dnnl_eltwise_logistic_use_dst_for_bwd: return dnn::Alg::logistic_dst;
    case dnnl_eltwise_exp_use_dst_for_bwd: return dnn::Alg::exp_dst;
    case dnnl_eltwise_clip_v2_use_dst_for_bwd: return dnn::Alg::clip_v2_dst;
    default: return dnn::Alg::none;
  }
}

dnn::Alg binary_alg(dnnl_alg_kind_t a) noexcept {
  switch (a) {
    case dnnl_binary_add: return dnn::Alg::add;
    case dnnl_binary_mul: return dnn::Alg::mul;
    case dnnl_binary_max: return dnn::Alg::max;
    case dnnl_binary_min: return dnn::Alg::min;
    case dnnl_binary_div: return dnn::Alg::div;
    case dnnl_binary_sub: return dnn::Alg::sub;
    case dnnl_binary_ge: return dnn::Alg::ge;
    case dnnl_binary_gt: return dnn::Alg::gt;
    case dnnl_binary_le: return dnn::Alg::le;
    case dnnl_binary_lt: return dnn::Alg::lt;
    case dnnl_binary_eq: return dnn::Alg::eq;
    case dnnl_binary_ne: return dnn::Alg::ne;
    default: return dnn::Alg::none;
  }
}

dnn::Alg other_alg(dnnl_alg_kind_t a) noexcept {
  switch (a) {
    case dnnl_pooling_max: return dnn::Alg::pool_max;
    case dnnl_pooling_avg_include_padding: return dnn::Alg::pool_avg_include_padding;
    case dnnl_pooling_avg_exclude_padding: return dnn::Alg::pool_avg_exclude_padding;
    case dnnl_lrn_across_channels: return dnn::Alg::lrn_across;
    case dnnl_lrn_within_channel: return dnn::Alg::lrn_within;
    case dnnl_resampling_nearest: return dnn::Alg::nearest;
    case dnnl_resampling_linear: return dnn::Alg::linear_interp;
    case dnnl_reduction_max: return dnn::Alg::reduce_max;
    case dnnl_reduction_min: return dnn::Alg::reduce_min;
    case dnnl_reduction_sum: return dnn::Alg::reduce_sum;
    case dnnl_reduction_mul: return dnn::Alg::reduce_mul;
    case dnnl_reduction_mean: return dnn::Alg::reduce_mean;
    case dnnl_reduction_norm_lp_max: return dnn::Alg::reduce_norm_lp_max;
    case dnnl_reduction_norm_lp_sum: return dnn::Alg::reduce_norm_lp_sum;
    case dnnl_reduction_norm_lp_power_p_max: return dnn::Alg::reduce_norm_lp_power_p_max;
    case dnnl_reduction_norm_lp_power_p_sum: return dnn::Alg::reduce_norm_lp_power_p_sum;
    default: return dnn::Alg::none;
  }
}

dnn::Prop to_prop(dnnl_prop_kind_t p) noexcept {
  switch (p) {
    case dnnl_forward_training: return dnn::Prop::forward_training;
    case dnnl_forward_inference: return dnn::Prop::forward_inference;
    case dnnl_backward_data: return dnn::Prop::backward_data;
    case dnnl_backward_weights: return dnn::Prop::backward_weights;
    case dnnl_backward: return dnn::Prop::backward;
    default: return dnn::Prop::none;
  }
}

// The SOL kind of a oneDNN primitive kind (v1 and v2 descriptors alike).
Op to_kind(dnnl_primitive_kind_t k, dnnl_alg_kind_t softmax_alg) noexcept {
  switch (k) {
    case dnnl_convolution: return Op::convolution;
    case dnnl_deconvolution: return Op::deconvolution;
    case dnnl_inner_product: return Op::inner_product;
    case dnnl_matmul: return Op::matmul;
    case dnnl_eltwise: return Op::eltwise;
    case dnnl_pooling:
    case dnnl_pooling_v2: return Op::pooling;
    case dnnl_batch_normalization: return Op::batch_normalization;
    case dnnl_layer_normalization: return Op::layer_normalization;
    case dnnl_softmax: return Op::softmax;
    case dnnl_logsoftmax: return Op::logsoftmax;
    case dnnl_softmax_v2: return softmax_alg == dnnl_softmax_log ? Op::logsoftmax : Op::softmax;
    case dnnl_binary: return Op::binary;
    case dnnl_sum: return Op::sum;
    case dnnl_concat: return Op::concat;
    case dnnl_reorder: return Op::reorder;
    case dnnl_lrn: return Op::lrn;
    case dnnl_shuffle: return Op::shuffle;
    case dnnl_resampling: return Op::resampling;
    case dnnl_reduction: return Op::reduction;
    case dnnl_prelu: return Op::prelu;
    case dnnl_rnn: return Op::rnn;
    default: return Op::dnnl_execute;
  }
}

// A oneDNN memory descriptor as a TensorDesc; nullptr when the IR cannot express it, else "".
const char* to_tensor(const Api& api, const md_t& md, dnn::TensorDesc& out) noexcept {
  if (md.format_kind != dnnl_blocked) return "a memory format other than plain or blocked strides";
  if (md.ndims <= 0 || md.ndims > dnn::kMaxDims) return "a tensor of more dimensions than SOL's IR holds";
  if (md.extra.flags != 0) return "a memory descriptor with extra flags (int8 compensation)";
  const dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  if (blk.inner_nblks > dnn::kMaxBlocks) return "more inner blocks than SOL's IR holds";
  out.dtype = to_dtype(md.data_type);
  if (out.dtype == DType::none) return "an element type SOL does not know";
  dnn::Layout& l = out.layout;
  l.ndims = md.ndims;
  for (int d = 0; d < md.ndims; ++d) {
    if (md.dims[d] == DNNL_RUNTIME_DIM_VAL || md.dims[d] < 0) return "runtime dimensions";
    if (md.padded_offsets[d] != 0) return "padded offsets";
    l.dims[d] = md.dims[d];
    l.padded[d] = md.padded_dims[d];
    l.strides[d] = blk.strides[d];
  }
  l.offset0 = md.offset0;
  l.nblocks = blk.inner_nblks;
  for (int b = 0; b < blk.inner_nblks; ++b) {
    l.block[b] = blk.inner_blks[b];
    l.block_dim[b] = static_cast<int8_t>(blk.inner_idxs[b]);
  }
  const size_t bytes = api.memory_desc_get_size(&md);
  if (bytes == DNNL_RUNTIME_SIZE_VAL) return "runtime dimensions";
  out.bytes = bytes;
  return "";
}

// The layout of a plain 1-D tensor of n f32 values.
dnn::TensorDesc vector_f32(int64_t n) noexcept {
  dnn::TensorDesc t;
  t.dtype = DType::f32;
  t.layout.ndims = 1;
  t.layout.dims[0] = t.layout.padded[0] = n;
  t.layout.strides[0] = 1;
  t.bytes = static_cast<size_t>(n) * sizeof(float);
  return t;
}

class Translator {
 public:
  Translator(const Api& api, const_dnnl_primitive_desc_t pd, const Description& info, dnn::Desc& node,
             Binding* bindings)
      : api_(api), pd_(pd), info_(info), node_(node), bindings_(bindings) {}

  void run() {
    node_.prop = to_prop(info_.prop);
    node_.dtype = info_.dtype;
    node_.flops = info_.flops;
    node_.bytes = info_.bytes;
    node_.shape = info_.shape;
    dnnl_alg_kind_t softmax_alg = dnnl_alg_kind_undef;
    if (info_.prim_kind == dnnl_softmax_v2 && info_.op_desc)
      softmax_alg = static_cast<const dnnl_softmax_v2_desc_t*>(info_.op_desc)->alg_kind;
    node_.kind = to_kind(info_.prim_kind, softmax_alg);
    if (node_.kind == Op::dnnl_execute) return fail("a primitive kind SOL does not know");
    if (node_.kind == Op::rnn) return fail("recurrent primitives are not DNN nodes yet");
    if (!engine_is_cpu()) return fail("a primitive of a non-CPU engine");
    if (!info_.op_desc && node_.kind != Op::sum && node_.kind != Op::concat && node_.kind != Op::reorder)
      return fail("its operation descriptor cannot be queried");
    if (!attributes()) return;
    if (!operation()) return;
    tensors();
  }

 private:
  void fail(const char* why) { node_.unsupported = why; }

  bool engine_is_cpu() const {
    dnnl_engine_t engine = nullptr;
    dnnl_engine_kind_t kind = dnnl_any_engine;
    if (api_.primitive_desc_query(pd_, dnnl_query_engine, 0, &engine) != dnnl_success || !engine) return false;
    return api_.engine_get_kind(engine, &kind) == dnnl_success && kind == dnnl_cpu;
  }

  // Output scales and post-ops; any other attribute of an f32 primitive is left at its default
  // by the frameworks (zero points and per-argument scales matter for int8, which SOL declines).
  bool attributes() {
    const_dnnl_primitive_attr_t attr = nullptr;
    if (api_.primitive_desc_get_attr(pd_, &attr) != dnnl_success || !attr) return true;
    dnnl_dim_t count = 0;
    int mask = 0;
    const float* scales = nullptr;
    if (api_.primitive_attr_get_output_scales(attr, &count, &mask, &scales) == dnnl_success && scales) {
      if (count != 1 || mask != 0) return fail("per-channel output scales"), false;
      if (std::isnan(scales[0])) return fail("output scales given at execution"), false;  // DNNL_RUNTIME_F32_VAL
      node_.output_scale = scales[0];
    }
    const_dnnl_post_ops_t po = nullptr;
    if (api_.primitive_attr_get_post_ops(attr, &po) != dnnl_success || !po) return true;
    const int n = api_.post_ops_len(po);
    if (n > dnn::kMaxPostOps) return fail("more post-ops than SOL's IR holds"), false;
    for (int i = 0; i < n; ++i) {
      dnn::PostOp& p = node_.post_ops[node_.npost_ops++];
      switch (api_.post_ops_get_kind(po, i)) {
        case dnnl_sum: {
          dnnl_data_type_t dt = dnnl_data_type_undef;
          p.kind = dnn::PostOp::Kind::sum;
          api_.post_ops_get_params_sum_v2(po, i, &p.scale, &dt);
          p.sum_dtype = to_dtype(dt);
          break;
        }
        case dnnl_eltwise: {
          dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
          p.kind = dnn::PostOp::Kind::eltwise;
          api_.post_ops_get_params_eltwise(po, i, &p.scale, &alg, &p.alpha, &p.beta);
          p.alg = eltwise_alg(alg);
          if (p.alg == dnn::Alg::none) return fail("an eltwise post-op SOL does not know"), false;
          break;
        }
        case dnnl_binary: {
          dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
          const md_t* src1 = nullptr;
          p.kind = dnn::PostOp::Kind::binary;
          api_.post_ops_get_params_binary(po, i, &alg, &src1);
          p.alg = binary_alg(alg);
          if (p.alg == dnn::Alg::none || !src1) return fail("a binary post-op SOL does not know"), false;
          const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1;
          if (!add(dnn::Arg::post_op_src, static_cast<uint8_t>(i), arg, query(arg))) return false;
          break;
        }
        default: return fail("a depthwise or prelu post-op"), false;
      }
    }
    return true;
  }

  const md_t* query(int arg) const noexcept {
    const md_t* md = api_.primitive_desc_query_md(pd_, dnnl_query_exec_arg_md, arg);
    return md && md->ndims > 0 ? md : nullptr;
  }

  // Appends a tensor bound to DNNL argument `arg`; a missing md adds nothing. False (and the node
  // unsupported) when the IR cannot hold it.
  bool add(dnn::Arg role, uint8_t index, int arg, const md_t* md, size_t offset = 0) {
    if (!md) return true;
    if (node_.ntensors == dnn::kMaxTensors) return fail("more tensors than SOL's IR holds"), false;
    dnn::Tensor& t = node_.tensors[node_.ntensors];
    t.arg = role;
    t.index = index;
    if (const char* why = to_tensor(api_, *md, t.desc); *why) return fail(why), false;
    bindings_[node_.ntensors++] = Binding{arg, offset};
    return true;
  }
  bool add(dnn::Arg role, int arg) { return add(role, 0, arg, query(arg)); }

  // oneDNN 2.x normalizations with use_scaleshift take one 2 x C f32 tensor: scale row, shift row.
  bool add_scaleshift(dnn::Arg scale, dnn::Arg shift, int arg) {
    const md_t* md = query(arg);
    if (!md) return true;
    if (md->ndims != 2 || md->dims[0] != 2 || md->data_type != dnnl_f32 || md->format_kind != dnnl_blocked ||
        md->format_desc.blocking.inner_nblks != 0 || md->format_desc.blocking.strides[1] != 1 ||
        md->format_desc.blocking.strides[0] != md->dims[1])
      return fail("a scale-and-shift tensor that is not a dense 2 x C array"), false;
    const int64_t c = md->dims[1];
    for (auto [role, offset] : {std::pair{scale, size_t{0}}, std::pair{shift, c * sizeof(float)}}) {
      if (node_.ntensors == dnn::kMaxTensors) return fail("more tensors than SOL's IR holds"), false;
      node_.tensors[node_.ntensors] = dnn::Tensor{role, 0, vector_f32(c)};
      bindings_[node_.ntensors++] = Binding{arg, offset};
    }
    return true;
  }

  void geometry(int ndims_src, const md_t* wei, const dnnl_dim_t* kernel, const dnnl_dim_t* strides,
                const dnnl_dim_t* dilates, const dnnl_dim_t (*padding)[DNNL_MAX_NDIMS]) {
    node_.nsp = ndims_src - 2;
    for (int i = 0; i < node_.nsp; ++i) {
      node_.kernel[i] = wei ? wei->dims[wei->ndims - node_.nsp + i] : kernel[i];
      node_.stride[i] = strides[i];
      node_.dilation[i] = dilates ? dilates[i] + 1 : 1;
      node_.pad_l[i] = padding[0][i];
      node_.pad_r[i] = padding[1][i];
    }
  }

  // Kind-specific parameters.
  bool operation() {
    const void* op = info_.op_desc;
    switch (node_.kind) {
      case Op::convolution:
      case Op::deconvolution: {
        const auto& d = *static_cast<const dnnl_convolution_desc_t*>(op);
        const md_t* src = d.src_desc.ndims ? &d.src_desc : &d.diff_src_desc;
        const md_t* wei = d.weights_desc.ndims ? &d.weights_desc : &d.diff_weights_desc;
        if (src->ndims < 3 || src->ndims > 5) return fail("a convolution of other than 1 to 3 spatial dims"), false;
        node_.alg = dnn::Alg::direct;
        node_.groups = wei->ndims == src->ndims + 1 ? wei->dims[0] : 1;
        geometry(src->ndims, wei, nullptr, d.strides, d.dilates, d.padding);
        return true;
      }
      case Op::pooling: {
        // pooling and pooling_v2 descriptors share their layout up to the v2's dilation.
        const auto& d = *static_cast<const dnnl_pooling_v2_desc_t*>(op);
        const md_t* src = d.src_desc.ndims ? &d.src_desc : &d.diff_src_desc;
        if (src->ndims < 3 || src->ndims > 5) return fail("pooling of other than 1 to 3 spatial dims"), false;
        node_.alg = other_alg(d.alg_kind);
        geometry(src->ndims, nullptr, d.kernel, d.strides,
                 info_.prim_kind == dnnl_pooling_v2 ? d.dilation : nullptr, d.padding);
        return true;
      }
      case Op::eltwise: {
        const auto& d = *static_cast<const dnnl_eltwise_desc_t*>(op);
        node_.alg = eltwise_alg(d.alg_kind);
        node_.alpha = d.alpha;
        node_.beta = d.beta;
        if (node_.alg == dnn::Alg::none) return fail("an eltwise algorithm SOL does not know"), false;
        return true;
      }
      case Op::batch_normalization: {
        const auto& d = *static_cast<const dnnl_batch_normalization_desc_t*>(op);
        return normalization(d.flags, d.batch_norm_epsilon);
      }
      case Op::layer_normalization: {
        const auto& d = *static_cast<const dnnl_layer_normalization_desc_t*>(op);
        return normalization(d.flags, d.layer_norm_epsilon);
      }
      case Op::softmax:
      case Op::logsoftmax:
        node_.axis = info_.prim_kind == dnnl_softmax_v2
                         ? static_cast<const dnnl_softmax_v2_desc_t*>(op)->softmax_axis
                         : static_cast<const dnnl_softmax_desc_t*>(op)->softmax_axis;
        return true;
      case Op::binary:
        node_.alg = binary_alg(static_cast<const dnnl_binary_desc_t*>(op)->alg_kind);
        if (node_.alg == dnn::Alg::none) return fail("a binary algorithm SOL does not know"), false;
        return true;
      case Op::lrn: {
        const auto& d = *static_cast<const dnnl_lrn_desc_t*>(op);
        node_.alg = other_alg(d.alg_kind);
        node_.local_size = d.local_size;
        node_.alpha = d.lrn_alpha;
        node_.beta = d.lrn_beta;
        node_.k = d.lrn_k;
        return true;
      }
      case Op::shuffle: {
        const auto& d = *static_cast<const dnnl_shuffle_desc_t*>(op);
        node_.axis = d.axis;
        node_.group_size = d.group_size;
        return true;
      }
      case Op::resampling:
        node_.alg = other_alg(static_cast<const dnnl_resampling_desc_t*>(op)->alg_kind);
        return true;
      case Op::reduction: {
        const auto& d = *static_cast<const dnnl_reduction_desc_t*>(op);
        node_.alg = other_alg(d.alg_kind);
        node_.alpha = d.p;
        node_.beta = d.eps;
        return true;
      }
      case Op::sum: {
        const int n = api_.primitive_desc_query_s32(pd_, dnnl_query_num_of_inputs_s32, 0);
        if (n <= 0 || n >= dnn::kMaxTensors) return fail("a sum of more sources than SOL's IR holds"), false;
        if (!sum_scales(pd_, node_.sum_scales, n))
          return fail("a sum whose scales SOL did not see (its descriptor was not created through SOL)"), false;
        return true;
      }
      case Op::concat: return concat_axis();
      default: return true;  // inner_product, matmul, reorder, prelu: their tensors say everything
    }
  }

  bool normalization(unsigned flags, float epsilon) {
    node_.epsilon = epsilon;
    node_.global_stats = flags & dnnl_use_global_stats;
    node_.use_scale = flags & (dnnl_use_scaleshift | dnnl_use_scale);
    node_.use_shift = flags & (dnnl_use_scaleshift | dnnl_use_shift);
    node_.fuse_relu = flags & dnnl_fuse_norm_relu;
    return true;
  }

  // The concatenation axis is not in the public API; it is the dimension along which the
  // sources' sizes add up to the destination's while every other dimension agrees.
  bool concat_axis() {
    const md_t* dst = query(DNNL_ARG_DST);
    const int n = api_.primitive_desc_query_s32(pd_, dnnl_query_num_of_inputs_s32, 0);
    if (!dst || n <= 0 || n >= dnn::kMaxTensors) return fail("a concat SOL cannot read"), false;
    for (int d = 0; d < dst->ndims; ++d) {
      int64_t total = 0;
      bool others_agree = true;
      for (int i = 0; i < n; ++i) {
        const md_t* src = query(DNNL_ARG_MULTIPLE_SRC + i);
        if (!src || src->ndims != dst->ndims) return fail("a concat SOL cannot read"), false;
        total += src->dims[d];
        for (int e = 0; e < dst->ndims; ++e)
          if (e != d && src->dims[e] != dst->dims[e]) others_agree = false;
      }
      if (others_agree && total == dst->dims[d]) {
        node_.axis = d;
        return true;
      }
    }
    return fail("a concat whose axis SOL cannot tell"), false;
  }

  // Every memory argument of the primitive, by role.
  void tensors() {
    const bool norm = node_.kind == Op::batch_normalization || node_.kind == Op::layer_normalization;
    if (norm && info_.op_desc) {
      const unsigned f = node_.kind == Op::batch_normalization
                             ? static_cast<const dnnl_batch_normalization_desc_t*>(info_.op_desc)->flags
                             : static_cast<const dnnl_layer_normalization_desc_t*>(info_.op_desc)->flags;
      if (f & dnnl_use_scaleshift) {
        if (!add_scaleshift(dnn::Arg::scale, dnn::Arg::shift, DNNL_ARG_WEIGHTS)) return;
        if (!add_scaleshift(dnn::Arg::diff_scale, dnn::Arg::diff_shift, DNNL_ARG_DIFF_WEIGHTS)) return;
      } else {
        if (f & dnnl_use_scale) {
          if (!add(dnn::Arg::scale, DNNL_ARG_SCALE)) return;
          if (!add(dnn::Arg::diff_scale, DNNL_ARG_DIFF_SCALE)) return;
        }
        if (f & dnnl_use_shift) {
          if (!add(dnn::Arg::shift, DNNL_ARG_SHIFT)) return;
          if (!add(dnn::Arg::diff_shift, DNNL_ARG_DIFF_SHIFT)) return;
        }
      }
      // oneDNN answers for mean and variance whether or not they are arguments.
      if (node_.global_stats || node_.prop != dnn::Prop::forward_inference) {
        if (!add(dnn::Arg::mean, DNNL_ARG_MEAN) || !add(dnn::Arg::variance, DNNL_ARG_VARIANCE)) return;
      }
    }
    static constexpr struct {
      dnn::Arg role;
      int arg;
      bool norm;  // also for normalizations (their weights are scale and shift, handled above)
    } kRoles[] = {
        {dnn::Arg::src, DNNL_ARG_SRC, true},
        {dnn::Arg::src1, DNNL_ARG_SRC_1, false},
        {dnn::Arg::weights, DNNL_ARG_WEIGHTS, false},
        {dnn::Arg::bias, DNNL_ARG_BIAS, false},
        {dnn::Arg::dst, DNNL_ARG_DST, true},
        {dnn::Arg::diff_src, DNNL_ARG_DIFF_SRC, true},
        {dnn::Arg::diff_weights, DNNL_ARG_DIFF_WEIGHTS, false},
        {dnn::Arg::diff_bias, DNNL_ARG_DIFF_BIAS, false},
        {dnn::Arg::diff_dst, DNNL_ARG_DIFF_DST, true},
        {dnn::Arg::workspace, DNNL_ARG_WORKSPACE, true},
    };
    for (const auto& r : kRoles)
      if ((!norm || r.norm) && !add(r.role, r.arg)) return;
    if (node_.kind == Op::sum || node_.kind == Op::concat) {
      const int n = api_.primitive_desc_query_s32(pd_, dnnl_query_num_of_inputs_s32, 0);
      for (int i = 0; i < n; ++i)
        if (!add(dnn::Arg::multi_src, static_cast<uint8_t>(i), DNNL_ARG_MULTIPLE_SRC + i,
                 query(DNNL_ARG_MULTIPLE_SRC + i)))
          return;
    }
    if (node_.ntensors > 0) node_.dtype = node_.tensors[0].desc.dtype;
    for (int i = 0; i < node_.ntensors; ++i)
      if (node_.tensors[i].arg == dnn::Arg::src || node_.tensors[i].arg == dnn::Arg::multi_src ||
          node_.tensors[i].arg == dnn::Arg::diff_dst) {
        node_.dtype = node_.tensors[i].desc.dtype;
        break;
      }
  }

  const Api& api_;
  const_dnnl_primitive_desc_t pd_;
  const Description& info_;
  dnn::Desc& node_;
  Binding* bindings_;
};

}  // namespace

void translate(const Api& api, const_dnnl_primitive_desc_t pd, const Description& info, capture::dnn::Desc& node,
               Binding* bindings) {
  Translator(api, pd, info, node, bindings).run();
}

}  // namespace sol::interpose::dnnl::detail
