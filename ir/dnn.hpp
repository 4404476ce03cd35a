// DNN nodes of SOL's IR: what a deep-learning primitive computes, in SOL's own terms.
//
// A frontend (oneDNN's today, cuDNN's later) describes each primitive once, when the framework
// creates it, as a dnn::Desc, and binds the data pointers of each execution into a dnn::Call that
// the Node points to (Node::dnn). Backends implement each kind once, against this header: they
// never see a frontend's structs.
//
// Conventions (framework-neutral; a frontend converts):
// - Tensors are logical arrays of `ndims` dimensions in the canonical order of their role:
//     data tensors                 N, C, [D,] [H,] W          (matmul: [batch...,] M, K / K, N / M, N)
//     convolution weights          [G,] O, I, [D,] [H,] W     (O and I per group when G is present)
//     deconvolution weights        [G,] O, I, spatial         (O: the deconvolution's output channels)
//     inner-product weights        O, I, [spatial...]         (matching src's trailing dims)
//     bias                         O (inner product, convolution: all groups' outputs)
//     mean, variance               C (batch normalization); data's dims without the last (layer norm)
//     scale, shift                 C (batch normalization); the last axis' size (layer norm)
//   and each has a Layout saying where element (i0, i1, ...) lives (plain strides or blocked).
// - Geometry: dilation 1 is dense (oneDNN's 0); padding is given at both ends (pad_l, pad_r).
// - Every tensor a kind does not use is absent from Desc::tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/node.hpp"

namespace sol::capture::dnn {

inline constexpr int kMaxDims = 6;      // gOIdhw
inline constexpr int kMaxBlocks = 4;    // inner blocks of one layout (ABcd8b16a2b has 3)
inline constexpr int kMaxTensors = 24;  // of one Desc (concat and sum: many sources)
inline constexpr int kMaxPostOps = 8;

// Where each element of a tensor lives: oneDNN's "blocked" description, which covers plain strided
// tensors (no inner blocks), channel-blocked ones (nChw8c: one inner block of 8 on dim 1) and
// weights with several inner blocks (OIhw8i8o, gOIhw4i16o4i).
//
// offset(idx) = offset0 + sum_d (idx[d] / B_d) * strides[d] + inner(idx), where B_d is the
// product of the inner blocks on dim d and inner() places the remainders inside the innermost
// block (the last inner block varies fastest), exactly as oneDNN's memory_desc_wrapper::off_v.
// Elements between dims[d] and padded[d] exist in memory (a blocked dim is padded to a multiple
// of its block); a writer fills them with zeros.
struct Layout {
  int ndims = 0;
  int64_t dims[kMaxDims] = {};
  int64_t padded[kMaxDims] = {};   // >= dims; equal to dims for plain layouts
  int64_t strides[kMaxDims] = {};  // elements between consecutive outer indices of each dim
  int64_t offset0 = 0;             // elements before element (0, ..., 0)
  int nblocks = 0;
  int64_t block[kMaxBlocks] = {};     // inner block sizes, outermost first
  int8_t block_dim[kMaxBlocks] = {};  // which dim each inner block splits

  bool plain() const noexcept { return nblocks == 0; }

