// A finalized cuDNN operation graph as framework-neutral DNN nodes (ir/dnn.hpp), with the
// shape text in the oneDNN frontend's notation (interpose/dnnl/describe.cpp), so that a CPU run
// (oneDNN) and a GPU run (cuDNN) of the same network name their primitives alike:
//
//     prop=forward_training mb8_ic4oc6_ih16oh8kh3sh2dh0ph1_iw16ow8kw3sw2dw0pw1 src=f32:abcd wei=f32:abcd
//     dst=f32:acdb
//
// What changes between cuDNN's terms and SOL's:
// - operation kinds: convolution forward / backward data / backward filter are one convolution
//   node with prop forward_training / backward_data / backward_weights (cuDNN does not tell
//   training from inference; oneDNN's dnnl_forward is forward_training); pointwise operations are
//   eltwise (unary, with prop forward_training or backward_data) or binary nodes; norm forward and
//   backward operations batch or layer normalization nodes.
// - tensors: cuDNN's logical dims with strides become plain layouts; grouped convolution weights
//   (K, C/g, spatial) become (g, K/g, C/g, spatial); dilation 1 is dense as in SOL's IR; the
//   problem text prints it zero-based as oneDNN does.
// - fusions: pointwise operations applied to an operation's virtual output are its post-ops
//   (eltwise or binary), as oneDNN describes fused primitives; alpha is the output scale and a
//   non-zero beta a sum post-op.
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "interpose/cudnn/detail.hpp"

namespace sol::interpose::cudnn::detail {
namespace {

namespace dnn = capture::dnn;
using capture::DType;
using capture::Op;

// A tensor descriptor as the IR needs it.
struct TensorInfo {
  bool ok = false;
  const char* why = nullptr;
  int64_t uid = 0;
  bool is_virtual = false;
  bool by_value = false;
  dnn::TensorDesc desc;
};

TensorInfo tensor_info(const Record* r) {
  TensorInfo t;
  if (!r || r->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) return t.why = "a tensor SOL did not see created", t;
  const Attr* dims = r->find(CUDNN_ATTR_TENSOR_DIMENSIONS);
  const Attr* strides = r->find(CUDNN_ATTR_TENSOR_STRIDES);
  const Attr* dt = r->find(CUDNN_ATTR_TENSOR_DATA_TYPE);
  if (!dims || !strides || !dt || dims->count != strides->count) return t.why = "a tensor without dims or strides", t;
  if (dims->count < 1 || dims->count > dnn::kMaxDims) return t.why = "a tensor of more dimensions than SOL's IR holds", t;
  if (const Attr* v = r->find(CUDNN_ATTR_TENSOR_VECTOR_COUNT); v && v->get<int64_t>() > 1)
    return t.why = "a vectorized tensor", t;
  if (const Attr* u = r->find(CUDNN_ATTR_TENSOR_UNIQUE_ID)) t.uid = u->get<int64_t>();
  if (const Attr* v = r->find(CUDNN_ATTR_TENSOR_IS_VIRTUAL)) t.is_virtual = v->get<bool>();
  if (const Attr* v = r->find(CUDNN_ATTR_TENSOR_IS_BY_VALUE)) t.by_value = v->get<bool>();
  t.desc.dtype = to_dtype(static_cast<cudnnDataType_t>(dt->get<int32_t>()));
  dnn::Layout& l = t.desc.layout;
  l.ndims = static_cast<int>(dims->count);
  int64_t last = 0;
  for (int d = 0; d < l.ndims; ++d) {
    l.dims[d] = l.padded[d] = dims->get<int64_t>(d);
    l.strides[d] = strides->get<int64_t>(d);
    if (l.dims[d] < 0 || l.strides[d] < 0) return t.why = "a tensor with negative dims or strides", t;
    if (l.dims[d] > 0) last += (l.dims[d] - 1) * l.strides[d];
  }
  t.desc.bytes = l.elements() > 0 ? static_cast<size_t>(last + 1) * capture::dtype_size(t.desc.dtype) : 0;
  t.ok = true;
  return t;
}

double elements(const dnn::TensorDesc& t) noexcept {
  return static_cast<double>(t.layout.elements());
}

// The shape text under construction.
class Text {
 public:
  void add(const char* s) { s_ += s; }
  void add(const std::string& s) { s_ += s; }
  void addf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) s_.append(buf, std::min(static_cast<size_t>(n), sizeof buf - 1));
  }
  void dims(const dnn::TensorDesc& t) {
    for (int d = 0; d < t.layout.ndims; ++d) addf(d ? "x%" PRId64 : "%" PRId64, t.layout.dims[d]);
  }
  std::string& str() { return s_; }

 private:
  std::string s_;
};

