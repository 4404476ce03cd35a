// DNN conformance: each case is a oneDNN primitive (with the forward pass it needs, for backward
// passes that read a workspace). The oneDNN frontend describes it as a DNN node; it runs natively
// on libdnnl and on a SOL backend on identical inputs, and every output is compared within a
// tolerance scaled to the reduction length. Every buffer has NaN guard zones on both sides that
// must stay untouched; outputs start as NaN, so an element the backend does not write shows up;
// inputs must be bitwise unchanged after the backend ran. A workspace never crosses sides: the
// forward pass runs on the native library and on the backend, and each backward pass reads the
// workspace its own side produced.
//
// The suite runs for "reference" and "onednn" (which must take every case), and for "opencl" and
// "cuda" when those backends initialise (a case they decline is skipped, with its reason).
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "hal/registry.hpp"
#include "harness.hpp"
#include "interpose/dnnl/dnnl.hpp"
#include "ir/dnn.hpp"
#include "onednn.hpp"

namespace sol::test {
namespace {

namespace ir = capture::dnn;
using hal::Reason;

// Output scale and post-ops, built up by the cases.
struct Attr {
  float scale = 1;
  struct Po {
    char kind;  // 's'um, 'e'ltwise, 'b'inary
    dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
    float a = 0, b = 0, scale = 1;
    Dims dims = {};  // binary: the second input's dims
  };
  std::vector<Po> post_ops;
  bool empty() const { return scale == 1 && post_ops.empty(); }

