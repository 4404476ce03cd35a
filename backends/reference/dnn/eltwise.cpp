// Eltwise: y = f(x; alpha, beta) forward, diff_src = diff_dst * f'(...) backward, with oneDNN 2.6's
// formulas (src/common/math_utils.hpp: relu_fwd, tanh_bwd_use_dst...), computed in float as
// oneDNN's reference computes them. Also the math of eltwise post-ops and of binary.
#include <cfloat>
#include <cmath>

#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

float logistic(float s) noexcept {
  // oneDNN avoids 1 / (1 + inf): past this bound expf(-s) overflows and the result is 0.
  const float exp_overflow_bound = 88.72283172607421875f;
  const float in = -s;
  return in < exp_overflow_bound ? 1.f / (1.f + std::exp(in)) : 0.f;
}
float soft_relu(float s) noexcept {
  return s < std::log(FLT_MAX) ? std::log1p(std::exp(s)) : s;
}
float soft_relu_bwd(float dd, float s) noexcept {
  return dd / (1 + std::exp(-s));
}
float bounded_relu(float s, float alpha) noexcept {
  s = s > 0 ? s : 0;
  return s > alpha ? alpha : s;
}
float clip(float s, float alpha, float beta) noexcept {
  s = s > alpha ? s : alpha;
  return s > beta ? beta : s;
}

constexpr float kSqrt2OverPi = 0.79788458347320556640625f;
constexpr float kGeluFitting = 0.044715f;
constexpr float kSqrt2Over2 = 0.707106769084930419921875f;
constexpr float kTwoOverSqrtPi = 1.12837922573089599609375f;

// The forward algorithm a *_dst one computes.
Alg base(Alg a) noexcept {
  switch (a) {
    case Alg::relu_dst: return Alg::relu;
    case Alg::tanh_dst: return Alg::tanh;
    case Alg::elu_dst: return Alg::elu;
    case Alg::sqrt_dst: return Alg::sqrt;
    case Alg::logistic_dst: return Alg::logistic;
    case Alg::exp_dst: return Alg::exp;
    case Alg::clip_v2_dst: return Alg::clip_v2;
    default: return a;
  }
}

}  // namespace

float eltwise_fwd(Alg a, float s, float alpha, float beta) noexcept {
  switch (base(a)) {
    case Alg::relu: return s > 0 ? s : s * alpha;
    case Alg::tanh: return std::tanh(s);
    case Alg::elu: return s > 0 ? s : alpha * std::expm1(s);
    case Alg::square: return s * s;
    case Alg::abs: return s > 0 ? s : -s;
    case Alg::sqrt: return std::sqrt(s);
    case Alg::linear: return alpha * s + beta;
    case Alg::bounded_relu: return bounded_relu(s, alpha);
    case Alg::soft_relu: return soft_relu(s);
    case Alg::logistic: return logistic(s);
    case Alg::exp: return std::exp(s);
    case Alg::gelu_tanh: {
      const float v = std::tanh(kSqrt2OverPi * s * (1 + kGeluFitting * s * s));
      return 0.5f * s * (1.f + v);
    }
    case Alg::gelu_erf: return 0.5f * s * (1.f + std::erf(s * kSqrt2Over2));
    case Alg::swish: return s * logistic(alpha * s);
    case Alg::log: return std::log(s);
    case Alg::clip:
    case Alg::clip_v2: return clip(s, alpha, beta);
    case Alg::pow: return alpha * std::pow(s, beta);
    case Alg::round: return std::nearbyint(s);  // the default rounding mode: half to even
    case Alg::logsigmoid: return -soft_relu(-s);
    case Alg::mish: return s * std::tanh(soft_relu(s));
    case Alg::hardswish: return s * bounded_relu(s + 3.f, 6.f) / 6.f;
    default: return s;  // excluded by the checks
  }
}

