// What a oneDNN primitive computes, read from its primitive descriptor (oneDNN 2.x C API).
//
// PrimitiveInfo::shape is space-separated tokens:
//
//     prop=<prop kind> [key=value ...] <problem> [post_ops=a+b] <arg>=<type>:<format> ...
//
// - prop: oneDNN's name of the propagation kind; "undef" for primitives that have none (matmul,
//   reorder, binary, sum, concat, reduction).
// - key=value: what oneDNN's verbose mode prints as "auxiliary" (alg, alpha, beta, flags, axis...).
// - problem: the only token without '='. It is character for character the problem_desc field of
//   oneDNN 2.6's verbose lines (ONEDNN_VERBOSE=1), which is benchdnn's notation, so traces and
//   verbose logs can be joined on it:
//     convolution, deconvolution  g2mb32_ic4oc16_ih32oh15kh3sh2dh1ph1_iw32ow15kw3sw2dw1pw1
//                                 (g only with groups; ic, oc in total; id.. and ih.. groups
//                                 only for 3D and 2D problems)
//     inner_product               mb32ic512oc128, mb32ic16ih4iw4oc128
//     matmul                      32x512:512x128:32x128 (src:weights:dst, batch dims included)
//     pooling, pooling_v2         mb32ic16_ih32oh16kh2sh2dh0ph0_iw32ow16kw2sw2dw0pw0
//     batch_normalization, lrn    mb32ic16ih8iw8 (lrn: ...ls5beta0.75)
//     resampling                  mb4ic16_ih8oh16_iw8ow16
//     rnn                         l1t5mb4sic16slc32dhc16dic16
//     binary, prelu, reduction    32x16x8x8:32x16x1x1 (the two inputs; reduction: src:dst)
//     concat                      8x16:8x4 (each source)
//     everything else             the dimensions of the main tensor: 32x16x32x32
// - post_ops: the attribute's post-ops, if any (sum, an eltwise or binary algorithm, dw, prelu).
// - <arg>=<type>:<format> for each memory argument of the descriptor (names from arg_kind()),
//   format as oneDNN prints it: a permutation of the dimension letters for plain strides (abcd,
//   acdb), capitals and inner blocks for blocked layouts (aBcd16b, ABcd8b16a2b); "any", "wino",
//   "rnn_packed" or "undef" for the other format kinds.
//
// Example: prop=forward_training mb32_ic3oc16_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1
//          src=f32:abcd wei=f32:Acdb8a bia=f32:a dst=f32:aBcd8b
//
// PrimitiveInfo::flops, one execution (a multiply-add is 2):
//   convolution (every prop kind)    2 * mb * oc * od*oh*ow * ic/g * kd*kh*kw
//   deconvolution                    2 * mb * ic * id*ih*iw * oc/g * kd*kh*kw (a transposed conv)
//   inner_product                    2 * mb * oc * ic * id*ih*iw
//   matmul                           2 * M * N * K * batch
//   rnn                              2 * L * D * T * mb * G*dhc * (slc + sic), plus the projection
//                                    2 * L * D * T * mb * dhc * dic; backward twice that
//   pooling                          output elements * kernel elements
//   lrn                              2 * elements * window (local_size, squared when within channel)
//   resampling                       output elements (nearest), 2 * 2^spatial dims each (linear)
//   batch/layer normalization, softmax, logsoftmax   5 * elements (mean, variance, normalize...)
//   sum                              inputs * elements
//   eltwise, binary, prelu, reduction, reorder, concat, shuffle   elements (of the larger side)
// Bias additions are left out. Unknown kinds and runtime dimensions give 0.
//
// PrimitiveInfo::bytes: the size of each memory argument, counted once per direction (read,
// written); the workspace once (written forward, read backward); the destination twice under a
// sum post-op.
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "interpose/dnnl/detail.hpp"

