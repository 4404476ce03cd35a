#include "backends/cuda/dnn_plan.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "backends/common/dnn_kinds.hpp"
#include "capture/dnn/validate.hpp"

namespace sol::backends::cuda::dnn {
namespace {

using capture::DType;
using capture::Op;
using hal::Reason;
using ir::Alg;
using ir::Arg;
using ir::Desc;
using ir::Layout;
using ir::Prop;
using ir::TensorDesc;
using ir::extent;
using ir::padded_elements;
using ir::count_sources;
using ir::forward;
using ir::same_dims;

bool fits_int(int64_t v) noexcept {
  return v >= 0 && v <= INT_MAX;
}

// Dense strides of `dims` in the order `perm` (nullptr: identity), per logical dim.
void dense_strides(int n, const int64_t* dims, const int* perm, int64_t* out) noexcept {
  int64_t stride = 1;
  for (int k = n - 1; k >= 0; --k) {
    const int d = perm ? perm[k] : k;
    out[d] = stride;
    stride *= dims[d];
  }
}

// The view pairing layout `l` with a dense array of strides `dense` per logical dim (of l.dims for
// a plain layout, of l.padded for a blocked one).
bool make_view(const Layout& l, const int64_t* dense, View& v) noexcept {
  struct Sub {
    int64_t size, stride, dense;
  };
  Sub subs[ir::kMaxDims + ir::kMaxBlocks];
  int count = 0;
  int64_t inner[ir::kMaxBlocks];  // the stride of each inner block's index
  for (int b = l.nblocks - 1, s = 1; b >= 0; --b) {
    inner[b] = s;
    s *= static_cast<int>(l.block[b]);
  }
  for (int d = 0; d < l.ndims; ++d) {
    int64_t blocked = 1;
    for (int b = 0; b < l.nblocks; ++b)
      if (l.block_dim[b] == d) blocked *= l.block[b];
    const int64_t size = l.plain() ? l.dims[d] : l.padded[d];
    subs[count++] = {size / blocked, l.strides[d], dense[d] * blocked};
    // The blocks of d, outermost first: the remainders of the index, each weighing the product of
    // the later blocks of d in the dense array.
    for (int b = 0; b < l.nblocks; ++b) {
      if (l.block_dim[b] != d) continue;
      int64_t later = 1;
      for (int c = b + 1; c < l.nblocks; ++c)
        if (l.block_dim[c] == d) later *= l.block[c];
      subs[count++] = {l.block[b], inner[b], dense[d] * later};
    }
  }
  v = View{};
  v.offset = l.offset0;
  for (int i = 0; i < count; ++i) {
    if (subs[i].size == 1) continue;
    if (v.ndims == kViewDims) return false;
    if (!fits_int(subs[i].size) || !fits_int(subs[i].stride) || !fits_int(subs[i].dense) || subs[i].stride < 1)
      return false;
    v.dims[v.ndims] = static_cast<int>(subs[i].size);
    v.strides[v.ndims] = static_cast<int>(subs[i].stride);
    v.dense[v.ndims] = static_cast<int>(subs[i].dense);
    ++v.ndims;
  }
  while (v.ndims < 4) {
    v.dims[v.ndims] = v.strides[v.ndims] = v.dense[v.ndims] = 1;
    ++v.ndims;
  }
  return true;
}

// Whether the layout is one Layout::offset() addresses inside the tensor's buffer, without padding
// where it is plain.
bool cudnn_addressable(const TensorDesc& t, const void* data) noexcept {
  if (!ir::addressable(t, data)) return false;
  // A plain layout here has no padding (cuDNN's tensor descriptors describe dims and strides).
  const Layout& l = t.layout;
  for (int d = 0; d < l.ndims; ++d)
    if (l.plain() && l.padded[d] != l.dims[d]) return false;
  return true;
}

// ---------------------------------------------------------------------------------- geometry

// The window (capture/dnn/validate.hpp) at cuDNN's positions: nsp of them (1-D: H = 1 before W),
// padding pad_l on both sides, since cuDNN pads symmetrically. Asymmetric padding is taken where
// the window positions are the same as with pad_l on both sides: the output size the symmetric
// padding gives is y's (oneDNN's pad_r is then only what the last window does not reach past).
Reason cudnn_window(const ir::Window& w, int nsp, int* xs, int* ys, int* k, int* pad, int* stride, int* dil,
                    bool dilation_allowed) noexcept {
  for (int a = 0; a < nsp; ++a) {
    const int at = 3 - nsp + a;  // Window's dims are right-aligned in (D, H, W)
    if (w.d[at] != 1 && !dilation_allowed) return Reason::geometry_unsupported;
    const int64_t sym = w.x[at] + 2 * w.p[at] - ((w.k[at] - 1) * w.d[at] + 1);
    if (sym < 0 || sym / w.s[at] + 1 != w.y[at]) return Reason::geometry_unsupported;
    for (int64_t v : {w.x[at], w.y[at], w.k[at], w.s[at], w.d[at], w.p[at]})
      if (!fits_int(v)) return Reason::too_large;
    xs[a] = static_cast<int>(w.x[at]), ys[a] = static_cast<int>(w.y[at]), k[a] = static_cast<int>(w.k[at]);
    stride[a] = static_cast<int>(w.s[at]), dil[a] = static_cast<int>(w.d[at]);
    pad[a] = static_cast<int>(w.p[at]);
  }
  return Reason::ok;
}

// ------------------------------------------------------------------------------------- checks

Reason check_post_op_support(const Desc& d) noexcept {
  for (int i = 0; i < d.npost_ops; ++i) {
    const ir::PostOp& po = d.post_ops[i];
    switch (po.kind) {
      case ir::PostOp::Kind::sum:
        if (po.sum_dtype != DType::none && po.sum_dtype != DType::f32) return Reason::attr_unsupported;
        break;
      case ir::PostOp::Kind::eltwise: {
        EltPlan e;
        if (Reason r = plan_eltwise(po.alg, po.alpha, po.beta, false, e); r != Reason::ok) return r;
        break;
      }
      case ir::PostOp::Kind::binary: {
        BinPlan b;
        if (Reason r = plan_binary(po.alg, b); r != Reason::ok) return r;
        const TensorDesc* dst = d.desc(Arg::dst);
        if (dst && dst->layout.ndims > 5) return Reason::layout_unsupported;  // cudnnOpTensor: 5 dims
        break;
      }
    }
  }
  return Reason::ok;
}

Reason check_ip(const Desc& d) noexcept {
  if (Reason r = ir::check_ip_tensors(d); r != Reason::ok) return r;
  ir::IpGeometry g;
  ir::ip_geometry(d, g);
  for (int64_t v : {g.n, g.o, g.k})
    if (!fits_int(v)) return Reason::too_large;
  return Reason::ok;
}

Reason check_matmul(const Desc& d) noexcept {
  if (Reason r = ir::check_matmul_tensors(d); r != Reason::ok) return r;
  const TensorDesc *a = d.desc(Arg::src), *b = d.desc(Arg::weights), *y = d.desc(Arg::dst);
  const int nd = y->layout.ndims;
  const int64_t *ad = a->layout.dims, *yd = y->layout.dims;
  for (int64_t v : {yd[nd - 2], yd[nd - 1], ad[nd - 1], a->layout.elements(), b->layout.elements(), y->layout.elements()})
    if (!fits_int(v)) return Reason::too_large;
  if (d.desc(Arg::bias) && nd > 5) return Reason::layout_unsupported;  // cudnnAddTensor: 5 dims
  return Reason::ok;
}

Reason check_eltwise(const Desc& d) noexcept {
  if (Reason r = ir::check_eltwise_tensors(d); r != Reason::ok) return r;
  EltPlan e;
  return plan_eltwise(d.alg, d.alpha, d.beta, !forward(d), e);
}

Reason check_bnorm(const Desc& d) noexcept {
  if (Reason r = ir::check_bnorm_tensors(d); r != Reason::ok) return r;
  const TensorDesc* x = d.desc(Arg::src);
  const int64_t c = x->layout.dims[1];
  // The fused ReLU's mask travels in a workspace from training to the backward pass.
  if (d.fuse_relu && d.prop != Prop::forward_inference) return Reason::workspace_unsupported;
  // cuDNN's backward pass differentiates through the batch statistics; with global statistics
  // they are constants.
  if (!forward(d) && d.global_stats) return Reason::flags_unsupported;
  // Training computes the variance from the running variance cuDNN keeps, which is unbiased:
  // 1 / (m - 1) needs two values per channel.
  const int64_t per_channel = x->layout.elements() / std::max<int64_t>(c, 1);
  if (forward(d) && !d.global_stats && per_channel < 2) return Reason::geometry_unsupported;
  if (!fits_int(c) || !fits_int(per_channel) || !fits_int(x->layout.dims[0])) return Reason::too_large;
  return Reason::ok;
}

Reason check_binary(const Desc& d) noexcept {
  if (Reason r = ir::check_binary_tensors(d); r != Reason::ok) return r;
  BinPlan p;
  if (Reason r = plan_binary(d.alg, p); r != Reason::ok) return r;
  // cudnnOpTensor broadcasts its second operand only, over at most 5 dims.
  const TensorDesc *a = d.desc(Arg::src), *y = d.desc(Arg::dst);
  if (!same_dims(*a, *y)) return Reason::geometry_unsupported;
  return y->layout.ndims <= 5 ? Reason::ok : Reason::layout_unsupported;
}

Reason check_sum(const Desc& d) noexcept {
  if (Reason r = ir::check_sum_tensors(d); r != Reason::ok) return r;
  return fits_int(d.desc(Arg::dst)->layout.elements()) ? Reason::ok : Reason::too_large;
}

Reason check_conv(const Desc& d) noexcept {
  ConvPlan p;
  return plan_conv(d, p);
}

Reason check_pooling(const Desc& d) noexcept {
  PoolPlan p;
  return plan_pool(d, p);
}

constexpr DnnKinds<DnnCheck> kChecks{
    .conv = check_conv,
    .ip = check_ip,
    .matmul = check_matmul,
    .eltwise = check_eltwise,
    .pooling = check_pooling,
    .bnorm = check_bnorm,
    .softmax = ir::check_softmax_tensors,
    .binary = check_binary,
    .sum = check_sum,
    .concat = ir::check_concat_tensors,
    .reorder = ir::check_reorder_tensors,
};

}  // namespace

bool plan_gather(const Layout& l, const int* perm, Gather& g) noexcept {
  g = Gather{};
  bool identity = true;
  if (perm)
    for (int k = 0; k < l.ndims; ++k) identity = identity && perm[k] == k;
  if (identity && dense_canonical(l)) return true;
  int64_t target[ir::kMaxDims];
  dense_strides(l.ndims, l.dims, perm, target);
  bool padded = false;
  for (int d = 0; d < l.ndims; ++d) padded = padded || (!l.plain() && l.padded[d] != l.dims[d]);
  if (!padded) {
    g.steps = 1;
    return make_view(l, target, g.first);
  }
  int64_t pstrides[ir::kMaxDims];
  dense_strides(l.ndims, l.padded, nullptr, pstrides);
  Layout p{};  // the dense array of the padded dims, cropped to the logical ones
  p.ndims = l.ndims;
  for (int d = 0; d < l.ndims; ++d) p.dims[d] = p.padded[d] = l.dims[d], p.strides[d] = pstrides[d];
  g.steps = 2;
  g.padded_elements = padded_elements(l);
  return make_view(l, pstrides, g.first) && make_view(p, target, g.second);
}

Reason plan_conv(const Desc& d, ConvPlan& p) noexcept {
  p = ConvPlan{};
  if (Reason r = ir::check_conv_tensors(d); r != Reason::ok) return r;
  ir::ConvGeometry g;
  ir::conv_geometry(d, g);
  const bool deconv = d.kind == Op::deconvolution;
  using Pass = ConvPlan::Pass;
  switch (d.prop) {
    case Prop::backward_data: p.pass = deconv ? Pass::forward : Pass::backward_data; break;
    case Prop::backward_weights: p.pass = Pass::backward_filter; break;
    default: p.pass = deconv ? Pass::backward_data : Pass::forward; break;
  }
  p.x = g.sides.x, p.y = g.sides.y, p.w = g.sides.w;
  p.nsp = d.nsp == 3 ? 3 : 2;
  int xs[3], ys[3], k[3];
  if (Reason r = cudnn_window(g, p.nsp, xs, ys, k, p.pad, p.stride, p.dilation, true); r != Reason::ok)
    return r;
  for (int64_t v : {g.n, g.g, g.g * g.cx, g.g * g.cy})
    if (!fits_int(v)) return Reason::too_large;
  p.groups = static_cast<int>(g.g);
  p.xdims[0] = p.ydims[0] = static_cast<int>(g.n);
  p.xdims[1] = static_cast<int>(g.g * g.cx);
  p.ydims[1] = static_cast<int>(g.g * g.cy);
  p.wdims[0] = static_cast<int>(g.g * g.cy);
  p.wdims[1] = static_cast<int>(g.cx);
  for (int a = 0; a < p.nsp; ++a) p.xdims[2 + a] = xs[a], p.ydims[2 + a] = ys[a], p.wdims[2 + a] = k[a];
  // A deconvolution's weights (G,) O, I, spatial are its convolution's (G,) I, O, spatial.
  p.transpose_w = deconv;
  const int w0 = g.grouped ? 1 : 0;
  for (int i = 0; i < d.desc(p.w)->layout.ndims; ++i) p.wperm[i] = i;
  if (deconv) std::swap(p.wperm[w0], p.wperm[w0 + 1]);
  if (d.desc(d.prop == Prop::backward_weights ? Arg::diff_bias : Arg::bias))
    p.bias_channels = static_cast<int>(g.out_channels(deconv));
  return Reason::ok;
}

Reason plan_pool(const Desc& d, PoolPlan& p) noexcept {
  p = PoolPlan{};
  switch (d.alg) {
    case Alg::pool_max: p.mode = CUDNN_POOLING_MAX_DETERMINISTIC; break;
    case Alg::pool_avg_include_padding: p.mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING; break;
    case Alg::pool_avg_exclude_padding: p.mode = CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING; break;
    default: return Reason::desc_invalid;
  }
  if (!forward(d) && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  // Max pooling trains with the positions of the maxima in a workspace of SOL's format, which
  // cuDNN does not produce (its backward pass recomputes them from x and y instead).
  if (d.alg == Alg::pool_max && d.prop != Prop::forward_inference) return Reason::workspace_unsupported;
  ir::PoolGeometry g;
  if (!ir::pool_geometry(d, g)) return Reason::desc_invalid;
  p.nsp = d.nsp == 3 ? 3 : 2;
  int xs[3], ys[3], dil[3];
  if (Reason r = cudnn_window(g, p.nsp, xs, ys, p.window, p.pad, p.stride, dil, false); r != Reason::ok)
    return r;
  if (!fits_int(g.n) || !fits_int(g.c)) return Reason::too_large;
  p.xdims[0] = p.ydims[0] = static_cast<int>(g.n);
  p.xdims[1] = p.ydims[1] = static_cast<int>(g.c);
  for (int a = 0; a < p.nsp; ++a) p.xdims[2 + a] = xs[a], p.ydims[2 + a] = ys[a];
  return Reason::ok;
}

Reason plan_eltwise(Alg alg, float alpha, float beta, bool backward, EltPlan& p) noexcept {
  using Kind = EltPlan::Kind;
  p = EltPlan{};
  p.alpha = alpha, p.beta = beta;
  auto activation = [&](cudnnActivationMode_t mode, double coef, bool recompute) {
    p.kind = Kind::activation, p.mode = mode, p.coef = coef, p.recompute_y = recompute;
    return Reason::ok;
  };
  switch (alg) {
    case Alg::relu:
    case Alg::relu_dst:
      // cuDNN's ReLU has no negative slope; x > 0 where y > 0, so either one serves backward.
      if (alpha == 0) return activation(CUDNN_ACTIVATION_RELU, 0, false);
      if (backward || alg == Alg::relu_dst) return Reason::alg_unsupported;
      p.kind = alpha <= 1 ? Kind::max_scaled : Kind::min_scaled;
      return Reason::ok;
    case Alg::tanh: return activation(CUDNN_ACTIVATION_TANH, 0, true);
    case Alg::logistic: return activation(CUDNN_ACTIVATION_SIGMOID, 0, true);
    case Alg::elu: return activation(CUDNN_ACTIVATION_ELU, alpha, true);
    case Alg::bounded_relu:
      if (alpha <= 0) return Reason::alg_unsupported;
      return activation(CUDNN_ACTIVATION_CLIPPED_RELU, alpha, true);
    case Alg::swish:
      p.swish_beta = alpha;
      return activation(CUDNN_ACTIVATION_SWISH, 0, true);
    default: break;
  }
  if (backward) return Reason::alg_unsupported;
  switch (alg) {
    case Alg::linear: p.kind = Kind::linear; return Reason::ok;
    case Alg::square: p.kind = Kind::square; return Reason::ok;
    case Alg::sqrt: p.kind = Kind::sqrt; return Reason::ok;
    case Alg::clip:
    case Alg::clip_v2:  // the same values forward: only the backward pass treats the bounds apart
      if (alpha == 0 && beta > 0) return activation(CUDNN_ACTIVATION_CLIPPED_RELU, beta, false);
      p.kind = Kind::clip;
      return Reason::ok;
    default: return Reason::alg_unsupported;  // gelu, exp, log, soft_relu, mish, hardswish, pow...
  }
}

Reason plan_binary(Alg alg, BinPlan& p) noexcept {
  p = BinPlan{};
  switch (alg) {
    case Alg::add: p.op = CUDNN_OP_TENSOR_ADD; return Reason::ok;
    case Alg::sub: p.op = CUDNN_OP_TENSOR_ADD, p.alpha2 = -1; return Reason::ok;
    case Alg::mul: p.op = CUDNN_OP_TENSOR_MUL; return Reason::ok;
    case Alg::max: p.op = CUDNN_OP_TENSOR_MAX; return Reason::ok;
    case Alg::min: p.op = CUDNN_OP_TENSOR_MIN; return Reason::ok;
    default: return Reason::alg_unsupported;  // div and the comparisons
  }
}

Reason check(const capture::Node& node, size_t device_memory) noexcept {
  if (Reason r = ir::check_node(node); r != Reason::ok) return r;
  const ir::Call* call = node.dnn;
  const Desc& d = *call->desc;
  size_t total = 0;
  for (int i = 0; i < d.ntensors; ++i) {
    const TensorDesc& t = d.tensors[i].desc;
    // A workspace would be in SOL's own format (pooling maxima, a fused ReLU's mask), which the
    // reference backend and opencl share; cuDNN produces neither.
    if (d.tensors[i].arg == Arg::workspace) return Reason::workspace_unsupported;
    if (t.dtype != DType::f32) return Reason::dtype_unsupported;
    if (!cudnn_addressable(t, call->data[i])) return Reason::layout_unsupported;
    if (t.layout.elements() == 0) return Reason::geometry_unsupported;
    Gather g;
    if (!plan_gather(t.layout, nullptr, g)) return Reason::layout_unsupported;
    if (!fits_int(t.layout.elements()) || !fits_int(padded_elements(t.layout))) return Reason::too_large;
    total += buffer_bytes(t) + static_cast<size_t>(padded_elements(t.layout)) * 2 * sizeof(float);
  }
  if (total > device_memory) return Reason::too_large;
  if (Reason r = check_dnn_attributes(d); r != Reason::ok) return r;
  if (Reason r = check_post_op_support(d); r != Reason::ok) return r;
  return check_dnn_kind(kChecks, d);
}

}  // namespace sol::backends::cuda::dnn
