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

}  // namespace sol::capture::dnn
