#include "capture/dnn/validate.hpp"

namespace sol::capture::dnn {

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

hal::Reason check_post_ops(const Desc& d) noexcept {
  using hal::Reason;
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
  using hal::Reason;
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
  using hal::Reason;
  const TensorDesc* y = d.desc(Arg::dst);
  const int n = count_sources(d);
  if (!y || n == 0) return Reason::desc_invalid;
  for (int i = 0; i < n; ++i)
    if (!same_dims(*d.desc(Arg::multi_src, i), *y)) return Reason::desc_invalid;
  return Reason::ok;
}

hal::Reason check_concat_tensors(const Desc& d) noexcept {
  using hal::Reason;
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
  return x && y && same_dims(*x, *y) ? hal::Reason::ok : hal::Reason::desc_invalid;
}

hal::Reason check_bnorm_tensors(const Desc& d) noexcept {
  using hal::Reason;
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

}  // namespace sol::capture::dnn