namespace sol::interpose::dnnl::detail {
namespace {

using md_t = dnnl_memory_desc_t;

bool present(const md_t* md) noexcept {
  return md && md->ndims > 0;
}

const md_t* first_present(const md_t* a, const md_t* b) noexcept {
  return present(a) ? a : b;
}

// Elements of a tensor; 0 for runtime (unknown) dimensions.
double elements(const md_t* md) noexcept {
  if (!present(md)) return 0;
  double n = 1;
  for (int d = 0; d < md->ndims; ++d) {
    if (md->dims[d] < 0) return 0;
    n *= static_cast<double>(md->dims[d]);
  }
  return n;
}

// The letter of spatial dimension i of nsp (1 to 3) in benchdnn's notation: d, h, w.
char spatial_letter(int nsp, int i) noexcept {
  return "dhw"[3 - nsp + i];
}

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

// The shape string under construction.
class Text {
 public:
  void add(const char* s) { s_ += s; }
  void add(const std::string& s) { s_ += s; }
  void add(char c) { s_ += c; }
  void addf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) s_.append(buf, static_cast<size_t>(n) < sizeof buf ? static_cast<size_t>(n) : sizeof buf - 1);
  }
  void dim(int64_t v) {
    if (v == DNNL_RUNTIME_DIM_VAL)
      add('*');
    else
      addf("%" PRId64, v);
  }
  // 32x16x8x8, as verbose prints dimensions.
  void dims(const md_t* md) {
    if (!present(md)) return;
    for (int d = 0; d < md->ndims; ++d) {
      if (d) add('x');
      dim(md->dims[d]);
    }
  }
  // mb32ic16ih8iw8: verbose's "descriptor style" of a tensor's dimensions.
  void desc_dims(const md_t* md) {
    if (!present(md)) return;
    if (md->ndims >= 6) return dims(md);
    if (md->ndims == 1) return addf("x%" PRId64, md->dims[0]);
    addf("mb%" PRId64 "ic%" PRId64, md->dims[0], md->dims[1]);
    for (int d = 2; d < md->ndims; ++d)
      addf("i%c%" PRId64, spatial_letter(md->ndims - 2, d - 2), md->dims[d]);
  }
  std::string& str() { return s_; }

 private:
  std::string s_;
};

// A memory format as oneDNN's verbose mode prints it (md2fmt_tag_str): dimensions sorted by
// decreasing outer stride (ties by decreasing outer block count, then in order), a capital letter
// for a blocked dimension, then the inner blocks.
std::string format_name(const md_t* md) {
  switch (md->format_kind) {
    case dnnl_format_kind_undef: return "undef";
    case dnnl_format_kind_any: return "any";
    case dnnl_blocked: break;
    case dnnl_format_kind_wino: return "wino";
    case dnnl_format_kind_rnn_packed: return "rnn_packed";
    default: return "opaque";
  }
  const dnnl_blocking_desc_t& blk = md->format_desc.blocking;
  const int nd = md->ndims;
  int64_t blocks[DNNL_MAX_NDIMS], outer[DNNL_MAX_NDIMS], strides[DNNL_MAX_NDIMS];
  char letters[DNNL_MAX_NDIMS + 1];
  for (int d = 0; d < nd; ++d) blocks[d] = 1;
  for (int b = 0; b < blk.inner_nblks && b < DNNL_MAX_NDIMS; ++b) {
    const int64_t idx = blk.inner_idxs[b];
    if (idx >= 0 && idx < nd) blocks[idx] *= blk.inner_blks[b];
  }
  for (int d = 0; d < nd; ++d) {
    letters[d] = static_cast<char>((blocks[d] == 1 ? 'a' : 'A') + d);
    outer[d] = blocks[d] > 0 ? md->padded_dims[d] / blocks[d] : 0;
    strides[d] = blk.strides[d];
  }
  if (nd > 0) {
    // The same stable bubble sort as oneDNN's utils::simultaneous_sort, so ties come out alike.
    auto cmp = [](int64_t a, int64_t b) { return b - a; };
    for (int i = 0; i < nd - 1; ++i) {
      bool swapped = false;
      for (int j = 0; j < nd - i - 1; ++j) {
        int64_t r = cmp(strides[j], strides[j + 1]);
        if (r == 0) r = cmp(outer[j], outer[j + 1]);
        if (r > 0) {
          std::swap(strides[j], strides[j + 1]);
          std::swap(outer[j], outer[j + 1]);
          std::swap(letters[j], letters[j + 1]);
          swapped = true;
        }
      }
      if (!swapped) break;
    }
  }
  std::string s(letters, static_cast<size_t>(nd));
  for (int b = 0; b < blk.inner_nblks && b < DNNL_MAX_NDIMS; ++b)
    s += std::to_string(blk.inner_blks[b]) + static_cast<char>('a' + blk.inner_idxs[b]);
  return s;
}

// One memory argument of the descriptor.
struct Arg {
  int arg;
  ArgKind kind;
  const md_t* md;
};

// The DNNL_ARG_* kinds a descriptor is asked about, in the order the shape lists them.
constexpr int kArgs[] = {
    DNNL_ARG_SRC,
    DNNL_ARG_SRC_1,
    DNNL_ARG_SRC_2,
    DNNL_ARG_SRC_3,
    DNNL_ARG_WEIGHTS,
    DNNL_ARG_WEIGHTS_1,
    DNNL_ARG_WEIGHTS_2,
    DNNL_ARG_WEIGHTS_3,
    DNNL_ARG_BIAS,
    DNNL_ARG_MEAN,
    DNNL_ARG_VARIANCE,
    DNNL_ARG_SCALE,
    DNNL_ARG_SHIFT,
    DNNL_ARG_DIFF_DST,
    DNNL_ARG_DIFF_DST_1,
    DNNL_ARG_DIFF_DST_2,
    DNNL_ARG_DST,
    DNNL_ARG_DST_1,
    DNNL_ARG_DST_2,
    DNNL_ARG_DIFF_SRC,
    DNNL_ARG_DIFF_SRC_1,
    DNNL_ARG_DIFF_SRC_2,
    DNNL_ARG_DIFF_SRC_3,
    DNNL_ARG_DIFF_WEIGHTS,
    DNNL_ARG_DIFF_WEIGHTS_1,
    DNNL_ARG_DIFF_WEIGHTS_2,
    DNNL_ARG_DIFF_WEIGHTS_3,
    DNNL_ARG_DIFF_BIAS,
    DNNL_ARG_DIFF_SCALE,
    DNNL_ARG_DIFF_SHIFT,
    DNNL_ARG_WORKSPACE,
};
// oneDNN 2.x allows at most 32 post-ops.
constexpr int kMaxPostOps = 32;