// One operation of the graph on its way to a DNN node.
struct OpNode {
  std::shared_ptr<dnn::Desc> desc = std::make_shared<dnn::Desc>();
  std::vector<int64_t> uids;           // per desc->tensors
  int64_t out_uid = -1;                // the tensor it writes (dst, diff_src...)
  bool out_virtual = false;
  const char* why = nullptr;           // what SOL could not describe
  std::string head;                    // "prop=... <problem>" without the arguments
  const char* name = "?";              // for the text of a graph of several nodes
  bool folded = false;                 // merged into another node as a post-op
  std::vector<std::string> post_op_names;  // oneDNN's names of its folded post-ops
};

// oneDNN's argument names, in the order its shapes list them (interpose/dnnl/describe.cpp).
constexpr struct {
  dnn::Arg arg;
  const char* name;
} kArgOrder[] = {
    {dnn::Arg::src, "src"},           {dnn::Arg::src1, "src1"},         {dnn::Arg::weights, "wei"},
    {dnn::Arg::bias, "bia"},          {dnn::Arg::mean, "mean"},         {dnn::Arg::variance, "var"},
    {dnn::Arg::scale, "scale"},       {dnn::Arg::shift, "shift"},       {dnn::Arg::diff_dst, "diff_dst"},
    {dnn::Arg::dst, "dst"},           {dnn::Arg::diff_src, "diff_src"}, {dnn::Arg::diff_weights, "diff_wei"},
    {dnn::Arg::diff_bias, "diff_bia"}, {dnn::Arg::diff_scale, "diff_scale"}, {dnn::Arg::diff_shift, "diff_shift"},
};

class Describer {
 public:
  explicit Describer(const Table& t) : table_(t) {}

  const Record* record(const Record& r, cudnnBackendAttributeName_t name) const {
    const Attr* a = r.find(name);
    if (!a || a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR || a->count < 1) return nullptr;
    auto it = table_.records.find(a->get<const void*>());
    return it == table_.records.end() ? nullptr : &it->second;
  }
  static double scalar(const Record& r, cudnnBackendAttributeName_t name, double dflt) {
    const Attr* a = r.find(name);
    if (!a) return dflt;
    if (a->type == CUDNN_TYPE_FLOAT) return a->get<float>();
    if (a->type == CUDNN_TYPE_DOUBLE) return a->get<double>();
    return dflt;
  }

  // Adds the tensor of `r`'s attribute `name` in role `arg`; false (and `n.why`) when it cannot.
  bool add(OpNode& n, const Record& r, cudnnBackendAttributeName_t name, dnn::Arg arg, bool output = false,
           uint8_t index = 0) {
    const Record* tr = record(r, name);
    TensorInfo t = tensor_info(tr);
    if (!t.ok) return n.why = t.why ? t.why : "a tensor SOL cannot read", false;
    dnn::Desc& d = *n.desc;
    if (d.ntensors == dnn::kMaxTensors) return n.why = "more tensors than SOL's IR holds", false;
    d.tensors[d.ntensors++] = dnn::Tensor{arg, index, t.desc};
    n.uids.push_back(t.uid);
    if (output) {
      n.out_uid = t.uid;
      n.out_virtual = t.is_virtual;
    }
    return true;
  }
  bool add_optional(OpNode& n, const Record& r, cudnnBackendAttributeName_t name, dnn::Arg arg, bool output = false) {
    return !record(r, name) || add(n, r, name, arg, output);
  }