float eltwise_bwd(Alg a, float dd, float x, float alpha, float beta) noexcept {
  const float s = x, d = x;  // x is src, or dst for the *_dst algorithms
  switch (a) {
    case Alg::relu: return s > 0 ? dd : dd * alpha;
    case Alg::relu_dst: return d > 0 ? dd : dd * alpha;
    case Alg::tanh: {
      const float e = std::tanh(s);
      return dd * (1 - e) * (1 + e);
    }
    case Alg::tanh_dst: return dd * (1 - d) * (1 + d);
    case Alg::elu: return dd * (s > 0 ? 1 : alpha * std::exp(s));
    case Alg::elu_dst: return dd * (d > 0 ? 1 : d + alpha);
    case Alg::square: return dd * 2 * s;
    case Alg::abs: return s > 0 ? dd : s < 0 ? -dd : 0;
    case Alg::sqrt: return dd / (2 * std::sqrt(s));
    case Alg::sqrt_dst: return dd / (2 * d);
    case Alg::linear: return dd * alpha;
    case Alg::bounded_relu: return dd * (0 < s && s <= alpha ? 1 : 0);
    case Alg::soft_relu: return soft_relu_bwd(dd, s);
    case Alg::logistic: {
      const float v = logistic(s);
      return dd * v * (1 - v);
    }
    case Alg::logistic_dst: return dd * d * (1 - d);
    case Alg::exp: return dd * std::exp(s);
    case Alg::exp_dst: return dd * d;
    case Alg::gelu_tanh: {
      const float g = kSqrt2OverPi * s * (1.f + kGeluFitting * s * s);
      const float dg = kSqrt2OverPi * (1.f + 3.f * kGeluFitting * s * s);
      const float v = std::tanh(g);
      return dd * 0.5f * (1.f + v) * (1.f + s * (1.f - v) * dg);
    }
    case Alg::gelu_erf: {
      const float v = s * kSqrt2Over2;
      return dd * 0.5f * (1.f + std::erf(v) + v * kTwoOverSqrtPi * std::exp(-v * v));
    }
    case Alg::swish: {
      const float v = logistic(alpha * s);
      return dd * (v + s * alpha * v * (1 - v));
    }
    case Alg::log: return dd / s;
    case Alg::clip: return dd * (alpha < s && s <= beta ? 1 : 0);
    case Alg::clip_v2: return dd * (alpha < s && s < beta ? 1 : 0);
    case Alg::clip_v2_dst: return dd * (alpha < d && d < beta ? 1 : 0);
    case Alg::pow: return beta == 0 ? 0 : dd * ((alpha * beta) * std::pow(s, beta - 1));
    case Alg::logsigmoid: return soft_relu_bwd(dd, -s);
    case Alg::mish: {
      const float t = std::tanh(soft_relu(s));
      const float srelu_bwd = soft_relu_bwd(1.0f, s);
      return dd * (t + s * srelu_bwd * (1 - t * t));
    }
    case Alg::hardswish: return s < 3.f ? (s > -3.f ? dd * (2 * s + 3.f) / 6.f : 0.f) : dd;
    default: return 0;  // excluded by the checks
  }
}

float binary_op(Alg a, float x, float y) noexcept {
  switch (a) {
    case Alg::add: return x + y;
    case Alg::mul: return x * y;
    case Alg::max: return x > y ? x : y;
    case Alg::min: return x < y ? x : y;
    case Alg::div: return x / y;
    case Alg::sub: return x - y;
    case Alg::ge: return x >= y;
    case Alg::gt: return x > y;
    case Alg::le: return x <= y;
    case Alg::lt: return x < y;
    case Alg::eq: return x == y;
    case Alg::ne: return x != y;
    default: return x;  // excluded by the checks
  }
}

Reason eltwise_check(const Desc& d) noexcept {
  return capture::dnn::check_eltwise_tensors(d);
}

void eltwise_run(const Call& c) {
  const Desc& d = *c.desc;
  if (d.prop != Prop::backward_data) {
    std::vector<float> v = gather(c, Arg::src);
    const Epilogue epilogue(c);
    for (float& x : v) x = eltwise_fwd(d.alg, x, d.alpha, d.beta);
    scatter(c, Arg::dst, v.data(), &epilogue);
    return;
  }
  std::vector<float> x = gather(c, uses_dst(d.alg) ? Arg::dst : Arg::src);
  const std::vector<float> dd = gather(c, Arg::diff_dst);
  for (size_t i = 0; i < x.size(); ++i) x[i] = eltwise_bwd(d.alg, dd[i], x[i], d.alpha, d.beta);
  scatter(c, Arg::diff_src, x.data());
}

}  // namespace sol::backends::reference::dnn
