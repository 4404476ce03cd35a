// The opencl backend's DNN nodes, beyond the conformance suite (tests/unit/dnn), which runs every
// kind against native oneDNN: geometry that suite does not combine (dilated depthwise on padded
// channel blocks, grouped 3-D deconvolution), the workspace formats (the reference backend's,
// byte for byte, each backend reading the other's), bytes of an output's buffer that its layout
// does not address, the reasons it declines, and the test-only SOL_TEST_WRONG_KERNEL switch.
//
// Each case is a real oneDNN primitive described by the oneDNN frontend; buffers have NaN guard
// zones on both sides, and outputs start as NaN so an element the backend does not write shows.
#include "ir/dnn.hpp"

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/reference/reference.hpp"
#include "config/config.hpp"
#include "fixture.hpp"
#include "interpose/dnnl/dnnl.hpp"
#include "onednn.hpp"

namespace sol::test {
namespace {

namespace ir = capture::dnn;
using hal::Reason;

// Every argument `pd` takes, inputs random (per argument seed), outputs NaN.
Args make_args(dnnl_primitive_desc_t pd, const std::vector<int>& outputs, unsigned seed) {
  Args args;
  for (int arg : exec_arg_kinds(pd)) {
    const dnnl_memory_desc_t* m = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
    if (!m || m->ndims == 0) continue;
    args[arg] = std::make_unique<Buffer>(*m);
    if (std::find(outputs.begin(), outputs.end(), arg) == outputs.end())
      fill_random(*args[arg], seed + static_cast<unsigned>(arg) * 7919u, arg == DNNL_ARG_VARIANCE);
  }
  return args;
}

Args copy_args(const Args& from) {
  Args out;
  for (auto& [arg, b] : from) out[arg] = std::make_unique<Buffer>(*b);
  return out;
}

// The primitive's description, editable before a backend is asked (declines).
ir::Desc describe(dnnl_primitive_desc_t pd) {
  const auto info = interpose::dnnl::describe(pd);
  EXPECT_TRUE(info && info->node) << (info ? info->why_not : "describe() failed");
  return info && info->node ? *info->node : ir::Desc{};
}

// Differences of `got` from `want` in the outputs (relative to 1 + |want|, the tolerance growing
// with the square root of the reduction length k) and guard damage anywhere.
std::string compare(Args& want, Args& got, const std::vector<int>& outputs, double k) {
  std::string out;
  const double tol = 2e-6 * std::sqrt(std::max(1.0, k)) + 2e-6;
  for (auto& [arg, b] : got) {
    if (!b->guards_intact()) out += "arg " + std::to_string(arg) + ": guard written\n";
    if (std::find(outputs.begin(), outputs.end(), arg) == outputs.end()) continue;
    int bad = 0;
    for (size_t i = 0; i < b->size() / 4; ++i) {
      const float w = want[arg]->f32()[i], g = b->f32()[i];
      if ((std::isnan(w) && std::isnan(g)) || std::fabs(g - w) <= tol * (1 + std::fabs(w))) continue;
      if (bad++ < 4)
        out += "arg " + std::to_string(arg) + "[" + std::to_string(i) + "]: " + std::to_string(w) + " vs " +
               std::to_string(g) + "\n";
    }
  }
  return out;
}

// The guard check itself, on tensors of every size modulo 4 (u8 workspaces have any size): a
// fresh buffer's guards are intact, the byte just past the tensor or just before it is seen, a
// byte inside it is not.
TEST(OpenclDnnHarness, GuardsHoldForEverySize) {
  for (dnnl_dim_t n = 1; n <= 8; ++n) {
    SCOPED_TRACE("bytes " + std::to_string(n));
    Buffer b(md({n}, dnnl_x, dnnl_u8));
    EXPECT_TRUE(b.guards_intact());
    b.data()[n - 1] = 0;
    EXPECT_TRUE(b.guards_intact());
    Buffer after(b), before(b);
    after.data()[n] = 0;
    before.data()[-1] = 0;
    EXPECT_FALSE(after.guards_intact());
    EXPECT_FALSE(before.guards_intact());
  }
}

hal::Backend& reference() {
  static std::unique_ptr<hal::Backend> b = [] {
    auto r = backends::reference::create();
    std::string why;
    EXPECT_TRUE(r->init(test_config(make_temp_dir()), why)) << why;
    return r;
  }();
  return *b;
}

class OpenclDnn : public testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = shared_backend(why);
    if (!backend_) GTEST_SKIP() << "no usable OpenCL device: " << why;
    bind_frontend();
  }
  // The primitive natively and on opencl, from identical inputs.
  void check_native(dnnl_primitive_desc_t pd, const std::vector<int>& outputs, double k) {
    ASSERT_NE(pd, nullptr);
    Args native = make_args(pd, outputs, 7);
    Args ocl = copy_args(native);
    ASSERT_EQ(run_native(pd, native), "");
    ASSERT_EQ(run_on(*backend_, pd, ocl), Reason::ok);
    EXPECT_EQ(compare(native, ocl, outputs, k), "");
    dnnl_primitive_desc_destroy(pd);
  }
  hal::Backend* backend_ = nullptr;
};