  OpNode convolution(const Record& r) {
    OpNode n;
    n.name = "convolution";
    dnn::Desc& d = *n.desc;
    d.kind = Op::convolution;
    d.alg = dnn::Alg::direct;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
    dnn::Arg xa, wa, ya;
    int out;  // which of x, w, y is written
    switch (r.type) {
      case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
        d.prop = dnn::Prop::forward_training;
        x = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, w = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W;
        y = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC;
        alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, beta = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
        xa = dnn::Arg::src, wa = dnn::Arg::weights, ya = dnn::Arg::dst, out = 2;
        break;
      case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
        d.prop = dnn::Prop::backward_data;
        x = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, w = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
        y = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, conv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
        alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, beta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
        xa = dnn::Arg::diff_src, wa = dnn::Arg::weights, ya = dnn::Arg::diff_dst, out = 0;
        break;
      default:
        d.prop = dnn::Prop::backward_weights;
        x = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, w = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
        y = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, conv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
        alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, beta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
        xa = dnn::Arg::src, wa = dnn::Arg::diff_weights, ya = dnn::Arg::diff_dst, out = 1;
        break;
    }
    const Record* c = record(r, conv);
    if (!c) return n.why = "a convolution without its convolution descriptor", n;
    if (!add(n, r, x, xa, out == 0) || !add(n, r, w, wa, out == 1) || !add(n, r, y, ya, out == 2)) return n;
    dnn::Layout& xl = d.tensors[0].desc.layout;
    dnn::Layout& wl = d.tensors[1].desc.layout;
    const dnn::Layout& yl = d.tensors[2].desc.layout;
    const Attr* sp = c->find(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS);
    const int nsp = sp ? static_cast<int>(sp->get<int64_t>()) : xl.ndims - 2;
    if (nsp < 1 || nsp > 3 || xl.ndims != nsp + 2 || wl.ndims != nsp + 2 || yl.ndims != nsp + 2)
      return n.why = "a convolution of other than 1 to 3 spatial dims", n;
    d.nsp = nsp;
    const Attr* pre = c->find(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS);
    const Attr* post = c->find(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS);
    const Attr* dil = c->find(CUDNN_ATTR_CONVOLUTION_DILATIONS);
    const Attr* str = c->find(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES);
    for (int i = 0; i < nsp; ++i) {
      d.kernel[i] = wl.dims[2 + i];
      d.stride[i] = str ? str->get<int64_t>(i) : 1;
      d.dilation[i] = dil ? dil->get<int64_t>(i) : 1;
      d.pad_l[i] = pre ? pre->get<int64_t>(i) : 0;
      d.pad_r[i] = post ? post->get<int64_t>(i) : d.pad_l[i];
    }
    const int64_t mb = xl.dims[0], ic = xl.dims[1], oc = yl.dims[1];
    d.groups = wl.dims[1] > 0 && ic % wl.dims[1] == 0 ? ic / wl.dims[1] : 1;
    if (const Attr* m = c->find(CUDNN_ATTR_CONVOLUTION_CONV_MODE);
        m && m->get<int32_t>() == CUDNN_CONVOLUTION)
      n.why = "a convolution with a flipped kernel (CUDNN_CONVOLUTION)";
    // Text: before the weights become (g, K/g, C/g, spatial).
    Text t;
    t.addf("prop=%s ", dnn::prop_name(d.prop));
    if (d.groups > 1) t.addf("g%" PRId64, d.groups);
    t.addf("mb%" PRId64 "_ic%" PRId64 "oc%" PRId64, mb, ic, oc);
    double out_points = 1, k_points = 1;
    for (int i = 0; i < nsp; ++i) {
      const char l = "dhw"[3 - nsp + i];
      t.addf("_i%c%" PRId64 "o%c%" PRId64 "k%c%" PRId64 "s%c%" PRId64 "d%c%" PRId64 "p%c%" PRId64, l,
             xl.dims[2 + i], l, yl.dims[2 + i], l, d.kernel[i], l, d.stride[i], l, d.dilation[i] - 1, l,
             d.pad_l[i]);
      out_points *= static_cast<double>(yl.dims[2 + i]);
      k_points *= static_cast<double>(d.kernel[i]);
    }
    n.head = t.str();
    d.flops = 2.0 * mb * oc * out_points * static_cast<double>(ic / std::max<int64_t>(d.groups, 1)) * k_points;
    if (d.groups > 1) {
      const int64_t g = d.groups;
      for (int i = wl.ndims; i > 0; --i) {
        wl.dims[i] = wl.padded[i] = wl.dims[i - 1];
        wl.strides[i] = wl.strides[i - 1];
      }
      wl.dims[1] = wl.padded[1] = wl.dims[0] / g;
      wl.dims[0] = wl.padded[0] = g;
      wl.strides[0] = wl.strides[1] * wl.dims[1];
      ++wl.ndims;
    }
    epilogue(n, scalar(r, alpha, 1), scalar(r, beta, 0));
    return n;
  }

  // alpha: the output scale; beta != 0: the output accumulates (a sum post-op).
  static void epilogue(OpNode& n, double alpha, double beta) {
    dnn::Desc& d = *n.desc;
    d.output_scale = static_cast<float>(alpha);
    if (beta != 0) {
      dnn::PostOp& p = d.post_ops[d.npost_ops++];
      p.kind = dnn::PostOp::Kind::sum;
      p.scale = static_cast<float>(beta);
    }
  }

