#include "capture/graph/encode.hpp"

#include <cstring>

#include "capture/graph/format.hpp"
#include "ir/dnn.hpp"
#include "ir/symbols.hpp"

namespace sol::capture::graph {
namespace {

using trace::Text;

uint64_t mix(uint64_t h, uint64_t v) noexcept {
  return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
}
uint64_t bits(double d) noexcept {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

bool is_complex(DType d) noexcept {
  return d == DType::c64 || d == DType::c128;
}

// `"name":` before each member but the first of an object or array.
class Members {
 public:
  explicit Members(Text& t) noexcept : t_(t) {}
  Text& key(const char* name) noexcept {
    if (!first_) t_.ch(',');
    first_ = false;
    return t_.ch('"').str(name).lit("\":");
  }
  Text& next() noexcept {
    if (!first_) t_.ch(',');
    first_ = false;
    return t_;
  }

 private:
  Text& t_;
  bool first_ = true;
};

void scalar(Members& m, const char* name, const Scalar& s, bool complex) noexcept {
  if (!s.present) return;
  Text& t = m.key(name);
  if (complex)
    t.ch('[').num(s.re).ch(',').num(s.im).ch(']');
  else
    t.num(s.re);
}

void blas_args(const Node& node, Text& t) noexcept {
  const BlasArgs& b = node.blas;
  const bool complex = is_complex(node.dtype) && !b.real_alpha;
  t.lit(",\"args\":{");
  Members m(t);
#define SOL_GRAPH_INT(f) \
  if (b.f) m.key(#f).i64(b.f);
  SOL_GRAPH_BLAS_INTS(SOL_GRAPH_INT)
#undef SOL_GRAPH_INT
#define SOL_GRAPH_MODE(f) \
  if (b.f) m.key(#f).ch('"').ch(b.f).ch('"');
  SOL_GRAPH_BLAS_MODES(SOL_GRAPH_MODE)
#undef SOL_GRAPH_MODE
  scalar(m, "alpha", b.alpha, complex);
  scalar(m, "beta", b.beta, is_complex(node.dtype));
  scalar(m, "cs", b.cs, false);
  scalar(m, "sn", b.sn, false);
  scalar(m, "ry1", b.ry1, false);
  if (b.real_alpha) m.key("real_alpha").boolean(true);
  t.ch('}');
  if (const DeviceBlas* d = node.device) {
    t.lit(",\"device\":{");
    Members dm(t);
#define SOL_GRAPH_DEV(f) dm.key(#f).i64(d->f);
    SOL_GRAPH_DEVICE_INTS(SOL_GRAPH_DEV)
#undef SOL_GRAPH_DEV
    if (d->detail) dm.key("detail").json(d->detail);
    t.ch('}');
  }
}

void dims(Text& t, const int64_t* v, int n) noexcept {
  t.ch('[');
  for (int i = 0; i < n; ++i) (i ? t.ch(',') : t).i64(v[i]);
  t.ch(']');
}

void tensor(const dnn::Tensor& x, Text& t) noexcept {
  const dnn::Layout& l = x.desc.layout;
  t.lit("{\"arg\":\"").str(dnn::arg_name(x.arg)).lit("\",\"index\":").u64(x.index);
  t.lit(",\"dtype\":\"").str(dtype_name(x.desc.dtype)).lit("\",\"dims\":");
  dims(t, l.dims, l.ndims);
  t.lit(",\"padded\":");
  dims(t, l.padded, l.ndims);
  t.lit(",\"strides\":");
  dims(t, l.strides, l.ndims);
  t.lit(",\"offset0\":").i64(l.offset0).lit(",\"blocks\":[");
  for (int b = 0; b < l.nblocks; ++b)
    (b ? t.ch(',') : t).ch('[').i64(l.block_dim[b]).ch(',').i64(l.block[b]).ch(']');
  t.lit("],\"bytes\":").u64(x.desc.bytes).ch('}');
}

void post_op(const dnn::PostOp& p, Text& t) noexcept {
  static constexpr const char* kKinds[] = {"sum", "eltwise", "binary"};
  t.lit("{\"kind\":\"").str(kKinds[static_cast<int>(p.kind)]).lit("\",\"alg\":\"").str(dnn::alg_name(p.alg));
  t.lit("\",\"scale\":").num(p.scale).lit(",\"alpha\":").num(p.alpha).lit(",\"beta\":").num(p.beta);
  t.lit(",\"sum_dtype\":\"").str(dtype_name(p.sum_dtype)).lit("\"}");
}

void dnn_desc(const dnn::Desc& d, Text& t) noexcept {
  t.lit(",\"dnn\":{\"kind\":\"").str(op_name(d.kind)).lit("\",\"prop\":\"").str(dnn::prop_name(d.prop));
  t.lit("\",\"alg\":\"").str(dnn::alg_name(d.alg)).lit("\",\"dtype\":\"").str(dtype_name(d.dtype)).ch('"');
#define SOL_GRAPH_DNN_INT(f) t.lit(",\"" #f "\":").i64(d.f);
  SOL_GRAPH_DNN_INTS(SOL_GRAPH_DNN_INT)
#undef SOL_GRAPH_DNN_INT
#define SOL_GRAPH_DNN_FLOAT(f) t.lit(",\"" #f "\":").num(d.f);
  SOL_GRAPH_DNN_FLOATS(SOL_GRAPH_DNN_FLOAT)
#undef SOL_GRAPH_DNN_FLOAT
#define SOL_GRAPH_DNN_FLAG(f) t.lit(",\"" #f "\":").boolean(d.f);
  SOL_GRAPH_DNN_FLAGS(SOL_GRAPH_DNN_FLAG)
#undef SOL_GRAPH_DNN_FLAG
#define SOL_GRAPH_DNN_SP(f) \
  t.lit(",\"" #f "\":");    \
  dims(t, d.f, d.nsp > 0 && d.nsp <= 3 ? d.nsp : 0);
  SOL_GRAPH_DNN_SPATIAL(SOL_GRAPH_DNN_SP)
#undef SOL_GRAPH_DNN_SP
  if (d.kind == Op::sum) {
    t.lit(",\"sum_scales\":[");
    int n = 0;
    for (int i = 0; i < d.ntensors; ++i)
      if (d.tensors[i].arg == dnn::Arg::multi_src)
        (n++ ? t.ch(',') : t).num(d.sum_scales[d.tensors[i].index]);
    t.ch(']');
  }
  t.lit(",\"post_ops\":[");
  for (int i = 0; i < d.npost_ops; ++i) {
    if (i) t.ch(',');
    post_op(d.post_ops[i], t);
  }
  t.lit("],\"tensors\":[");
  for (int i = 0; i < d.ntensors; ++i) {
    if (i) t.ch(',');
    tensor(d.tensors[i], t);
  }
  t.lit("],\"flops\":").num(d.flops).lit(",\"bytes\":").num(d.bytes);
  if (d.unsupported) t.lit(",\"unsupported\":").json(d.unsupported);
  t.ch('}');
}

}  // namespace

// "lp64" for the plain names at 32-bit integers (what a replay calls); else "ilp64" for the plain
// names bound to an ILP64 library, or the family's own name (docs/blas-families.md).
const char* name_family(const Node& node) noexcept {
  const Family f = symbol_family(node.sym);
  if (f == Family::plain) return node.ilp64 ? "ilp64" : "lp64";
  return family_name(f);
}

bool computes(const Node& node) noexcept {
  const char* family = op_family(node.op);
  return family[0] == 'b' || node.dnn != nullptr || node.op == Op::dnnl_execute ||
         node.op == Op::cudnn_execute || node.op == Op::cudnn_legacy;
}

uint64_t description_key(const Node& node) noexcept {
  uint64_t h =
      mix(0x736f6c64657363ull, static_cast<uint64_t>(node.sym) | static_cast<uint64_t>(node.op) << 16 |
                                   static_cast<uint64_t>(node.dtype) << 24);
  if (node.dnn) return mix(h, dnn::content_key(*node.dnn->desc));
  if (op_family(node.op)[0] != 'b') return h;
  const BlasArgs& b = node.blas;
#define SOL_GRAPH_INT(f) h = mix(h, static_cast<uint64_t>(b.f));
  SOL_GRAPH_BLAS_INTS(SOL_GRAPH_INT)
#undef SOL_GRAPH_INT
#define SOL_GRAPH_MODE(f) h = mix(h, static_cast<unsigned char>(b.f));
  SOL_GRAPH_BLAS_MODES(SOL_GRAPH_MODE)
#undef SOL_GRAPH_MODE
#define SOL_GRAPH_SCALAR(f) h = mix(mix(mix(h, bits(b.f.re)), bits(b.f.im)), b.f.present);
  SOL_GRAPH_BLAS_SCALARS(SOL_GRAPH_SCALAR)
#undef SOL_GRAPH_SCALAR
  h = mix(h, b.real_alpha);
  if (const DeviceBlas* d = node.device) {
#define SOL_GRAPH_DEV(f) h = mix(h, static_cast<uint64_t>(d->f));
    SOL_GRAPH_DEVICE_INTS(SOL_GRAPH_DEV)
#undef SOL_GRAPH_DEV
    h = mix(h, reinterpret_cast<uintptr_t>(d->detail));  // interned by the frontend
  }
  return h;
}

void describe(const Node& node, uint32_t id, uint32_t lib, const char* shape, Text& t) noexcept {
  const Op op = node.dnn ? node.dnn->desc->kind : node.op;
  const DType dtype = node.dnn ? node.dnn->desc->dtype : node.dtype;
  t.lit("{\"desc\":").u64(id).lit(",\"symbol\":\"").str(symbol_name(node.sym));
  t.lit("\",\"api\":\"").str(api_name(node.api)).lit("\",\"op\":\"").str(op_name(op));
  t.lit("\",\"dtype\":\"").str(dtype_name(dtype)).lit("\",\"lib\":").u64(lib);
  if (op_family(node.op)[0] == 'b') {
    t.lit(",\"family\":\"").str(name_family(node)).ch('"');
    blas_args(node, t);
  } else if (node.dnn) {
    dnn_desc(*node.dnn->desc, t);
  } else {
    t.lit(",\"unsupported\":\"a computing call SOL does not describe\"");
  }
  t.lit(",\"shape\":").json(shape).lit("}\n");
}

}  // namespace sol::capture::graph
