// capture::dnnl with real oneDNN primitives: descriptions checked against hand-computed strings,
// flops and bytes, and every problem string against what oneDNN's own verbose mode prints for the
// same execution.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capture/dnn/operands.hpp"
#include "interpose/dnnl/dnnl.hpp"
#include "onednn.hpp"

namespace sol::interpose::dnnl {
namespace {

namespace blas = capture::blas;
using capture::DnnlExec;
using test::engine;  // the oneDNN fixtures (tests/unit/support/onednn.hpp)
using test::md;
using test::pd_of;
using test::stream;

// The problem token of a shape: the only one without '='.
std::string problem_of(const std::string& shape) {
  std::istringstream in(shape);
  std::string tok, found;
  while (in >> tok)
    if (tok.find('=') == std::string::npos) found = tok;
  return found;
}

std::string token_value(const std::string& shape, const std::string& key) {
  std::istringstream in(shape);
  std::string tok;
  while (in >> tok)
    if (tok.rfind(key + "=", 0) == 0) return tok.substr(key.size() + 1);
  return "";
}

// ---------------------------------------------------------------------------------- the cases

struct Case {
  const char* name;
  std::function<dnnl_primitive_desc_t()> make;
  const char* kind;
  const char* shape = nullptr;  // exact, when given
  double flops = -1;            // exact, when >= 0
  double bytes = -1;            // exact, when >= 0
};

dnnl_primitive_desc_t conv_plain() {
  auto src = md({32, 3, 32, 32}, dnnl_abcd), wei = md({16, 3, 3, 3}, dnnl_abcd), bia = md({16}, dnnl_a),
       dst = md({32, 16, 32, 32}, dnnl_abcd);
  dnnl_convolution_desc_t d;
  dnnl_dims_t s = {1, 1}, p = {1, 1};
  dnnl_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei, &bia,
                                     &dst, s, p, p);
  return pd_of(&d);
}

// Groups, strides, dilation and padding at once.
dnnl_primitive_desc_t conv_grouped() {
  auto src = md({32, 4, 32, 32}, dnnl_abcd), wei = md({2, 8, 2, 3, 3}, dnnl_abcde), bia = md({16}, dnnl_a),
       dst = md({32, 16, 15, 15}, dnnl_abcd);
  dnnl_convolution_desc_t d;
  dnnl_dims_t s = {2, 2}, dl = {1, 1}, p = {1, 1};
  dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &src, &wei,
                                             &bia, &dst, s, dl, p, p);
  return pd_of(&d);
}

// Formats left to oneDNN (blocked on AVX2 machines), and the backward passes that use it as hint.
struct ConvAny {
  dnnl_memory_desc_t src = md({8, 3, 16, 16}, dnnl_format_tag_any),
                     wei = md({16, 3, 3, 3}, dnnl_format_tag_any), bia = md({16}, dnnl_a),
                     dst = md({8, 16, 16, 16}, dnnl_format_tag_any);
  dnnl_dims_t s = {1, 1}, p = {1, 1};
  dnnl_primitive_desc_t fwd() {
    dnnl_convolution_desc_t d;
    dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &src, &wei, &bia,
                                       &dst, s, p, p);
    return pd_of(&d);
  }
  dnnl_primitive_desc_t bwd_data() {
    dnnl_primitive_desc_t hint = fwd();
    dnnl_convolution_desc_t d;
    dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &src, &wei, &dst, s, p, p);
    dnnl_primitive_desc_t pd = pd_of(&d, hint);
    dnnl_primitive_desc_destroy(hint);
    return pd;
  }
  dnnl_primitive_desc_t bwd_weights() {
    dnnl_primitive_desc_t hint = fwd();
    dnnl_convolution_desc_t d;
    dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &src, &wei, &bia, &dst, s, p, p);
    dnnl_primitive_desc_t pd = pd_of(&d, hint);
    dnnl_primitive_desc_destroy(hint);
    return pd;
  }
};
constexpr double kConvAnyFlops = 2.0 * 8 * 16 * 16 * 16 * 3 * 9;

dnnl_primitive_desc_t conv_1d() {
  auto src = md({8, 3, 16}, dnnl_abc), wei = md({4, 3, 3}, dnnl_abc), dst = md({8, 4, 16}, dnnl_abc);
  dnnl_convolution_desc_t d;
  dnnl_dims_t s = {1}, p = {1};
  dnnl_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei, nullptr,
                                     &dst, s, p, p);
  return pd_of(&d);
}

dnnl_primitive_desc_t conv_3d() {
  auto src = md({2, 3, 4, 8, 8}, dnnl_abcde), wei = md({4, 3, 1, 3, 3}, dnnl_abcde),
       dst = md({2, 4, 4, 8, 8}, dnnl_abcde);
  dnnl_convolution_desc_t d;
  dnnl_dims_t s = {1, 1, 1}, p = {0, 1, 1};
  dnnl_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei, nullptr,
                                     &dst, s, p, p);
  return pd_of(&d);
}

dnnl_primitive_desc_t deconv_1d() {
  auto src = md({8, 4, 16}, dnnl_abc), wei = md({3, 4, 3}, dnnl_abc), dst = md({8, 3, 16}, dnnl_abc);
  dnnl_deconvolution_desc_t d;
  dnnl_dims_t s = {1}, p = {1};
  dnnl_deconvolution_forward_desc_init(&d, dnnl_forward_training, dnnl_deconvolution_direct, &src, &wei,
                                       nullptr, &dst, s, p, p);
  return pd_of(&d);
}

dnnl_primitive_desc_t inner_product() {
  auto src = md({32, 512}, dnnl_ab), wei = md({128, 512}, dnnl_ab), bia = md({128}, dnnl_a),
       dst = md({32, 128}, dnnl_ab);
  dnnl_inner_product_desc_t d;
  dnnl_inner_product_forward_desc_init(&d, dnnl_forward_training, &src, &wei, &bia, &dst);
  return pd_of(&d);
}