class Describer {
 public:
  Describer(const Api& api, const_dnnl_primitive_desc_t pd, Description& out)
      : api_(api), pd_(pd), out_(out) {}

  bool run() {
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    if (api_.primitive_desc_query(pd_, dnnl_query_primitive_kind, 0, &kind) != dnnl_success) return false;
    // The op descriptor's own kind is what the program asked for: it tells logsoftmax from
    // softmax, which share a primitive kind, and pooling from pooling_v2.
    if (api_.primitive_desc_query(pd_, dnnl_query_op_d, 0, &op_) == dnnl_success && op_)
      kind = *static_cast<const dnnl_primitive_kind_t*>(op_);
    else
      op_ = nullptr;
    kind_ = kind;
    if (api_.primitive_desc_query(pd_, dnnl_query_prop_kind, 0, &prop_) != dnnl_success)
      prop_ = dnnl_prop_kind_undef;
    out_.prim_kind = kind_;
    out_.prop = prop_;
    out_.op_desc = op_;

    read_post_ops();
    collect_args();

    text_.add("prop=");
    text_.add(name(api_.prop_kind2str(prop_)));
    text_.add(' ');
    problem();
    while (text_.str().back() == ' ') text_.str().pop_back();  // a problem-less kind leaves one
    if (!post_ops_.empty()) {
      text_.add(" post_ops=");
      text_.add(post_ops_);
    }
    for (int i = 0; i < nargs_; ++i) {
      const Arg& a = args_[i];
      text_.add(' ');
      if (a.arg >= DNNL_ARG_MULTIPLE_SRC && a.arg < DNNL_ARG_MULTIPLE_DST)
        text_.addf("src%d", a.arg - DNNL_ARG_MULTIPLE_SRC);
      else
        text_.add(a.kind.name);
      text_.add('=');
      text_.add(name(api_.dt2str(a.md->data_type)));
      text_.add(':');
      text_.add(format_name(a.md));
    }
    out_.shape = std::move(text_.str());

    for (int arg :
         {DNNL_ARG_SRC, DNNL_ARG_DIFF_SRC, DNNL_ARG_MULTIPLE_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DST}) {
      if (const md_t* md = find(arg)) {
        out_.dtype = to_dtype(md->data_type);
        break;
      }
    }
    out_.bytes = bytes();
    return true;
  }

 private:
  static const char* name(const char* s) noexcept { return s ? s : "?"; }
  bool forward() const noexcept { return prop_ == dnnl_forward_training || prop_ == dnnl_forward_inference; }

  const md_t* query_arg(int arg) const noexcept {
    const md_t* md = api_.primitive_desc_query_md(pd_, dnnl_query_exec_arg_md, arg);
    return present(md) ? md : nullptr;
  }
  const md_t* find(int arg) const noexcept {
    for (int i = 0; i < nargs_; ++i)
      if (args_[i].arg == arg) return args_[i].md;
    return nullptr;
  }
  void push(int arg, const md_t* md) {
    if (md && nargs_ < kMaxArgs) args_[nargs_++] = Arg{arg, arg_kind(arg), md};
  }

  void read_post_ops() {
    const_dnnl_primitive_attr_t attr = nullptr;
    const_dnnl_post_ops_t po = nullptr;
    if (api_.primitive_desc_get_attr(pd_, &attr) != dnnl_success || !attr) return;
    if (api_.primitive_attr_get_post_ops(attr, &po) != dnnl_success || !po) return;
    const int n = api_.post_ops_len(po);
    for (int i = 0; i < n && i < kMaxPostOps; ++i) {
      if (i) post_ops_ += '+';
      switch (api_.post_ops_get_kind(po, i)) {
        case dnnl_sum:
          post_ops_ += "sum";
          out_.dst_read = true;
          break;
        case dnnl_eltwise: {
          float scale = 0, alpha = 0, beta = 0;
          dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
          api_.post_ops_get_params_eltwise(po, i, &scale, &alg, &alpha, &beta);
          post_ops_ += name(api_.alg_kind2str(alg));
          break;
        }
        case dnnl_binary: {
          dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
          const md_t* src1 = nullptr;
          api_.post_ops_get_params_binary(po, i, &alg, &src1);
          post_ops_ += name(api_.alg_kind2str(alg));
          binary_post_ops_[nbinary_post_ops_++] = i;
          break;
        }
        case dnnl_convolution: post_ops_ += "dw"; break;
        case dnnl_prelu: post_ops_ += "prelu"; break;
        default: post_ops_ += '?'; break;
      }
    }
  }

