// Batch normalization (statistics over N and the spatial dims, per channel C = dim 1) and layer
// normalization (statistics over the last dim, per leading index), forward with computed or
// given (global_stats) statistics, and backward. Both normalize groups of values that share a
// mean and variance, so one set of loops over "rows" serves both:
//   batch norm: for each channel c, the N * spatial values of channel c; scale/shift per c
//   layer norm: for each leading index r, the C values of the last dim; scale/shift per element
#include <cmath>
#include <cstring>

#include "backends/common/dnn_workspace.hpp"
#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

// The values of one normalization group: offsets base(r) + i * stride(...) for i in [0, len).
// Batch norm: (N, C, S) dense, group c holds n * C * S + c * S + s. Layer norm: (R, C) dense.
struct Groups {
  bool batch = true;
  int64_t n = 1, c = 1, s = 1;  // batch norm: N, C, spatial; layer norm: n = rows, c = C, s = 1
  int64_t count() const { return batch ? c : n; }  // groups
  int64_t len() const { return batch ? n * s : c; }  // values per group
  // Offset of value i of group g, and the index of its scale/shift.
  int64_t at(int64_t g, int64_t i) const { return batch ? (i / s * c + g) * s + i % s : g * c + i; }
  int64_t param(int64_t g, int64_t i) const { return batch ? g : i; }
  int64_t params() const { return c; }
};

bool groups_of(const Desc& d, Groups& g) {
  const TensorDesc* x = d.desc(Arg::src);
  const TensorDesc* y = d.desc(forward(d) ? Arg::dst : Arg::diff_dst);
  if (!x || !y || !same_dims(*x, *y)) return false;
  const Layout& l = x->layout;
  g.batch = d.kind == Op::batch_normalization;
  if (l.ndims < 2) return false;
  if (g.batch) {
    g.n = l.dims[0], g.c = l.dims[1], g.s = 1;
    for (int i = 2; i < l.ndims; ++i) g.s *= l.dims[i];
  } else {
    g.c = l.dims[l.ndims - 1], g.n = 1, g.s = 1;
    for (int i = 0; i < l.ndims - 1; ++i) g.n *= l.dims[i];
  }
  return true;
}

int64_t elements(const TensorDesc* t) {
  return t ? t->layout.elements() : -1;
}

}  // namespace