dnnl_primitive_desc_t inner_product_4d() {
  auto src = md({32, 16, 4, 4}, dnnl_abcd), wei = md({128, 16, 4, 4}, dnnl_abcd),
       dst = md({32, 128}, dnnl_ab);
  dnnl_inner_product_desc_t d;
  dnnl_inner_product_forward_desc_init(&d, dnnl_forward_inference, &src, &wei, nullptr, &dst);
  return pd_of(&d);
}

dnnl_primitive_desc_t matmul() {
  auto a = md({32, 512}, dnnl_ab), b = md({512, 128}, dnnl_ab), c = md({32, 128}, dnnl_ab);
  dnnl_matmul_desc_t d;
  dnnl_matmul_desc_init(&d, &a, &b, nullptr, &c);
  return pd_of(&d);
}

dnnl_primitive_desc_t matmul_batched() {
  auto a = md({4, 32, 64}, dnnl_abc), b = md({4, 64, 16}, dnnl_acb), bias = md({1, 1, 16}, dnnl_abc),
       c = md({4, 32, 16}, dnnl_abc);
  dnnl_matmul_desc_t d;
  dnnl_matmul_desc_init(&d, &a, &b, &bias, &c);
  return pd_of(&d);
}

dnnl_primitive_desc_t reorder(dnnl_memory_desc_t from, dnnl_memory_desc_t to) {
  dnnl_primitive_desc_t pd = nullptr;
  EXPECT_EQ(dnnl_reorder_primitive_desc_create(&pd, &from, engine(), &to, engine(), nullptr), dnnl_success);
  return pd;
}

dnnl_primitive_desc_t eltwise(dnnl_alg_kind_t alg, float alpha, float beta, dnnl_prop_kind_t prop) {
  auto a = md({32, 16, 32, 32}, dnnl_abcd);
  dnnl_eltwise_desc_t d;
  dnnl_eltwise_forward_desc_init(&d, prop, alg, &a, alpha, beta);
  return pd_of(&d);
}

dnnl_primitive_desc_t relu_backward() {
  dnnl_primitive_desc_t hint = eltwise(dnnl_eltwise_relu, 0, 0, dnnl_forward_training);
  auto a = md({32, 16, 32, 32}, dnnl_abcd);
  dnnl_eltwise_desc_t d;
  dnnl_eltwise_backward_desc_init(&d, dnnl_eltwise_relu, &a, &a, 0, 0);
  dnnl_primitive_desc_t pd = pd_of(&d, hint);
  dnnl_primitive_desc_destroy(hint);
  return pd;
}

struct Pool {
  dnnl_memory_desc_t src = md({32, 16, 32, 32}, dnnl_abcd), dst = md({32, 16, 16, 16}, dnnl_abcd);
  dnnl_dims_t s = {2, 2}, k = {2, 2}, p = {0, 0};
  dnnl_primitive_desc_t max_fwd() {
    dnnl_pooling_desc_t d;
    dnnl_pooling_forward_desc_init(&d, dnnl_forward_training, dnnl_pooling_max, &src, &dst, s, k, p, p);
    return pd_of(&d);
  }
  dnnl_primitive_desc_t max_bwd() {
    dnnl_primitive_desc_t hint = max_fwd();
    dnnl_pooling_desc_t d;
    dnnl_pooling_backward_desc_init(&d, dnnl_pooling_max, &src, &dst, s, k, p, p);
    dnnl_primitive_desc_t pd = pd_of(&d, hint);
    dnnl_primitive_desc_destroy(hint);
    return pd;
  }
  dnnl_primitive_desc_t avg_v2() {
    dnnl_pooling_v2_desc_t d;
    dnnl_dims_t dl = {1, 1};
    auto dst2 = md({32, 16, 15, 15}, dnnl_abcd);
    dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, dnnl_pooling_avg_exclude_padding, &src,
                                      &dst2, s, k, dl, p, p);
    return pd_of(&d);
  }
};

struct BatchNorm {
  dnnl_memory_desc_t data = md({32, 16, 8, 8}, dnnl_abcd);
  dnnl_primitive_desc_t fwd(dnnl_prop_kind_t prop, unsigned flags) {
    dnnl_batch_normalization_desc_t d;
    dnnl_batch_normalization_forward_desc_init(&d, prop, &data, 1e-5f, flags);
    return pd_of(&d);
  }
  dnnl_primitive_desc_t bwd() {
    dnnl_primitive_desc_t hint = fwd(dnnl_forward_training, dnnl_use_scaleshift);
    dnnl_batch_normalization_desc_t d;
    dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, &data, &data, 1e-5f, dnnl_use_scaleshift);
    dnnl_primitive_desc_t pd = pd_of(&d, hint);
    dnnl_primitive_desc_destroy(hint);
    return pd;
  }
};

dnnl_primitive_desc_t layer_norm() {
  auto data = md({4, 32, 64}, dnnl_abc);
  dnnl_layer_normalization_desc_t d;
  dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_training, &data, nullptr, 1e-5f,
                                             dnnl_use_scale | dnnl_use_shift);
  return pd_of(&d);
}

dnnl_primitive_desc_t softmax(bool log) {
  auto data = md({32, 1000}, dnnl_ab);
  dnnl_softmax_desc_t d;
  if (log)
    dnnl_logsoftmax_forward_desc_init(&d, dnnl_forward_training, &data, 1);
  else
    dnnl_softmax_forward_desc_init(&d, dnnl_forward_training, &data, 1);
  return pd_of(&d);
}

