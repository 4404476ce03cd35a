// The cuda backend's DNN plans without a GPU (backends/cuda/dnn_plan.hpp): each layout's copies
// through cudnnTransformTensor, replayed here on the host, put every element where
// Layout::offset() says it is; convolutions, pooling and eltwise functions in cuDNN's terms; the
// reasons it gives for nodes it declines.
#include "backends/cuda/dnn_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <vector>

namespace sol::test {
namespace {

namespace ir = capture::dnn;
namespace plan = backends::cuda::dnn;
using capture::DType;
using capture::Op;
using hal::Reason;

// A plain layout of `dims` in the memory order `order` (outermost first; empty: as the dims).
ir::Layout plain(std::initializer_list<int64_t> dims, std::initializer_list<int> order = {}) {
  ir::Layout l;
  l.ndims = static_cast<int>(dims.size());
  int d = 0;
  for (int64_t v : dims) l.dims[d] = l.padded[d] = v, ++d;
  // An array, not a vector: GCC 12 at -O3 took a vector built from `order` for a non-heap pointer.
  int ord[ir::kMaxDims];
  std::iota(ord, ord + l.ndims, 0);
  std::copy(order.begin(), order.end(), ord);
  int64_t stride = 1;
  for (int k = l.ndims - 1; k >= 0; --k) l.strides[ord[k]] = stride, stride *= l.dims[ord[k]];
  return l;
}

// A blocked layout: outer dims in their order, then the inner blocks (dim, size), outermost first.
ir::Layout blocked(std::initializer_list<int64_t> dims, std::initializer_list<std::pair<int, int64_t>> blocks) {
  ir::Layout l;
  l.ndims = static_cast<int>(dims.size());
  int d = 0;
  for (int64_t v : dims) l.dims[d] = v, ++d;
  int64_t per_dim[ir::kMaxDims];
  for (int k = 0; k < l.ndims; ++k) per_dim[k] = 1;
  for (auto [dim, size] : blocks) {
    l.block_dim[l.nblocks] = static_cast<int8_t>(dim);
    l.block[l.nblocks++] = size;
    per_dim[dim] *= size;
  }
  int64_t inner = 1;
  for (int b = 0; b < l.nblocks; ++b) inner *= l.block[b];
  for (int k = 0; k < l.ndims; ++k) l.padded[k] = (l.dims[k] + per_dim[k] - 1) / per_dim[k] * per_dim[k];
  int64_t stride = inner;
  for (int k = l.ndims - 1; k >= 0; --k) l.strides[k] = stride, stride *= l.padded[k] / per_dim[k];
  return l;
}

// cudnnTransformTensor on the host: every element of the view from one side to the other.
void replay(const plan::View& v, const std::vector<float>& from, std::vector<float>& to, bool to_dense) {
  std::vector<int> idx(v.ndims, 0);
  for (;;) {
    int64_t lo = v.offset, de = 0;
    for (int k = 0; k < v.ndims; ++k) lo += int64_t{idx[k]} * v.strides[k], de += int64_t{idx[k]} * v.dense[k];
    if (to_dense)
      to.at(de) = from.at(lo);
    else
      to.at(lo) = from.at(de);
    int k = v.ndims - 1;
    while (k >= 0 && ++idx[k] == v.dims[k]) idx[k--] = 0;
    if (k < 0) return;
  }
}

// The dense array a gather plan makes of a tensor whose element at layout offset o holds o, in
// the order `perm`, against Layout::offset() element by element; then the scatter back, which
// must restore every element and write the padding as zeros.
void expect_round_trip(const ir::Layout& l, const int* perm = nullptr) {
  plan::Gather g;
  ASSERT_TRUE(plan::plan_gather(l, perm, g));
  int64_t extent = 1;
  {
    int64_t last[ir::kMaxDims];
    for (int d = 0; d < l.ndims; ++d) last[d] = l.padded[d] - 1;
    extent = l.offset(last) + 1;
  }
  std::vector<float> mem(extent);
  for (int64_t i = 0; i < extent; ++i) mem[i] = static_cast<float>(i);
  const int64_t n = l.elements();
  std::vector<float> dense(n, -1);
  if (g.steps == 0) {
    dense.assign(mem.begin(), mem.begin() + n);
  } else if (g.steps == 1) {
    replay(g.first, mem, dense, true);
  } else {
    std::vector<float> padded(g.padded_elements, -1);
    replay(g.first, mem, padded, true);
    replay(g.second, padded, dense, true);
  }
  // Dense position of each logical index in the order perm.
  std::vector<int> order(l.ndims);
  for (int k = 0; k < l.ndims; ++k) order[k] = perm ? perm[k] : k;
  int64_t idx[ir::kMaxDims] = {};
  for (int64_t e = 0; e < n; ++e) {
    int64_t pos = 0;
    for (int k = 0; k < l.ndims; ++k) pos = pos * l.dims[order[k]] + idx[order[k]];
    ASSERT_EQ(dense[pos], static_cast<float>(l.offset(idx))) << "element " << e;
    for (int k = l.ndims - 1; k >= 0 && ++idx[k] == l.dims[k]; --k) idx[k] = 0;
  }
  if (g.steps == 0) return;
  std::vector<float> back(extent, 12345.f);
  if (g.steps == 1) {
    replay(g.first, dense, back, false);
  } else {
    std::vector<float> padded(g.padded_elements, 0.f);  // dnn.cpp zero-fills it
    replay(g.second, dense, padded, false);
    replay(g.first, padded, back, false);
  }
  int64_t all[ir::kMaxDims] = {};
  for (;;) {  // every padded element: its value, or 0 in the padding
    bool inside = true;
    for (int d = 0; d < l.ndims; ++d) inside = inside && all[d] < l.dims[d];
    const int64_t o = l.offset(all);
    ASSERT_EQ(back[o], inside ? mem[o] : 0.f) << "offset " << o;
    int d = l.ndims - 1;
    while (d >= 0 && ++all[d] == l.padded[d]) all[d--] = 0;
    if (d < 0) break;
  }
}

TEST(CudaDnnLayout, DenseCanonicalNeedsNoCopy) {
  plan::Gather g;
  ASSERT_TRUE(plan::plan_gather(plain({2, 3, 4, 5}), nullptr, g));
  EXPECT_EQ(g.steps, 0);
}

TEST(CudaDnnLayout, PlainStridedLayouts) {
  expect_round_trip(plain({2, 3, 4, 5}, {0, 2, 3, 1}));  // nhwc
  expect_round_trip(plain({3, 7}, {1, 0}));              // ba
  ir::Layout view = plain({2, 8, 4, 5});                 // channels 2..4 of an nchw tensor
  view.dims[1] = view.padded[1] = 3;
  view.offset0 = 2 * view.strides[1];
  expect_round_trip(view);
}

TEST(CudaDnnLayout, BlockedLayouts) {
  expect_round_trip(blocked({2, 16, 3, 5}, {{1, 8}}));  // nChw8c, exact
  const ir::Layout padded = blocked({2, 13, 3, 5}, {{1, 8}});
  plan::Gather g;
  ASSERT_TRUE(plan::plan_gather(padded, nullptr, g));
  EXPECT_EQ(g.steps, 2);
  EXPECT_EQ(g.padded_elements, 2 * 16 * 3 * 5);
  expect_round_trip(padded);                                      // nChw8c, 13 channels of 16
  expect_round_trip(blocked({12, 10, 3, 3}, {{1, 8}, {0, 8}}));  // OIhw8i8o, both padded
  expect_round_trip(blocked({2, 16, 32, 3, 3}, {{2, 4}, {1, 16}, {2, 4}}));  // gOIhw4i16o4i
}

TEST(CudaDnnLayout, TransposedWeightsOfADeconvolution) {
  const int perm[] = {0, 2, 1, 3, 4};  // G, O, I, H, W as the convolution's G, I, O, H, W
  expect_round_trip(plain({2, 3, 5, 3, 2}), perm);
  expect_round_trip(blocked({2, 12, 10, 3, 2}, {{2, 8}, {1, 8}}), perm);
}

TEST(CudaDnnLayout, MoreThanEightDimsDeclined) {
  // 6 dims with 4 blocks on 4 of them: 10 view dims.
  ir::Layout l = blocked({3, 3, 3, 3, 3, 3}, {{0, 2}, {1, 2}, {2, 2}, {3, 2}});
  plan::Gather g;
  EXPECT_FALSE(plan::plan_gather(l, nullptr, g));
}

// ---------------------------------------------------------------------------------- nodes

struct NodeOf {
  ir::Desc desc;
  ir::Call call;
  capture::Node node{capture::Sym::dnnl_primitive_execute, Op::convolution, DType::f32};
  std::vector<std::vector<float>> data;
  void add(ir::Arg arg, const ir::Layout& l, DType dt = DType::f32) {
    ir::Tensor& t = desc.tensors[desc.ntensors++];
    t.arg = arg;
    t.desc.dtype = dt;
    t.desc.layout = l;
    t.desc.bytes = static_cast<size_t>(l.elements()) * capture::dtype_size(dt);
  }
  capture::Node& make() {
    data.resize(desc.ntensors);
    for (int i = 0; i < desc.ntensors; ++i) {
      data[i].resize(desc.tensors[i].desc.bytes / 4 + 1);
      call.data[i] = data[i].data();
    }
    call.desc = &desc;
    node.op = desc.kind;
    node.dnn = &call;
    return node;
  }
};

// A 2-D convolution: src N, IC, IH, IW; kernel k, stride s, padding l / r.
NodeOf conv(ir::Prop prop, int64_t ih, int64_t k, int64_t s, int64_t pl, int64_t pr, int64_t groups = 1) {
  NodeOf c;
  ir::Desc& d = c.desc;
  d.kind = Op::convolution;
  d.prop = prop;
  d.dtype = DType::f32;
  d.nsp = 2;
  d.groups = groups;
  for (int i = 0; i < 2; ++i) d.kernel[i] = k, d.stride[i] = s, d.pad_l[i] = pl, d.pad_r[i] = pr;
  const int64_t oh = (ih + pl + pr - k) / s + 1;
  c.add(ir::Arg::src, plain({2, 4 * groups, ih, ih}));
  c.add(ir::Arg::weights, groups > 1 ? plain({groups, 6, 4, k, k}) : plain({6, 4, k, k}));
  c.add(ir::Arg::dst, plain({2, 6 * groups, oh, oh}));
  return c;
}

TEST(CudaDnnConv, Geometry) {
  NodeOf c = conv(ir::Prop::forward_training, 9, 3, 2, 1, 1, 2);
  plan::ConvPlan p;
  ASSERT_EQ(plan::plan_conv(c.desc, p), Reason::ok);
  EXPECT_EQ(p.pass, plan::ConvPlan::Pass::forward);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.nsp, 2);
  const int x[] = {2, 8, 9, 9}, y[] = {2, 12, 5, 5}, w[] = {12, 4, 3, 3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.xdims[i], x[i]);
    EXPECT_EQ(p.ydims[i], y[i]);
    EXPECT_EQ(p.wdims[i], w[i]);
  }
  EXPECT_EQ(p.pad[0], 1);
  EXPECT_EQ(p.stride[1], 2);
  EXPECT_EQ(capture::dnn::Arg::src, p.x);
}