  // Element offset of a logical index (idx[d] < padded[d]).
  int64_t offset(const int64_t* idx) const noexcept {
    int64_t pos[kMaxDims];
    for (int d = 0; d < ndims; ++d) pos[d] = idx[d];
    int64_t off = offset0, stride = 1;
    for (int b = nblocks - 1; b >= 0; --b) {
      const int d = block_dim[b];
      off += (pos[d] % block[b]) * stride;
      pos[d] /= block[b];
      stride *= block[b];
    }
    for (int d = 0; d < ndims; ++d) off += pos[d] * strides[d];
    return off;
  }
  // Logical elements (the product of dims).
  int64_t elements() const noexcept {
    int64_t n = 1;
    for (int d = 0; d < ndims; ++d) n *= dims[d];
    return ndims ? n : 0;
  }
};

struct TensorDesc {
  DType dtype = DType::none;
  Layout layout;
  size_t bytes = 0;  // the buffer the tensor occupies, padding included (from the frontend)
};

// A layout's padded elements (the product of padded dims, 0 for none); one past the last element
// offset() reaches (0 for an empty tensor: offsets grow with every index, strides are not
// negative); whether it is plain, dense, row-major and starts at 0.
int64_t padded_elements(const Layout& l) noexcept;
int64_t extent(const Layout& l) noexcept;
bool dense_canonical(const Layout& l) noexcept;
// The bytes a tensor's buffer spans (its `bytes`, or what its layout reaches if more); whether
// writing every padded element through the layout writes every byte of that buffer.
size_t buffer_bytes(const TensorDesc& t) noexcept;
bool covers(const TensorDesc& t) noexcept;

// The role of a tensor in its primitive.
enum class Arg : uint8_t {
  src,
  src1,  // binary's second input; prelu's weights are `weights`
  weights,
  bias,
  dst,
  diff_src,
  diff_weights,
  diff_bias,
  diff_dst,
  mean,
  variance,
  scale,
  shift,
  diff_scale,
  diff_shift,
  workspace,    // opaque to frontends; owned by the backend that ran the forward pass
  multi_src,    // sum and concat sources: Tensor::index is the source's position
  post_op_src,  // a binary post-op's second input: Tensor::index is the post-op's position
};
const char* arg_name(Arg a) noexcept;

struct Tensor {
  Arg arg = Arg::src;
  uint8_t index = 0;  // multi_src, post_op_src
  TensorDesc desc;
};

// The propagation kind.
enum class Prop : uint8_t {
  none,               // kinds without one: matmul, reorder, binary, sum, concat
  forward_training,   // may write a workspace and (normalizations) mean and variance
  forward_inference,  // normalizations with global_stats read mean and variance
  backward_data,      // diff_src from diff_dst (and weights / workspace / mean and variance)
  backward_weights,   // diff_weights (and diff_bias) from src and diff_dst
  backward,           // normalizations: diff_src and diff_scale / diff_shift
};
const char* prop_name(Prop p) noexcept;

// Algorithms, by kind. SOL_DNN_ALG(name)
#define SOL_DNN_ALGS(X)                                                                                      \
  X(none)                                                                                                    \
  /* convolution, deconvolution: every algorithm computes the direct convolution */                          \
  X(direct)                                                                                                  \
  /* eltwise, and eltwise post-ops: y = f(x; alpha, beta) as oneDNN 2.x defines them */                      \
  X(relu) /* x > 0 ? x : alpha * x */                                                                        \
  X(tanh)                                                                                                    \
  X(elu)                                                   /* x > 0 ? x : alpha * (e^x - 1) */               \
      X(square) X(abs) X(sqrt) X(linear)                   /* alpha * x + beta */                            \
      X(bounded_relu)                                      /* min(alpha, max(x, 0)) */                       \
      X(soft_relu)                                         /* log(1 + e^x) */                                \
      X(logistic) X(exp) X(gelu_tanh) X(gelu_erf) X(swish) /* x * logistic(alpha * x) */                     \
      X(log) X(clip)                                       /* min(beta, max(alpha, x)) */                    \
      X(clip_v2) /* clip, but x <= alpha gives alpha and x > beta gives beta */                              \
      X(pow)     /* alpha * x^beta */                                                                        \
      X(round) X(logsigmoid) X(mish)                                                                         \
          X(hardswish) /* x * min(max(x + 3, 0), 6) / 6 */ /* the backward pass of these reads dst instead   \
                                                              of src */                                      \
      X(relu_dst) X(tanh_dst) X(elu_dst) X(sqrt_dst) X(logistic_dst) X(exp_dst) X(clip_v2_dst) /* pooling */ \
      X(pool_max) X(pool_avg_include_padding) X(pool_avg_exclude_padding) /* binary, and binary post-ops */  \
      X(add) X(mul) X(max) X(min) X(div) X(sub) X(ge) X(gt) X(le) X(lt) X(eq) X(ne) /* lrn */                \
      X(lrn_across) X(lrn_within)                                                   /* resampling */         \
      X(nearest) X(linear_interp)                                                   /* reduction */          \
      X(reduce_max) X(reduce_min) X(reduce_sum) X(reduce_mul) X(reduce_mean) X(reduce_norm_lp_max)           \
          X(reduce_norm_lp_sum) X(reduce_norm_lp_power_p_max) X(reduce_norm_lp_power_p_sum)

enum class Alg : uint8_t {
#define SOL_DNN_ALG_ENUM(name) name,
  SOL_DNN_ALGS(SOL_DNN_ALG_ENUM)
#undef SOL_DNN_ALG_ENUM
};
const char* alg_name(Alg a) noexcept;

// Applied, in order, to each output value v after the primitive computed it (and after the
// output scale): sum: v += scale * (the value dst held before the call, as sum_dtype);
// eltwise: v = scale * f(v; alpha, beta); binary: v = v <alg> post_op_src[index] (broadcast as
// binary broadcasts).
struct PostOp {
  enum class Kind : uint8_t { sum, eltwise, binary } kind = Kind::sum;
  Alg alg = Alg::none;
  float scale = 1, alpha = 0, beta = 0;
  DType sum_dtype = DType::none;  // sum: the type dst's old values are read as (none: dst's own)
};

// What one primitive computes. Immutable once the frontend built it; shared by every execution.
struct Desc {
  Op kind = Op::dnnl_execute;  // one of the dnn-family kinds of ops.def (Op::convolution, ...)
  Prop prop = Prop::none;
  Alg alg = Alg::none;
  DType dtype = DType::none;  // the main source's element type, for routing and traces