dnnl_primitive_desc_t softmax_v2() {
  auto data = md({32, 1000}, dnnl_ab);
  dnnl_softmax_v2_desc_t d;
  dnnl_softmax_v2_forward_desc_init(&d, dnnl_forward_inference, dnnl_softmax_log, &data, &data, 1);
  return pd_of(&d);
}

dnnl_primitive_desc_t binary_add() {
  auto a = md({32, 16, 8, 8}, dnnl_abcd), b = md({32, 16, 1, 1}, dnnl_abcd);
  dnnl_binary_desc_t d;
  dnnl_binary_desc_init(&d, dnnl_binary_add, &a, &b, &a);
  return pd_of(&d);
}

dnnl_primitive_desc_t sum() {
  dnnl_memory_desc_t srcs[3] = {md({8, 16}, dnnl_ab), md({8, 16}, dnnl_ab), md({8, 16}, dnnl_ba)};
  float scales[3] = {1, 1, 2};
  dnnl_primitive_desc_t pd = nullptr;
  EXPECT_EQ(dnnl_sum_primitive_desc_create(&pd, nullptr, 3, scales, srcs, nullptr, engine()), dnnl_success);
  return pd;
}

dnnl_primitive_desc_t concat() {
  dnnl_memory_desc_t srcs[2] = {md({8, 16}, dnnl_ab), md({8, 4}, dnnl_ab)};
  dnnl_primitive_desc_t pd = nullptr;
  EXPECT_EQ(dnnl_concat_primitive_desc_create(&pd, nullptr, 2, 1, srcs, nullptr, engine()), dnnl_success);
  return pd;
}

dnnl_primitive_desc_t lrn() {
  auto data = md({4, 16, 8, 8}, dnnl_abcd);
  dnnl_lrn_desc_t d;
  dnnl_lrn_forward_desc_init(&d, dnnl_forward_inference, dnnl_lrn_across_channels, &data, 5, 1e-4f, 0.75f,
                             1.f);
  return pd_of(&d);
}

dnnl_primitive_desc_t shuffle() {
  auto data = md({4, 16, 8, 8}, dnnl_abcd);
  dnnl_shuffle_desc_t d;
  dnnl_shuffle_forward_desc_init(&d, dnnl_forward_inference, &data, 1, 4);
  return pd_of(&d);
}

dnnl_primitive_desc_t resampling() {
  auto src = md({4, 16, 8, 8}, dnnl_abcd), dst = md({4, 16, 16, 16}, dnnl_abcd);
  dnnl_resampling_desc_t d;
  dnnl_resampling_forward_desc_init(&d, dnnl_forward_inference, dnnl_resampling_linear, nullptr, &src, &dst);
  return pd_of(&d);
}

dnnl_primitive_desc_t reduction() {
  auto src = md({4, 16, 8, 8}, dnnl_abcd), dst = md({4, 16, 1, 1}, dnnl_abcd);
  dnnl_reduction_desc_t d;
  dnnl_reduction_desc_init(&d, dnnl_reduction_sum, &src, &dst, 0.f, 0.f);
  return pd_of(&d);
}

dnnl_primitive_desc_t prelu() {
  auto src = md({4, 16, 8, 8}, dnnl_abcd), wei = md({1, 16, 1, 1}, dnnl_abcd);
  dnnl_prelu_desc_t d;
  dnnl_prelu_forward_desc_init(&d, dnnl_forward_training, &src, &wei);
  return pd_of(&d);
}

// T=5, MB=4, one layer, one direction, SLC=32, SIC=DHC=16, four gates.
dnnl_primitive_desc_t lstm() {
  auto sl = md({5, 4, 32}, dnnl_tnc), si = md({1, 1, 4, 16}, dnnl_ldnc), sc = md({1, 1, 4, 16}, dnnl_ldnc),
       wl = md({1, 1, 32, 4, 16}, dnnl_format_tag_any), wi = md({1, 1, 16, 4, 16}, dnnl_format_tag_any),
       b = md({1, 1, 4, 16}, dnnl_ldgo), dl = md({5, 4, 16}, dnnl_tnc), di = md({1, 1, 4, 16}, dnnl_ldnc),
       dc = md({1, 1, 4, 16}, dnnl_ldnc);
  dnnl_rnn_desc_t d;
  dnnl_lstm_forward_desc_init(&d, dnnl_forward_inference, dnnl_unidirectional_left2right, &sl, &si, &sc, &wl,
                              &wi, &b, &dl, &di, &dc, 0);
  return pd_of(&d);
}

// A convolution with a sum, a ReLU and a per-channel addition fused after it.
dnnl_primitive_desc_t conv_post_ops() {
  dnnl_post_ops_t po = nullptr;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_create(&po);
  dnnl_post_ops_append_sum(po, 1.f);
  dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f);
  auto channel = md({1, 8, 1, 1}, dnnl_abcd);
  dnnl_post_ops_append_binary(po, dnnl_binary_add, &channel);
  dnnl_primitive_attr_create(&attr);
  dnnl_primitive_attr_set_post_ops(attr, po);
  auto src = md({2, 8, 8, 8}, dnnl_abcd), wei = md({8, 8, 1, 1}, dnnl_abcd),
       dst = md({2, 8, 8, 8}, dnnl_abcd);
  dnnl_convolution_desc_t d;
  dnnl_dims_t s = {1, 1}, p = {0, 0};
  dnnl_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei, nullptr,
                                     &dst, s, p, p);
  dnnl_primitive_desc_t pd = pd_of(&d, nullptr, attr);
  dnnl_primitive_attr_destroy(attr);
  dnnl_post_ops_destroy(po);
  return pd;
}