TEST(CudaDnnConv, AsymmetricPaddingOnlyWhereTheWindowsAreTheSame) {
  // 8 + 1 + 0, kernel 3, stride 2: 4 outputs, as with 1 on both sides: taken.
  NodeOf same = conv(ir::Prop::forward_training, 8, 3, 2, 1, 0);
  EXPECT_EQ(plan::check(same.make(), size_t{1} << 30), Reason::ok);
  // 8 + 0 + 2, kernel 3, stride 1: 8 outputs; symmetric 0 gives 6: declined.
  NodeOf other = conv(ir::Prop::forward_training, 8, 3, 1, 0, 2);
  EXPECT_EQ(plan::check(other.make(), size_t{1} << 30), Reason::geometry_unsupported);
}

TEST(CudaDnnConv, DeconvolutionIsTheConvolutionsBackwardData) {
  NodeOf c;
  ir::Desc& d = c.desc;
  d.kind = Op::deconvolution;
  d.prop = ir::Prop::forward_inference;
  d.nsp = 1;
  d.kernel[0] = 3, d.stride[0] = 2;
  c.add(ir::Arg::src, plain({1, 5, 4}));
  c.add(ir::Arg::weights, plain({7, 5, 3}));  // O = 7 outputs, I = 5 inputs
  c.add(ir::Arg::dst, plain({1, 7, 9}));      // (4 - 1) * 2 + 3
  plan::ConvPlan p;
  ASSERT_EQ(plan::plan_conv(d, p), Reason::ok);
  EXPECT_EQ(p.pass, plan::ConvPlan::Pass::backward_data);
  EXPECT_EQ(p.x, ir::Arg::dst);
  EXPECT_EQ(p.y, ir::Arg::src);
  EXPECT_TRUE(p.transpose_w);
  EXPECT_EQ(p.wperm[0], 1);
  EXPECT_EQ(p.wperm[1], 0);
  // 1-D as H = 1: x 1, 7, 1, 9; y 1, 5, 1, 4; the convolution's filter K = 5, C = 7.
  const int x[] = {1, 7, 1, 9}, y[] = {1, 5, 1, 4}, w[] = {5, 7, 1, 3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.xdims[i], x[i]);
    EXPECT_EQ(p.ydims[i], y[i]);
    EXPECT_EQ(p.wdims[i], w[i]);
  }
  EXPECT_EQ(p.stride[0], 1);
  EXPECT_EQ(p.stride[1], 2);
}