  struct PwMode {
    enum class Kind : uint8_t { unary, unary_bwd, binary, other } kind;
    dnn::Alg alg;
    const char* name;  // oneDNN's name of the algorithm
  };
  static PwMode pw_mode(int32_t m) noexcept {
    using K = PwMode::Kind;
    using A = dnn::Alg;
    switch (m) {
      case CUDNN_POINTWISE_ADD: return {K::binary, A::add, "binary_add"};
      case CUDNN_POINTWISE_MUL: return {K::binary, A::mul, "binary_mul"};
      case CUDNN_POINTWISE_SUB: return {K::binary, A::sub, "binary_sub"};
      case CUDNN_POINTWISE_DIV: return {K::binary, A::div, "binary_div"};
      case CUDNN_POINTWISE_MAX: return {K::binary, A::max, "binary_max"};
      case CUDNN_POINTWISE_MIN: return {K::binary, A::min, "binary_min"};
      case CUDNN_POINTWISE_CMP_EQ: return {K::binary, A::eq, "binary_eq"};
      case CUDNN_POINTWISE_CMP_NEQ: return {K::binary, A::ne, "binary_ne"};
      case CUDNN_POINTWISE_CMP_GT: return {K::binary, A::gt, "binary_gt"};
      case CUDNN_POINTWISE_CMP_GE: return {K::binary, A::ge, "binary_ge"};
      case CUDNN_POINTWISE_CMP_LT: return {K::binary, A::lt, "binary_lt"};
      case CUDNN_POINTWISE_CMP_LE: return {K::binary, A::le, "binary_le"};
      case CUDNN_POINTWISE_RELU_FWD: return {K::unary, A::relu, "eltwise_relu"};
      case CUDNN_POINTWISE_TANH_FWD: return {K::unary, A::tanh, "eltwise_tanh"};
      case CUDNN_POINTWISE_SIGMOID_FWD: return {K::unary, A::logistic, "eltwise_logistic"};
      case CUDNN_POINTWISE_ELU_FWD: return {K::unary, A::elu, "eltwise_elu"};
      case CUDNN_POINTWISE_GELU_FWD: return {K::unary, A::gelu_erf, "eltwise_gelu_erf"};
      case CUDNN_POINTWISE_GELU_APPROX_TANH_FWD: return {K::unary, A::gelu_tanh, "eltwise_gelu_tanh"};
      case CUDNN_POINTWISE_SOFTPLUS_FWD: return {K::unary, A::soft_relu, "eltwise_soft_relu"};
      case CUDNN_POINTWISE_SWISH_FWD: return {K::unary, A::swish, "eltwise_swish"};
      case CUDNN_POINTWISE_ABS: return {K::unary, A::abs, "eltwise_abs"};
      case CUDNN_POINTWISE_EXP: return {K::unary, A::exp, "eltwise_exp"};
      case CUDNN_POINTWISE_LOG: return {K::unary, A::log, "eltwise_log"};
      case CUDNN_POINTWISE_SQRT: return {K::unary, A::sqrt, "eltwise_sqrt"};
      case CUDNN_POINTWISE_IDENTITY: return {K::unary, A::linear, "eltwise_linear"};
      case CUDNN_POINTWISE_RELU_BWD: return {K::unary_bwd, A::relu, "eltwise_relu"};
      case CUDNN_POINTWISE_TANH_BWD: return {K::unary_bwd, A::tanh, "eltwise_tanh"};
      case CUDNN_POINTWISE_SIGMOID_BWD: return {K::unary_bwd, A::logistic, "eltwise_logistic"};
      case CUDNN_POINTWISE_ELU_BWD: return {K::unary_bwd, A::elu, "eltwise_elu"};
      case CUDNN_POINTWISE_GELU_BWD: return {K::unary_bwd, A::gelu_erf, "eltwise_gelu_erf"};
      case CUDNN_POINTWISE_GELU_APPROX_TANH_BWD: return {K::unary_bwd, A::gelu_tanh, "eltwise_gelu_tanh"};
      case CUDNN_POINTWISE_SOFTPLUS_BWD: return {K::unary_bwd, A::soft_relu, "eltwise_soft_relu"};
      case CUDNN_POINTWISE_SWISH_BWD: return {K::unary_bwd, A::swish, "eltwise_swish"};
      default: return {K::other, A::none, "pointwise"};
    }
  }