// Convolution, deconvolution, inner product, matmul and reorder.
std::vector<Case> weighted_cases() {
  return {
      {"conv", conv_plain, "convolution",
       "prop=forward_inference mb32_ic3oc16_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1 src=f32:abcd "
       "wei=f32:abcd "
       "bia=f32:a dst=f32:abcd",
       2.0 * 32 * 16 * 32 * 32 * 3 * 9, 393216 + 1728 + 64 + 2097152},
      {"conv_grouped", conv_grouped, "convolution",
       "prop=forward_training g2mb32_ic4oc16_ih32oh15kh3sh2dh1ph1_iw32ow15kw3sw2dw1pw1 src=f32:abcd "
       "wei=f32:abcde "
       "bia=f32:a dst=f32:abcd",
       2.0 * 32 * 16 * 15 * 15 * 2 * 9, 524288 + 1152 + 64 + 460800},
      {"conv_any_fwd", [] { return ConvAny().fwd(); }, "convolution", nullptr, kConvAnyFlops},
      {"conv_bwd_data", [] { return ConvAny().bwd_data(); }, "convolution", nullptr, kConvAnyFlops},
      {"conv_bwd_weights", [] { return ConvAny().bwd_weights(); }, "convolution", nullptr, kConvAnyFlops},
      {"conv_1d", conv_1d, "convolution",
       "prop=forward_inference mb8_ic3oc4_iw16ow16kw3sw1dw0pw1 src=f32:abc wei=f32:abc dst=f32:abc",
       2.0 * 8 * 4 * 16 * 3 * 3},
      {"conv_3d", conv_3d, "convolution",
       "prop=forward_inference mb2_ic3oc4_id4od4kd1sd1dd0pd0_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1 "
       "src=f32:abcde "
       "wei=f32:abcde dst=f32:abcde",
       2.0 * 2 * 4 * 4 * 8 * 8 * 3 * 9},
      {"deconv_1d", deconv_1d, "deconvolution",
       "prop=forward_training mb8_ic4oc3_iw16ow16kw3sw1dw0pw1 src=f32:abc wei=f32:abc dst=f32:abc",
       2.0 * 8 * 4 * 16 * 3 * 3},
      {"inner_product", inner_product, "inner_product",
       "prop=forward_training mb32ic512oc128 src=f32:ab wei=f32:ab bia=f32:a dst=f32:ab",
       2.0 * 32 * 128 * 512, 65536 + 262144 + 512 + 16384},
      {"inner_product_4d", inner_product_4d, "inner_product",
       "prop=forward_inference mb32ic16ih4iw4oc128 src=f32:abcd wei=f32:abcd dst=f32:ab",
       2.0 * 32 * 128 * 256},
      {"matmul", matmul, "matmul", "prop=undef 32x512:512x128:32x128 src=f32:ab wei=f32:ab dst=f32:ab",
       2.0 * 32 * 512 * 128, 65536 + 262144 + 16384},
      {"matmul_batched", matmul_batched, "matmul",
       "prop=undef 4x32x64:4x64x16:4x32x16 src=f32:abc wei=f32:acb bia=f32:abc dst=f32:abc",
       2.0 * 4 * 32 * 16 * 64, 32768 + 16384 + 64 + 8192},
      {"reorder_to_blocked",
       [] {
         return reorder(md({32, 16, 8, 8}, dnnl_abcd), md({32, 16, 8, 8}, dnnl_aBcd16b));
       },
       "reorder", "prop=undef 32x16x8x8 src=f32:abcd dst=f32:aBcd16b", 32768, 2 * 131072},
      {"reorder_to_nhwc",
       [] {
         return reorder(md({32, 16, 8, 8}, dnnl_aBcd8b), md({32, 16, 8, 8}, dnnl_acdb));
       },
       "reorder", "prop=undef 32x16x8x8 src=f32:aBcd8b dst=f32:acdb", 32768},
      {"reorder_weights",
       [] {
         return reorder(md({16, 8, 3, 3}, dnnl_abcd), md({16, 8, 3, 3}, dnnl_OIhw8i16o2i));
       },
       "reorder", "prop=undef 16x8x3x3 src=f32:abcd dst=f32:ABcd8b16a2b", 1152},
      {"reorder_s8",
       [] {
         return reorder(md({64, 32}, dnnl_ab), md({64, 32}, dnnl_ba, dnnl_s8));
       },
       "reorder", "prop=undef 64x32 src=f32:ab dst=s8:ba", 2048, 8192 + 2048},
  };
}