  dnnl_primitive_attr_t make() const {
    if (empty()) return nullptr;
    dnnl_primitive_attr_t attr = nullptr;
    dnnl_primitive_attr_create(&attr);
    if (scale != 1) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale);
    dnnl_post_ops_t po = nullptr;
    dnnl_post_ops_create(&po);
    for (const Po& p : post_ops) {
      if (p.kind == 's') dnnl_post_ops_append_sum(po, p.scale);
      if (p.kind == 'e') dnnl_post_ops_append_eltwise(po, p.scale, p.alg, p.a, p.b);
      if (p.kind == 'b') {
        const dnnl_memory_desc_t m = md(p.dims, plain_tag(static_cast<int>(p.dims.size())));
        dnnl_post_ops_append_binary(po, p.alg, &m);
      }
    }
    dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_post_ops_destroy(po);
    return attr;
  }
  bool has_sum() const {
    for (const Po& p : post_ops)
      if (p.kind == 's') return true;
    return false;
  }
};

// --------------------------------------------------------------------------------- the cases

// One primitive to check, and the forward pass before it when it reads a workspace.
struct Case {
  std::string name;
  std::function<dnnl_primitive_desc_t()> make;
  std::function<dnnl_primitive_desc_t()> make_forward;  // empty unless a workspace is needed
  std::vector<int> outputs;                            // DNNL_ARG_* the primitive writes
  double k = 1;            // reduction length: the tolerance grows with sqrt(k)
  bool positive = false;   // inputs in (0.1, 2) instead of (-1, 1): sqrt, log, pow...
  bool dst_is_input = false;  // a sum post-op reads dst
};

// Tolerance: relative to 1 + |expected|, oneDNN's and the backend's float rounding both grow with
// the square root of the number of terms summed.
double tolerance(const Case& c) {
  return 2e-6 * std::sqrt(std::max(1.0, c.k)) + 2e-6;
}

// The buffers of one primitive execution on both sides.
struct Execution {
  dnnl_primitive_desc_t pd = nullptr;
  std::map<int, dnnl_memory_desc_t> mds;
  Args native, backend;
};

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Allocates and fills every argument of `pd`. Inputs that `previous` (the forward pass) also had
// take its native values on both sides, except the workspace, which each side takes from its own.
void prepare(Execution& ex, const Case& c, const std::vector<int>& outputs, Execution* previous, unsigned seed) {
  for (int arg : exec_arg_kinds(ex.pd)) {
    const dnnl_memory_desc_t* m = dnnl_primitive_desc_query_md(ex.pd, dnnl_query_exec_arg_md, arg);
    if (!m || m->ndims == 0) continue;
    ex.mds[arg] = *m;
    ex.native[arg] = std::make_unique<Buffer>(*m);
    ex.backend[arg] = std::make_unique<Buffer>(*m);
    const bool input = !contains(outputs, arg) || (arg == DNNL_ARG_DST && c.dst_is_input);
    if (!input) continue;
    const size_t size = dnnl_memory_desc_get_size(m);
    if (previous && previous->native.count(arg) && previous->mds[arg].ndims == m->ndims &&
        dnnl_memory_desc_get_size(&previous->mds[arg]) == size) {
      const bool ws = arg == DNNL_ARG_WORKSPACE;
      std::memcpy(ex.native[arg]->data(), previous->native[arg]->data(), size);
      std::memcpy(ex.backend[arg]->data(), (ws ? previous->backend : previous->native)[arg]->data(), size);
      continue;
    }
    const bool positive = c.positive || arg == DNNL_ARG_VARIANCE;
    fill_random(*ex.native[arg], seed + static_cast<unsigned>(arg) * 7919u, positive);
    std::memcpy(ex.backend[arg]->data(), ex.native[arg]->data(), size);
  }
}

float element(const dnnl_memory_desc_t& m, const unsigned char* p, size_t i) {
  if (m.data_type == dnnl_bf16) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}

// Differences between the sides' outputs (the whole buffer: padding included), guard damage,
// and inputs the backend changed. Empty when all is well.
std::string compare(Execution& ex, const Case& c, const std::vector<int>& outputs,
                    const std::map<int, std::vector<unsigned char>>& inputs_before, bool exact) {
  std::string out;
  const double tol = tolerance(c);
  for (auto& [arg, buf] : ex.backend) {
    const dnnl_memory_desc_t& m = ex.mds[arg];
    const size_t size = dnnl_memory_desc_get_size(&m);
    if (!buf->guards_intact()) out += "arg " + std::to_string(arg) + ": a guard zone was written\n";
    if (!contains(outputs, arg)) {
      if (std::memcmp(buf->bytes.data(), inputs_before.at(arg).data(), buf->bytes.size()))
        out += "input arg " + std::to_string(arg) + " was modified\n";
      continue;
    }
    if (exact) {  // the same library made the same primitive: the same bytes, workspace included
      if (std::memcmp(buf->data(), ex.native[arg]->data(), size))
        out += "arg " + std::to_string(arg) + " differs from native's bytes\n";
      continue;
    }
    if (arg == DNNL_ARG_WORKSPACE) continue;  // each side's own format
    const size_t esize = m.data_type == dnnl_bf16 ? 2 : 4;
    const double etol = m.data_type == dnnl_bf16 ? 1e-2 : tol;
    int bad = 0;
    for (size_t i = 0; i < size / esize; ++i) {
      const float want = element(m, ex.native[arg]->data(), i), got = element(m, buf->data(), i);
      if (std::isnan(want) && std::isnan(got)) continue;
      if (std::fabs(got - want) <= etol * (1 + std::fabs(want))) continue;
      if (bad++ < 5)
        out += "arg " + std::to_string(arg) + " element " + std::to_string(i) + ": native " + std::to_string(want) +
               ", backend " + std::to_string(got) + "\n";
    }
    if (bad > 5) out += "... " + std::to_string(bad) + " elements differ in arg " + std::to_string(arg) + "\n";
  }
  return out;
}

// -------------------------------------------------------------------------------- the backends

hal::Backend* backend_named(const std::string& name, std::string& why) {
  static config::Config cfg = test_config(make_temp_dir());
  static hal::Registry registry(cfg);
  hal::Backend* b = registry.get(name);
  if (!b) why = registry.why(name);
  return b;
}

// ---------------------------------------------------------------------------------- case list

const int kOut[] = {DNNL_ARG_DST, DNNL_ARG_WORKSPACE};

dnnl_dims_t* dims_of(std::vector<Dims>& keep, Dims d) {
  d.resize(DNNL_MAX_NDIMS, 0);
  keep.push_back(d);
  return reinterpret_cast<dnnl_dims_t*>(keep.back().data());
}

// Convolution geometry, benchdnn-like: mb, g, ic, oc, spatial sizes, kernel, stride, dilation
// (oneDNN's: 0 dense), padding left and right.
struct Conv {
  dnnl_dim_t mb, g, ic, oc;
  Dims in, k, s, d, pl, pr;
  Dims out(bool deconv) const {
    Dims o;
    for (size_t i = 0; i < in.size(); ++i) {
      const dnnl_dim_t span = (k[i] - 1) * (d[i] + 1) + 1;
      o.push_back(deconv ? (in[i] - 1) * s[i] + span - pl[i] - pr[i] : (in[i] + pl[i] + pr[i] - span) / s[i] + 1);
    }
    return o;
  }
  double reduction() const {
    double r = static_cast<double>(ic / g);
    for (auto x : k) r *= static_cast<double>(x);
    return r;
  }
};

dnnl_format_tag_t data_tag(size_t nsp, bool blocked8) {
  if (nsp == 1) return blocked8 ? dnnl_nCw8c : dnnl_ncw;
  if (nsp == 2) return blocked8 ? dnnl_nChw8c : dnnl_nchw;
  return blocked8 ? dnnl_nCdhw8c : dnnl_ncdhw;
}

// conv/deconv descriptor for one propagation. Weights and (with `any`) data take oneDNN's choice
// of format: blocked where its kernels want blocking.
std::function<dnnl_primitive_desc_t()> conv_pd(bool deconv, dnnl_prop_kind_t prop, Conv cv, bool blocked,
                                               bool bias, Attr attr = {}) {
  return [=]() -> dnnl_primitive_desc_t {
    const size_t nsp = cv.in.size();
    Dims src = {cv.mb, cv.ic}, dst = {cv.mb, cv.oc}, wei;
    for (auto x : cv.in) src.push_back(x);
    for (auto x : cv.out(deconv)) dst.push_back(x);
    if (cv.g > 1) wei = {cv.g, cv.oc / cv.g, cv.ic / cv.g};
    else wei = {cv.oc, cv.ic};
    for (auto x : cv.k) wei.push_back(x);
    const dnnl_format_tag_t dt = data_tag(nsp, blocked);
    const dnnl_memory_desc_t src_md = md(src, dt), dst_md = md(dst, dt), wei_md = md(wei, dnnl_format_tag_any),
                             bias_md = md({cv.oc}, dnnl_x);
    std::vector<Dims> keep;
    keep.reserve(8);
    const auto S = *dims_of(keep, cv.s), D = *dims_of(keep, cv.d), PL = *dims_of(keep, cv.pl), PR = *dims_of(keep, cv.pr);
    const dnnl_memory_desc_t* b = bias ? &bias_md : nullptr;
    dnnl_convolution_desc_t fwd{}, d{};
    auto fwd_init = deconv ? dnnl_dilated_deconvolution_forward_desc_init : dnnl_dilated_convolution_forward_desc_init;
    const dnnl_alg_kind_t alg = deconv ? dnnl_deconvolution_direct : dnnl_convolution_direct;
    EXPECT_EQ(fwd_init(&fwd, prop == dnnl_forward_inference ? prop : dnnl_forward_training, alg, &src_md, &wei_md, b,
                       &dst_md, S, D, PL, PR),
              dnnl_success);
    dnnl_primitive_attr_t a = attr.make();
    if (prop == dnnl_forward_training || prop == dnnl_forward_inference) {
      dnnl_primitive_desc_t pd = pd_of(&fwd, nullptr, a);
      if (a) dnnl_primitive_attr_destroy(a);
      return pd;
    }
    if (prop == dnnl_backward_data) {
      auto init = deconv ? dnnl_dilated_deconvolution_backward_data_desc_init
                         : dnnl_dilated_convolution_backward_data_desc_init;
      EXPECT_EQ(init(&d, alg, &src_md, &wei_md, &dst_md, S, D, PL, PR), dnnl_success);
    } else {
      auto init = deconv ? dnnl_dilated_deconvolution_backward_weights_desc_init
                         : dnnl_dilated_convolution_backward_weights_desc_init;
      EXPECT_EQ(init(&d, alg, &src_md, &wei_md, b, &dst_md, S, D, PL, PR), dnnl_success);
    }
    return bwd_pd(&fwd, &d);
  };
}

void add_conv_cases(std::vector<Case>& cases) {
  struct Shape {
    const char* name;
    Conv cv;
  };
  const Shape shapes[] = {
      {"mb2ic3oc5_ih7kh3ph1", {2, 1, 3, 5, {7, 7}, {3, 3}, {1, 1}, {0, 0}, {1, 1}, {1, 1}}},
      {"g2mb2ic6oc10_ih9iw8kh3kw2sh2dh1ph1pw0_asym", {2, 2, 6, 10, {9, 8}, {3, 2}, {2, 1}, {1, 0}, {1, 0}, {2, 1}}},
      {"dw_g16mb2ic16oc16_ih10kh3ph1", {2, 16, 16, 16, {10, 10}, {3, 3}, {1, 1}, {0, 0}, {1, 1}, {1, 1}}},
      {"1x1_mb3ic13oc11_ih6", {3, 1, 13, 11, {6, 6}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0, 0}}},
      {"1d_mb2ic4oc6_iw17kw5sw3pw2", {2, 1, 4, 6, {17}, {5}, {3}, {0}, {2}, {1}}},
      {"3d_mb1ic3oc4_id5kd3pd1", {1, 1, 3, 4, {5, 6, 5}, {3, 3, 2}, {1, 2, 1}, {0, 1, 0}, {1, 1, 0}, {1, 0, 1}}},
      {"blk_mb2ic16oc24_ih8kh3", {2, 1, 16, 24, {8, 8}, {3, 3}, {1, 1}, {0, 0}, {1, 1}, {1, 1}}},
      {"blkpad_g2mb2ic20oc12_ih6kh3sh2", {2, 2, 20, 12, {6, 6}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, {0, 0}}},
  };
  for (bool deconv : {false, true}) {
    const std::string kind = deconv ? "deconv_" : "conv_";
    for (const Shape& sh : shapes) {
      const bool blocked = std::string(sh.name).rfind("blk", 0) == 0;
      if (deconv && std::string(sh.name).rfind("dw_", 0) == 0) continue;
      // A deconvolution's reduction runs over its own input channels (ic) and the kernel.
      const double k_fwd = sh.cv.reduction(), k_bwd_d = (sh.cv.oc / sh.cv.g) * k_fwd / (sh.cv.ic / sh.cv.g);
      Conv cv = sh.cv;
      Dims out = cv.out(deconv);
      double k_bwd_w = cv.mb;
      for (auto x : (deconv ? cv.in : out)) k_bwd_w *= static_cast<double>(x);
      cases.push_back({kind + "fwd_" + sh.name, conv_pd(deconv, dnnl_forward_training, cv, blocked, true), {}, {DNNL_ARG_DST}, k_fwd});
      cases.push_back({kind + "bwd_d_" + sh.name, conv_pd(deconv, dnnl_backward_data, cv, blocked, false), {}, {DNNL_ARG_DIFF_SRC}, k_bwd_d});
      cases.push_back({kind + "bwd_w_" + sh.name, conv_pd(deconv, dnnl_backward_weights, cv, blocked, true), {},
                       {DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, k_bwd_w});
    }
  }
  // Attributes: output scale, sum, eltwise, binary with a per-channel and a full operand.
  const Conv cv = shapes[0].cv;
  Attr a;
  a.post_ops = {{'s', dnnl_alg_kind_undef, 0, 0, 0.75f}, {'e', dnnl_eltwise_relu, 0.1f, 0, 1}};
  Case c{"conv_fwd_sum_relu", conv_pd(false, dnnl_forward_inference, cv, true, true, a), {}, {DNNL_ARG_DST}, cv.reduction()};
  c.dst_is_input = true;
  cases.push_back(c);
  Attr b;
  b.post_ops = {{'b', dnnl_binary_add, 0, 0, 1, {1, 5, 1, 1}}, {'e', dnnl_eltwise_tanh, 0, 0, 1},
                {'b', dnnl_binary_mul, 0, 0, 1, {2, 5, 7, 7}}};
  cases.push_back({"conv_fwd_binary_bcast_tanh_binary", conv_pd(false, dnnl_forward_inference, cv, true, false, b), {},
                   {DNNL_ARG_DST}, cv.reduction()});
  Attr e;
  e.post_ops = {{'e', dnnl_eltwise_linear, 2.f, -1.f, 1}};
  cases.push_back({"deconv_fwd_linear", conv_pd(true, dnnl_forward_inference, shapes[1].cv, false, true, e), {},
                   {DNNL_ARG_DST}, 12});
}

void add_ip_matmul_cases(std::vector<Case>& cases) {
  auto ip = [](dnnl_prop_kind_t prop, Dims src, dnnl_dim_t oc, dnnl_format_tag_t tag, Attr attr = {}) {
    return [=]() -> dnnl_primitive_desc_t {
      Dims wei = src;
      wei[0] = oc;
      const dnnl_memory_desc_t s = md(src, tag), w = md(wei, dnnl_format_tag_any), b = md({oc}, dnnl_x),
                               d = md({src[0], oc}, dnnl_nc);
      dnnl_inner_product_desc_t fwd{}, bwd{};
      dnnl_inner_product_forward_desc_init(&fwd, dnnl_forward_training, &s, &w, &b, &d);
      dnnl_primitive_attr_t a = attr.make();
      if (prop == dnnl_forward_training) {
        dnnl_primitive_desc_t pd = pd_of(&fwd, nullptr, a);
        if (a) dnnl_primitive_attr_destroy(a);
        return pd;
      }
      if (prop == dnnl_backward_data) dnnl_inner_product_backward_data_desc_init(&bwd, &s, &w, &d);
      else dnnl_inner_product_backward_weights_desc_init(&bwd, &s, &w, &b, &d);
      return bwd_pd(&fwd, &bwd);
    };
  };
  const Dims s4 = {3, 13, 4, 5};  // K = 260 over channels and spatial dims
  for (auto [tag, name] : {std::pair{dnnl_nchw, "nchw"}, std::pair{dnnl_nChw8c, "nChw8c"}}) {
    cases.push_back({std::string("ip_fwd_") + name, ip(dnnl_forward_training, s4, 7, tag), {}, {DNNL_ARG_DST}, 260});
    cases.push_back({std::string("ip_bwd_d_") + name, ip(dnnl_backward_data, s4, 7, tag), {}, {DNNL_ARG_DIFF_SRC}, 7});
    cases.push_back({std::string("ip_bwd_w_") + name, ip(dnnl_backward_weights, s4, 7, tag), {},
                     {DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 3});
  }
  cases.push_back({"ip_fwd_2d", ip(dnnl_forward_training, {5, 33}, 17, dnnl_nc), {}, {DNNL_ARG_DST}, 33});
  Attr a;
  a.post_ops = {{'e', dnnl_eltwise_gelu_erf, 0, 0, 1}, {'b', dnnl_binary_sub, 0, 0, 1, {1, 17}}};
  cases.push_back({"ip_fwd_gelu_binary", ip(dnnl_forward_training, {5, 33}, 17, dnnl_nc, a), {}, {DNNL_ARG_DST}, 33});

  auto mm = [](Dims src, Dims wei, Dims dst, Dims bias, Attr attr = {}, bool transposed_b = false) {
    return [=]() -> dnnl_primitive_desc_t {
      const int nd = static_cast<int>(src.size());
      const dnnl_memory_desc_t s = md(src, plain_tag(nd)),
                               w = md(wei, transposed_b ? (nd == 2 ? dnnl_ba : dnnl_acb) : plain_tag(nd)),
                               d = md(dst, plain_tag(nd));
      dnnl_memory_desc_t b{};
      if (!bias.empty()) b = md(bias, plain_tag(nd));
      dnnl_matmul_desc_t desc{};
      dnnl_matmul_desc_init(&desc, &s, &w, bias.empty() ? nullptr : &b, &d);
      dnnl_primitive_attr_t a = attr.make();
      dnnl_primitive_desc_t pd = pd_of(&desc, nullptr, a);
      if (a) dnnl_primitive_attr_destroy(a);
      return pd;
    };
  };
  cases.push_back({"matmul_2d_bias", mm({7, 19}, {19, 5}, {7, 5}, {1, 5}), {}, {DNNL_ARG_DST}, 19});
  cases.push_back({"matmul_2d_bt", mm({7, 19}, {19, 5}, {7, 5}, {}, {}, true), {}, {DNNL_ARG_DST}, 19});
  cases.push_back({"matmul_3d_bcast_bias", mm({3, 6, 9}, {1, 9, 4}, {3, 6, 4}, {3, 6, 1}), {}, {DNNL_ARG_DST}, 9});
  Attr a2;
  a2.scale = 2.f;
  a2.post_ops = {{'s', dnnl_alg_kind_undef, 0, 0, 0.5f}, {'b', dnnl_binary_max, 0, 0, 1, {1, 1, 4}}};
  Case c{"matmul_3d_oscale_sum_binary", mm({2, 5, 8}, {2, 8, 4}, {2, 5, 4}, {1, 1, 4}, a2), {}, {DNNL_ARG_DST}, 8};
  c.dst_is_input = true;
  cases.push_back(c);
}

void add_eltwise_cases(std::vector<Case>& cases) {
  struct Alg {
    const char* name;
    dnnl_alg_kind_t alg;
    float a, b;
    bool positive, backward;
  };
  const Alg algs[] = {
      {"relu", dnnl_eltwise_relu, 0.2f, 0, false, true},
      {"tanh", dnnl_eltwise_tanh, 0, 0, false, true},
      {"elu", dnnl_eltwise_elu, 0.7f, 0, false, true},
      {"square", dnnl_eltwise_square, 0, 0, false, true},
      {"abs", dnnl_eltwise_abs, 0, 0, false, true},
      {"sqrt", dnnl_eltwise_sqrt, 0, 0, true, true},
      {"linear", dnnl_eltwise_linear, 1.5f, -0.3f, false, true},
      {"bounded_relu", dnnl_eltwise_bounded_relu, 0.6f, 0, false, true},
      {"soft_relu", dnnl_eltwise_soft_relu, 0, 0, false, true},
      {"logistic", dnnl_eltwise_logistic, 0, 0, false, true},
      {"exp", dnnl_eltwise_exp, 0, 0, false, true},
      {"gelu_tanh", dnnl_eltwise_gelu_tanh, 0, 0, false, true},
      {"gelu_erf", dnnl_eltwise_gelu_erf, 0, 0, false, true},
      {"swish", dnnl_eltwise_swish, 1.3f, 0, false, true},
      {"log", dnnl_eltwise_log, 0, 0, true, true},
      {"clip", dnnl_eltwise_clip, -0.4f, 0.5f, false, true},
      {"clip_v2", dnnl_eltwise_clip_v2, -0.4f, 0.5f, false, true},
      {"pow", dnnl_eltwise_pow, 1.2f, 1.7f, true, true},
      {"round", dnnl_eltwise_round, 0, 0, false, false},
      {"logsigmoid", dnnl_eltwise_logsigmoid, 0, 0, false, true},
      {"mish", dnnl_eltwise_mish, 0, 0, false, true},
      {"hardswish", dnnl_eltwise_hardswish, 0, 0, false, true},
      {"relu_dst", dnnl_eltwise_relu_use_dst_for_bwd, 0, 0, false, true},
      {"tanh_dst", dnnl_eltwise_tanh_use_dst_for_bwd, 0, 0, false, true},
      {"elu_dst", dnnl_eltwise_elu_use_dst_for_bwd, 0.5f, 0, false, true},
      {"sqrt_dst", dnnl_eltwise_sqrt_use_dst_for_bwd, 0, 0, true, true},
      {"logistic_dst", dnnl_eltwise_logistic_use_dst_for_bwd, 0, 0, false, true},
      {"exp_dst", dnnl_eltwise_exp_use_dst_for_bwd, 0, 0, false, true},
      {"clip_v2_dst", dnnl_eltwise_clip_v2_use_dst_for_bwd, -0.4f, 0.5f, false, true},
  };
  for (const Alg& al : algs) {
    const Dims dims = {2, 11, 5, 3};
    auto make = [=](bool bwd) {
      return [=]() -> dnnl_primitive_desc_t {
        const dnnl_memory_desc_t m = md(dims, dnnl_nChw8c);
        dnnl_eltwise_desc_t f{}, b{};
        dnnl_eltwise_forward_desc_init(&f, dnnl_forward_training, al.alg, &m, al.a, al.b);
        if (!bwd) return pd_of(&f);
        dnnl_eltwise_backward_desc_init(&b, al.alg, &m, &m, al.a, al.b);
        return bwd_pd(&f, &b);
      };
    };
    Case f{std::string("eltwise_fwd_") + al.name, make(false), {}, {DNNL_ARG_DST}, 4};
    f.positive = al.positive;
    cases.push_back(f);
    if (!al.backward) continue;
    Case b{std::string("eltwise_bwd_") + al.name, make(true), {}, {DNNL_ARG_DIFF_SRC}, 4};
    b.positive = al.positive;
    cases.push_back(b);
  }
}

void add_pooling_cases(std::vector<Case>& cases) {
  struct P {
    const char* name;
    dnnl_alg_kind_t alg;
    Dims in, k, s, d, pl, pr;
    dnnl_dim_t c;
  };
  const P ps[] = {
      {"max_ih9k3s2p1", dnnl_pooling_max, {9, 9}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, {1, 1}, 5},
      {"max_ih8k2s2_blk", dnnl_pooling_max, {8, 8}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {0, 0}, 16},
      {"max_3d_dil", dnnl_pooling_max, {5, 7, 6}, {2, 3, 2}, {1, 2, 2}, {0, 1, 0}, {0, 1, 1}, {1, 0, 0}, 3},
      {"avgi_ih7k3s2p1asym", dnnl_pooling_avg_include_padding, {7, 8}, {3, 3}, {2, 2}, {0, 0}, {1, 0}, {1, 2}, 6},
      {"avge_ih7k3s2p1asym", dnnl_pooling_avg_exclude_padding, {7, 8}, {3, 3}, {2, 2}, {0, 0}, {1, 0}, {1, 2}, 6},
      {"avge_1d", dnnl_pooling_avg_exclude_padding, {13}, {4}, {3}, {0}, {2}, {1}, 4},
  };
  for (const P& p : ps) {
    const bool blocked = std::string(p.name).find("blk") != std::string::npos;
    auto make = [=](bool bwd, dnnl_prop_kind_t prop) {
      return [=]() -> dnnl_primitive_desc_t {
        Dims src = {2, p.c}, dst = {2, p.c};
        double k = 1;
        for (size_t i = 0; i < p.in.size(); ++i) {
          src.push_back(p.in[i]);
          dst.push_back((p.in[i] + p.pl[i] + p.pr[i] - ((p.k[i] - 1) * (p.d[i] + 1) + 1)) / p.s[i] + 1);
          k *= p.k[i];
        }
        const dnnl_format_tag_t tag = data_tag(p.in.size(), blocked);
        const dnnl_memory_desc_t s = md(src, tag), d = md(dst, tag);
        std::vector<Dims> keep;
        keep.reserve(8);
        const auto S = *dims_of(keep, p.s), K = *dims_of(keep, p.k), D = *dims_of(keep, p.d),
                   PL = *dims_of(keep, p.pl), PR = *dims_of(keep, p.pr);
        dnnl_pooling_v2_desc_t f{}, b{};
        dnnl_pooling_v2_forward_desc_init(&f, prop, p.alg, &s, &d, S, K, D, PL, PR);
        if (!bwd) return pd_of(&f);
        dnnl_pooling_v2_backward_desc_init(&b, p.alg, &s, &d, S, K, D, PL, PR);
        return bwd_pd(&f, &b);
      };
    };
    double k = 1;
    for (auto x : p.k) k *= static_cast<double>(x);
    cases.push_back({std::string("pool_fwd_") + p.name, make(false, dnnl_forward_training), {}, {kOut[0], kOut[1]}, k});
    cases.push_back({std::string("pool_fwd_inf_") + p.name, make(false, dnnl_forward_inference), {}, {DNNL_ARG_DST}, k});
    const bool max = p.alg == dnnl_pooling_max;
    cases.push_back({std::string("pool_bwd_") + p.name, make(true, dnnl_forward_training),
                     max ? make(false, dnnl_forward_training) : std::function<dnnl_primitive_desc_t()>{},
                     {DNNL_ARG_DIFF_SRC}, k});
  }
}

void add_norm_cases(std::vector<Case>& cases) {
  auto bn = [](dnnl_prop_kind_t prop, unsigned flags, Dims dims, dnnl_format_tag_t tag) {
    return [=]() -> dnnl_primitive_desc_t {
      const dnnl_memory_desc_t m = md(dims, tag);
      dnnl_batch_normalization_desc_t f{}, b{};
      const dnnl_prop_kind_t fprop = prop == dnnl_forward_inference ? prop : dnnl_forward_training;
      dnnl_batch_normalization_forward_desc_init(&f, fprop, &m, 1e-3f, flags);
      if (prop == fprop) return pd_of(&f);
      dnnl_batch_normalization_backward_desc_init(&b, prop, &m, &m, 1e-3f, flags);
      return bwd_pd(&f, &b);
    };
  };
  const unsigned ss = dnnl_use_scale | dnnl_use_shift;
  const Dims d4 = {3, 13, 5, 4};
  const std::vector<int> stats_out = {DNNL_ARG_DST, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_WORKSPACE};
  cases.push_back({"bnorm_fwd_train_nchw", bn(dnnl_forward_training, ss, d4, dnnl_nchw), {}, stats_out, 60});
  cases.push_back({"bnorm_fwd_train_blk_noscale", bn(dnnl_forward_training, 0, d4, dnnl_nChw8c), {}, stats_out, 60});
  cases.push_back({"bnorm_fwd_train_relu_blk", bn(dnnl_forward_training, ss | dnnl_fuse_norm_relu, d4, dnnl_nChw16c),
                   {}, stats_out, 60});
  cases.push_back({"bnorm_fwd_inf_global", bn(dnnl_forward_inference, ss | dnnl_use_global_stats, d4, dnnl_nchw), {},
                   {DNNL_ARG_DST}, 1});
  cases.push_back({"bnorm_fwd_scaleshift_legacy_3d", bn(dnnl_forward_training, dnnl_use_scaleshift, {2, 5, 3, 4, 3}, dnnl_ncdhw),
                   {}, stats_out, 72});
  const std::vector<int> bwd_out = {DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT, DNNL_ARG_DIFF_WEIGHTS};
  cases.push_back({"bnorm_bwd_nchw", bn(dnnl_backward, ss, d4, dnnl_nchw), {}, bwd_out, 60});
  cases.push_back({"bnorm_bwd_data_blk", bn(dnnl_backward_data, 0, d4, dnnl_nChw8c), {}, bwd_out, 60});
  cases.push_back({"bnorm_bwd_global", bn(dnnl_backward, ss | dnnl_use_global_stats, d4, dnnl_nchw), {}, bwd_out, 60});
  cases.push_back({"bnorm_bwd_relu", bn(dnnl_backward, ss | dnnl_fuse_norm_relu, d4, dnnl_nchw),
                   bn(dnnl_forward_training, ss | dnnl_fuse_norm_relu, d4, dnnl_nchw), bwd_out, 60});

  auto ln = [](dnnl_prop_kind_t prop, unsigned flags, Dims dims) {
    return [=]() -> dnnl_primitive_desc_t {
      const int nd = static_cast<int>(dims.size());
      const dnnl_memory_desc_t m = md(dims, plain_tag(nd));
      dnnl_memory_desc_t stat = md(Dims(dims.begin(), dims.end() - 1), plain_tag(nd - 1));
      dnnl_layer_normalization_desc_t f{}, b{};
      const dnnl_prop_kind_t fprop = prop == dnnl_forward_inference ? prop : dnnl_forward_training;
      dnnl_layer_normalization_forward_desc_init(&f, fprop, &m, &stat, 1e-4f, flags);
      if (prop == fprop) return pd_of(&f);
      dnnl_layer_normalization_backward_desc_init(&b, prop, &m, &m, &stat, 1e-4f, flags);
      return bwd_pd(&f, &b);
    };
  };
  cases.push_back({"lnorm_fwd_train", ln(dnnl_forward_training, ss, {4, 3, 37}), {}, stats_out, 37});
  cases.push_back({"lnorm_fwd_inf_global", ln(dnnl_forward_inference, ss | dnnl_use_global_stats, {6, 20}), {},
                   {DNNL_ARG_DST}, 1});
  cases.push_back({"lnorm_fwd_inf", ln(dnnl_forward_inference, dnnl_use_scale, {6, 20}), {}, {DNNL_ARG_DST}, 20});
  cases.push_back({"lnorm_bwd", ln(dnnl_backward, ss, {4, 3, 37}), {}, bwd_out, 37});
  cases.push_back({"lnorm_bwd_data", ln(dnnl_backward_data, 0, {5, 16}), {}, bwd_out, 16});
}

void add_softmax_cases(std::vector<Case>& cases) {
  for (bool log : {false, true})
    for (int axis : {1, 3}) {
      const Dims dims = {3, 10, 4, 7};
      const dnnl_alg_kind_t alg = log ? dnnl_softmax_log : dnnl_softmax_accurate;
      auto make = [=](bool bwd) {
        return [=]() -> dnnl_primitive_desc_t {
          const dnnl_memory_desc_t m = md(dims, axis == 1 ? dnnl_nChw8c : dnnl_nchw);
          dnnl_softmax_v2_desc_t f{}, b{};
          dnnl_softmax_v2_forward_desc_init(&f, dnnl_forward_training, alg, &m, &m, axis);
          if (!bwd) return pd_of(&f);
          dnnl_softmax_v2_backward_desc_init(&b, alg, &m, &m, &m, axis);
          return bwd_pd(&f, &b);
        };
      };
      const std::string name = std::string(log ? "logsoftmax" : "softmax") + "_axis" + std::to_string(axis);
      cases.push_back({name + "_fwd", make(false), {}, {DNNL_ARG_DST}, 10});
      cases.push_back({name + "_bwd", make(true), {}, {DNNL_ARG_DIFF_SRC}, 10});
    }
}

// binary, sum, concat, reorder.
void add_misc_cases(std::vector<Case>& cases) {
  // binary: every algorithm, src1 broadcast per channel; one full-size case with post-ops.
  const std::pair<const char*, dnnl_alg_kind_t> bins[] = {
      {"add", dnnl_binary_add}, {"mul", dnnl_binary_mul}, {"max", dnnl_binary_max}, {"min", dnnl_binary_min},
      {"div", dnnl_binary_div}, {"sub", dnnl_binary_sub}, {"ge", dnnl_binary_ge},   {"gt", dnnl_binary_gt},
      {"le", dnnl_binary_le},   {"lt", dnnl_binary_lt},   {"eq", dnnl_binary_eq},   {"ne", dnnl_binary_ne}};
  auto binary = [](dnnl_alg_kind_t alg, Dims a, Dims b, dnnl_format_tag_t tag, Attr attr = {}) {
    return [=]() -> dnnl_primitive_desc_t {
      const dnnl_memory_desc_t s0 = md(a, tag), s1 = md(b, plain_tag(static_cast<int>(b.size()))), d = md(a, tag);
      dnnl_binary_desc_t desc{};
      dnnl_binary_desc_init(&desc, alg, &s0, &s1, &d);
      dnnl_primitive_attr_t at = attr.make();
      dnnl_primitive_desc_t pd = pd_of(&desc, nullptr, at);
      if (at) dnnl_primitive_attr_destroy(at);
      return pd;
    };
  };
  for (auto [name, alg] : bins)
    cases.push_back({std::string("binary_") + name + "_bcast", binary(alg, {2, 11, 3, 5}, {1, 11, 1, 1}, dnnl_nChw8c), {},
                     {DNNL_ARG_DST}, 1});
  Attr a;
  a.post_ops = {{'s', dnnl_alg_kind_undef, 0, 0, 0.5f}, {'e', dnnl_eltwise_logistic, 0, 0, 2.f}};
  Case bs{"binary_add_full_sum_logistic", binary(dnnl_binary_add, {4, 6, 7}, {4, 6, 7}, dnnl_abc, a), {}, {DNNL_ARG_DST}, 2};
  bs.dst_is_input = true;
  cases.push_back(bs);
  cases.push_back({"binary_mul_bcast_last", binary(dnnl_binary_mul, {4, 6, 7}, {4, 1, 7}, dnnl_abc), {}, {DNNL_ARG_DST}, 1});

  // sum and concat over mixed layouts.
  cases.push_back({"sum_3src_scaled",
                   [] {
                     const Dims d = {2, 10, 3, 3};
                     const dnnl_memory_desc_t srcs[] = {md(d, dnnl_nchw), md(d, dnnl_nChw8c), md(d, dnnl_nhwc)};
                     const float scales[] = {1.f, 0.5f, -2.f};
                     const dnnl_memory_desc_t dst = md(d, dnnl_nChw8c);
                     dnnl_primitive_desc_t pd = nullptr;
                     EXPECT_EQ(dnnl_sum_primitive_desc_create(&pd, &dst, 3, scales, srcs, nullptr, engine()), dnnl_success);
                     // Under LD_PRELOAD the frontend sees this call; here the test hands the scales over.
                     interpose::dnnl::record_sum_scales(pd, scales, 3);
                     return pd;
                   },
                   {}, {DNNL_ARG_DST}, 3});
  cases.push_back({"concat_axis1_mixed",
                   [] {
                     const dnnl_memory_desc_t srcs[] = {md({2, 5, 3, 4}, dnnl_nchw), md({2, 8, 3, 4}, dnnl_nChw8c),
                                                        md({2, 3, 3, 4}, dnnl_nhwc)};
                     const dnnl_memory_desc_t dst = md({2, 16, 3, 4}, dnnl_nchw);
                     dnnl_primitive_desc_t pd = nullptr;
                     EXPECT_EQ(dnnl_concat_primitive_desc_create(&pd, &dst, 3, 1, srcs, nullptr, engine()), dnnl_success);
                     return pd;
                   },
                   {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"concat_axis2",
                   [] {
                     const dnnl_memory_desc_t srcs[] = {md({3, 4, 2}, dnnl_abc), md({3, 4, 5}, dnnl_abc)};
                     const dnnl_memory_desc_t dst = md({3, 4, 7}, dnnl_abc);
                     dnnl_primitive_desc_t pd = nullptr;
                     EXPECT_EQ(dnnl_concat_primitive_desc_create(&pd, &dst, 2, 2, srcs, nullptr, engine()), dnnl_success);
                     return pd;
                   },
                   {}, {DNNL_ARG_DST}, 1});

  // reorder: into and out of padded blocked layouts, weights, bf16, output scale and sum.
  auto reorder = [](Dims dims, dnnl_format_tag_t from, dnnl_format_tag_t to, dnnl_data_type_t dt_to = dnnl_f32,
                    Attr attr = {}) {
    return [=]() -> dnnl_primitive_desc_t {
      const dnnl_memory_desc_t s = md(dims, from), d = md(dims, to, dt_to);
      dnnl_primitive_attr_t at = attr.make();
      dnnl_primitive_desc_t pd = nullptr;
      EXPECT_EQ(dnnl_reorder_primitive_desc_create(&pd, &s, engine(), &d, engine(), at), dnnl_success);
      if (at) dnnl_primitive_attr_destroy(at);
      return pd;
    };
  };
  cases.push_back({"reorder_nchw_nChw16c_pad", reorder({2, 13, 3, 5}, dnnl_nchw, dnnl_nChw16c), {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"reorder_nChw8c_nhwc", reorder({2, 13, 3, 5}, dnnl_nChw8c, dnnl_nhwc), {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"reorder_oihw_OIhw8i8o_pad", reorder({12, 10, 3, 3}, dnnl_oihw, dnnl_OIhw8i8o), {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"reorder_goihw_gOIhw8i8o_pad", reorder({2, 9, 5, 3, 3}, dnnl_goihw, dnnl_gOIhw8i8o), {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"reorder_f32_bf16", reorder({4, 9}, dnnl_ab, dnnl_ba, dnnl_bf16), {}, {DNNL_ARG_DST}, 1});
  Attr ra;
  ra.scale = 3.f;
  ra.post_ops = {{'s', dnnl_alg_kind_undef, 0, 0, 0.25f}};
  Case rc{"reorder_oscale_sum", reorder({3, 16, 2, 2}, dnnl_nchw, dnnl_nChw8c, dnnl_f32, ra), {}, {DNNL_ARG_DST}, 2};
  rc.dst_is_input = true;
  cases.push_back(rc);
}

// shuffle, lrn, prelu, reduction.
void add_rare_cases(std::vector<Case>& cases) {
  auto shuffle = [](bool bwd, int axis, dnnl_dim_t group) {
    return [=]() -> dnnl_primitive_desc_t {
      const dnnl_memory_desc_t m = md({2, 12, 3, 4}, dnnl_nchw);
      dnnl_shuffle_desc_t f{}, b{};
      dnnl_shuffle_forward_desc_init(&f, dnnl_forward_training, &m, axis, group);
      if (!bwd) return pd_of(&f);
      dnnl_shuffle_backward_desc_init(&b, &m, axis, group);
      return bwd_pd(&f, &b);
    };
  };
  cases.push_back({"shuffle_fwd_c_g3", shuffle(false, 1, 3), {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"shuffle_bwd_c_g4", shuffle(true, 1, 4), {}, {DNNL_ARG_DIFF_SRC}, 1});
  cases.push_back({"shuffle_fwd_w_g2", shuffle(false, 3, 2), {}, {DNNL_ARG_DST}, 1});
  auto lrn = [](dnnl_alg_kind_t alg, dnnl_dim_t size) {
    return [=]() -> dnnl_primitive_desc_t {
      const dnnl_memory_desc_t m = md({2, 10, 6, 5}, dnnl_nchw);
      dnnl_lrn_desc_t f{};
      dnnl_lrn_forward_desc_init(&f, dnnl_forward_inference, alg, &m, size, 1e-1f, 0.75f, 1.f);
      return pd_of(&f);
    };
  };
  cases.push_back({"lrn_across_5", lrn(dnnl_lrn_across_channels, 5), {}, {DNNL_ARG_DST}, 5});
  cases.push_back({"lrn_within_3", lrn(dnnl_lrn_within_channel, 3), {}, {DNNL_ARG_DST}, 9});
  auto prelu = [](bool bwd, Dims w) {
    return [=]() -> dnnl_primitive_desc_t {
      const Dims d = {2, 6, 3, 5};
      const dnnl_memory_desc_t m = md(d, dnnl_nchw), wm = md(w, dnnl_nchw);
      dnnl_prelu_desc_t f{}, b{};
      dnnl_prelu_forward_desc_init(&f, dnnl_forward_training, &m, &wm);
      if (!bwd) return pd_of(&f);
      dnnl_prelu_backward_desc_init(&b, &m, &wm, &m, &wm);
      return bwd_pd(&f, &b);
    };
  };
  cases.push_back({"prelu_fwd_per_channel", prelu(false, {1, 6, 1, 1}), {}, {DNNL_ARG_DST}, 1});
  cases.push_back({"prelu_bwd_per_channel", prelu(true, {1, 6, 1, 1}), {}, {DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_WEIGHTS}, 30});
  cases.push_back({"prelu_bwd_full", prelu(true, {2, 6, 3, 5}), {}, {DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_WEIGHTS}, 1});
  auto reduction = [](dnnl_alg_kind_t alg, Dims dst, float p, float eps) {
    return [=]() -> dnnl_primitive_desc_t {
      const dnnl_memory_desc_t s = md({3, 8, 5, 4}, dnnl_nchw), d = md(dst, dnnl_nchw);
      dnnl_reduction_desc_t r{};
      dnnl_reduction_desc_init(&r, alg, &s, &d, p, eps);
      return pd_of(&r);
    };
  };
  const std::pair<const char*, dnnl_alg_kind_t> reds[] = {
      {"max", dnnl_reduction_max},   {"min", dnnl_reduction_min},   {"sum", dnnl_reduction_sum},
      {"mean", dnnl_reduction_mean}, {"mul", dnnl_reduction_mul},   {"norm_lp_max", dnnl_reduction_norm_lp_max},
      {"norm_lp_sum", dnnl_reduction_norm_lp_sum}, {"norm_lp_power_p_sum", dnnl_reduction_norm_lp_power_p_sum}};
  for (auto [name, alg] : reds)
    cases.push_back({std::string("reduction_") + name, reduction(alg, {3, 1, 5, 1}, 2.f, 1e-3f), {}, {DNNL_ARG_DST}, 32});
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    add_conv_cases(c);
    add_ip_matmul_cases(c);
    add_eltwise_cases(c);
    add_pooling_cases(c);
    add_norm_cases(c);
    add_softmax_cases(c);
    add_misc_cases(c);
    add_rare_cases(c);
    return c;
  }();
  return cases;
}

// ---------------------------------------------------------------------------------- the tests

class Conformance : public testing::TestWithParam<std::tuple<std::string, int>> {};

// The reference backend implements every case; the onednn backend makes every case's primitive
// back from its node, with the same results as the program's own, bit for bit.
bool must_take(const std::string& backend) {
  return backend == "reference" || backend == "onednn";
}

TEST_P(Conformance, MatchesNative) {
  const auto& [backend_name, index] = GetParam();
  const Case& c = all_cases()[index];
  bind_frontend();
  std::string why;
  hal::Backend* backend = backend_named(backend_name, why);
  if (!backend) {
    ASSERT_FALSE(must_take(backend_name)) << why;
    GTEST_SKIP() << backend_name << " unavailable: " << why;
  }
  const unsigned seed = static_cast<unsigned>(std::hash<std::string>{}(c.name));

  // The forward pass first, when the case reads its workspace.
  Execution fwd;
  if (c.make_forward) {
    fwd.pd = c.make_forward();
    ASSERT_NE(fwd.pd, nullptr);
    prepare(fwd, c, {DNNL_ARG_DST, DNNL_ARG_WORKSPACE, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE}, nullptr, seed);
    ASSERT_EQ(run_native(fwd.pd, fwd.native), "");
    const Reason r = run_on(*backend, fwd.pd, fwd.backend, nullptr, &why);
    if (r != Reason::ok && !must_take(backend_name)) GTEST_SKIP() << "forward declined: " << reason_string(r);
    ASSERT_EQ(r, Reason::ok) << reason_string(r) << " " << why;
  }

  Execution ex;
  ex.pd = c.make();
  ASSERT_NE(ex.pd, nullptr);
  prepare(ex, c, c.outputs, c.make_forward ? &fwd : nullptr, seed + 1);
  std::map<int, std::vector<unsigned char>> before;
  for (auto& [arg, buf] : ex.backend) before[arg] = buf->bytes;
  ASSERT_EQ(run_native(ex.pd, ex.native), "");
  const Reason r = run_on(*backend, ex.pd, ex.backend, nullptr, &why);
  if (r != Reason::ok && !must_take(backend_name) && r != Reason::internal_error && r != Reason::device_error)
    GTEST_SKIP() << backend_name << " declines: " << reason_string(r);
  ASSERT_EQ(r, Reason::ok) << reason_string(r) << " " << why;
  EXPECT_EQ(compare(ex, c, c.outputs, before, backend_name == "onednn"), "");
  dnnl_primitive_desc_destroy(ex.pd);
  if (fwd.pd) dnnl_primitive_desc_destroy(fwd.pd);
}

std::vector<int> case_indices() {
  std::vector<int> v(all_cases().size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
  return v;
}

std::string case_name(const testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  return all_cases()[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Reference, Conformance,
                         testing::Combine(testing::Values(std::string("reference")), testing::ValuesIn(case_indices())),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Opencl, Conformance,
                         testing::Combine(testing::Values(std::string("opencl")), testing::ValuesIn(case_indices())),
                         case_name);
// oneDNN itself, its primitives made back from the nodes (backends/onednn/dnn.hpp): what `sol
// replay` runs DNN nodes natively with.
INSTANTIATE_TEST_SUITE_P(Onednn, Conformance,
                         testing::Combine(testing::Values(std::string("onednn")), testing::ValuesIn(case_indices())),
                         case_name);
// Run as a test of its own (dnn_conformance_cuda, label gpu): skipped without a CUDA device.
INSTANTIATE_TEST_SUITE_P(Cuda, Conformance,
                         testing::Combine(testing::Values(std::string("cuda")), testing::ValuesIn(case_indices())),
                         case_name);

// ----------------------------------------------------------------------------- declined nodes

// The node of a primitive, for cases that alter its description before asking the backend.
struct Described {
  std::shared_ptr<const interpose::dnnl::PrimitiveInfo> info;
  ir::Desc desc;
};

Described describe_pd(dnnl_primitive_desc_t pd) {
  Described d;
  d.info = interpose::dnnl::describe(pd);
  EXPECT_TRUE(d.info && d.info->node) << (d.info ? d.info->why_not : "describe() failed");
  if (d.info && d.info->node) d.desc = *d.info->node;
  dnnl_primitive_desc_destroy(pd);
  return d;
}

// supports() on a description with dummy (never dereferenced) data pointers.
Reason supports(const ir::Desc& desc) {
  std::string why;
  hal::Backend* backend = backend_named("reference", why);
  EXPECT_NE(backend, nullptr) << why;
  if (!backend) return Reason::ok;
  static std::vector<unsigned char> storage(1 << 20);
  ir::Call call;
  call.desc = &desc;
  for (int i = 0; i < desc.ntensors; ++i) call.data[i] = storage.data();
  capture::Node node(capture::Sym::dnnl_primitive_execute, desc.kind, desc.dtype);
  node.dnn = &call;
  return backend->supports(node);
}

TEST(ReferenceDeclines, IntegerConvolution) {
  bind_frontend();
  const dnnl_memory_desc_t s = md({1, 8, 5, 5}, dnnl_nhwc, dnnl_u8), w = md({8, 8, 3, 3}, dnnl_format_tag_any, dnnl_s8),
                           d = md({1, 8, 3, 3}, dnnl_nhwc, dnnl_s32);
  dnnl_convolution_desc_t cd{};
  const dnnl_dims_t one = {1, 1}, zero = {0, 0};
  ASSERT_EQ(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s, &w, nullptr, &d,
                                               one, zero, zero),
            dnnl_success);
  Described x = describe_pd(pd_of(&cd));
  if (x.info && x.info->node) {
    EXPECT_EQ(supports(x.desc), Reason::dtype_unsupported);
  }
}

TEST(ReferenceDeclines, SumPostOpOfAnotherType) {
  bind_frontend();
  Attr a;
  a.post_ops = {{'s', dnnl_alg_kind_undef, 0, 0, 1}};
  const Conv cv = {1, 1, 3, 4, {5, 5}, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {0, 0}};
  Described x = describe_pd(conv_pd(false, dnnl_forward_inference, cv, false, false, a)());
  ASSERT_EQ(x.desc.npost_ops, 1);
  EXPECT_EQ(supports(x.desc), Reason::ok);
  x.desc.post_ops[0].sum_dtype = capture::DType::s8;
  EXPECT_EQ(supports(x.desc), Reason::attr_unsupported);
}

TEST(ReferenceDeclines, AttributesOnBackwardAndLrnBackward) {
  bind_frontend();
  const Conv cv = {1, 1, 3, 4, {5, 5}, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {0, 0}};
  Described x = describe_pd(conv_pd(false, dnnl_backward_data, cv, false, false)());
  x.desc.output_scale = 2;
  EXPECT_EQ(supports(x.desc), Reason::attr_unsupported);

  const dnnl_memory_desc_t m = md({2, 10, 6, 5}, dnnl_nchw);
  dnnl_lrn_desc_t f{}, b{};
  dnnl_lrn_forward_desc_init(&f, dnnl_forward_training, dnnl_lrn_across_channels, &m, 5, 1e-1f, 0.75f, 1.f);
  dnnl_lrn_backward_desc_init(&b, dnnl_lrn_across_channels, &m, &m, 5, 1e-1f, 0.75f, 1.f);
  Described y = describe_pd(bwd_pd(&f, &b));
  EXPECT_EQ(supports(y.desc), Reason::prop_unsupported);
}

TEST(ReferenceDeclines, InconsistentShapesAndLayouts) {
  bind_frontend();
  const Conv cv = {1, 1, 3, 4, {5, 5}, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {0, 0}};
  Described x = describe_pd(conv_pd(false, dnnl_forward_inference, cv, false, false)());
  ir::Desc wrong = x.desc;
  wrong.stride[0] = 2;  // dst no longer has the size this stride gives
  EXPECT_EQ(supports(wrong), Reason::desc_invalid);
  ir::Desc overflow = x.desc;
  overflow.tensors[0].desc.bytes = 4;  // the layout reaches past the buffer
  EXPECT_EQ(supports(overflow), Reason::layout_unsupported);
}

}  // namespace
}  // namespace sol::test