// Convolution descriptors: src and dst in `tag`, weights in oneDNN's choice of format.
struct Conv {
  Dims src, wei, dst, s, d, pl, pr;  // d: oneDNN's dilation (0 dense)
  dnnl_format_tag_t tag;
  bool deconv = false;
};
dnnl_primitive_desc_t conv_pd(const Conv& c, dnnl_prop_kind_t prop,
                              const_dnnl_primitive_attr_t attr = nullptr) {
  const dnnl_memory_desc_t s = md(c.src, c.tag), w = md(c.wei, dnnl_format_tag_any), d = md(c.dst, c.tag),
                           b = md({c.dst[1]}, dnnl_x);
  const dnnl_alg_kind_t alg = c.deconv ? dnnl_deconvolution_direct : dnnl_convolution_direct;
  dnnl_convolution_desc_t f{}, bwd{};
  auto fwd_init =
      c.deconv ? dnnl_dilated_deconvolution_forward_desc_init : dnnl_dilated_convolution_forward_desc_init;
  EXPECT_EQ(fwd_init(&f, dnnl_forward_training, alg, &s, &w, &b, &d, c.s.data(), c.d.data(), c.pl.data(),
                     c.pr.data()),
            dnnl_success);
  if (prop == dnnl_forward_training) return pd_of(&f, nullptr, attr);
  if (prop == dnnl_backward_data) {
    auto init = c.deconv ? dnnl_dilated_deconvolution_backward_data_desc_init
                         : dnnl_dilated_convolution_backward_data_desc_init;
    EXPECT_EQ(init(&bwd, alg, &s, &w, &d, c.s.data(), c.d.data(), c.pl.data(), c.pr.data()), dnnl_success);
  } else {
    auto init = c.deconv ? dnnl_dilated_deconvolution_backward_weights_desc_init
                         : dnnl_dilated_convolution_backward_weights_desc_init;
    EXPECT_EQ(init(&bwd, alg, &s, &w, &b, &d, c.s.data(), c.d.data(), c.pl.data(), c.pr.data()),
              dnnl_success);
  }
  return bwd_pd(&f, &bwd);
}

// Depthwise, 20 channels on blocks of 16 (padded), dilation 2, stride 2, asymmetric padding:
// oh = (11 + 2 + 1 - 5) / 2 + 1 = 5, ow = (11 + 1 + 0 - 5) / 2 + 1 = 4.
const Conv kDepthwise = {{2, 20, 11, 11}, {20, 1, 1, 3, 3}, {2, 20, 5, 4}, {2, 2},
                         {1, 1},          {2, 1},           {1, 0},        dnnl_nChw16c};
// Grouped 3-D deconvolution: in 3x4x3, stride (2,1,2), out = (in - 1) * s + k - pl - pr.
const Conv kDeconv3d = {{1, 6, 3, 4, 3}, {3, 4, 2, 2, 3, 2}, {1, 12, 5, 5, 5}, {2, 1, 2}, {0, 0, 0},
                        {0, 1, 0},       {1, 0, 1},          dnnl_ncdhw,       true};