// Eltwise, pooling, the normalizations, softmax, the multi-input kinds and the rest.
std::vector<Case> other_cases() {
  return {
      {"relu", [] { return eltwise(dnnl_eltwise_relu, 0, 0, dnnl_forward_training); }, "eltwise",
       "prop=forward_training alg=eltwise_relu alpha=0 beta=0 32x16x32x32 src=f32:abcd dst=f32:abcd", 524288,
       2 * 2097152},
      {"linear", [] { return eltwise(dnnl_eltwise_linear, 0.5f, 1.25f, dnnl_forward_inference); }, "eltwise",
       "prop=forward_inference alg=eltwise_linear alpha=0.5 beta=1.25 32x16x32x32 src=f32:abcd dst=f32:abcd"},
      {"relu_bwd", relu_backward, "eltwise",
       "prop=backward_data alg=eltwise_relu alpha=0 beta=0 32x16x32x32 src=f32:abcd diff_dst=f32:abcd "
       "diff_src=f32:abcd",
       524288, 3 * 2097152},
      {"max_pool", [] { return Pool().max_fwd(); }, "pooling",
       "prop=forward_training alg=pooling_max mb32ic16_ih32oh16kh2sh2dh0ph0_iw32ow16kw2sw2dw0pw0 "
       "src=f32:abcd "
       "dst=f32:abcd ws=u8:abcd",
       32.0 * 16 * 16 * 16 * 4, 2097152 + 524288 + 131072},
      {"max_pool_bwd", [] { return Pool().max_bwd(); }, "pooling",
       "prop=backward_data alg=pooling_max mb32ic16_ih32oh16kh2sh2dh0ph0_iw32ow16kw2sw2dw0pw0 "
       "diff_dst=f32:abcd "
       "diff_src=f32:abcd ws=u8:abcd",
       32.0 * 16 * 16 * 16 * 4, 2097152 + 524288 + 131072},
      {"avg_pool_v2", [] { return Pool().avg_v2(); }, "pooling",
       "prop=forward_inference alg=pooling_avg_exclude_padding "
       "mb32ic16_ih32oh15kh2sh2dh1ph0_iw32ow15kw2sw2dw1pw0 "
       "src=f32:abcd dst=f32:abcd",
       32.0 * 16 * 15 * 15 * 4},
      {"batch_norm", [] { return BatchNorm().fwd(dnnl_forward_training, dnnl_use_scaleshift); },
       "batch_normalization",
       "prop=forward_training flags=S mb32ic16ih8iw8 src=f32:abcd wei=f32:ab mean=f32:a var=f32:a "
       "dst=f32:abcd",
       5.0 * 32768, 131072 + 128 + 64 + 64 + 131072},
      {"batch_norm_inference",
       [] {
         return BatchNorm().fwd(dnnl_forward_inference, dnnl_use_global_stats | dnnl_use_scale |
                                                            dnnl_use_shift | dnnl_fuse_norm_relu);
       },
       "batch_normalization",
       "prop=forward_inference flags=GCHR mb32ic16ih8iw8 src=f32:abcd mean=f32:a var=f32:a scale=f32:a "
       "shift=f32:a "
       "dst=f32:abcd",
       5.0 * 32768, 131072 + 4 * 64 + 131072},
      {"batch_norm_bwd", [] { return BatchNorm().bwd(); }, "batch_normalization",
       "prop=backward flags=S mb32ic16ih8iw8 src=f32:abcd wei=f32:ab mean=f32:a var=f32:a diff_dst=f32:abcd "
       "diff_src=f32:abcd diff_wei=f32:ab",
       5.0 * 32768},
      {"layer_norm", layer_norm, "layer_normalization",
       "prop=forward_training flags=CH 4x32x64 src=f32:abc mean=f32:ab var=f32:ab scale=f32:a shift=f32:a "
       "dst=f32:abc",
       5.0 * 8192},
      {"softmax", [] { return softmax(false); }, "softmax",
       "prop=forward_training alg=softmax_accurate axis=1 32x1000 src=f32:ab dst=f32:ab", 5.0 * 32000,
       2 * 128000},
      {"logsoftmax", [] { return softmax(true); }, "logsoftmax",
       "prop=forward_training alg=softmax_log axis=1 32x1000 src=f32:ab dst=f32:ab", 5.0 * 32000},
      {"softmax_v2", softmax_v2, "logsoftmax",
       "prop=forward_inference alg=softmax_log axis=1 32x1000 src=f32:ab dst=f32:ab", 5.0 * 32000},
      {"binary_add", binary_add, "binary",
       "prop=undef alg=binary_add 32x16x8x8:32x16x1x1 src=f32:abcd src1=f32:abcd dst=f32:abcd", 32768,
       131072 + 2048 + 131072},
      {"sum", sum, "sum", "prop=undef 8x16 src0=f32:ab src1=f32:ab src2=f32:ba dst=f32:ab", 3 * 128, 4 * 512},
      {"concat", concat, "concat", "prop=undef axis=1 8x16:8x4 src0=f32:ab src1=f32:ab dst=f32:ab", 160,
       512 + 128 + 640},
      {"lrn", lrn, "lrn",
       "prop=forward_inference alg=lrn_across_channels mb4ic16ih8iw8ls5beta0.75 src=f32:abcd dst=f32:abcd",
       2.0 * 4096 * 5},
      {"shuffle", shuffle, "shuffle",
       "prop=forward_inference axis=1 group=4 4x16x8x8 src=f32:abcd dst=f32:abcd", 4096},
      {"resampling", resampling, "resampling",
       "prop=forward_inference alg=resampling_linear mb4ic16_ih8oh16_iw8ow16 src=f32:abcd dst=f32:abcd",
       16384.0 * 8},
      {"reduction", reduction, "reduction",
       "prop=undef alg=reduction_sum p=0 eps=0 4x16x8x8:4x16x1x1 src=f32:abcd dst=f32:abcd", 4096},
      {"prelu", prelu, "prelu",
       "prop=forward_training 4x16x8x8:1x16x1x1 src=f32:abcd wei=f32:abcd dst=f32:abcd", 4096},
      {"lstm", lstm, "rnn", nullptr, 2.0 * 5 * 4 * 4 * 16 * (32 + 16)},
      {"conv_post_ops", conv_post_ops, "convolution",
       "prop=forward_inference mb2_ic8oc8_ih8oh8kh1sh1dh0ph0_iw8ow8kw1sw1dw0pw0 "
       "post_ops=sum+eltwise_relu+binary_add "
       "src=f32:abcd wei=f32:abcd po_src=f32:abcd dst=f32:abcd",
       2.0 * 2 * 8 * 64 * 8, 4096 + 256 + 32 + 2 * 4096},
  };
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> c = weighted_cases();
    for (Case& x : other_cases()) c.push_back(std::move(x));
    return c;
  }();
  return all;
}

// ---------------------------------------------------------------------------------- execution

// What one execution passed and what oneDNN's verbose mode said about it.
struct Execution {
  std::vector<dnnl_exec_arg_t> args;
  std::vector<std::string> verbose;  // the fields of the onednn_verbose,exec line
};

