// Inner product (every propagation kind) and matmul (batched, with broadcast batch dims and a
// broadcast bias). An inner product flattens src to (N, K) and weights to (O, K), K being IC
// times the spatial dims, which both share in the same canonical order.
#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

struct IpGeo {
  int64_t n = 0, o = 0, k = 0;
};

// The x tensor (src or diff_src), the weights (or diff_weights) and the y tensor (dst or diff_dst).
bool ip_geometry(const Desc& d, IpGeo& g) {
  const bool bwd_data = d.prop == Prop::backward_data, bwd_w = d.prop == Prop::backward_weights;
  const TensorDesc* x = d.desc(bwd_data ? Arg::diff_src : Arg::src);
  const TensorDesc* w = d.desc(bwd_w ? Arg::diff_weights : Arg::weights);
  const TensorDesc* y = d.desc(bwd_data || bwd_w ? Arg::diff_dst : Arg::dst);
  if (!x || !w || !y) return false;
  const Layout &xl = x->layout, &wl = w->layout, &yl = y->layout;
  if (xl.ndims < 2 || wl.ndims != xl.ndims || yl.ndims != 2) return false;
  g.n = xl.dims[0], g.o = wl.dims[0], g.k = 1;
  for (int i = 1; i < xl.ndims; ++i) {
    if (wl.dims[i] != xl.dims[i]) return false;
    g.k *= xl.dims[i];
  }
  return yl.dims[0] == g.n && yl.dims[1] == g.o;
}

}  // namespace

Reason ip_check(const Desc& d) noexcept {
  switch (d.prop) {
    case Prop::forward_training:
    case Prop::forward_inference:
    case Prop::backward_data:
    case Prop::backward_weights: break;
    default: return Reason::prop_unsupported;
  }
  IpGeo g;
  if (!ip_geometry(d, g)) return Reason::desc_invalid;
  const TensorDesc* b = d.desc(d.prop == Prop::backward_weights ? Arg::diff_bias : Arg::bias);
  if (b && (b->layout.ndims != 1 || b->layout.dims[0] != g.o)) return Reason::desc_invalid;
  return Reason::ok;
}

void ip_run(const Call& c) {
  const Desc& d = *c.desc;
  IpGeo g;
  ip_geometry(d, g);
  switch (d.prop) {
    case Prop::backward_data: {  // diff_src = diff_dst * W
      const std::vector<float> w = gather(c, Arg::weights), dy = gather(c, Arg::diff_dst);
      std::vector<double> dx(g.n * g.k, 0.0);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t o = 0; o < g.o; ++o) {
          const double a = dy[n * g.o + o];
          for (int64_t k = 0; k < g.k; ++k) dx[n * g.k + k] += a * w[o * g.k + k];
        }
      scatter(c, Arg::diff_src, dx.data());
      return;
    }
    case Prop::backward_weights: {  // diff_weights = diff_dst^T * src, diff_bias = column sums
      const std::vector<float> x = gather(c, Arg::src), dy = gather(c, Arg::diff_dst);
      std::vector<double> dw(g.o * g.k, 0.0), db(g.o, 0.0);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t o = 0; o < g.o; ++o) {
          const double a = dy[n * g.o + o];
          db[o] += a;
          for (int64_t k = 0; k < g.k; ++k) dw[o * g.k + k] += a * x[n * g.k + k];
        }
      scatter(c, Arg::diff_weights, dw.data());
      scatter(c, Arg::diff_bias, db.data());
      return;
    }
    default: {
      const std::vector<float> x = gather(c, Arg::src), w = gather(c, Arg::weights), b = gather(c, Arg::bias);
      const Epilogue epilogue(c);
      std::vector<double> y(g.n * g.o);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t o = 0; o < g.o; ++o) {
          double acc = 0;
          for (int64_t k = 0; k < g.k; ++k) acc += static_cast<double>(x[n * g.k + k]) * w[o * g.k + k];
          y[n * g.o + o] = acc + (b.empty() ? 0.0 : b[o]);
        }
      scatter(c, Arg::dst, y.data(), &epilogue);
      return;
    }
  }
}

Reason matmul_check(const Desc& d) noexcept {
  if (d.prop != Prop::none && d.prop != Prop::forward_inference && d.prop != Prop::forward_training)
    return Reason::prop_unsupported;
  const TensorDesc *a = d.desc(Arg::src), *b = d.desc(Arg::weights), *y = d.desc(Arg::dst);
  if (!a || !b || !y) return Reason::desc_invalid;
  const int nd = y->layout.ndims;
  if (nd < 2 || a->layout.ndims != nd || b->layout.ndims != nd) return Reason::desc_invalid;
  const int64_t *ad = a->layout.dims, *bd = b->layout.dims, *yd = y->layout.dims;
  if (ad[nd - 2] != yd[nd - 2] || bd[nd - 1] != yd[nd - 1] || ad[nd - 1] != bd[nd - 2]) return Reason::desc_invalid;
  for (int i = 0; i < nd - 2; ++i)
    if ((ad[i] != yd[i] && ad[i] != 1) || (bd[i] != yd[i] && bd[i] != 1)) return Reason::desc_invalid;
  if (const TensorDesc* bias = d.desc(Arg::bias))
    if (!broadcasts_to(*bias, *y)) return Reason::desc_invalid;
  return Reason::ok;
}

void matmul_run(const Call& c) {
  const Desc& d = *c.desc;
  const TensorDesc &at = *d.desc(Arg::src), &bt = *d.desc(Arg::weights), &yt = *d.desc(Arg::dst);
  const Shape as = shape_of(at), bs = shape_of(bt), ys = shape_of(yt);
  const int nd = ys.ndims;
  const int64_t m = ys.dims[nd - 2], n = ys.dims[nd - 1], k = as.dims[nd - 1];
  const std::vector<float> a = gather(c, Arg::src), b = gather(c, Arg::weights), bias = gather(c, Arg::bias);
  Shape bias_s;
  if (!bias.empty()) bias_s = shape_of(*d.desc(Arg::bias));
  const Epilogue epilogue(c);
  std::vector<double> y(static_cast<size_t>(ys.size), 0.0);

  const int64_t batches = ys.size / (m * n > 0 ? m * n : 1);
  for (int64_t batch = 0; m * n > 0 && batch < batches; ++batch) {
    // The batch index per dim, and where that batch starts in a and b (broadcast dims stay at 0).
    int64_t a0 = 0, b0 = 0, rest = batch;
    int64_t bidx[kMaxDims] = {};
    for (int i = nd - 3; i >= 0; --i) {
      bidx[i] = rest % ys.dims[i];
      rest /= ys.dims[i];
      if (as.dims[i] != 1) a0 += bidx[i] * as.strides[i];
      if (bs.dims[i] != 1) b0 += bidx[i] * bs.strides[i];
    }
    double* yb = y.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i) {
      double* yr = yb + i * n;
      for (int64_t p = 0; p < k; ++p) {
        const double av = a[a0 + i * k + p];
        const float* br = b.data() + b0 + p * n;
        for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];
      }
      if (bias.empty()) continue;
      bidx[nd - 2] = i;
      int64_t row = 0;
      for (int dd = 0; dd < nd - 1; ++dd)
        if (bias_s.dims[dd] != 1) row += bidx[dd] * bias_s.strides[dd];
      const bool bias_n = bias_s.dims[nd - 1] != 1;
      for (int64_t j = 0; j < n; ++j) yr[j] += bias[row + (bias_n ? j : 0)];
    }
  }
  scatter(c, Arg::dst, y.data(), &epilogue);
}

}  // namespace sol::backends::reference::dnn