  // Normalization primitives: flags decide which of the aliased scale/shift arguments are real
  // and whether mean and variance are arguments at all (oneDNN answers for all of them).
  bool wanted(int arg) const noexcept {
    if (kind_ != dnnl_batch_normalization && kind_ != dnnl_layer_normalization) return true;
    const unsigned flags = norm_flags();
    switch (arg) {
      case DNNL_ARG_WEIGHTS:
      case DNNL_ARG_DIFF_WEIGHTS: return flags & dnnl_use_scaleshift;
      case DNNL_ARG_SCALE:
      case DNNL_ARG_DIFF_SCALE: return !(flags & dnnl_use_scaleshift) && (flags & dnnl_use_scale);
      case DNNL_ARG_SHIFT:
      case DNNL_ARG_DIFF_SHIFT: return !(flags & dnnl_use_scaleshift) && (flags & dnnl_use_shift);
      case DNNL_ARG_MEAN:
      case DNNL_ARG_VARIANCE: return (flags & dnnl_use_global_stats) || prop_ != dnnl_forward_inference;
      default: return true;
    }
  }
  unsigned norm_flags() const noexcept {
    if (!op_) return 0;
    if (kind_ == dnnl_batch_normalization)
      return static_cast<const dnnl_batch_normalization_desc_t*>(op_)->flags;
    if (kind_ == dnnl_layer_normalization)
      return static_cast<const dnnl_layer_normalization_desc_t*>(op_)->flags;
    return 0;
  }

  void collect_args() {
    for (int arg : kArgs) {
      if (arg == DNNL_ARG_DIFF_DST) {
        // Sum and concat sources come after the plain sources.
        const int n = api_.primitive_desc_query_s32(pd_, dnnl_query_num_of_inputs_s32, 0);
        if (kind_ == dnnl_sum || kind_ == dnnl_concat)
          for (int i = 0; i < n; ++i) push(DNNL_ARG_MULTIPLE_SRC + i, query_arg(DNNL_ARG_MULTIPLE_SRC + i));
        // Only binary post-ops have a source: oneDNN 2.6 answers for the others too, with garbage.
        for (int i = 0; i < nbinary_post_ops_; ++i) {
          const int po_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(binary_post_ops_[i]) | DNNL_ARG_SRC_1;
          push(po_arg, query_arg(po_arg));
        }
      }
      if (wanted(arg)) push(arg, query_arg(arg));
    }
    const unsigned flags = norm_flags();
    out_.stats_written = prop_ == dnnl_forward_training && !(flags & dnnl_use_global_stats);
  }

  double bytes() const {
    double total = 0;
    for (int i = 0; i < nargs_; ++i) {
      size_t size = api_.memory_desc_get_size(args_[i].md);
      if (size == DNNL_RUNTIME_SIZE_VAL) continue;
      int directions = 1;
      switch (args_[i].kind.use) {
        case Use::read:
        case Use::workspace:
        case Use::stats: directions = 1; break;
        case Use::write: directions = (args_[i].arg == DNNL_ARG_DST && out_.dst_read) ? 2 : 1; break;
        case Use::skip: directions = 0; break;
      }
      total += static_cast<double>(size) * directions;
    }
    return total;
  }

  // ----------------------------------------------------------------------- problem and flops

  void problem() {
    if (!op_) return;
    switch (kind_) {
      case dnnl_convolution:
      case dnnl_deconvolution: return convolution(*static_cast<const dnnl_convolution_desc_t*>(op_));
      case dnnl_inner_product: return inner_product(*static_cast<const dnnl_inner_product_desc_t*>(op_));
      case dnnl_matmul: return matmul();
      case dnnl_pooling:
      case dnnl_pooling_v2: return pooling(*static_cast<const dnnl_pooling_v2_desc_t*>(op_));
      case dnnl_eltwise: return eltwise(*static_cast<const dnnl_eltwise_desc_t*>(op_));
      case dnnl_batch_normalization: {
        const auto& d = *static_cast<const dnnl_batch_normalization_desc_t*>(op_);
        return normalization(d.flags, first_present(&d.data_desc, &d.diff_data_desc), true);
      }
      case dnnl_layer_normalization: {
        const auto& d = *static_cast<const dnnl_layer_normalization_desc_t*>(op_);
        return normalization(d.flags, first_present(&d.data_desc, &d.diff_data_desc), false);
      }
      case dnnl_softmax:
      case dnnl_logsoftmax:
      case dnnl_softmax_v2: return softmax();
      case dnnl_binary: return binary(*static_cast<const dnnl_binary_desc_t*>(op_));
      case dnnl_lrn: return lrn(*static_cast<const dnnl_lrn_desc_t*>(op_));
      case dnnl_shuffle: return shuffle(*static_cast<const dnnl_shuffle_desc_t*>(op_));
      case dnnl_resampling: return resampling(*static_cast<const dnnl_resampling_desc_t*>(op_));
      case dnnl_reduction: return reduction(*static_cast<const dnnl_reduction_desc_t*>(op_));
      case dnnl_prelu: return prelu(*static_cast<const dnnl_prelu_desc_t*>(op_));
      case dnnl_rnn: return rnn(*static_cast<const dnnl_rnn_desc_t*>(op_));
      case dnnl_reorder: return copy(first_present(find(DNNL_ARG_SRC), find(DNNL_ARG_DST)));
      case dnnl_sum: return sum();
      case dnnl_concat: return concat();
      default: return;
    }
  }