// All arguments the descriptor names, from DNNL_ARG_SRC to the post-op sources.
std::vector<int> arg_ids(const_dnnl_primitive_desc_t pd) {
  std::vector<int> ids = {DNNL_ARG_SRC,       DNNL_ARG_SRC_1,        DNNL_ARG_SRC_2,      DNNL_ARG_DST,
                          DNNL_ARG_DST_1,     DNNL_ARG_DST_2,        DNNL_ARG_WEIGHTS,    DNNL_ARG_WEIGHTS_1,
                          DNNL_ARG_BIAS,      DNNL_ARG_MEAN,         DNNL_ARG_VARIANCE,   DNNL_ARG_SCALE,
                          DNNL_ARG_SHIFT,     DNNL_ARG_WORKSPACE,    DNNL_ARG_SCRATCHPAD, DNNL_ARG_DIFF_SRC,
                          DNNL_ARG_DIFF_DST,  DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS,  DNNL_ARG_DIFF_SCALE,
                          DNNL_ARG_DIFF_SHIFT};
  const int n = dnnl_primitive_desc_query_s32(pd, dnnl_query_num_of_inputs_s32, 0);
  for (int i = 0; i < n; ++i) ids.push_back(DNNL_ARG_MULTIPLE_SRC + i);
  const_dnnl_primitive_attr_t attr = nullptr;
  const_dnnl_post_ops_t po = nullptr;
  if (dnnl_primitive_desc_get_attr(pd, &attr) == dnnl_success &&
      dnnl_primitive_attr_get_post_ops(attr, &po) == dnnl_success)
    for (int i = 0; i < dnnl_post_ops_len(po); ++i)
      if (dnnl_post_ops_get_kind(po, i) == dnnl_binary)
        ids.push_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1);
  return ids;
}

Execution execute(dnnl_primitive_t prim) {
  Execution ex;
  const_dnnl_primitive_desc_t pd = nullptr;
  EXPECT_EQ(dnnl_primitive_get_primitive_desc(prim, &pd), dnnl_success);
  for (int id : arg_ids(pd)) {
    const dnnl_memory_desc_t* m = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, id);
    if (!m || m->ndims == 0) continue;
    dnnl_memory_t mem = nullptr;
    EXPECT_EQ(dnnl_memory_create(&mem, m, engine(), DNNL_MEMORY_ALLOCATE), dnnl_success);
    void* h = nullptr;
    dnnl_memory_get_data_handle(mem, &h);
    // Zeros: a max-pooling workspace full of garbage would send the backward pass out of bounds.
    std::memset(h, 0, dnnl_memory_desc_get_size(m));
    ex.args.push_back({id, mem});
  }
  dnnl_set_verbose(1);
  testing::internal::CaptureStdout();
  dnnl_status_t st = dnnl_primitive_execute(prim, stream(), static_cast<int>(ex.args.size()), ex.args.data());
  dnnl_stream_wait(stream());
  std::string out = testing::internal::GetCapturedStdout();
  dnnl_set_verbose(0);
  EXPECT_EQ(st, dnnl_success);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("onednn_verbose,exec,", 0) != 0) continue;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) ex.verbose.push_back(f);
  }
  return ex;
}

void release(Execution& ex) {
  for (auto& a : ex.args) dnnl_memory_destroy(a.memory);
  ex.args.clear();
}

// oneDNN 2.6 runs pooling and softmax (log or not) on their v2 implementations, and its verbose
// mode names those.
std::string verbose_kind(const std::string& kind) {
  static const std::map<std::string, std::string> alias = {
      {"pooling", "pooling_v2"}, {"softmax", "softmax_v2"}, {"logsoftmax", "softmax_v2"}};
  auto it = alias.find(kind);
  return it == alias.end() ? kind : it->second;
}

// The memory one execution touches, as the trace's dataflow graph sees it: the primitive's DNN
// node bound to the execution's arguments.
int operands(const DnnlExec& e, blas::Operand* out, int max) {
  auto info = find(e.primitive);
  if (!info) return 0;
  capture::dnn::Call call;
  const char* why = nullptr;
  if (!bind_call(*info, e.nargs, e.args, call, &why)) return 0;
  return capture::dnn::operands(call, out, max);
}

// ---------------------------------------------------------------------------------- tests

class DnnlInfo : public testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(bind(reinterpret_cast<const void*>(&dnnl_primitive_desc_query)));
  }
};

