// Checks of a DNN node that every backend makes the same way: that a node is one to run at all,
// algorithm families, broadcasting, the output scale and post-ops of the kinds oneDNN gives them
// to, and the geometry of each kind with the tensors it must have. What a backend can run beyond
// that (element types, layouts, sizes, which kinds at all) is its own and stays there.
#pragma once

#include "hal/backend.hpp"
#include "ir/dnn.hpp"
#include "ir/node.hpp"

namespace sol::capture::dnn {

// An eltwise algorithm (the *_dst ones included), and those whose backward pass reads dst.
bool is_eltwise(Alg a) noexcept;
bool uses_dst(Alg a) noexcept;
bool is_binary(Alg a) noexcept;

// Whether `b` broadcasts to `a` numpy-style: same rank, each dim equal or 1.
bool broadcasts_to(const TensorDesc& b, const TensorDesc& a) noexcept;

// A node of the "dnn" family with a bound call (its memory matched the description) of a
// description the frontend could give in full, with a sane tensor count: op_unsupported (another
// family) or desc_invalid, else ok. What every backend checks before anything else.
hal::Reason check_node(const Node& node) noexcept;

// The output scale and post-ops of a node whose kind takes them: a dst to apply them to, sum
// post-ops reading dst's own type, known eltwise and binary algorithms, binary sources that
// broadcast to dst. attr_unsupported or desc_invalid, else ok.
hal::Reason check_post_ops(const Desc& d) noexcept;

// Whether a node has an output scale or post-ops, and whether its kind takes them in its
// propagation (oneDNN's primary-output attributes: convolution, deconvolution, inner product,
// matmul, eltwise, pooling, binary, reorder, prelu and reduction, forward).
bool has_attributes(const Desc& d) noexcept;
bool takes_attributes(const Desc& d) noexcept;
// ok without attributes; attr_unsupported where the kind does not take them; else check_post_ops.
hal::Reason check_attributes(const Desc& d) noexcept;

// Whether the layout is one Layout::offset() addresses inside the tensor's buffer at `data`
// (sane dims, blocks and strides; a buffer and offset where there are elements).
bool addressable(const TensorDesc& t, const void* data) noexcept;

// A forward propagation (training or inference); two tensors of the same dims; how many multi_src
// tensors a node has (sum, concat).
bool forward(const Desc& d) noexcept;
bool same_dims(const TensorDesc& a, const TensorDesc& b) noexcept;
int count_sources(const Desc& d) noexcept;

// What a node's tensors must be, whatever runs it: the ones its kind and propagation read and
// write are there, with dims that agree. prop_unsupported (a propagation the kind has not) or
// desc_invalid, else ok. Each backend adds what it can run.
hal::Reason check_softmax_tensors(const Desc& d) noexcept;
hal::Reason check_sum_tensors(const Desc& d) noexcept;
hal::Reason check_concat_tensors(const Desc& d) noexcept;
hal::Reason check_reorder_tensors(const Desc& d) noexcept;
// Batch normalization: src and dst (diff_dst), per-channel statistics present where read (global
// statistics, or backward) and of the channel count, scale/shift likewise, diff_src backward.
hal::Reason check_bnorm_tensors(const Desc& d) noexcept;
// Eltwise: a known algorithm; src and dst of the same dims forward; backward_data only, never for
// round (oneDNN defines no backward pass for it), with diff_dst, diff_src and src (dst for the
// *_dst algorithms) of the same dims.
hal::Reason check_eltwise_tensors(const Desc& d) noexcept;
// Binary: a known algorithm, src, src1 and dst, both sources broadcasting to dst.
hal::Reason check_binary_tensors(const Desc& d) noexcept;
// Matmul: forward (or none); src [batch...] M x K, weights [batch...] K x N, dst [batch...] M x N,
// batch dims equal to dst's or 1; a bias broadcasting to dst.
hal::Reason check_matmul_tensors(const Desc& d) noexcept;

// ------------------------------------------------------------------------------------ geometry
// What convolution, pooling and inner product compute, from their tensors' dims and the
// description's window: one copy for every backend, which takes it from here and checks only what
// it can run of it.

// A window over an x side producing a y side (convolution, pooling), per spatial dim right-aligned
// in (D, H, W): a node of 1 or 2 spatial dims has size 1, and no padding, in the leading ones.
struct Window {
  int64_t x[3] = {1, 1, 1}, y[3] = {1, 1, 1};  // spatial sizes of the x and y sides
  int64_t k[3] = {1, 1, 1};                    // the kernel
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1};  // stride, dilation (1: dense)
  int64_t p[3] = {0, 0, 0};                    // padding before (pad_l)

  // The positions of the window.
  int64_t volume() const noexcept { return k[0] * k[1] * k[2]; }
};

// The window between data layouts x and y (N, C, spatial...): false when their spatial dims
// disagree with the description, y = (x + pad_l + pad_r - ((k - 1) * dilation + 1)) / stride + 1.
bool window_of(const Desc& d, const Layout& x, const Layout& y, Window& w) noexcept;

// The tensors of a convolution or deconvolution in its propagation: the x side (the larger spatial
// extent), the y side and the weights (or diff_weights). A deconvolution is the convolution whose
// input is its output: its x side is dst (diff_dst), its y side src (diff_src).
struct ConvSides {
  Arg x, y, w;
};
ConvSides conv_sides(const Desc& d) noexcept;

// A convolution or deconvolution as one correlation between its sides: n images, g groups of cx
// channels on the x side and cy on the y side. Weights are (G,) O, I, spatial: O = cy, I = cx for
// a convolution, O = cx, I = cy for a deconvolution; `grouped` when they have the G dim.
struct ConvGeometry : Window {
  ConvSides sides{};
  int64_t n = 1, g = 1, cx = 1, cy = 1;
  bool grouped = false;
  int64_t out_channels(bool deconv) const noexcept { return deconv ? g * cx : g * cy; }
};
// false when the tensors are missing or disagree with each other or with the description.
bool conv_geometry(const Desc& d, ConvGeometry& g) noexcept;

// Pooling: n images of c channels, x the source side (src, diff_src), y dst (diff_dst).
struct PoolGeometry : Window {
  int64_t n = 1, c = 1;
};
bool pool_geometry(const Desc& d, PoolGeometry& g) noexcept;

// An inner product as a GEMM: x (src or diff_src) as N x K, K the product of its dims after N;
// the weights (or diff_weights) as O x K; y (dst or diff_dst) N x O.
struct IpGeometry {
  int64_t n = 0, o = 0, k = 0;
};
bool ip_geometry(const Desc& d, IpGeometry& g) noexcept;

// Convolution and deconvolution, inner product: forward, backward_data or backward_weights
// (prop_unsupported), tensors that agree with the geometry, a bias (diff_bias) of the output
// channels (desc_invalid), else ok.
hal::Reason check_conv_tensors(const Desc& d) noexcept;
hal::Reason check_ip_tensors(const Desc& d) noexcept;
// Pooling: max or average (desc_invalid), forward or backward_data (prop_unsupported), tensors
// that agree with the geometry (desc_invalid), else ok. The workspace is each backend's business.
hal::Reason check_pool_tensors(const Desc& d) noexcept;

}  // namespace sol::capture::dnn