  OpNode pointwise(const Record& r) {
    OpNode n;
    dnn::Desc& d = *n.desc;
    const Record* pw = record(r, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
    const Attr* mode = pw ? pw->find(CUDNN_ATTR_POINTWISE_MODE) : nullptr;
    if (!mode) return n.name = "pointwise", n.why = "a pointwise operation without its mode", n;
    const PwMode m = pw_mode(mode->get<int32_t>());
    d.alg = m.alg;
    float alpha = 0, beta = 0;
    if (m.alg == dnn::Alg::relu) alpha = static_cast<float>(scalar(*pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, 0));
    if (m.alg == dnn::Alg::elu) alpha = static_cast<float>(scalar(*pw, CUDNN_ATTR_POINTWISE_ELU_ALPHA, 1));
    if (m.alg == dnn::Alg::swish) alpha = static_cast<float>(scalar(*pw, CUDNN_ATTR_POINTWISE_SWISH_BETA, 1));
    if (m.alg == dnn::Alg::linear) alpha = 1;
    d.alpha = alpha;
    d.beta = beta;
    Text t;
    switch (m.kind) {
      case PwMode::Kind::binary: {
        n.name = "binary";
        d.kind = Op::binary;
        if (!add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, dnn::Arg::src) ||
            !add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, dnn::Arg::src1) ||
            !add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, dnn::Arg::dst, true))
          return n;
        t.addf("prop=undef alg=%s ", m.name);
        t.dims(d.tensors[0].desc);
        t.add(":");
        t.dims(d.tensors[1].desc);
        d.flops = elements(d.tensors[2].desc);
        break;
      }
      case PwMode::Kind::unary:
      case PwMode::Kind::other: {
        n.name = "eltwise";
        d.kind = Op::eltwise;
        d.prop = dnn::Prop::forward_training;
        if (!add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, dnn::Arg::src) ||
            !add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, dnn::Arg::dst, true))
          return n;
        if (m.kind == PwMode::Kind::other) {
          n.why = "a pointwise mode SOL's IR does not have";
          t.addf("prop=forward_training alg=pointwise_mode%d ", mode->get<int32_t>());
        } else {
          t.addf("prop=forward_training alg=%s alpha=%g beta=%g ", m.name, alpha, beta);
        }
        t.dims(d.tensors[0].desc);
        d.flops = elements(d.tensors[0].desc);
        break;
      }
      case PwMode::Kind::unary_bwd: {
        n.name = "eltwise";
        d.kind = Op::eltwise;
        d.prop = dnn::Prop::backward_data;
        if (!add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, dnn::Arg::src) ||
            !add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dnn::Arg::diff_dst) ||
            !add(n, r, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dnn::Arg::diff_src, true))
          return n;
        t.addf("prop=backward_data alg=%s alpha=%g beta=%g ", m.name, alpha, beta);
        t.dims(d.tensors[0].desc);
        d.flops = elements(d.tensors[0].desc);
        break;
      }
    }
    n.head = t.str();
    return n;
  }

  OpNode matmul(const Record& r) {
    OpNode n;
    n.name = "matmul";
    dnn::Desc& d = *n.desc;
    d.kind = Op::matmul;
    if (!add(n, r, CUDNN_ATTR_OPERATION_MATMUL_ADESC, dnn::Arg::src) ||
        !add(n, r, CUDNN_ATTR_OPERATION_MATMUL_BDESC, dnn::Arg::weights) ||
        !add(n, r, CUDNN_ATTR_OPERATION_MATMUL_CDESC, dnn::Arg::dst, true))
      return n;
    const dnn::Layout& a = d.tensors[0].desc.layout;
    Text t;
    t.add("prop=undef ");
    t.dims(d.tensors[0].desc);
    t.add(":");
    t.dims(d.tensors[1].desc);
    t.add(":");
    t.dims(d.tensors[2].desc);
    n.head = t.str();
    d.flops = 2.0 * elements(d.tensors[2].desc) * static_cast<double>(a.dims[a.ndims - 1]);
    return n;
  }

  OpNode reduction(const Record& r) {
    OpNode n;
    n.name = "reduction";
    dnn::Desc& d = *n.desc;
    d.kind = Op::reduction;
    const Record* rd = record(r, CUDNN_ATTR_OPERATION_REDUCTION_DESC);
    const Attr* op = rd ? rd->find(CUDNN_ATTR_REDUCTION_OPERATOR) : nullptr;
    if (!add(n, r, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, dnn::Arg::src) ||
        !add(n, r, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, dnn::Arg::dst, true))
      return n;
    const char* name = "reduction_unknown";
    switch (op ? op->get<int32_t>() : -1) {
      case CUDNN_REDUCE_TENSOR_ADD: d.alg = dnn::Alg::reduce_sum, name = "reduction_sum"; break;
      case CUDNN_REDUCE_TENSOR_MUL: d.alg = dnn::Alg::reduce_mul, name = "reduction_mul"; break;
      case CUDNN_REDUCE_TENSOR_MIN: d.alg = dnn::Alg::reduce_min, name = "reduction_min"; break;
      case CUDNN_REDUCE_TENSOR_MAX: d.alg = dnn::Alg::reduce_max, name = "reduction_max"; break;
      case CUDNN_REDUCE_TENSOR_AVG: d.alg = dnn::Alg::reduce_mean, name = "reduction_mean"; break;
      case CUDNN_REDUCE_TENSOR_NORM1: d.alg = dnn::Alg::reduce_norm_lp_sum, d.alpha = 1, name = "reduction_norm_lp_sum"; break;
      case CUDNN_REDUCE_TENSOR_NORM2: d.alg = dnn::Alg::reduce_norm_lp_sum, d.alpha = 2, name = "reduction_norm_lp_sum"; break;
      default: n.why = "a reduction operator SOL's IR does not have"; break;
    }
    Text t;
    t.addf("prop=undef alg=%s p=%g eps=0 ", name, d.alpha);
    t.dims(d.tensors[0].desc);
    t.add(":");
    t.dims(d.tensors[1].desc);
    n.head = t.str();
    d.flops = elements(d.tensors[0].desc);
    return n;
  }

  OpNode norm(const Record& r, bool forward) {
    OpNode n;
    dnn::Desc& d = *n.desc;
    const Attr* mode = r.find(forward ? CUDNN_ATTR_OPERATION_NORM_FWD_MODE : CUDNN_ATTR_OPERATION_NORM_BWD_MODE);
    const int32_t m = mode ? mode->get<int32_t>() : -1;
    const bool batch = m == CUDNN_BATCH_NORM;
    n.name = batch ? "batch_normalization" : "layer_normalization";
    d.kind = batch ? Op::batch_normalization : Op::layer_normalization;
    if (m != CUDNN_BATCH_NORM && m != CUDNN_LAYER_NORM) n.why = "a normalization SOL's IR does not have (instance, group, RMS)";
    bool ok;
    if (forward) {
      const Attr* phase = r.find(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE);
      const bool training = !phase || phase->get<int32_t>() == CUDNN_NORM_FWD_TRAINING;
      d.prop = training ? dnn::Prop::forward_training : dnn::Prop::forward_inference;
      d.global_stats = !training;
      ok = add(n, r, CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, dnn::Arg::src) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, dnn::Arg::mean) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, dnn::Arg::variance) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, dnn::Arg::scale) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, dnn::Arg::shift) &&
           add(n, r, CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, dnn::Arg::dst, true);
    } else {
      d.prop = dnn::Prop::backward;
      ok = add(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, dnn::Arg::src) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, dnn::Arg::mean) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, dnn::Arg::variance) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, dnn::Arg::scale) &&
           add(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, dnn::Arg::diff_dst) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, dnn::Arg::diff_scale) &&
           add_optional(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, dnn::Arg::diff_shift) &&
           add(n, r, CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, dnn::Arg::diff_src, true);
    }
    if (!ok) return n;
    d.use_scale = d.find(dnn::Arg::scale) >= 0;
    d.use_shift = d.find(dnn::Arg::shift) >= 0 || d.find(dnn::Arg::diff_shift) >= 0;
    // cuDNN's norm operations take the inverse variance (and epsilon as a by-value tensor): the
    // node says which, since SOL's IR means the variance.
    if (!n.why) n.why = "a normalization with an inverse-variance tensor";
    const dnn::TensorDesc& x = d.tensors[0].desc;
    Text t;
    t.addf("prop=%s ", dnn::prop_name(d.prop));
    std::string flags = std::string(d.global_stats ? "G" : "") + (d.use_scale ? "C" : "") + (d.use_shift ? "H" : "");
    if (!flags.empty()) t.add("flags=" + flags + " ");
    if (batch && x.layout.ndims >= 2 && x.layout.ndims <= 5) {
      t.addf("mb%" PRId64 "ic%" PRId64, x.layout.dims[0], x.layout.dims[1]);
      for (int i = 2; i < x.layout.ndims; ++i) t.addf("i%c%" PRId64, "dhw"[3 - (x.layout.ndims - 2) + (i - 2)], x.layout.dims[i]);
    } else {
      t.dims(x);
    }
    n.head = t.str();
    d.flops = 5 * elements(x);
    return n;
  }

  OpNode operation(const Record& r) {
    switch (r.type) {
      case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
      case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
      case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: return convolution(r);
      case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return pointwise(r);
      case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return matmul(r);
      case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return reduction(r);
      case CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR: return norm(r, true);
      case CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR: return norm(r, false);
      default: {
        OpNode n;
        n.name = op_type_name(r.type);
        n.desc->kind = Op::cudnn_execute;
        n.why = "an operation SOL's IR does not have";
        n.head = n.name;
        return n;
      }
    }
  }

  static const char* op_type_name(cudnnBackendDescriptorType_t t) noexcept {
    switch (t) {
      case CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR: return "gen_stats";
      case CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR: return "bn_finalize";
      case CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR: return "bn_bwd_weights";
      case CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR: return "resample_fwd";
      case CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR: return "resample_bwd";
      case CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR: return "concat";
      case CUDNN_BACKEND_OPERATION_SIGNAL_DESCRIPTOR: return "signal";
      case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: return "reshape";
      case CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR: return "rng";
      case CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR: return "paged_cache_load";
      case CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR: return "block_scale_quantize";
      case CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR: return "block_scale_dequantize";
      case CUDNN_BACKEND_OPERATION_EXPAND_BAND_MATRIX_DESCRIPTOR: return "expand_band_matrix";
      case CUDNN_BACKEND_OPERATION_CONTRACT_BAND_MATRIX_DESCRIPTOR: return "contract_band_matrix";
      case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: return "sdpa_fwd";
      case CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR: return "sdpa_bwd";
      case CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR: return "moe_grouped_matmul";
      default: return "operation";
    }
  }

  // Folds pointwise node `pw` into `into` (whose virtual output it consumes) as a post-op.
  static bool fold(OpNode& into, OpNode& pw) {
    dnn::Desc& d = *into.desc;
    const dnn::Desc& p = *pw.desc;
    if (d.npost_ops == dnn::kMaxPostOps || pw.why || p.prop == dnn::Prop::backward_data) return false;
    if (p.kind != Op::eltwise && p.kind != Op::binary) return false;
    const int in = p.kind == Op::binary && pw.uids[0] != into.out_uid ? 1 : 0;  // the folded operand
    if (pw.uids[in] != into.out_uid) return false;
    const int out = into.desc->find(dnn::Arg::dst) >= 0 ? d.find(dnn::Arg::dst) : -1;
    if (out < 0) return false;
    dnn::PostOp& po = d.post_ops[d.npost_ops];
    po.kind = p.kind == Op::eltwise ? dnn::PostOp::Kind::eltwise : dnn::PostOp::Kind::binary;
    po.alg = p.alg;
    po.alpha = p.alpha;
    po.beta = p.beta;
    if (p.kind == Op::binary) {
      if (d.ntensors == dnn::kMaxTensors) return false;
      d.tensors[d.ntensors++] = dnn::Tensor{dnn::Arg::post_op_src, static_cast<uint8_t>(d.npost_ops), p.tensors[1 - in].desc};
      into.uids.push_back(pw.uids[1 - in]);
    }
    ++d.npost_ops;
    // The node now writes the pointwise operation's output.
    const int pw_out = p.find(dnn::Arg::dst);
    d.tensors[out].desc = p.tensors[pw_out].desc;
    into.uids[static_cast<size_t>(out)] = pw.uids[static_cast<size_t>(pw_out)];
    into.out_uid = pw.out_uid;
    into.out_virtual = pw.out_virtual;
    into.post_op_names.push_back(pw_name(p));
    d.flops += p.flops;
    pw.folded = true;
    return true;
  }
  static std::string pw_name(const dnn::Desc& p) {
    const std::string a = dnn::alg_name(p.alg);
    return (p.kind == Op::binary ? "binary_" : "eltwise_") + a;
  }

  std::shared_ptr<const Graph> run(const Record& graph) {
    const Attr* ops = graph.find(CUDNN_ATTR_OPERATIONGRAPH_OPS);
    std::vector<OpNode> nodes;
    for (int64_t i = 0; ops && i < ops->count; ++i) {
      auto it = table_.records.find(ops->get<const void*>(i));
      if (it == table_.records.end()) {
        OpNode n;
        n.name = "operation";
        n.desc->kind = Op::cudnn_execute;
        n.why = "an operation SOL did not see created";
        n.head = "operation";
        nodes.push_back(std::move(n));
        continue;
      }
      nodes.push_back(operation(it->second));
    }
    // Pointwise operations on a node's virtual output become its post-ops, in graph order.
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].folded || nodes[i].why) continue;
      for (size_t j = i + 1; j < nodes.size() && nodes[i].out_virtual; ++j)
        if (!nodes[j].folded && (nodes[j].desc->kind == Op::eltwise || nodes[j].desc->kind == Op::binary) &&
            !nodes[j].uids.empty() &&
            (nodes[j].uids[0] == nodes[i].out_uid || (nodes[j].uids.size() > 2 && nodes[j].uids[1] == nodes[i].out_uid)))
          fold(nodes[i], nodes[j]);
    }
    std::vector<OpNode*> left;
    for (OpNode& n : nodes)
      if (!n.folded) left.push_back(&n);
    auto g = std::make_shared<Graph>();
    if (left.size() == 1) {
      OpNode& n = *left[0];
      finish_text(n);
      dnn::Desc& d = *n.desc;
      d.unsupported = n.why ? n.why : "a cuDNN graph: its data is device memory, it runs natively";
      g->node = n.desc;
      g->uids = n.uids;
      return g;
    }
    // Several nodes (or none): one traced call, its shape listing them.
    auto d = std::make_shared<dnn::Desc>();
    d->kind = Op::cudnn_execute;
    d->unsupported = "a cuDNN graph of several operations";
    std::string s = "graph=" + std::to_string(left.size()) + "ops";
    for (OpNode* n : left) {
      finish_text(*n);
      s += " [" + std::string(n->name) + " " + n->desc->shape + "]";
      d->flops += n->desc->flops;
      d->bytes += n->desc->bytes;
      if (d->dtype == DType::none) d->dtype = n->desc->dtype;
    }
    d->shape = std::move(s);
    g->node = std::move(d);
    return g;
  }

  // The node's shape: its head, post-ops and arguments; its dtype and bytes.
  static void finish_text(OpNode& n) {
    dnn::Desc& d = *n.desc;
    std::string s = n.head;
    if (!n.post_op_names.empty() || d.has_sum_post_op()) {
      s += " post_ops=";
      bool first = true;
      for (int i = 0; i < d.npost_ops; ++i) {
        if (d.post_ops[i].kind != dnn::PostOp::Kind::sum) continue;
        s += first ? "sum" : "+sum";
        first = false;
      }
      for (const auto& p : n.post_op_names) {
        s += (first ? "" : "+") + p;
        first = false;
      }
    }
    for (const auto& a : kArgOrder)
      for (int i = 0; i < d.ntensors; ++i)
        if (d.tensors[i].arg == a.arg) {
          s += ' ';
          s += a.name;
          s += '=';
          s += dtype_text(d.tensors[i].desc.dtype);
          s += ':';
          s += format_name(d.tensors[i].desc.layout);
        }
    for (int i = 0; i < d.ntensors; ++i)
      if (d.tensors[i].arg == dnn::Arg::post_op_src)
        s += " po_src=" + std::string(dtype_text(d.tensors[i].desc.dtype)) + ':' + format_name(d.tensors[i].desc.layout);
    d.shape = std::move(s);
    for (int i = 0; i < d.ntensors; ++i) {
      const dnn::Tensor& t = d.tensors[i];
      d.bytes += static_cast<double>(t.desc.bytes) * ((d.read(t) ? 1 : 0) + (d.written(t) ? 1 : 0));
    }
    for (int i = 0; i < d.ntensors; ++i)
      if (d.tensors[i].arg == dnn::Arg::src || d.tensors[i].arg == dnn::Arg::diff_dst) {
        d.dtype = d.tensors[i].desc.dtype;
        break;
      }
    if (d.dtype == DType::none && d.ntensors) d.dtype = d.tensors[0].desc.dtype;
  }

 private:
  const Table& table_;
};

}  // namespace