  void alg(dnnl_alg_kind_t a) {
    text_.add("alg=");
    text_.add(name(api_.alg_kind2str(a)));
    text_.add(' ');
  }

  // The _i?o?k?s?d?p? groups of convolutions and pooling, d, h, w as the tensor has them.
  void spatial(int nsp, const int64_t* in, const int64_t* out, const int64_t* k, const dnnl_dim_t* s,
               const dnnl_dim_t* dl, const dnnl_dim_t* p) {
    for (int i = 0; i < nsp; ++i) {
      const char c = spatial_letter(nsp, i);
      text_.addf("_i%c%" PRId64 "o%c%" PRId64 "k%c%" PRId64 "s%c%" PRId64 "d%c%" PRId64 "p%c%" PRId64, c,
                 in[i], c, out[i], c, k[i], c, s[i], c, dl[i], c, p[i]);
    }
  }

  void convolution(const dnnl_convolution_desc_t& d) {
    const md_t* src = first_present(&d.src_desc, &d.diff_src_desc);
    const md_t* wei = first_present(&d.weights_desc, &d.diff_weights_desc);
    const md_t* dst = first_present(&d.dst_desc, &d.diff_dst_desc);
    if (!present(src) || !present(wei) || !present(dst) || src->ndims < 3 || src->ndims > 5) return;
    if (d.alg_kind != dnnl_convolution_direct && d.alg_kind != dnnl_deconvolution_direct) alg(d.alg_kind);
    const int nsp = src->ndims - 2;
    const bool groups = wei->ndims == src->ndims + 1;
    const int64_t g = groups ? wei->dims[0] : 1;
    const int64_t mb = src->dims[0], ic = src->dims[1], oc = dst->dims[1];
    int64_t in[3], out[3], k[3];
    double in_points = 1, out_points = 1, k_points = 1;
    for (int i = 0; i < nsp; ++i) {
      in[i] = src->dims[2 + i];
      out[i] = dst->dims[2 + i];
      k[i] = wei->dims[wei->ndims - nsp + i];
      in_points *= static_cast<double>(in[i]);
      out_points *= static_cast<double>(out[i]);
      k_points *= static_cast<double>(k[i]);
    }
    if (groups) text_.addf("g%" PRId64, g);
    text_.addf("mb%" PRId64 "_ic%" PRId64 "oc%" PRId64, mb, ic, oc);
    spatial(nsp, in, out, k, d.strides, d.dilates, d.padding[0]);
    if (g <= 0 || mb < 0 || ic < 0 || oc < 0) return;
    // A deconvolution is the transposed convolution: its source plays the convolution's output.
    if (kind_ == dnnl_deconvolution)
      out_.flops = 2.0 * mb * ic * in_points * static_cast<double>(oc / g) * k_points;
    else
      out_.flops = 2.0 * mb * oc * out_points * static_cast<double>(ic / g) * k_points;
  }

  void inner_product(const dnnl_inner_product_desc_t& d) {
    const md_t* src = first_present(&d.src_desc, &d.diff_src_desc);
    const md_t* wei = first_present(&d.weights_desc, &d.diff_weights_desc);
    if (!present(src) || !present(wei)) return;
    text_.desc_dims(src);
    text_.addf("oc%" PRId64, wei->dims[0]);
    if (wei->dims[0] >= 0) out_.flops = 2.0 * static_cast<double>(wei->dims[0]) * elements(src);
  }

  void matmul() {
    const md_t* src = find(DNNL_ARG_SRC);
    const md_t* wei = find(DNNL_ARG_WEIGHTS);
    const md_t* dst = find(DNNL_ARG_DST);
    if (!src || !wei || !dst || dst->ndims < 2) return;
    text_.dims(src);
    text_.add(':');
    text_.dims(wei);
    text_.add(':');
    text_.dims(dst);
    const double mn = elements(dst);  // batch * M * N
    const int64_t k = src->dims[src->ndims - 1];
    if (k >= 0) out_.flops = 2.0 * mn * static_cast<double>(k);
  }