TEST(CudaDnnEltwise, Mapping) {
  plan::EltPlan e;
  using Kind = plan::EltPlan::Kind;
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::relu, 0, 0, false, e), Reason::ok);
  EXPECT_EQ(e.kind, Kind::activation);
  EXPECT_EQ(e.mode, CUDNN_ACTIVATION_RELU);
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::relu, 0.1f, 0, false, e), Reason::ok);
  EXPECT_EQ(e.kind, Kind::max_scaled);
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::relu, 3.f, 0, false, e), Reason::ok);
  EXPECT_EQ(e.kind, Kind::min_scaled);
  EXPECT_EQ(plan::plan_eltwise(ir::Alg::relu, 0.1f, 0, true, e), Reason::alg_unsupported);
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::clip, 0, 6.f, false, e), Reason::ok);
  EXPECT_EQ(e.mode, CUDNN_ACTIVATION_CLIPPED_RELU);
  EXPECT_EQ(e.coef, 6.0);
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::clip_v2, -1.f, 1.f, false, e), Reason::ok);
  EXPECT_EQ(e.kind, Kind::clip);
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::tanh, 0, 0, true, e), Reason::ok);
  EXPECT_TRUE(e.recompute_y);
  ASSERT_EQ(plan::plan_eltwise(ir::Alg::swish, 0.5f, 0, false, e), Reason::ok);
  EXPECT_EQ(e.swish_beta, 0.5);
  EXPECT_EQ(plan::plan_eltwise(ir::Alg::gelu_erf, 0, 0, false, e), Reason::alg_unsupported);
  EXPECT_EQ(plan::plan_eltwise(ir::Alg::linear, 2, 1, true, e), Reason::alg_unsupported);
}

