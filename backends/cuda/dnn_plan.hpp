// DNN nodes in cuDNN's terms, decided without a device: which nodes the cuda backend takes (and
// the reason it gives for the others), and how each one's tensors and geometry translate into
// cuDNN's descriptors. dnn.cpp runs what these plans say; tests check them without a GPU.
//
// Layouts. cuDNN computes on dense tensors (NCHW order, strides of its own choosing). A tensor of
// any other layout SOL's IR can express goes through cudnnTransformTensor, a strided copy of up to
// 8 dims: a plain layout is its logical dims with their strides; a blocked one (nChw8c,
// OIhw8i8o...) is its padded dims with each blocked dim split into its outer part and one dim per
// block (8 channels of stride 1, ...), which makes it a plain strided tensor of more dims whose
// element order matches the dense array's split the same way. A padded blocked tensor is copied
// to a dense array of its padded dims first, which a second, plain copy crops (and the other way
// round for an output, whose padding is written as zeros).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>

#include "hal/backend.hpp"
#include "ir/dnn.hpp"
#include "ir/node.hpp"

namespace sol::backends::cuda::dnn {

namespace ir = capture::dnn;

inline constexpr int kViewDims = 8;  // CUDNN_DIM_MAX

// The elements of a tensor as a strided tensor of cuDNN, in two memory orders: the tensor's own
// layout (`strides`, from `offset`) and a dense array (`dense`). Dims of size 1 are dropped; at
// least 4 are kept (cuDNN's N-d descriptors want 4 or more), padded with size-1 dims.
struct View {
  int ndims = 0;
  int dims[kViewDims] = {};
  int strides[kViewDims] = {};
  int dense[kViewDims] = {};
  int64_t offset = 0;  // elements before element (0, ..., 0) in the tensor's own layout
};

// How a tensor's layout goes to (or comes from) the dense array of its logical dims taken in the
// order `perm` (perm[k]: the logical dim at position k, outermost first; nullptr: 0, 1, 2...).
//   steps 0: the layout is that dense array already (nothing to copy);
//   steps 1: one copy, `first`;
//   steps 2: a blocked layout whose padded dims exceed its dims: `first` between the layout and a
//            dense array of the padded dims (`padded_elements`), `second` between that and the
//            dense array (its `strides` are the padded array's).
struct Gather {
  int steps = 0;
  View first, second;
  int64_t padded_elements = 0;
};
// false when the layout needs more than 8 dims or sizes beyond cuDNN's 32-bit ints.
bool plan_gather(const ir::Layout& l, const int* perm, Gather& g) noexcept;

// Row-major over the logical dims, unpadded, from offset 0 (ir/dnn.hpp).
using ir::dense_canonical;

// A convolution or deconvolution as one of cuDNN's three convolution calls. A deconvolution is the
// convolution whose input is its output: its forward pass is a convolution's backward-data pass,
// its backward-data pass a forward pass, with the weights' O and I exchanged (`perm`).
struct ConvPlan {
  enum class Pass : uint8_t { forward, backward_data, backward_filter } pass = Pass::forward;
  ir::Arg x = ir::Arg::src, y = ir::Arg::dst, w = ir::Arg::weights;  // the convolution's x, y, weights
  bool transpose_w = false;
  int wperm[ir::kMaxDims] = {};  // the weights' dense order when transpose_w
  int nsp = 2;                   // spatial dims given to cuDNN: 2 or 3 (1-D as H = 1)
  int groups = 1;
  int xdims[5] = {}, ydims[5] = {}, wdims[5] = {};  // N C [D] H W; N K [D] H W; K C/groups [D] H W
  int pad[3] = {}, stride[3] = {}, dilation[3] = {};
  int bias_channels = 0;  // channels of the bias (or diff_bias), 0 without one
};
hal::Reason plan_conv(const ir::Desc& d, ConvPlan& p) noexcept;

struct PoolPlan {
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  int nsp = 2;
  int window[3] = {}, pad[3] = {}, stride[3] = {};
  int xdims[5] = {}, ydims[5] = {};
};
hal::Reason plan_pool(const ir::Desc& d, PoolPlan& p) noexcept;

// An eltwise function (a node's, or a post-op's) as cuDNN computes it:
//   activation   cudnnActivationForward/Backward (`mode`, `coef`, `swish_beta`)
//   max_scaled   max(x, alpha x) (ReLU with a slope alpha <= 1: cudnnOpTensor MAX of x and alpha x)
//   min_scaled   min(x, alpha x) (slope > 1)
//   linear       alpha x + beta (cudnnOpTensor ADD of alpha x and a 1-element beta)
//   square       x * x (cudnnOpTensor MUL)
//   sqrt         cudnnOpTensor SQRT
//   clip         min(beta, max(alpha, x)) (two cudnnOpTensor passes with 1-element bounds)
// Backward passes: the activations only.
struct EltPlan {
  enum class Kind : uint8_t { activation, max_scaled, min_scaled, linear, square, sqrt, clip } kind = Kind::activation;
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  double coef = 0, swish_beta = 1;
  float alpha = 0, beta = 0;
  bool recompute_y = false;  // backward: cuDNN reads y = f(x), which the node does not have
};
hal::Reason plan_eltwise(ir::Alg alg, float alpha, float beta, bool backward, EltPlan& p) noexcept;

// A binary operation (a node's, or a post-op's): cudnnOpTensor op(A, alpha2 * B).
struct BinPlan {
  cudnnOpTensorOp_t op = CUDNN_OP_TENSOR_ADD;
  float alpha2 = 1;
};
hal::Reason plan_binary(ir::Alg alg, BinPlan& p) noexcept;

// Reason::ok when the cuda backend computes this node on a device of `device_memory` bytes, else
// why not (dnn.hpp lists what it takes).
hal::Reason check(const capture::Node& node, size_t device_memory) noexcept;

// A tensor buffer's span and whether a full write covers it (ir/dnn.hpp).
using ir::buffer_bytes;
using ir::covers;

}  // namespace sol::backends::cuda::dnn