  // pooling and pooling_v2 descriptors share their layout up to the v2's trailing dilation.
  void pooling(const dnnl_pooling_v2_desc_t& d) {
    const md_t* src = first_present(&d.src_desc, &d.diff_src_desc);
    const md_t* dst = first_present(&d.dst_desc, &d.diff_dst_desc);
    if (!present(src) || !present(dst) || src->ndims < 3 || src->ndims > 5) return;
    alg(d.alg_kind);
    const int nsp = src->ndims - 2;
    const dnnl_dims_t no_dilation = {};
    int64_t in[3], out[3];
    double k_points = 1;
    for (int i = 0; i < nsp; ++i) {
      in[i] = src->dims[2 + i];
      out[i] = dst->dims[2 + i];
      k_points *= static_cast<double>(d.kernel[i]);
    }
    text_.addf("mb%" PRId64 "ic%" PRId64, src->dims[0], src->dims[1]);
    spatial(nsp, in, out, d.kernel, d.strides, d.primitive_kind == dnnl_pooling_v2 ? d.dilation : no_dilation,
            d.padding[0]);
    out_.flops = elements(dst) * k_points;
  }

  void eltwise(const dnnl_eltwise_desc_t& d) {
    const md_t* data = first_present(&d.data_desc, &d.diff_data_desc);
    alg(d.alg_kind);
    text_.addf("alpha=%g beta=%g ", d.alpha, d.beta);
    text_.dims(data);
    out_.flops = elements(data);
  }

  static std::string norm_flags_name(unsigned flags) {
    std::string s;
    if (flags & dnnl_use_global_stats) s += 'G';
    if (flags & dnnl_use_scaleshift) s += 'S';
    if (flags & dnnl_use_scale) s += 'C';
    if (flags & dnnl_use_shift) s += 'H';
    if (flags & dnnl_fuse_norm_relu) s += 'R';
    return s;
  }

  void normalization(unsigned flags, const md_t* data, bool batch) {
    const std::string f = norm_flags_name(flags);
    if (!f.empty()) text_.add("flags=" + f + " ");
    if (batch)
      text_.desc_dims(data);
    else
      text_.dims(data);
    out_.flops = 5 * elements(data);
  }

  void softmax() {
    const md_t* data;
    int axis;
    dnnl_alg_kind_t a;
    if (kind_ == dnnl_softmax_v2) {
      const auto& d = *static_cast<const dnnl_softmax_v2_desc_t*>(op_);
      data = first_present(&d.src_desc, &d.diff_src_desc);
      axis = d.softmax_axis;
      a = d.alg_kind;
    } else {
      const auto& d = *static_cast<const dnnl_softmax_desc_t*>(op_);
      data = first_present(&d.data_desc, &d.diff_desc);
      axis = d.softmax_axis;
      a = kind_ == dnnl_logsoftmax ? dnnl_softmax_log : dnnl_softmax_accurate;
    }
    alg(a);
    text_.addf("axis=%d ", axis);
    text_.dims(data);
    out_.flops = 5 * elements(data);
  }

  void binary(const dnnl_binary_desc_t& d) {
    alg(d.alg_kind);
    text_.dims(&d.src_desc[0]);
    text_.add(':');
    text_.dims(&d.src_desc[1]);
    out_.flops = elements(&d.dst_desc);
  }

  void lrn(const dnnl_lrn_desc_t& d) {
    const md_t* data = first_present(&d.data_desc, &d.diff_data_desc);
    alg(d.alg_kind);
    text_.desc_dims(data);
    text_.addf("ls%" PRId64 "beta%g", d.local_size, d.lrn_beta);
    const double ls = static_cast<double>(d.local_size);
    const int nsp = present(data) ? data->ndims - 2 : 0;
    double window = ls;
    if (d.alg_kind == dnnl_lrn_within_channel)
      for (int i = 1; i < nsp; ++i) window *= ls;
    out_.flops = 2 * elements(data) * window;
  }

  void shuffle(const dnnl_shuffle_desc_t& d) {
    text_.addf("axis=%d group=%" PRId64 " ", d.axis, d.group_size);
    text_.dims(&d.data_desc);
    out_.flops = elements(&d.data_desc);
  }

  void resampling(const dnnl_resampling_desc_t& d) {
    const md_t* src = first_present(&d.src_desc, &d.diff_src_desc);
    const md_t* dst = first_present(&d.dst_desc, &d.diff_dst_desc);
    if (!present(src) || !present(dst) || src->ndims < 3 || src->ndims > 5) return;
    alg(d.alg_kind);
    const int nsp = src->ndims - 2;
    text_.addf("mb%" PRId64 "ic%" PRId64, src->dims[0], src->dims[1]);
    for (int i = 0; i < nsp; ++i) {
      const char c = spatial_letter(nsp, i);
      text_.addf("_i%c%" PRId64 "o%c%" PRId64, c, src->dims[2 + i], c, dst->dims[2 + i]);
    }
    const double per_point = d.alg_kind == dnnl_resampling_nearest ? 1 : 2.0 * (1 << nsp);
    out_.flops = elements(dst) * per_point;
  }

