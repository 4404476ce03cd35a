// Dense gathers and epilogue scatters of DNN tensors (detail.hpp).
#include <cstring>

#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

float bf16_to_f32(uint16_t h) noexcept {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even, as oneDNN's cvt_float_to_bfloat16; NaN stays a (quiet) NaN.
uint16_t f32_to_bf16(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Advances a row-major multi-index over `dims`; false after the last one.
bool next(int64_t* idx, const int64_t* dims, int ndims) noexcept {
  for (int d = ndims - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

}  // namespace

Shape shape_of(const TensorDesc& t) noexcept {
  Shape s;
  s.ndims = t.layout.ndims;
  s.size = 1;
  for (int d = s.ndims - 1; d >= 0; --d) {
    s.dims[d] = t.layout.dims[d];
    s.strides[d] = s.size;
    s.size *= s.dims[d];
  }
  if (s.ndims == 0) s.size = 0;
  return s;
}

float load(DType dt, const void* base, int64_t offset) noexcept {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(base)[offset];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[offset]);
    default: return 0;  // excluded by dnn_supports
  }
}

void store(DType dt, void* base, int64_t offset, float v) noexcept {
  switch (dt) {
    case DType::f32: static_cast<float*>(base)[offset] = v; break;
    case DType::bf16: static_cast<uint16_t*>(base)[offset] = f32_to_bf16(v); break;
    default: break;  // excluded by dnn_supports
  }
}

std::vector<float> gather(const Call& call, Arg arg, int index) {
  const int i = call.desc->find(arg, index);
  if (i < 0) return {};
  const TensorDesc& t = call.desc->tensors[i].desc;
  const Shape s = shape_of(t);
  std::vector<float> out(static_cast<size_t>(s.size));
  if (s.size == 0) return out;
  const void* base = call.data[i];
  int64_t idx[kMaxDims] = {};
  int64_t n = 0;
  do {
    out[n++] = load(t.dtype, base, t.layout.offset(idx));
  } while (next(idx, s.dims, s.ndims));
  return out;
}

Epilogue::Epilogue(const Call& call) : desc_(*call.desc) {
  const TensorDesc* dst = desc_.desc(Arg::dst);
  binary_.resize(static_cast<size_t>(desc_.npost_ops));
  for (int p = 0; p < desc_.npost_ops; ++p) {
    const PostOp& po = desc_.post_ops[p];
    if (po.kind == PostOp::Kind::sum) reads_dst_ = true;
    if (po.kind != PostOp::Kind::binary) continue;
    Operand& op = binary_[p];
    op.values = gather(call, Arg::post_op_src, p);
    const Shape s = shape_of(*desc_.desc(Arg::post_op_src, p));
    for (int d = 0; d < s.ndims; ++d) op.strides[d] = s.dims[d] == dst->layout.dims[d] ? s.strides[d] : 0;
  }
}

float Epilogue::apply(float v, const int64_t* idx, float old) const noexcept {
  v *= desc_.output_scale;
  for (int p = 0; p < desc_.npost_ops; ++p) {
    const PostOp& po = desc_.post_ops[p];
    switch (po.kind) {
      case PostOp::Kind::sum: v += po.scale * old; break;
      case PostOp::Kind::eltwise: v = po.scale * eltwise_fwd(po.alg, v, po.alpha, po.beta); break;
      case PostOp::Kind::binary: {
        const Operand& op = binary_[p];
        int64_t at = 0;
        for (int d = 0; d < kMaxDims; ++d) at += idx[d] * op.strides[d];
        v = binary_op(po.alg, v, op.values[at]);
        break;
      }
    }
  }
  return v;
}

template <class T>
void scatter(const Call& call, Arg arg, const T* values, const Epilogue* epilogue) noexcept {
  const int i = call.desc->find(arg);
  if (i < 0) return;
  const TensorDesc& t = call.desc->tensors[i].desc;
  const Layout& l = t.layout;
  const Shape s = shape_of(t);
  if (s.size == 0 && l.ndims == 0) return;
  void* base = call.data[i];
  // Every padded index: logical ones get their value, the rest (blocked padding) zero.
  int64_t idx[kMaxDims] = {};
  for (int d = 0; d < l.ndims; ++d)
    if (l.padded[d] == 0) return;
  do {
    bool inside = true;
    int64_t at = 0;
    for (int d = 0; d < l.ndims; ++d) {
      inside = inside && idx[d] < l.dims[d];
      at += idx[d] * s.strides[d];
    }
    const int64_t off = l.offset(idx);
    float v = 0;
    if (inside) {
      v = static_cast<float>(values[at]);
      if (epilogue) v = epilogue->apply(v, idx, epilogue->reads_dst() ? load(t.dtype, base, off) : 0.f);
    }
    store(t.dtype, base, off, v);
  } while (next(idx, l.padded, l.ndims));
}
template void scatter<float>(const Call&, Arg, const float*, const Epilogue*) noexcept;
template void scatter<double>(const Call&, Arg, const double*, const Epilogue*) noexcept;


}  // namespace sol::backends::reference::dnn
