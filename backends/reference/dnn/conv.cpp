// Convolution and deconvolution, every propagation kind, as one direct correlation between an
// "x" side (the larger spatial extent) and a "y" side, related by x = y * stride - pad_l + k * dil:
//
//                         x side      y side      computes
//   convolution fwd       src         dst         y = corr(x, w)          (kernel `forward`)
//   convolution bwd_data  diff_src    diff_dst    x = corr^T(y, w)        (kernel `transposed`)
//   convolution bwd_wei   src         diff_dst    w = corr(x, y)          (kernel `weights`)
//   deconvolution fwd     dst         src         x = corr^T(y, w^T)
//   deconvolution bwd_data diff_dst   diff_src    y = corr(x, w^T)
//   deconvolution bwd_wei diff_dst    src         w^T = corr(x, y)
//
// Weights in the kernels are (G, Cy, Cx, KD, KH, KW) per group; deconvolution weights are
// (G, O, I, ...) with O on the x side, hence the transposes (w^T).
#include <algorithm>

#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

// The geometry (capture/dnn/validate.hpp) and the sizes of the kernels' dense arrays.
struct Geo : capture::dnn::ConvGeometry {
  int64_t xsize() const { return n * g * cx * x[0] * x[1] * x[2]; }
  int64_t ysize() const { return n * g * cy * y[0] * y[1] * y[2]; }
  int64_t wsize() const { return g * cy * cx * k[0] * k[1] * k[2]; }
};

int64_t div_floor(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Calls f(w, yo, xo, count) for every run of `count` y elements yo, yo + 1... that weight element w
// pairs with x elements xo, xo + s[2]... (the x positions inside the tensor only). The loop order
// keeps one y plane and one x plane hot while it walks the weights.
template <class F>
void visit(const Geo& g, F&& f) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gr = 0; gr < g.g; ++gr)
      for (int64_t cy = 0; cy < g.cy; ++cy)
        for (int64_t cx = 0; cx < g.cx; ++cx) {
          const int64_t yplane = ((n * g.g + gr) * g.cy + cy) * g.y[0] * g.y[1] * g.y[2];
          const int64_t xplane = ((n * g.g + gr) * g.cx + cx) * g.x[0] * g.x[1] * g.x[2];
          for (int64_t kd = 0; kd < g.k[0]; ++kd)
            for (int64_t kh = 0; kh < g.k[1]; ++kh)
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t w = ((((gr * g.cy + cy) * g.cx + cx) * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw;
                // The y range along W whose x position is inside [0, x[2]).
                const int64_t shift = kw * g.d[2] - g.p[2];
                const int64_t lo = std::max<int64_t>(0, div_floor(-shift + g.s[2] - 1, g.s[2]));
                const int64_t hi = std::min<int64_t>(g.y[2], div_floor(g.x[2] - 1 - shift, g.s[2]) + 1);
                if (lo >= hi) continue;
                for (int64_t od = 0; od < g.y[0]; ++od) {
                  const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
                  if (id < 0 || id >= g.x[0]) continue;
                  for (int64_t oh = 0; oh < g.y[1]; ++oh) {
                    const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
                    if (ih < 0 || ih >= g.x[1]) continue;
                    const int64_t yo = yplane + (od * g.y[1] + oh) * g.y[2] + lo;
                    const int64_t xo = xplane + (id * g.x[1] + ih) * g.x[2] + lo * g.s[2] + shift;
                    f(w, yo, xo, hi - lo);
                  }
                }
              }
        }
}

// y += corr(x, w)
void forward(const Geo& g, const float* x, const float* w, double* y) {
  const int64_t s = g.s[2];
  visit(g, [&](int64_t wi, int64_t yo, int64_t xo, int64_t count) {
    const double wv = w[wi];
    double* yr = y + yo;
    const float* xr = x + xo;
    for (int64_t j = 0; j < count; ++j) yr[j] += wv * xr[j * s];
  });
}

// x += corr^T(y, w)
void transposed(const Geo& g, const float* y, const float* w, double* x) {
  const int64_t s = g.s[2];
  visit(g, [&](int64_t wi, int64_t yo, int64_t xo, int64_t count) {
    const double wv = w[wi];
    const float* yr = y + yo;
    double* xr = x + xo;
    for (int64_t j = 0; j < count; ++j) xr[j * s] += wv * yr[j];
  });
}