TEST_P(DnnlInfo, DescribesLikeOneDnnVerbose) {
  const Case& c = GetParam();
  dnnl_primitive_desc_t pd = c.make();
  ASSERT_NE(pd, nullptr);
  dnnl_primitive_t prim = nullptr;
  ASSERT_EQ(dnnl_primitive_create(&prim, pd), dnnl_success);
  on_create(prim, pd);
  dnnl_primitive_desc_destroy(pd);  // the primitive keeps its own copy; the description needs neither

  auto info = find(prim);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->kind, c.kind);
  if (c.shape) {
    EXPECT_EQ(info->shape, c.shape);
  }
  if (c.flops >= 0) {
    EXPECT_DOUBLE_EQ(info->flops, c.flops);
  }
  if (c.bytes >= 0) {
    EXPECT_DOUBLE_EQ(info->bytes, c.bytes);
  }
  EXPECT_GT(info->bytes, 0);
  EXPECT_GT(info->flops, 0);
  EXPECT_EQ(info->dtype, DType::f32);
  EXPECT_FALSE(problem_of(info->shape).empty()) << info->shape;

  Execution ex = execute(prim);
  ASSERT_GE(ex.verbose.size(), 11u) << "no verbose line for " << c.name;
  EXPECT_EQ(ex.verbose[3], verbose_kind(info->kind));
  EXPECT_EQ(ex.verbose[5], token_value(info->shape, "prop"));
  EXPECT_EQ(ex.verbose[9], problem_of(info->shape)) << info->shape;

  // Every argument of the execution comes back with its handle, size and direction: one
  // operand per argument, or two for a 2 x C scale-and-shift buffer, which SOL splits.
  blas::Operand ops[64];
  const DnnlExec exec{prim, stream(), static_cast<int>(ex.args.size()), ex.args.data()};
  const int n = operands(exec, ops, 64);
  ASSERT_TRUE(info->node) << c.name;
  // Recurrent primitives are not DNN nodes; a sum's scales are learnt from the
  // dnnl_sum_primitive_desc_create call, which this test makes without libsol. Both are traced
  // and run natively.
  if (info->kind == "rnn" || info->kind == "sum") {
    EXPECT_NE(info->node->unsupported, nullptr) << c.name;
    EXPECT_FALSE(info->why_not.empty());
    EXPECT_EQ(n, 0);
    release(ex);
    on_destroy(prim);
    dnnl_primitive_destroy(prim);
    return;
  }
  ASSERT_EQ(info->node->unsupported, nullptr) << c.name << ": " << info->why_not;

  int matched = 0;
  for (const auto& a : ex.args) {
    if (a.arg == DNNL_ARG_SCRATCHPAD) continue;
    void* h = nullptr;
    const dnnl_memory_desc_t* m = nullptr;
    dnnl_memory_get_data_handle(a.memory, &h);
    dnnl_memory_get_memory_desc(a.memory, &m);
    const size_t size = dnnl_memory_desc_get_size(m);
    const bool is_output =
        a.arg == DNNL_ARG_DST || a.arg == DNNL_ARG_DIFF_SRC || a.arg == DNNL_ARG_DIFF_WEIGHTS ||
        a.arg == DNNL_ARG_DIFF_BIAS || a.arg == DNNL_ARG_WORKSPACE || a.arg == DNNL_ARG_DST_1 ||
        a.arg == DNNL_ARG_DST_2 || a.arg == DNNL_ARG_DIFF_SCALE || a.arg == DNNL_ARG_DIFF_SHIFT;
    size_t covered = 0;
    for (int i = 0; i < n; ++i) {
      const auto* p = static_cast<const unsigned char*>(ops[i].ptr);
      const auto* base = static_cast<const unsigned char*>(h);
      if (p < base || p >= base + size) continue;
      covered += ops[i].bytes;
      ++matched;
      // Statistics are outputs only when computed, a workspace only in forward passes
      // (DnnlOperands tests them).
      if (a.arg != DNNL_ARG_MEAN && a.arg != DNNL_ARG_VARIANCE && a.arg != DNNL_ARG_WORKSPACE) {
        EXPECT_EQ(ops[i].written, is_output) << ops[i].name;
      }
      EXPECT_TRUE(ops[i].read || ops[i].written) << ops[i].name;
    }
    // oneDNN 2.x answers for a normalization's scale-and-shift argument and for its separate
    // scale and shift arguments alike; the execution passes all of them, the node takes those
    // its flags name.
    const bool aliased = a.arg == DNNL_ARG_WEIGHTS || a.arg == DNNL_ARG_SCALE || a.arg == DNNL_ARG_SHIFT ||
                         a.arg == DNNL_ARG_DIFF_WEIGHTS || a.arg == DNNL_ARG_DIFF_SCALE ||
                         a.arg == DNNL_ARG_DIFF_SHIFT;
    const bool normalization = info->kind == "batch_normalization" || info->kind == "layer_normalization";
    if (!(normalization && aliased && covered == 0)) {
      EXPECT_EQ(covered, size) << c.name << " arg " << a.arg;
    }
  }
  EXPECT_EQ(n, matched);
  release(ex);

  on_destroy(prim);
  EXPECT_EQ(find(prim), nullptr);
  dnnl_primitive_destroy(prim);
}

INSTANTIATE_TEST_SUITE_P(Primitives, DnnlInfo, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

class DnnlOperands : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(bind(reinterpret_cast<const void*>(&dnnl_primitive_desc_query)));
  }
  dnnl_primitive_t create(dnnl_primitive_desc_t pd) {
    dnnl_primitive_t prim = nullptr;
    EXPECT_EQ(dnnl_primitive_create(&prim, pd), dnnl_success);
    dnnl_primitive_desc_destroy(pd);
    return prim;
  }
};

TEST_F(DnnlOperands, StatisticsAreOutputsOnlyWhenComputed) {
  BatchNorm bn;
  dnnl_primitive_t training = create(bn.fwd(dnnl_forward_training, dnnl_use_scaleshift));
  dnnl_primitive_t inference = create(bn.fwd(dnnl_forward_inference, dnnl_use_global_stats));
  on_create(training, nullptr);  // no descriptor: taken from the primitive
  on_create(inference, nullptr);
  for (dnnl_primitive_t prim : {training, inference}) {
    Execution ex = execute(prim);
    blas::Operand ops[16];
    const int n =
        operands(DnnlExec{prim, stream(), static_cast<int>(ex.args.size()), ex.args.data()}, ops, 16);
    int stats = 0;
    for (int i = 0; i < n; ++i) {
      if (std::string(ops[i].name) != "mean" && std::string(ops[i].name) != "var") continue;
      ++stats;
      EXPECT_EQ(ops[i].written, prim == training) << ops[i].name;
      EXPECT_EQ(ops[i].read, prim == inference) << ops[i].name;
    }
    EXPECT_EQ(stats, 2);
    release(ex);
    on_destroy(prim);
    dnnl_primitive_destroy(prim);
  }
}

