#include "capture/dnn/validate.hpp"

#include <string_view>

namespace sol::capture::dnn {

using hal::Reason;

bool is_eltwise(Alg a) noexcept {
  return a >= Alg::relu && a <= Alg::clip_v2_dst;
}
bool uses_dst(Alg a) noexcept {
  return a >= Alg::relu_dst && a <= Alg::clip_v2_dst;
}
bool is_binary(Alg a) noexcept {
  return a >= Alg::add && a <= Alg::ne;
}

bool broadcasts_to(const TensorDesc& b, const TensorDesc& a) noexcept {
  if (a.layout.ndims != b.layout.ndims) return false;
  for (int d = 0; d < a.layout.ndims; ++d)
    if (b.layout.dims[d] != a.layout.dims[d] && b.layout.dims[d] != 1) return false;
  return true;
}

hal::Reason check_node(const Node& node) noexcept {
  if (std::string_view(op_family(node.op)) != "dnn") return Reason::op_unsupported;
  const Call* call = node.dnn;
  // An unbound call (its memory did not match the description) has no data pointers to run on.
  if (!call || !call->desc || call->unbound || call->desc->kind != node.op) return Reason::desc_invalid;
  const Desc& d = *call->desc;
  if (d.unsupported) return Reason::desc_invalid;  // the frontend could not describe it fully
  if (d.ntensors < 0 || d.ntensors > kMaxTensors) return Reason::desc_invalid;
  return Reason::ok;
}

hal::Reason check_post_ops(const Desc& d) noexcept {
  if (d.npost_ops < 0 || d.npost_ops > kMaxPostOps) return Reason::attr_unsupported;
  const TensorDesc* dst = d.desc(Arg::dst);
  if (!dst) return Reason::desc_invalid;
  for (int p = 0; p < d.npost_ops; ++p) {
    const PostOp& po = d.post_ops[p];
    switch (po.kind) {
      case PostOp::Kind::sum:
        if (po.sum_dtype != DType::none && po.sum_dtype != dst->dtype) return Reason::attr_unsupported;
        break;
      case PostOp::Kind::eltwise:
        if (!is_eltwise(po.alg)) return Reason::attr_unsupported;
        break;
      case PostOp::Kind::binary: {
        const TensorDesc* src = d.desc(Arg::post_op_src, p);
        if (!is_binary(po.alg) || !src) return Reason::attr_unsupported;
        if (!broadcasts_to(*src, *dst)) return Reason::desc_invalid;
        break;
      }
      default: return Reason::attr_unsupported;
    }
  }
  return Reason::ok;
}

bool forward(const Desc& d) noexcept {
  return d.prop == Prop::forward_training || d.prop == Prop::forward_inference;
}

bool same_dims(const TensorDesc& a, const TensorDesc& b) noexcept {
  if (a.layout.ndims != b.layout.ndims) return false;
  for (int d = 0; d < a.layout.ndims; ++d)
    if (a.layout.dims[d] != b.layout.dims[d]) return false;
  return true;
}

int count_sources(const Desc& d) noexcept {
  int n = 0;
  while (d.find(Arg::multi_src, n) >= 0) ++n;
  return n;
}

hal::Reason check_softmax_tensors(const Desc& d) noexcept {
  if (!forward(d) && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  const TensorDesc* dst = d.desc(Arg::dst);
  if (!dst || d.axis < 0 || d.axis >= dst->layout.ndims) return Reason::desc_invalid;
  for (Arg a : {forward(d) ? Arg::src : Arg::diff_dst, forward(d) ? Arg::src : Arg::diff_src}) {
    const TensorDesc* t = d.desc(a);
    if (!t || !same_dims(*t, *dst)) return Reason::desc_invalid;
  }
  return Reason::ok;
}

hal::Reason check_sum_tensors(const Desc& d) noexcept {
  const TensorDesc* y = d.desc(Arg::dst);
  const int n = count_sources(d);
  if (!y || n == 0) return Reason::desc_invalid;
  for (int i = 0; i < n; ++i)
    if (!same_dims(*d.desc(Arg::multi_src, i), *y)) return Reason::desc_invalid;
  return Reason::ok;
}

hal::Reason check_concat_tensors(const Desc& d) noexcept {
  const TensorDesc* y = d.desc(Arg::dst);
  const int n = count_sources(d);
  if (!y || n == 0 || d.axis < 0 || d.axis >= y->layout.ndims) return Reason::desc_invalid;
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const Layout& l = d.desc(Arg::multi_src, i)->layout;
    if (l.ndims != y->layout.ndims) return Reason::desc_invalid;
    for (int k = 0; k < l.ndims; ++k)
      if (k != d.axis && l.dims[k] != y->layout.dims[k]) return Reason::desc_invalid;
    total += l.dims[d.axis];
  }
  return total == y->layout.dims[d.axis] ? Reason::ok : Reason::desc_invalid;
}

hal::Reason check_reorder_tensors(const Desc& d) noexcept {
  const TensorDesc *x = d.desc(Arg::src), *y = d.desc(Arg::dst);
  return x && y && same_dims(*x, *y) ? Reason::ok : Reason::desc_invalid;
}

hal::Reason check_bnorm_tensors(const Desc& d) noexcept {
  if (!forward(d) && d.prop != Prop::backward && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  const TensorDesc* x = d.desc(Arg::src);
  const TensorDesc* y = d.desc(forward(d) ? Arg::dst : Arg::diff_dst);
  if (!x || !y || !same_dims(*x, *y) || x->layout.ndims < 2) return Reason::desc_invalid;
  const int64_t c = x->layout.dims[1];
  const bool stats_in = d.global_stats || !forward(d);
  for (Arg a : {Arg::mean, Arg::variance}) {
    const TensorDesc* t = d.desc(a);
    if ((stats_in && !t) || (t && t->layout.elements() != c)) return Reason::desc_invalid;
  }
  for (Arg a : {Arg::scale, Arg::shift, Arg::diff_scale, Arg::diff_shift})
    if (const TensorDesc* t = d.desc(a); t && t->layout.elements() != c) return Reason::desc_invalid;
  if (d.use_scale && !d.desc(Arg::scale)) return Reason::desc_invalid;
  if (d.use_shift && forward(d) && !d.desc(Arg::shift)) return Reason::desc_invalid;
  if (!forward(d) && (!d.desc(Arg::diff_src) || !same_dims(*d.desc(Arg::diff_src), *x))) return Reason::desc_invalid;
  return Reason::ok;
}

hal::Reason check_eltwise_tensors(const Desc& d) noexcept {
  if (!is_eltwise(d.alg)) return Reason::desc_invalid;
  if (forward(d)) {
    const TensorDesc *src = d.desc(Arg::src), *dst = d.desc(Arg::dst);
    return src && dst && same_dims(*src, *dst) ? Reason::ok : Reason::desc_invalid;
  }
  if (d.prop != Prop::backward_data || d.alg == Alg::round) return Reason::prop_unsupported;
  const TensorDesc *x = d.desc(uses_dst(d.alg) ? Arg::dst : Arg::src), *dd = d.desc(Arg::diff_dst),
                   *ds = d.desc(Arg::diff_src);
  return x && dd && ds && same_dims(*x, *dd) && same_dims(*x, *ds) ? Reason::ok : Reason::desc_invalid;
}

hal::Reason check_binary_tensors(const Desc& d) noexcept {
  const TensorDesc *a = d.desc(Arg::src), *b = d.desc(Arg::src1), *y = d.desc(Arg::dst);
  if (!is_binary(d.alg) || !a || !b || !y) return Reason::desc_invalid;
  return broadcasts_to(*a, *y) && broadcasts_to(*b, *y) ? Reason::ok : Reason::desc_invalid;
}

hal::Reason check_matmul_tensors(const Desc& d) noexcept {
  if (d.prop != Prop::none && !forward(d)) return Reason::prop_unsupported;
  const TensorDesc *a = d.desc(Arg::src), *b = d.desc(Arg::weights), *y = d.desc(Arg::dst);
  if (!a || !b || !y) return Reason::desc_invalid;
  const int nd = y->layout.ndims;
  if (nd < 2 || a->layout.ndims != nd || b->layout.ndims != nd) return Reason::desc_invalid;
  const int64_t *ad = a->layout.dims, *bd = b->layout.dims, *yd = y->layout.dims;
  if (ad[nd - 2] != yd[nd - 2] || bd[nd - 1] != yd[nd - 1] || ad[nd - 1] != bd[nd - 2])
    return Reason::desc_invalid;
  for (int i = 0; i < nd - 2; ++i)
    if ((ad[i] != yd[i] && ad[i] != 1) || (bd[i] != yd[i] && bd[i] != 1)) return Reason::desc_invalid;
  if (const TensorDesc* bias = d.desc(Arg::bias))
    if (!broadcasts_to(*bias, *y)) return Reason::desc_invalid;
  return Reason::ok;
}

bool addressable(const TensorDesc& t, const void* data) noexcept {
  const Layout& l = t.layout;
  if (l.ndims < 1 || l.ndims > kMaxDims || l.nblocks < 0 || l.nblocks > kMaxBlocks) return false;
  int64_t blocked[kMaxDims];
  for (int d = 0; d < l.ndims; ++d) {
    if (l.dims[d] < 0 || l.padded[d] < l.dims[d] || l.strides[d] < 0) return false;
    blocked[d] = 1;
  }
  for (int b = 0; b < l.nblocks; ++b) {
    if (l.block_dim[b] < 0 || l.block_dim[b] >= l.ndims || l.block[b] < 1) return false;
    blocked[l.block_dim[b]] *= l.block[b];
  }
  for (int d = 0; d < l.ndims; ++d)
    if (l.padded[d] % blocked[d]) return false;
  if (padded_elements(l) == 0) return true;
  if (!data || l.offset0 < 0) return false;
  return t.bytes == 0 || static_cast<size_t>(extent(l)) * dtype_size(t.dtype) <= t.bytes;
}

bool has_attributes(const Desc& d) noexcept {
  return d.output_scale != 1 || d.npost_ops != 0;
}

bool takes_attributes(const Desc& d) noexcept {
  const bool fwd = d.prop == Prop::none || forward(d);
  switch (d.kind) {
    case Op::convolution:
    case Op::deconvolution:
    case Op::inner_product:
    case Op::matmul:
    case Op::eltwise:
    case Op::pooling:
    case Op::binary:
    case Op::reorder:
    case Op::prelu:
    case Op::reduction: return fwd;
    default: return false;
  }
}

hal::Reason check_attributes(const Desc& d) noexcept {
  if (!has_attributes(d)) return Reason::ok;
  if (!takes_attributes(d)) return Reason::attr_unsupported;
  return check_post_ops(d);
}

// ------------------------------------------------------------------------------------ geometry

bool window_of(const Desc& d, const Layout& x, const Layout& y, Window& w) noexcept {
  w = Window{};
  if (d.nsp < 1 || d.nsp > 3 || x.ndims != d.nsp + 2 || y.ndims != d.nsp + 2) return false;
  for (int i = 0; i < d.nsp; ++i) {
    const int at = 3 - d.nsp + i;
    w.x[at] = x.dims[2 + i], w.y[at] = y.dims[2 + i], w.k[at] = d.kernel[i];
    w.s[at] = d.stride[i], w.d[at] = d.dilation[i], w.p[at] = d.pad_l[i];
    if (w.k[at] < 1 || w.s[at] < 1 || w.d[at] < 1 || w.p[at] < 0 || d.pad_r[i] < 0) return false;
    const int64_t room = w.x[at] + d.pad_l[i] + d.pad_r[i] - ((w.k[at] - 1) * w.d[at] + 1);
    if (room < 0 || room / w.s[at] + 1 != w.y[at]) return false;
  }
  return true;
}

ConvSides conv_sides(const Desc& d) noexcept {
  const bool deconv = d.kind == Op::deconvolution;
  switch (d.prop) {
    case Prop::backward_data:
      return deconv ? ConvSides{Arg::diff_dst, Arg::diff_src, Arg::weights}
                    : ConvSides{Arg::diff_src, Arg::diff_dst, Arg::weights};
    case Prop::backward_weights:
      return deconv ? ConvSides{Arg::diff_dst, Arg::src, Arg::diff_weights}
                    : ConvSides{Arg::src, Arg::diff_dst, Arg::diff_weights};
    default:
      return deconv ? ConvSides{Arg::dst, Arg::src, Arg::weights}
                    : ConvSides{Arg::src, Arg::dst, Arg::weights};
  }
}

bool conv_geometry(const Desc& d, ConvGeometry& g) noexcept {
  g = ConvGeometry{};
  g.sides = conv_sides(d);
  const TensorDesc *xt = d.desc(g.sides.x), *yt = d.desc(g.sides.y), *wt = d.desc(g.sides.w);
  if (!xt || !yt || !wt || !window_of(d, xt->layout, yt->layout, g)) return false;
  const Layout& wl = wt->layout;
  g.grouped = wl.ndims == d.nsp + 3;
  if (!g.grouped && wl.ndims != d.nsp + 2) return false;
  const int w0 = g.grouped ? 1 : 0;
  const bool deconv = d.kind == Op::deconvolution;
  g.g = g.grouped ? wl.dims[0] : 1;
  g.cy = wl.dims[w0 + (deconv ? 1 : 0)];
  g.cx = wl.dims[w0 + (deconv ? 0 : 1)];
  g.n = xt->layout.dims[0];
  if (g.g != d.groups || g.g < 1 || yt->layout.dims[0] != g.n || xt->layout.dims[1] != g.g * g.cx ||
      yt->layout.dims[1] != g.g * g.cy)
    return false;
  for (int i = 0; i < d.nsp; ++i)
    if (wl.dims[w0 + 2 + i] != d.kernel[i]) return false;
  return true;
}

bool pool_geometry(const Desc& d, PoolGeometry& g) noexcept {
  g = PoolGeometry{};
  const TensorDesc* xt = d.desc(forward(d) ? Arg::src : Arg::diff_src);
  const TensorDesc* yt = d.desc(forward(d) ? Arg::dst : Arg::diff_dst);
  if (!xt || !yt || !window_of(d, xt->layout, yt->layout, g)) return false;
  g.n = xt->layout.dims[0], g.c = xt->layout.dims[1];
  return yt->layout.dims[0] == g.n && yt->layout.dims[1] == g.c;
}

bool ip_geometry(const Desc& d, IpGeometry& g) noexcept {
  const bool bwd_data = d.prop == Prop::backward_data, bwd_w = d.prop == Prop::backward_weights;
  const TensorDesc* x = d.desc(bwd_data ? Arg::diff_src : Arg::src);
  const TensorDesc* w = d.desc(bwd_w ? Arg::diff_weights : Arg::weights);
  const TensorDesc* y = d.desc(bwd_data || bwd_w ? Arg::diff_dst : Arg::dst);
  if (!x || !w || !y) return false;
  const Layout &xl = x->layout, &wl = w->layout, &yl = y->layout;
  if (xl.ndims < 2 || wl.ndims != xl.ndims || yl.ndims != 2) return false;
  g.n = xl.dims[0], g.o = wl.dims[0], g.k = 1;
  for (int i = 1; i < xl.ndims; ++i) {
    if (wl.dims[i] != xl.dims[i]) return false;
    g.k *= xl.dims[i];
  }
  return yl.dims[0] == g.n && yl.dims[1] == g.o;
}

namespace {

// The propagations of convolution, deconvolution and inner product.
bool weighted_prop(const Desc& d) noexcept {
  return forward(d) || d.prop == Prop::backward_data || d.prop == Prop::backward_weights;
}

// A bias (diff_bias for backward_weights), when the node has one, of `channels` elements.
bool bias_of(const Desc& d, int64_t channels) noexcept {
  const TensorDesc* b = d.desc(d.prop == Prop::backward_weights ? Arg::diff_bias : Arg::bias);
  return !b || (b->layout.ndims == 1 && b->layout.dims[0] == channels);
}

}  // namespace

hal::Reason check_conv_tensors(const Desc& d) noexcept {
  if (!weighted_prop(d)) return Reason::prop_unsupported;
  ConvGeometry g;
  if (!conv_geometry(d, g)) return Reason::desc_invalid;
  return bias_of(d, g.out_channels(d.kind == Op::deconvolution)) ? Reason::ok : Reason::desc_invalid;
}

hal::Reason check_ip_tensors(const Desc& d) noexcept {
  if (!weighted_prop(d)) return Reason::prop_unsupported;
  IpGeometry g;
  if (!ip_geometry(d, g)) return Reason::desc_invalid;
  return bias_of(d, g.o) ? Reason::ok : Reason::desc_invalid;
}

hal::Reason check_pool_tensors(const Desc& d) noexcept {
  if (d.alg != Alg::pool_max && d.alg != Alg::pool_avg_include_padding &&
      d.alg != Alg::pool_avg_exclude_padding)
    return Reason::desc_invalid;
  if (!forward(d) && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  PoolGeometry g;
  return pool_geometry(d, g) ? Reason::ok : Reason::desc_invalid;
}

}  // namespace sol::capture::dnn