TEST(CudaDnnNodes, Declines) {
  const size_t memory = size_t{1} << 30;
  NodeOf integer = conv(ir::Prop::forward_inference, 6, 3, 1, 1, 1);
  integer.desc.tensors[0].desc.dtype = DType::s8;
  EXPECT_EQ(plan::check(integer.make(), memory), Reason::dtype_unsupported);

  NodeOf big = conv(ir::Prop::forward_inference, 64, 3, 1, 1, 1);
  EXPECT_EQ(plan::check(big.make(), 1000), Reason::too_large);

  NodeOf pool;  // max pooling, training: its workspace
  pool.desc.kind = Op::pooling;
  pool.desc.prop = ir::Prop::forward_training;
  pool.desc.alg = ir::Alg::pool_max;
  pool.desc.nsp = 2;
  for (int i = 0; i < 2; ++i) pool.desc.kernel[i] = 2, pool.desc.stride[i] = 2;
  pool.add(ir::Arg::src, plain({1, 2, 4, 4}));
  pool.add(ir::Arg::dst, plain({1, 2, 2, 2}));
  pool.add(ir::Arg::workspace, plain({1, 2, 2, 2}), DType::u8);
  EXPECT_EQ(plan::check(pool.make(), memory), Reason::workspace_unsupported);

  NodeOf dilated = pool;  // average, dilated: cuDNN's pooling has no dilation
  dilated.desc.ntensors = 2;
  dilated.desc.alg = ir::Alg::pool_avg_exclude_padding;
  dilated.desc.dilation[0] = dilated.desc.dilation[1] = 2;
  dilated.desc.tensors[0].desc.layout = plain({1, 2, 5, 5});
  dilated.desc.tensors[0].desc.bytes = 50 * sizeof(float);
  EXPECT_EQ(plan::check(dilated.make(), memory), Reason::geometry_unsupported);

  NodeOf bn;  // backward with global statistics
  bn.desc.kind = Op::batch_normalization;
  bn.desc.prop = ir::Prop::backward;
  bn.desc.global_stats = true;
  bn.desc.epsilon = 1e-5f;
  for (ir::Arg a : {ir::Arg::src, ir::Arg::diff_dst, ir::Arg::diff_src}) bn.add(a, plain({2, 3, 4, 4}));
  for (ir::Arg a : {ir::Arg::mean, ir::Arg::variance}) bn.add(a, plain({3}));
  EXPECT_EQ(plan::check(bn.make(), memory), Reason::flags_unsupported);

  NodeOf lrn;
  lrn.desc.kind = Op::lrn;
  lrn.desc.prop = ir::Prop::forward_inference;
  lrn.add(ir::Arg::src, plain({1, 4, 3, 3}));
  lrn.add(ir::Arg::dst, plain({1, 4, 3, 3}));
  EXPECT_EQ(plan::check(lrn.make(), memory), Reason::op_unsupported);
}

}  // namespace
}  // namespace sol::test