  void reduction(const dnnl_reduction_desc_t& d) {
    alg(d.alg_kind);
    text_.addf("p=%g eps=%g ", d.p, d.eps);
    text_.dims(&d.src_desc);
    text_.add(':');
    text_.dims(&d.dst_desc);
    out_.flops = elements(&d.src_desc);
  }

  void prelu(const dnnl_prelu_desc_t& d) {
    const md_t* data = first_present(&d.data_desc, &d.diff_data_desc);
    text_.dims(data);
    text_.add(':');
    text_.dims(first_present(&d.weights_desc, &d.diff_weights_desc));
    out_.flops = elements(data);
  }

  void rnn(const dnnl_rnn_desc_t& d) {
    const md_t& src = d.src_layer_desc;
    const md_t& wl = d.weights_layer_desc;
    const md_t& wi = d.weights_iter_desc;
    if (src.ndims != 3 || wl.ndims != 5 || wi.ndims != 5) return;
    alg(d.cell_kind);
    text_.add("direction=");
    text_.add(name(api_.rnn_direction2str(d.direction)));
    text_.add(' ');
    if (d.activation_kind != dnnl_alg_kind_undef) {
      text_.add("activation=");
      text_.add(name(api_.alg_kind2str(d.activation_kind)));
      text_.add(' ');
    }
    const int64_t l = wl.dims[0], dirs = wl.dims[1], slc = wl.dims[2], gates = wl.dims[3], dhc = wl.dims[4];
    const int64_t t = src.dims[0], mb = src.dims[1], sic = wi.dims[2];
    const int64_t dic = present(&d.weights_projection_desc) ? d.weights_projection_desc.dims[3] : dhc;
    text_.addf("l%" PRId64 "t%" PRId64 "mb%" PRId64 "sic%" PRId64 "slc%" PRId64 "dhc%" PRId64 "dic%" PRId64,
               l, t, mb, sic, slc, dhc, dic);
    if (l < 0 || dirs < 0 || t < 0 || mb < 0 || slc < 0 || sic < 0 || gates < 0 || dhc < 0 || dic < 0) return;
    const double cells = static_cast<double>(l) * dirs * t * mb;
    double flops = 2.0 * cells * gates * dhc * (slc + sic);
    if (present(&d.weights_projection_desc)) flops += 2.0 * cells * dhc * dic;
    out_.flops = forward() ? flops : 2 * flops;
  }

  void copy(const md_t* data) {
    text_.dims(data);
    out_.flops = elements(data);
  }

  void sum() {
    const md_t* dst = find(DNNL_ARG_DST);
    text_.dims(dst);
    const int n = api_.primitive_desc_query_s32(pd_, dnnl_query_num_of_inputs_s32, 0);
    out_.flops = elements(dst) * (n > 0 ? n : 1);
  }

  // The concatenation axis is not in the public API; it is the dimension along which the
  // sources' sizes add up to the destination's while every other dimension agrees.
  void concat() {
    const md_t* dst = find(DNNL_ARG_DST);
    const int n = api_.primitive_desc_query_s32(pd_, dnnl_query_num_of_inputs_s32, 0);
    if (!dst || n <= 0) return;
    int axis = -1;
    for (int d = 0; d < dst->ndims && axis < 0; ++d) {
      int64_t total = 0;
      bool others_agree = true;
      for (int i = 0; i < n; ++i) {
        const md_t* src = find(DNNL_ARG_MULTIPLE_SRC + i);
        if (!src || src->ndims != dst->ndims) return;
        total += src->dims[d];
        for (int e = 0; e < dst->ndims; ++e)
          if (e != d && src->dims[e] != dst->dims[e]) others_agree = false;
      }
      if (others_agree && total == dst->dims[d]) axis = d;
    }
    if (axis >= 0) text_.addf("axis=%d ", axis);
    for (int i = 0; i < n; ++i) {
      if (i) text_.add(':');
      text_.dims(find(DNNL_ARG_MULTIPLE_SRC + i));
    }
    out_.flops = elements(dst);
  }

  static constexpr int kMaxArgs = 64;

  const Api& api_;
  const_dnnl_primitive_desc_t pd_;
  Description& out_;
  const void* op_ = nullptr;
  dnnl_primitive_kind_t kind_ = dnnl_undefined_primitive;
  dnnl_prop_kind_t prop_ = dnnl_prop_kind_undef;
  std::string post_ops_;
  int binary_post_ops_[kMaxPostOps];
  int nbinary_post_ops_ = 0;
  Arg args_[kMaxArgs];
  int nargs_ = 0;
  Text text_;
};

}  // namespace