  // convolution, deconvolution, pooling: nsp spatial dims (1 to 3), kernel, strides, dilations
  // (1 = dense), paddings before and after (may differ: asymmetric padding). groups: 1 without.
  int nsp = 0;
  int64_t groups = 1;
  int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  int64_t pad_l[3] = {}, pad_r[3] = {};

  // eltwise: alpha, beta. lrn: alpha, beta, k. reduction: p (alpha), eps (beta).
  float alpha = 0, beta = 0, k = 0;
  // normalizations: y = scale * (x - mean) / sqrt(variance + epsilon) + shift
  float epsilon = 0;
  bool global_stats = false;  // mean and variance are inputs (else computed, and written in training)
  bool use_scale = false, use_shift = false;
  bool fuse_relu = false;  // ReLU after normalization; training writes its mask to the workspace
  int axis = 0;            // softmax, logsoftmax, concat, shuffle
  int64_t group_size = 0;  // shuffle
  int64_t local_size = 0;  // lrn

  float output_scale = 1;  // common output scale (attribute), applied before post-ops
  // sum: dst = sum_i sum_scales[i] * multi_src[i] (at most kMaxTensors - 1 sources)
  float sum_scales[kMaxTensors] = {};
  int npost_ops = 0;
  PostOp post_ops[kMaxPostOps];

  int ntensors = 0;
  Tensor tensors[kMaxTensors];

  double flops = 0;   // one execution (multiply-add = 2)
  double bytes = 0;   // read plus written
  std::string shape;  // the problem as text, for traces and logs (the frontend's notation)
  // Why this primitive cannot be a node for SOL's backends (runtime dimensions, an attribute or
  // layout the IR cannot express...), or nullptr. Such a node is described (traces show it) but
  // always runs natively; tensors may then be missing.
  const char* unsupported = nullptr;

  // The tensor with this role (and index), or -1.
  int find(Arg a, int index = 0) const noexcept {
    for (int i = 0; i < ntensors; ++i)
      if (tensors[i].arg == a && tensors[i].index == index) return i;
    return -1;
  }
  const TensorDesc* desc(Arg a, int index = 0) const noexcept {
    const int i = find(a, index);
    return i < 0 ? nullptr : &tensors[i].desc;
  }
  // Whether a role is written by this primitive (the rest are read; dst is read by backward passes
  // and under a sum post-op;
  // mean and variance are written by forward_training without global_stats; the workspace is
  // written by forward passes and read by backward ones).
  bool written(const Tensor& t) const noexcept;
  bool read(const Tensor& t) const noexcept;
  bool has_sum_post_op() const noexcept {
    for (int i = 0; i < npost_ops; ++i)
      if (post_ops[i].kind == PostOp::Kind::sum) return true;
    return false;
  }
};

// What identifies a description: a hash of everything in it (kind, propagation, algorithm,
// geometry, attributes, every tensor's layout, the frontend's text, the reason it is unsupported),
// so that equal descriptions made apart (by two primitives, by two processes) have the same key.
uint64_t content_key(const Desc& d) noexcept;

class Call;

// How the frontend runs a call natively with some tensors moved elsewhere: `data` has one
// pointer per Desc tensor (same layout, another buffer). Verify uses it to run the native
// primitive on copies. Returns false when it could not (the check is then skipped).
using NativeRerun = bool (*)(const Call& call, void* const* data) noexcept;

// One execution: the description and the data pointers of this call, one per Desc tensor.
class Call {
 public:
  const Desc* desc = nullptr;
  void* data[kMaxTensors] = {};
  NativeRerun rerun_native = nullptr;
  // Why `data` is not bound (an argument missing or not matching desc), or nullptr. Such a call
  // is traced as its kind but runs natively.
  const char* unbound = nullptr;
  const void* frontend = nullptr;  // the frontend's own record of the call (for rerun_native)

  void* ptr(Arg a, int index = 0) const noexcept {
    const int i = desc->find(a, index);
    return i < 0 ? nullptr : data[i];
  }
};

}  // namespace sol::capture::dnn
