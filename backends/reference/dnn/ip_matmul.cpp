// Inner product (every propagation kind) and matmul (batched, with broadcast batch dims and a
// broadcast bias). An inner product flattens src to (N, K) and weights to (O, K), K being IC
// times the spatial dims, which both share in the same canonical order.
#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
using capture::dnn::ip_geometry;
using capture::dnn::IpGeometry;

Reason ip_check(const Desc& d) noexcept {
  return capture::dnn::check_ip_tensors(d);
}

void ip_run(const Call& c) {
  const Desc& d = *c.desc;
  IpGeometry g;
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
  return capture::dnn::check_matmul_tensors(d);
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