// w += corr(x, y)
void weights(const Geo& g, const float* x, const float* y, double* w) {
  const int64_t s = g.s[2];
  visit(g, [&](int64_t wi, int64_t yo, int64_t xo, int64_t count) {
    const float* yr = y + yo;
    const float* xr = x + xo;
    double acc = 0;
    for (int64_t j = 0; j < count; ++j) acc += static_cast<double>(yr[j]) * xr[j * s];
    w[wi] += acc;
  });
}

// (G, A, B, K...) <-> (G, B, A, K...): deconvolution weights to and from the kernels' order.
template <class T>
std::vector<T> swap_oi(const std::vector<T>& w, int64_t groups, int64_t a, int64_t b, int64_t k) {
  std::vector<T> out(w.size());
  for (int64_t gr = 0; gr < groups; ++gr)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t e = 0; e < k; ++e) out[((gr * b + j) * a + i) * k + e] = w[((gr * a + i) * b + j) * k + e];
  return out;
}

// Adds bias[c] to every value of channel c of an (N, C, spatial) array.
void add_bias(double* v, const std::vector<float>& bias, int64_t n, int64_t c, int64_t spatial) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t e = 0; e < spatial; ++e) v[(i * c + ch) * spatial + e] += bias[ch];
}

// Sum over N and spatial of each channel of an (N, C, spatial) array.
std::vector<double> channel_sums(const std::vector<float>& v, int64_t n, int64_t c, int64_t spatial) {
  std::vector<double> out(c, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      double acc = 0;
      for (int64_t e = 0; e < spatial; ++e) acc += v[(i * c + ch) * spatial + e];
      out[ch] += acc;
    }
  return out;
}

}  // namespace

Reason conv_check(const Desc& d) noexcept {
  return capture::dnn::check_conv_tensors(d);
}

void conv_run(const Call& c) {
  const Desc& d = *c.desc;
  Geo g;
  capture::dnn::conv_geometry(d, g);
  const capture::dnn::ConvSides sd = g.sides;
  const bool deconv = d.kind == Op::deconvolution;
  const int64_t kvol = g.k[0] * g.k[1] * g.k[2];
  const int64_t xsp = g.x[0] * g.x[1] * g.x[2], ysp = g.y[0] * g.y[1] * g.y[2];
  auto kernel_weights = [&] {
    std::vector<float> w = gather(c, Arg::weights);
    return deconv ? swap_oi(w, g.g, g.cx, g.cy, kvol) : w;
  };

  switch (d.prop) {
    case Prop::backward_data: {
      const std::vector<float> w = kernel_weights();
      if (deconv) {  // diff_src (y side) = corr(diff_dst, w^T)
        const std::vector<float> x = gather(c, Arg::diff_dst);
        std::vector<double> y(g.ysize(), 0.0);
        forward(g, x.data(), w.data(), y.data());
        scatter(c, Arg::diff_src, y.data());
      } else {
        const std::vector<float> y = gather(c, Arg::diff_dst);
        std::vector<double> x(g.xsize(), 0.0);
        transposed(g, y.data(), w.data(), x.data());
        scatter(c, Arg::diff_src, x.data());
      }
      return;
    }
    case Prop::backward_weights: {
      const std::vector<float> x = gather(c, sd.x), y = gather(c, sd.y);
      std::vector<double> w(g.wsize(), 0.0);
      weights(g, x.data(), y.data(), w.data());
      // diff_bias sums diff_dst: the y side of a convolution, the x side of a deconvolution.
      std::vector<double> bias = deconv ? channel_sums(x, g.n, g.g * g.cx, xsp) : channel_sums(y, g.n, g.g * g.cy, ysp);
      if (deconv) w = swap_oi(w, g.g, g.cy, g.cx, kvol);
      scatter(c, Arg::diff_weights, w.data());
      scatter(c, Arg::diff_bias, bias.data());
      return;
    }
    default: {
      const std::vector<float> w = kernel_weights(), src = gather(c, Arg::src), bias = gather(c, Arg::bias);
      const Epilogue epilogue(c);
      std::vector<double> dst;
      if (deconv) {
        dst.assign(g.xsize(), 0.0);
        transposed(g, src.data(), w.data(), dst.data());
        if (!bias.empty()) add_bias(dst.data(), bias, g.n, g.g * g.cx, xsp);
      } else {
        dst.assign(g.ysize(), 0.0);
        forward(g, src.data(), w.data(), dst.data());
        if (!bias.empty()) add_bias(dst.data(), bias, g.n, g.g * g.cy, ysp);
      }
      scatter(c, Arg::dst, dst.data(), &epilogue);
      return;
    }
  }
}

}  // namespace sol::backends::reference::dnn