TEST_F(OpenclDnn, DilatedStridedDepthwiseOnPaddedBlocks) {
  check_native(conv_pd(kDepthwise, dnnl_forward_training), {DNNL_ARG_DST}, 9);
  check_native(conv_pd(kDepthwise, dnnl_backward_data), {DNNL_ARG_DIFF_SRC}, 9);
  check_native(conv_pd(kDepthwise, dnnl_backward_weights), {DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 50);
}

TEST_F(OpenclDnn, GroupedDeconvolution3d) {
  check_native(conv_pd(kDeconv3d, dnnl_forward_training), {DNNL_ARG_DST}, 12);
  check_native(conv_pd(kDeconv3d, dnnl_backward_data), {DNNL_ARG_DIFF_SRC}, 48);
  check_native(conv_pd(kDeconv3d, dnnl_backward_weights), {DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 100);
}

TEST_F(OpenclDnn, SumBinaryEltwisePostOpsOnPaddedBlocks) {
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_attr_create(&attr);
  dnnl_post_ops_t po = nullptr;
  dnnl_post_ops_create(&po);
  dnnl_post_ops_append_sum(po, 2.f);
  const dnnl_memory_desc_t per_channel = md({1, 12, 1, 1}, dnnl_abcd);
  dnnl_post_ops_append_binary(po, dnnl_binary_mul, &per_channel);
  dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, -0.5f, 0.5f);
  dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  // 12 output channels on blocks of 8: padded.
  const Conv c = {{2, 6, 7, 7}, {12, 6, 3, 3}, {2, 12, 7, 7}, {1, 1}, {0, 0}, {1, 1}, {1, 1}, dnnl_nChw8c};
  dnnl_primitive_desc_t pd = conv_pd(c, dnnl_forward_training, attr);
  dnnl_primitive_attr_destroy(attr);
  ASSERT_NE(pd, nullptr);
  // dst is read (sum): random like the inputs.
  Args native = make_args(pd, {}, 11);
  Args ocl = copy_args(native);
  ASSERT_EQ(run_native(pd, native), "");
  ASSERT_EQ(run_on(*backend_, pd, ocl), Reason::ok);
  EXPECT_EQ(compare(native, ocl, {DNNL_ARG_DST}, 54), "");
  dnnl_primitive_desc_destroy(pd);
}

// Max pooling's workspace: identical bytes from both backends, and each backend's backward pass
// reads the other's. A 3x3 window gets a u8 workspace from oneDNN, a 17x17 one (289 positions) s32.
void check_pool_workspace(hal::Backend& ocl, int64_t k) {
  const int64_t in = k + 4, out = (in + 1 - k) / 2 + 1;  // stride 2, padding 1 before, 0 after
  const dnnl_memory_desc_t s = md({2, 20, in, in}, dnnl_nChw8c), d = md({2, 20, out, out}, dnnl_nChw8c);
  const dnnl_dims_t st = {2, 2}, ks = {k, k}, dil = {0, 0}, pl = {1, 1}, pr = {0, 0};
  dnnl_pooling_v2_desc_t f{}, b{};
  ASSERT_EQ(dnnl_pooling_v2_forward_desc_init(&f, dnnl_forward_training, dnnl_pooling_max, &s, &d, st, ks,
                                              dil, pl, pr),
            dnnl_success);
  ASSERT_EQ(dnnl_pooling_v2_backward_desc_init(&b, dnnl_pooling_max, &s, &d, st, ks, dil, pl, pr),
            dnnl_success);
  dnnl_primitive_desc_t fwd = pd_of(&f), bwd = bwd_pd(&f, &b);
  const ir::Desc desc = describe(fwd);
  ASSERT_NE(desc.desc(ir::Arg::workspace), nullptr);
  EXPECT_EQ(desc.desc(ir::Arg::workspace)->dtype, k > 15 ? capture::DType::s32 : capture::DType::u8);

  Args ref_fwd = make_args(fwd, {DNNL_ARG_DST, DNNL_ARG_WORKSPACE}, 3);
  Args ocl_fwd = copy_args(ref_fwd);
  ASSERT_EQ(run_on(reference(), fwd, ref_fwd), Reason::ok);
  ASSERT_EQ(run_on(ocl, fwd, ocl_fwd), Reason::ok);
  EXPECT_EQ(compare(ref_fwd, ocl_fwd, {DNNL_ARG_DST}, 1), "");
  EXPECT_EQ(ref_fwd[DNNL_ARG_WORKSPACE]->bytes, ocl_fwd[DNNL_ARG_WORKSPACE]->bytes);

  Args ref_bwd = make_args(bwd, {DNNL_ARG_DIFF_SRC}, 5);
  Args ocl_bwd = copy_args(ref_bwd);
  ref_bwd[DNNL_ARG_WORKSPACE]->take_bytes(*ocl_fwd[DNNL_ARG_WORKSPACE]);  // each reads the other's
  ocl_bwd[DNNL_ARG_WORKSPACE]->take_bytes(*ref_fwd[DNNL_ARG_WORKSPACE]);
  ASSERT_EQ(run_on(reference(), bwd, ref_bwd), Reason::ok);
  ASSERT_EQ(run_on(ocl, bwd, ocl_bwd), Reason::ok);
  EXPECT_EQ(compare(ref_bwd, ocl_bwd, {DNNL_ARG_DIFF_SRC}, 9), "");
  dnnl_primitive_desc_destroy(fwd);
  dnnl_primitive_desc_destroy(bwd);
}

TEST_F(OpenclDnn, MaxPoolingWorkspaceIsTheReferences) {
  check_pool_workspace(*backend_, 3);
  check_pool_workspace(*backend_, 17);
}

// The node's workspace described as its buffer's first `bytes` bytes, plain u8.
std::function<void(ir::Desc&)> workspace_of(size_t bytes) {
  return [bytes](ir::Desc& x) {
    ir::TensorDesc& ws = x.tensors[x.find(ir::Arg::workspace)].desc;
    ws.dtype = capture::DType::u8;
    ws.layout = ir::Layout{};
    ws.layout.ndims = 1;
    ws.layout.dims[0] = ws.layout.padded[0] = static_cast<int64_t>(bytes);
    ws.layout.strides[0] = 1;
    ws.bytes = bytes;
  };
}

// Whether the buffer's bytes from `from` on (tensor-relative, guards included) are `old`'s.
bool kept_from(const Buffer& b, const std::vector<unsigned char>& old, size_t from) {
  return std::equal(b.bytes.begin() + static_cast<std::ptrdiff_t>(kGuard + from), b.bytes.end(),
                    old.begin() + static_cast<std::ptrdiff_t>(kGuard + from));
}

// Batch normalization with a fused ReLU, training, on {3, 13, 5, 3} in `tag`: 585 elements, so
// SOL's mask (dnn.hpp: a bit per logical element) is 74 bytes, the last one partial. oneDNN
// sizes the workspace the program allocates by its implementation, which the CPU decides (a bit
// per padded element, 90 bytes, for its jit kernels; a byte per padded element, 720, for its
// reference one, which nChw16c gets without AVX-512): the size is not asserted, only that each
// backend writes exactly the mask, byte for byte the other's, and nothing after it. The same
// with the workspace described as exactly 74 bytes; 73 are declined with nothing written.
// Backward, each backend reads the other's mask.
void check_bnorm_workspace(hal::Backend& ocl, dnnl_format_tag_t tag) {
  const Dims dims = {3, 13, 5, 3};
  const size_t mask_bytes = (3 * 13 * 5 * 3 + 7) / 8;
  const dnnl_memory_desc_t m = md(dims, tag);
  const unsigned flags = dnnl_use_scale | dnnl_use_shift | dnnl_fuse_norm_relu;
  dnnl_batch_normalization_desc_t f{}, b{};
  ASSERT_EQ(dnnl_batch_normalization_forward_desc_init(&f, dnnl_forward_training, &m, 1e-3f, flags),
            dnnl_success);
  ASSERT_EQ(dnnl_batch_normalization_backward_desc_init(&b, dnnl_backward, &m, &m, 1e-3f, flags),
            dnnl_success);
  dnnl_primitive_desc_t fwd = pd_of(&f), bwd = bwd_pd(&f, &b);
  const int ws = DNNL_ARG_WORKSPACE;
  const std::vector<int> fwd_out = {DNNL_ARG_DST, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, ws};
  const std::vector<int> stats = {DNNL_ARG_DST, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
  Args ref_fwd = make_args(fwd, fwd_out, 3);
  Args ocl_fwd = copy_args(ref_fwd);
  const std::vector<unsigned char> fresh = ref_fwd[ws]->bytes;
  ASSERT_GE(ref_fwd[ws]->size(), mask_bytes);  // oneDNN's: at least a bit per element
  ASSERT_EQ(run_on(reference(), fwd, ref_fwd), Reason::ok);
  ASSERT_EQ(run_on(ocl, fwd, ocl_fwd), Reason::ok);
  EXPECT_EQ(compare(ref_fwd, ocl_fwd, stats, 45), "");
  EXPECT_TRUE(ref_fwd[ws]->guards_intact());
  EXPECT_EQ(ref_fwd[ws]->bytes, ocl_fwd[ws]->bytes);
  EXPECT_TRUE(kept_from(*ref_fwd[ws], fresh, mask_bytes));
  EXPECT_TRUE(kept_from(*ocl_fwd[ws], fresh, mask_bytes));

  for (hal::Backend* backend : {&reference(), &ocl}) {
    Args exact = make_args(fwd, fwd_out, 3);
    ASSERT_EQ(run_on(*backend, fwd, exact, workspace_of(mask_bytes)), Reason::ok);
    EXPECT_EQ(compare(ref_fwd, exact, stats, 45), "");
    EXPECT_TRUE(std::equal(exact[ws]->bytes.begin(), exact[ws]->bytes.begin() + kGuard + mask_bytes,
                           ref_fwd[ws]->bytes.begin()));
    EXPECT_TRUE(kept_from(*exact[ws], fresh, mask_bytes));

    Args small = make_args(fwd, fwd_out, 3);
    Args untouched = copy_args(small);
    EXPECT_EQ(run_on(*backend, fwd, small, workspace_of(mask_bytes - 1)), Reason::workspace_unsupported);
    for (auto& [arg, buf] : small) EXPECT_TRUE(buf->bytes == untouched[arg]->bytes) << "arg " << arg << " written";
  }

  const std::vector<int> bwd_out = {DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
  Args ref_bwd = make_args(bwd, bwd_out, 5);
  Args ocl_bwd = copy_args(ref_bwd);
  ref_bwd[ws]->take_bytes(*ocl_fwd[ws]);
  ocl_bwd[ws]->take_bytes(*ref_fwd[ws]);
  ASSERT_EQ(run_on(reference(), bwd, ref_bwd), Reason::ok);
  ASSERT_EQ(run_on(ocl, bwd, ocl_bwd), Reason::ok);
  EXPECT_EQ(compare(ref_bwd, ocl_bwd, bwd_out, 45), "");
  // The masked gradient is not trivial: some elements were cut by the ReLU, some were not.
  const float* dx = ref_bwd[DNNL_ARG_DIFF_SRC]->f32();
  const size_t n = ref_bwd[DNNL_ARG_DIFF_SRC]->size() / sizeof(float);
  EXPECT_TRUE(std::any_of(dx, dx + n, [](float v) { return v != 0 && !std::isnan(v); }));
  dnnl_primitive_desc_destroy(fwd);
  dnnl_primitive_desc_destroy(bwd);
}

// 13 channels padded to 8- and 16-channel blocks, and unpadded: whichever blocking the CPU's
// oneDNN prefers, both are run here.
TEST_F(OpenclDnn, BatchNormReluWorkspaceIsTheReferences) {
  for (dnnl_format_tag_t tag : {dnnl_nchw, dnnl_nChw8c, dnnl_nChw16c}) {
    SCOPED_TRACE(tag == dnnl_nchw ? "nchw" : tag == dnnl_nChw8c ? "nChw8c" : "nChw16c");
    check_bnorm_workspace(*backend_, tag);
  }
}

// A reorder into channels 2..4 of a larger nchw tensor (a submemory: offset and gaps): the other
// channels' bytes in the buffer must come back exactly as they were.
TEST_F(OpenclDnn, BytesOutsideTheLayoutKept) {
  const dnnl_memory_desc_t src = md({2, 3, 4, 5}, dnnl_nChw8c), parent = md({2, 8, 4, 5}, dnnl_nchw);
  dnnl_memory_desc_t view{};
  const dnnl_dims_t dims = {2, 3, 4, 5}, offsets = {0, 2, 0, 0};
  ASSERT_EQ(dnnl_memory_desc_init_submemory(&view, &parent, dims, offsets), dnnl_success);
  dnnl_primitive_desc_t pd = nullptr;
  ASSERT_EQ(dnnl_reorder_primitive_desc_create(&pd, &src, engine(), &view, engine(), nullptr), dnnl_success);
  Args native = make_args(pd, {DNNL_ARG_DST}, 13);  // dst's NaN pattern must survive outside the view
  native[DNNL_ARG_DST] = std::make_unique<Buffer>(view, dnnl_memory_desc_get_size(&parent));
  Args ocl = copy_args(native);
  ASSERT_EQ(run_native(pd, native), "");
  ASSERT_EQ(run_on(*backend_, pd, ocl), Reason::ok);
  EXPECT_EQ(native[DNNL_ARG_DST]->bytes, ocl[DNNL_ARG_DST]->bytes);
  dnnl_primitive_desc_destroy(pd);
}

TEST_F(OpenclDnn, Declines) {
  // Integer data.
  const Conv c = {{1, 8, 5, 5}, {8, 8, 3, 3}, {1, 8, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, dnnl_nchw};
  const dnnl_memory_desc_t s = md(c.src, dnnl_nhwc, dnnl_u8), w = md(c.wei, dnnl_format_tag_any, dnnl_s8),
                           d = md(c.dst, dnnl_nhwc, dnnl_s32);
  dnnl_convolution_desc_t cd{};
  ASSERT_EQ(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s, &w,
                                               nullptr, &d, c.s.data(), c.pl.data(), c.pr.data()),
            dnnl_success);
  dnnl_primitive_desc_t integer = pd_of(&cd);
  Args integer_args = make_args(integer, {DNNL_ARG_DST}, 1);
  EXPECT_EQ(run_on(*backend_, integer, integer_args), Reason::dtype_unsupported);
  dnnl_primitive_desc_destroy(integer);

  // Attributes on a backward pass; a u8 workspace for a window of 289 positions; a fused-ReLU
  // workspace of fewer bits than elements. Nothing may be written.
  dnnl_primitive_desc_t bwd = conv_pd(c, dnnl_backward_data);
  Args args = make_args(bwd, {DNNL_ARG_DIFF_SRC}, 1);
  const std::vector<unsigned char> before = args[DNNL_ARG_DIFF_SRC]->bytes;
  EXPECT_EQ(run_on(*backend_, bwd, args, [](ir::Desc& x) { x.output_scale = 2; }), Reason::attr_unsupported);
  EXPECT_EQ(args[DNNL_ARG_DIFF_SRC]->bytes, before);
  dnnl_primitive_desc_destroy(bwd);

  const dnnl_memory_desc_t ps = md({1, 4, 21, 21}, dnnl_nchw), pdst = md({1, 4, 3, 3}, dnnl_nchw);
  const dnnl_dims_t st = {2, 2}, ks = {17, 17}, dil = {0, 0}, zero = {0, 0};
  dnnl_pooling_v2_desc_t pool{};
  ASSERT_EQ(dnnl_pooling_v2_forward_desc_init(&pool, dnnl_forward_training, dnnl_pooling_max, &ps, &pdst, st,
                                              ks, dil, zero, zero),
            dnnl_success);
  dnnl_primitive_desc_t ppd = pd_of(&pool);
  Args pargs = make_args(ppd, {DNNL_ARG_DST, DNNL_ARG_WORKSPACE}, 1);
  EXPECT_EQ(
      run_on(*backend_, ppd, pargs,
             [](ir::Desc& x) { x.tensors[x.find(ir::Arg::workspace)].desc.dtype = capture::DType::u8; }),
      Reason::workspace_unsupported);
  dnnl_primitive_desc_destroy(ppd);

  const dnnl_memory_desc_t bm = md({2, 4, 4, 4}, dnnl_nchw);
  dnnl_batch_normalization_desc_t bn{};
  ASSERT_EQ(
      dnnl_batch_normalization_forward_desc_init(&bn, dnnl_forward_training, &bm, 1e-3f, dnnl_fuse_norm_relu),
      dnnl_success);
  dnnl_primitive_desc_t bpd = pd_of(&bn);
  Args bargs = make_args(bpd, {DNNL_ARG_DST, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_WORKSPACE}, 1);
  EXPECT_EQ(run_on(*backend_, bpd, bargs,
                   [](ir::Desc& x) {
                     ir::TensorDesc& ws = x.tensors[x.find(ir::Arg::workspace)].desc;
                     ws.layout = ir::Layout{};
                     ws.layout.ndims = 1;
                     ws.layout.dims[0] = ws.layout.padded[0] = ws.bytes = 15;
                     ws.layout.strides[0] = 1;
                   }),
            Reason::workspace_unsupported);  // 128 elements need 16 bytes
  dnnl_primitive_desc_destroy(bpd);

  // Layer normalization is not implemented here.
  const dnnl_memory_desc_t lm = md({4, 10}, dnnl_ab), stat = md({4}, dnnl_a);
  dnnl_layer_normalization_desc_t ln{};
  ASSERT_EQ(dnnl_layer_normalization_forward_desc_init(&ln, dnnl_forward_inference, &lm, &stat, 1e-4f, 0),
            dnnl_success);
  dnnl_primitive_desc_t lpd = pd_of(&ln);
  Args largs = make_args(lpd, {DNNL_ARG_DST}, 1);
  EXPECT_EQ(run_on(*backend_, lpd, largs), Reason::op_unsupported);
  dnnl_primitive_desc_destroy(lpd);
}

// SOL_TEST_WRONG_KERNEL=convolution, read when a backend initialises: its convolutions' first
// output element is off by exactly 1, everything else as without the switch.
TEST_F(OpenclDnn, WrongKernelSwitchBreaksConvolutionsOnly) {
  ASSERT_EQ(setenv("SOL_TEST_WRONG_KERNEL", "convolution", 1), 0);
  auto wrong = backends::opencl::create();
  std::string why;
  const bool ok = wrong->init(test_config(make_temp_dir()), why);
  unsetenv("SOL_TEST_WRONG_KERNEL");
  ASSERT_TRUE(ok) << why;

  dnnl_primitive_desc_t pd = conv_pd(kDepthwise, dnnl_forward_training);
  Args good = make_args(pd, {DNNL_ARG_DST}, 17);
  Args bad = copy_args(good);
  ASSERT_EQ(run_on(*backend_, pd, good), Reason::ok);
  ASSERT_EQ(run_on(*wrong, pd, bad), Reason::ok);
  const float* g = good[DNNL_ARG_DST]->f32();
  const float* b = bad[DNNL_ARG_DST]->f32();
  EXPECT_FLOAT_EQ(b[0], g[0] + 1);
  EXPECT_EQ(std::memcmp(g + 1, b + 1, good[DNNL_ARG_DST]->size() - 4), 0);
  dnnl_primitive_desc_destroy(pd);

  Conv deconv = kDeconv3d;
  dnnl_primitive_desc_t dpd = conv_pd(deconv, dnnl_forward_training);
  Args dgood = make_args(dpd, {DNNL_ARG_DST}, 19);
  Args dbad = copy_args(dgood);
  ASSERT_EQ(run_on(*backend_, dpd, dgood), Reason::ok);
  ASSERT_EQ(run_on(*wrong, dpd, dbad), Reason::ok);
  EXPECT_EQ(dgood[DNNL_ARG_DST]->bytes, dbad[DNNL_ARG_DST]->bytes);
  dnnl_primitive_desc_destroy(dpd);
}

}  // namespace
}  // namespace sol::test