Reason norm_check(const Desc& d) noexcept {
  if (d.kind == Op::layer_normalization && d.fuse_relu) return Reason::desc_invalid;  // no such flag
  if (!forward(d) && d.prop != Prop::backward && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  Groups g;
  if (!groups_of(d, g)) return Reason::desc_invalid;
  const int64_t stats = g.count();
  const bool stats_in = d.global_stats || !forward(d);
  if (stats_in && (elements(d.desc(Arg::mean)) != stats || elements(d.desc(Arg::variance)) != stats))
    return Reason::desc_invalid;
  for (Arg a : {Arg::mean, Arg::variance})
    if (const TensorDesc* t = d.desc(a); t && t->layout.elements() != stats) return Reason::desc_invalid;
  for (Arg a : {Arg::scale, Arg::shift, Arg::diff_scale, Arg::diff_shift})
    if (const TensorDesc* t = d.desc(a); t && t->layout.elements() != g.params()) return Reason::desc_invalid;
  if (d.use_scale && !d.desc(Arg::scale)) return Reason::desc_invalid;
  if (d.use_shift && forward(d) && !d.desc(Arg::shift)) return Reason::desc_invalid;
  if (!forward(d) && !d.desc(Arg::diff_src)) return Reason::desc_invalid;
  // The ReLU mask travels from forward_training to backward in the workspace.
  return check_bnorm_mask(d, g.n * g.c * g.s);
}

void norm_run(const Call& c) {
  const Desc& d = *c.desc;
  Groups g;
  groups_of(d, g);
  const std::vector<float> x = gather(c, Arg::src);
  const std::vector<float> scale = gather(c, Arg::scale), shift = gather(c, Arg::shift);
  const bool stats_in = d.global_stats || !forward(d);
  std::vector<float> mean_in, var_in;
  if (stats_in) mean_in = gather(c, Arg::mean), var_in = gather(c, Arg::variance);
  const int ws_i = d.find(Arg::workspace);
  const bool mask = bnorm_mask(d);
  const int64_t nvalues = g.n * g.c * g.s;
  auto gamma = [&](int64_t p) { return d.use_scale ? scale[p] : 1.f; };

  // mean and variance per group: given, or computed (variance about the mean, divided by len).
  std::vector<double> mean(g.count()), var(g.count());
  for (int64_t k = 0; k < g.count(); ++k) {
    if (stats_in) {
      mean[k] = mean_in[k], var[k] = var_in[k];
      continue;
    }
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < g.len(); ++i) sum += x[g.at(k, i)];
    mean[k] = g.len() ? sum / g.len() : 0;
    for (int64_t i = 0; i < g.len(); ++i) {
      const double v = x[g.at(k, i)] - mean[k];
      sq += v * v;
    }
    var[k] = g.len() ? sq / g.len() : 0;
  }

  if (forward(d)) {
    std::vector<float> y(nvalues);
    std::vector<uint8_t> bits(mask ? (nvalues + 7) / 8 : 0, 0);
    for (int64_t k = 0; k < g.count(); ++k) {
      const double inv = 1.0 / std::sqrt(var[k] + d.epsilon);
      for (int64_t i = 0; i < g.len(); ++i) {
        const int64_t at = g.at(k, i), p = g.param(k, i);
        float v = static_cast<float>(gamma(p) * (x[at] - mean[k]) * inv + (d.use_shift ? shift[p] : 0.f));
        if (d.fuse_relu) {
          if (v <= 0)
            v = 0;
          else if (mask)
            bits[at / 8] |= static_cast<uint8_t>(1u << (at % 8));
        }
        y[at] = v;
      }
    }
    scatter(c, Arg::dst, y.data());
    if (d.prop == Prop::forward_training && !d.global_stats) {
      scatter(c, Arg::mean, mean.data());
      scatter(c, Arg::variance, var.data());
    }
    if (mask) std::memcpy(c.data[ws_i], bits.data(), bits.size());
    return;
  }

  std::vector<float> dy = gather(c, Arg::diff_dst);
  if (mask) {
    const auto* bits = static_cast<const uint8_t*>(c.data[ws_i]);
    for (int64_t at = 0; at < nvalues; ++at)
      if (!(bits[at / 8] >> (at % 8) & 1)) dy[at] = 0;
  }
  std::vector<double> dx(nvalues), dscale(g.params(), 0.0), dshift(g.params(), 0.0);
  for (int64_t k = 0; k < g.count(); ++k) {
    const double inv = 1.0 / std::sqrt(var[k] + d.epsilon);
    // Per group: the sums that diff_src needs. Batch norm's are also diff_scale and diff_shift
    // (one parameter per group); layer norm sums those over groups per element instead.
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = 0; i < g.len(); ++i) {
      const int64_t at = g.at(k, i), p = g.param(k, i);
      const double xhat = (x[at] - mean[k]) * inv;
      dscale[p] += dy[at] * xhat;
      dshift[p] += dy[at];
      sum_dy += gamma(p) * dy[at];
      sum_dy_xhat += gamma(p) * dy[at] * xhat;
    }
    for (int64_t i = 0; i < g.len(); ++i) {
      const int64_t at = g.at(k, i), p = g.param(k, i);
      double v = gamma(p) * dy[at];
      if (!d.global_stats) v -= (sum_dy + (x[at] - mean[k]) * inv * sum_dy_xhat) / g.len();
      dx[at] = v * inv;
    }
  }
  scatter(c, Arg::diff_src, dx.data());
  if (d.prop == Prop::backward) {
    scatter(c, Arg::diff_scale, dscale.data());
    scatter(c, Arg::diff_shift, dshift.data());
  }
}

}  // namespace sol::backends::reference::dnn