DType to_dtype(cudnnDataType_t t) noexcept {
  switch (t) {
    case CUDNN_DATA_FLOAT: return DType::f32;
    case CUDNN_DATA_DOUBLE: return DType::f64;
    case CUDNN_DATA_HALF: return DType::f16;
    case CUDNN_DATA_BFLOAT16: return DType::bf16;
    case CUDNN_DATA_INT8: return DType::s8;
    case CUDNN_DATA_UINT8: return DType::u8;
    case CUDNN_DATA_INT32: return DType::s32;
    default: return DType::none;
  }
}

const char* dtype_text(DType t) noexcept {
  return t == DType::none ? "undef" : capture::dtype_name(t);
}

// As oneDNN's md2fmt_tag_str for a plain layout: dimensions by decreasing stride, ties by
// decreasing size, then in order (the same stable sort).
std::string format_name(const dnn::Layout& l) {
  const int nd = l.ndims;
  int64_t strides[dnn::kMaxDims], sizes[dnn::kMaxDims];
  char letters[dnn::kMaxDims];
  for (int d = 0; d < nd; ++d) {
    strides[d] = l.strides[d];
    sizes[d] = l.padded[d];
    letters[d] = static_cast<char>('a' + d);
  }
  for (int i = 0; i < nd - 1; ++i) {
    bool swapped = false;
    for (int j = 0; j < nd - i - 1; ++j) {
      int64_t r = strides[j + 1] - strides[j];
      if (r == 0) r = sizes[j + 1] - sizes[j];
      if (r > 0) {
        std::swap(strides[j], strides[j + 1]);
        std::swap(sizes[j], sizes[j + 1]);
        std::swap(letters[j], letters[j + 1]);
        swapped = true;
      }
    }
    if (!swapped) break;
  }
  return std::string(letters, static_cast<size_t>(nd));
}

std::shared_ptr<const Graph> describe_graph(const Table& table, const Record& graph) {
  return Describer(table).run(graph);
}

}  // namespace sol::interpose::cudnn::detail