ArgKind arg_kind(int arg) noexcept {
  // Sources of sum and concat, and the outputs of primitives that have several.
  static const char* const kSrcN[] = {"src0", "src1", "src2",  "src3",  "src4",  "src5",  "src6",  "src7",
                                      "src8", "src9", "src10", "src11", "src12", "src13", "src14", "src15"};
  static const char* const kDstN[] = {"dst0", "dst1", "dst2", "dst3", "dst4", "dst5", "dst6", "dst7"};
  constexpr int kNSrc = sizeof kSrcN / sizeof kSrcN[0], kNDst = sizeof kDstN / sizeof kDstN[0];
  if (arg >= DNNL_ARG_MULTIPLE_SRC && arg < DNNL_ARG_MULTIPLE_DST) {
    const int i = arg - DNNL_ARG_MULTIPLE_SRC;
    return {i < kNSrc ? kSrcN[i] : "src", Use::read};
  }
  if (arg >= DNNL_ARG_MULTIPLE_DST && arg < DNNL_ARG_ATTR_ZERO_POINTS) {
    const int i = arg - DNNL_ARG_MULTIPLE_DST;
    return {i < kNDst ? kDstN[i] : "dst", Use::write};
  }
  if (arg >= DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE && arg < DNNL_ARG_ATTR_INPUT_SCALES)
    return {"po_src", Use::read};
  if (arg & DNNL_ARG_ATTR_INPUT_SCALES) return {"scales", Use::read};
  if (arg & DNNL_ARG_ATTR_POST_OP_DW) return {"dw", Use::read};
  if (arg & DNNL_ARG_ATTR_ZERO_POINTS) return {"zp", Use::read};
  switch (arg) {
    case DNNL_ARG_SRC: return {"src", Use::read};
    case DNNL_ARG_SRC_1: return {"src1", Use::read};
    case DNNL_ARG_SRC_2: return {"src2", Use::read};
    case DNNL_ARG_SRC_3: return {"src3", Use::read};
    case DNNL_ARG_DST: return {"dst", Use::write};
    case DNNL_ARG_DST_1: return {"dst1", Use::write};
    case DNNL_ARG_DST_2: return {"dst2", Use::write};
    case DNNL_ARG_WEIGHTS: return {"wei", Use::read};
    case DNNL_ARG_WEIGHTS_1: return {"wei1", Use::read};
    case DNNL_ARG_WEIGHTS_2: return {"wei2", Use::read};
    case DNNL_ARG_WEIGHTS_3: return {"wei3", Use::read};
    case DNNL_ARG_BIAS: return {"bia", Use::read};
    case DNNL_ARG_MEAN: return {"mean", Use::stats};
    case DNNL_ARG_VARIANCE: return {"var", Use::stats};
    case DNNL_ARG_SCALE: return {"scale", Use::read};
    case DNNL_ARG_SHIFT: return {"shift", Use::read};
    case DNNL_ARG_WORKSPACE: return {"ws", Use::workspace};
    case DNNL_ARG_SCRATCHPAD: return {"scratchpad", Use::skip};
    case DNNL_ARG_DIFF_SRC: return {"diff_src", Use::write};
    case DNNL_ARG_DIFF_SRC_1: return {"diff_src1", Use::write};
    case DNNL_ARG_DIFF_SRC_2: return {"diff_src2", Use::write};
    case DNNL_ARG_DIFF_SRC_3: return {"diff_src3", Use::write};
    case DNNL_ARG_DIFF_DST: return {"diff_dst", Use::read};
    case DNNL_ARG_DIFF_DST_1: return {"diff_dst1", Use::read};
    case DNNL_ARG_DIFF_DST_2: return {"diff_dst2", Use::read};
    case DNNL_ARG_DIFF_WEIGHTS: return {"diff_wei", Use::write};
    case DNNL_ARG_DIFF_WEIGHTS_1: return {"diff_wei1", Use::write};
    case DNNL_ARG_DIFF_WEIGHTS_2: return {"diff_wei2", Use::write};
    case DNNL_ARG_DIFF_WEIGHTS_3: return {"diff_wei3", Use::write};
    case DNNL_ARG_DIFF_BIAS: return {"diff_bia", Use::write};
    case DNNL_ARG_DIFF_SCALE: return {"diff_scale", Use::write};
    case DNNL_ARG_DIFF_SHIFT: return {"diff_shift", Use::write};
    case DNNL_ARG_ATTR_OUTPUT_SCALES: return {"oscale", Use::read};
    default: return {"arg", Use::read};
  }
}

bool describe(const Api& api, const_dnnl_primitive_desc_t pd, Description& out) {
  if (!pd) return false;
  return Describer(api, pd, out).run();
}

}  // namespace sol::interpose::dnnl::detail