TEST_F(DnnlOperands, SumPostOpReadsTheDestination) {
  dnnl_primitive_t prim = create(conv_post_ops());
  on_create(prim, nullptr);
  Execution ex = execute(prim);
  blas::Operand ops[16];
  const int n = operands(DnnlExec{prim, stream(), static_cast<int>(ex.args.size()), ex.args.data()}, ops, 16);
  bool seen = false;
  for (int i = 0; i < n; ++i) {
    if (std::string(ops[i].name) != "dst") continue;
    seen = true;
    EXPECT_TRUE(ops[i].read && ops[i].written);
  }
  EXPECT_TRUE(seen);
  release(ex);
  on_destroy(prim);
  dnnl_primitive_destroy(prim);
}

TEST_F(DnnlOperands, MismatchedMemoryIsNotBound) {
  // A memory of another layout than the primitive's: oneDNN rejects it at execution, so SOL
  // leaves the call to oneDNN rather than computing on a misread tensor.
  dnnl_eltwise_desc_t d{};
  auto src = md({4, 8}, dnnl_ab);
  ASSERT_EQ(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, dnnl_eltwise_relu, &src, 0, 0),
            dnnl_success);
  dnnl_primitive_desc_t pd = pd_of(&d);
  dnnl_primitive_t prim = nullptr;
  ASSERT_EQ(dnnl_primitive_create(&prim, pd), dnnl_success);
  on_create(prim, pd);
  auto info = find(prim);
  ASSERT_TRUE(info && info->node);
  auto other = md({4, 8}, dnnl_ba);
  dnnl_memory_t a = nullptr, b = nullptr;
  ASSERT_EQ(dnnl_memory_create(&a, &src, engine(), DNNL_MEMORY_ALLOCATE), dnnl_success);
  ASSERT_EQ(dnnl_memory_create(&b, &other, engine(), DNNL_MEMORY_ALLOCATE), dnnl_success);
  capture::dnn::Call call;
  const char* why = nullptr;
  const dnnl_exec_arg_t good[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_DST, a}};
  EXPECT_TRUE(bind_call(*info, 2, good, call, &why)) << (why ? why : "");
  const dnnl_exec_arg_t bad[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_DST, b}};
  EXPECT_FALSE(bind_call(*info, 2, bad, call, &why));
  EXPECT_NE(why, nullptr);
  const dnnl_exec_arg_t missing[] = {{DNNL_ARG_SRC, a}};
  EXPECT_FALSE(bind_call(*info, 1, missing, call, &why));
  on_destroy(prim);
  dnnl_primitive_destroy(prim);
  dnnl_primitive_desc_destroy(pd);
  dnnl_memory_destroy(a);
  dnnl_memory_destroy(b);
}

TEST_F(DnnlOperands, UnknownPrimitivesAreNotFound) {
  int never_created = 0;
  EXPECT_EQ(find(&never_created), nullptr);
  EXPECT_EQ(find(nullptr), nullptr);
  on_destroy(&never_created);  // harmless
  on_create(nullptr, nullptr);
  EXPECT_EQ(find(nullptr), nullptr);
}

TEST_F(DnnlOperands, HandlesAreDescribedAnewWhenReused) {
  int handle = 0;
  dnnl_primitive_desc_t relu = eltwise(dnnl_eltwise_relu, 0, 0, dnnl_forward_inference);
  dnnl_primitive_desc_t mm = matmul();
  on_create(&handle, relu);
  EXPECT_EQ(find(&handle)->kind, "eltwise");
  on_create(&handle, mm);  // oneDNN reused the address without SOL seeing the destroy
  EXPECT_EQ(find(&handle)->kind, "matmul");
  on_destroy(&handle);
  EXPECT_EQ(find(&handle), nullptr);
  dnnl_primitive_desc_destroy(relu);
  dnnl_primitive_desc_destroy(mm);
}

TEST_F(DnnlOperands, ConcurrentLookupsWhileCreatingAndDestroying) {
  // Fake handles with a real descriptor: on_create reads only the descriptor.
  dnnl_primitive_desc_t pd = eltwise(dnnl_eltwise_relu, 0, 0, dnnl_forward_inference);
  constexpr int kHandles = 256, kReaders = 4, kRounds = 40;
  static char handles[kHandles];
  std::atomic<bool> stop{false};
  std::atomic<long> hits{0}, bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r)
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed))
        for (int i = 0; i < kHandles; ++i)
          if (auto info = find(&handles[i])) {
            hits.fetch_add(1, std::memory_order_relaxed);
            if (info->kind != "eltwise" || info->flops != 524288) bad.fetch_add(1);
          }
    });
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kHandles; ++i) on_create(&handles[i], pd);
    for (int i = 0; i < kHandles; ++i) on_destroy(&handles[i]);
  }
  for (int i = 0; i < kHandles; i += 2) on_create(&handles[i], pd);
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 0);
  for (int i = 0; i < kHandles; ++i) {
    EXPECT_EQ(find(&handles[i]) != nullptr, i % 2 == 0) << i;
    on_destroy(&handles[i]);
  }
  dnnl_primitive_desc_destroy(pd);
}

// In a fresh process (death-test style "threadsafe" re-executes the binary): nothing is bound
// until bind() gets a symbol of a real oneDNN, and until then nothing is described.
TEST(DnnlBind, RefusesWhatIsNotOneDnn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        dnnl_primitive_desc_t pd = eltwise(dnnl_eltwise_relu, 0, 0, dnnl_forward_inference);
        int handle = 0;
        int failures = 0;
        on_create(&handle, pd);
        failures += find(&handle) != nullptr;  // not bound yet
        failures += bind(nullptr);
        failures += bind(reinterpret_cast<const void*>(&strlen));  // libc has no oneDNN
        on_create(&handle, pd);
        failures += find(&handle) != nullptr;
        failures += !bind(reinterpret_cast<const void*>(&dnnl_memory_desc_get_size));
        failures += !bind(reinterpret_cast<const void*>(&strlen));  // bound: idempotent
        on_create(&handle, pd);
        failures += find(&handle) == nullptr;
        std::exit(failures);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace sol::interpose::dnnl
