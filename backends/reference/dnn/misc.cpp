// The element-moving and element-wise kinds: binary, sum, concat, reorder, shuffle, prelu,
// reduction, and lrn (forward).
#include <algorithm>
#include <cmath>

#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

// Dense strides of `t` against the dims of `full`: 0 along the dims `t` broadcasts.
void broadcast_strides(const TensorDesc& t, const TensorDesc& full, int64_t* strides) {
  const Shape s = shape_of(t);
  for (int d = 0; d < kMaxDims; ++d)
    strides[d] = d < s.ndims && s.dims[d] == full.layout.dims[d] ? s.strides[d] : 0;
}

// Calls f(canonical index into `full`, offset into a tensor with `strides`) over all of `full`.
template <class F>
void each_broadcast(const Shape& full, const int64_t* strides, F&& f) {
  int64_t idx[kMaxDims] = {};
  for (int64_t at = 0; at < full.size; ++at) {
    int64_t rest = at, off = 0;
    for (int d = full.ndims - 1; d >= 0; --d) {
      idx[d] = rest % full.dims[d], rest /= full.dims[d];
      off += idx[d] * strides[d];
    }
    f(at, off);
  }
}


}  // namespace

// ---------------------------------------------------------------------------------------- binary

Reason binary_check(const Desc& d) noexcept {
  return capture::dnn::check_binary_tensors(d);
}

void binary_run(const Call& c) {
  const Desc& d = *c.desc;
  const TensorDesc& yt = *d.desc(Arg::dst);
  const std::vector<float> a = gather(c, Arg::src), b = gather(c, Arg::src1);
  const Epilogue epilogue(c);
  int64_t as[kMaxDims], bs[kMaxDims];
  broadcast_strides(*d.desc(Arg::src), yt, as);
  broadcast_strides(*d.desc(Arg::src1), yt, bs);
  const Shape ys = shape_of(yt);
  std::vector<float> y(static_cast<size_t>(ys.size));
  each_broadcast(ys, as, [&](int64_t at, int64_t off) { y[at] = a[off]; });
  each_broadcast(ys, bs, [&](int64_t at, int64_t off) { y[at] = binary_op(d.alg, y[at], b[off]); });
  scatter(c, Arg::dst, y.data(), &epilogue);
}

// ------------------------------------------------------------------------------- sum and concat

Reason sum_check(const Desc& d) noexcept {
  return capture::dnn::check_sum_tensors(d);
}

// dst = sum_scales[0] * src_0 + sum_scales[1] * src_1 + ...
void sum_run(const Call& c) {
  const int n = count_sources(*c.desc);
  std::vector<std::vector<float>> srcs(n);
  for (int i = 0; i < n; ++i) srcs[i] = gather(c, Arg::multi_src, i);
  std::vector<double> y(srcs[0].size(), 0.0);
  for (int i = 0; i < n; ++i) {
    const double scale = c.desc->sum_scales[i];
    for (size_t k = 0; k < y.size(); ++k) y[k] += scale * srcs[i][k];
  }
  scatter(c, Arg::dst, y.data());
}

Reason concat_check(const Desc& d) noexcept {
  return capture::dnn::check_concat_tensors(d);
}

void concat_run(const Call& c) {
  const Desc& d = *c.desc;
  const int n = count_sources(d);
  std::vector<std::vector<float>> srcs(n);
  for (int i = 0; i < n; ++i) srcs[i] = gather(c, Arg::multi_src, i);
  const Shape ys = shape_of(*d.desc(Arg::dst));
  // Each source is (outer, its axis extent * inner) and lands at a column offset of dst's rows.
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < d.axis; ++k) outer *= ys.dims[k];
  for (int k = d.axis + 1; k < ys.ndims; ++k) inner *= ys.dims[k];
  const int64_t row = ys.dims[d.axis] * inner;
  std::vector<float> y(static_cast<size_t>(ys.size));
  int64_t column = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t width = d.desc(Arg::multi_src, i)->layout.dims[d.axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(srcs[i].data() + o * width, width, y.data() + o * row + column);
    column += width;
  }
  scatter(c, Arg::dst, y.data());
}

// --------------------------------------------------------------------------------------- reorder

Reason reorder_check(const Desc& d) noexcept {
  return capture::dnn::check_reorder_tensors(d);
}

// dst = output_scale * src (+ sum post-op): the epilogue does all but the move.
void reorder_run(const Call& c) {
  const std::vector<float> x = gather(c, Arg::src);
  const Epilogue epilogue(c);
  scatter(c, Arg::dst, x.data(), &epilogue);
}

// --------------------------------------------------------------------------------------- shuffle

Reason shuffle_check(const Desc& d) noexcept {
  const bool fwd = forward(d);
  if (!fwd && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  const TensorDesc *x = d.desc(fwd ? Arg::src : Arg::diff_dst), *y = d.desc(fwd ? Arg::dst : Arg::diff_src);
  if (!x || !y || !same_dims(*x, *y) || d.axis < 0 || d.axis >= x->layout.ndims) return Reason::desc_invalid;
  const int64_t c = x->layout.dims[d.axis];
  if (d.group_size < 1 || c % d.group_size) return Reason::desc_invalid;
  return Reason::ok;
}

// The axis of C elements is a (rows x cols) matrix transposed: forward rows = group_size,
// backward rows = C / group_size. Output element i reads input (i % cols) * rows + i / cols.
void shuffle_run(const Call& c) {
  const Desc& d = *c.desc;
  const bool fwd = forward(d);
  const std::vector<float> x = gather(c, fwd ? Arg::src : Arg::diff_dst);
  const Shape s = shape_of(*d.desc(fwd ? Arg::src : Arg::diff_dst));
  const int64_t ch = s.dims[d.axis], rows = fwd ? d.group_size : ch / d.group_size, cols = ch / rows;
  int64_t outer = 1, inner = s.strides[d.axis];
  for (int k = 0; k < d.axis; ++k) outer *= s.dims[k];
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < ch; ++i) {
      const int64_t from = (i % cols) * rows + i / cols;
      std::copy_n(x.data() + (o * ch + from) * inner, inner, y.data() + (o * ch + i) * inner);
    }
  scatter(c, fwd ? Arg::dst : Arg::diff_src, y.data());
}

// ----------------------------------------------------------------------------------------- prelu

Reason prelu_check(const Desc& d) noexcept {
  const bool fwd = forward(d);
  if (!fwd && d.prop != Prop::backward && d.prop != Prop::backward_data) return Reason::prop_unsupported;
  const TensorDesc *x = d.desc(Arg::src), *w = d.desc(Arg::weights);
  const TensorDesc* y = d.desc(fwd ? Arg::dst : Arg::diff_dst);
  if (!x || !w || !y || !same_dims(*x, *y) || !broadcasts_to(*w, *x)) return Reason::desc_invalid;
  if (!fwd) {
    const TensorDesc *dx = d.desc(Arg::diff_src), *dw = d.desc(Arg::diff_weights);
    if (!dx || !same_dims(*dx, *x) || (dw && !same_dims(*dw, *w))) return Reason::desc_invalid;
  }
  return Reason::ok;
}

// dst = src > 0 ? src : w * src; backward: diff_src = src > 0 ? dd : w * dd and diff_weights,
// the sum of src * dd where src <= 0 over the dims the weights broadcast along.
void prelu_run(const Call& c) {
  const Desc& d = *c.desc;
  const TensorDesc& xt = *d.desc(Arg::src);
  const std::vector<float> x = gather(c, Arg::src), w = gather(c, Arg::weights);
  int64_t ws[kMaxDims];
  broadcast_strides(*d.desc(Arg::weights), xt, ws);
  const Shape xs = shape_of(xt);
  if (forward(d)) {
    const Epilogue epilogue(c);
    std::vector<float> y(x.size());
    each_broadcast(xs, ws, [&](int64_t at, int64_t off) { y[at] = x[at] > 0 ? x[at] : w[off] * x[at]; });
    scatter(c, Arg::dst, y.data(), &epilogue);
    return;
  }
  const std::vector<float> dy = gather(c, Arg::diff_dst);
  std::vector<float> dx(x.size());
  std::vector<double> dw(w.size(), 0.0);
  each_broadcast(xs, ws, [&](int64_t at, int64_t off) {
    dx[at] = x[at] > 0 ? dy[at] : w[off] * dy[at];
    if (!(x[at] > 0)) dw[off] += static_cast<double>(x[at]) * dy[at];
  });
  scatter(c, Arg::diff_src, dx.data());
  scatter(c, Arg::diff_weights, dw.data());
}

// ------------------------------------------------------------------------------------- reduction

Reason reduction_check(const Desc& d) noexcept {
  if (d.alg < Alg::reduce_max || d.alg > Alg::reduce_norm_lp_power_p_sum) return Reason::desc_invalid;
  const TensorDesc *x = d.desc(Arg::src), *y = d.desc(Arg::dst);
  if (!x || !y || !broadcasts_to(*y, *x)) return Reason::desc_invalid;
  return Reason::ok;
}

// dst[i] = reduce over the src elements that broadcast to i; the lp norms with p = alpha and
// eps = beta: max(sum |x|^p, eps) or sum |x|^p + eps, then the p-th root for the non-power ones.
void reduction_run(const Call& c) {
  const Desc& d = *c.desc;
  const TensorDesc &xt = *d.desc(Arg::src), &yt = *d.desc(Arg::dst);
  const std::vector<float> x = gather(c, Arg::src);
  const Epilogue epilogue(c);
  int64_t ys[kMaxDims];
  broadcast_strides(yt, xt, ys);
  const Shape xs = shape_of(xt), yshape = shape_of(yt);
  const bool is_max = d.alg == Alg::reduce_max, is_min = d.alg == Alg::reduce_min, is_mul = d.alg == Alg::reduce_mul;
  const double init = is_max ? -INFINITY : is_min ? INFINITY : is_mul ? 1.0 : 0.0;
  std::vector<double> acc(static_cast<size_t>(yshape.size), init);
  const double p = d.alpha;
  each_broadcast(xs, ys, [&](int64_t at, int64_t off) {
    const double v = x[at];
    switch (d.alg) {
      case Alg::reduce_max: acc[off] = std::max(acc[off], v); break;
      case Alg::reduce_min: acc[off] = std::min(acc[off], v); break;
      case Alg::reduce_mul: acc[off] *= v; break;
      case Alg::reduce_sum:
      case Alg::reduce_mean: acc[off] += v; break;
      default: acc[off] += std::pow(std::fabs(v), p); break;  // the lp norms
    }
  });
  const double n = static_cast<double>(xs.size) / std::max<int64_t>(1, yshape.size);
  for (double& a : acc) {
    switch (d.alg) {
      case Alg::reduce_mean: a /= n; break;
      case Alg::reduce_norm_lp_max: a = std::pow(std::max(a, double(d.beta)), 1 / p); break;
      case Alg::reduce_norm_lp_sum: a = std::pow(a + d.beta, 1 / p); break;
      case Alg::reduce_norm_lp_power_p_max: a = std::max(a, double(d.beta)); break;
      case Alg::reduce_norm_lp_power_p_sum: a += d.beta; break;
      default: break;
    }
  }
  scatter(c, Arg::dst, acc.data(), &epilogue);
}

// ------------------------------------------------------------------------------------------- lrn

Reason lrn_check(const Desc& d) noexcept {
  if (!forward(d)) return Reason::prop_unsupported;
  if (d.alg != Alg::lrn_across && d.alg != Alg::lrn_within) return Reason::desc_invalid;
  const TensorDesc *x = d.desc(Arg::src), *y = d.desc(Arg::dst);
  if (!x || !y || !same_dims(*x, *y) || x->layout.ndims < 3 || d.local_size < 1) return Reason::desc_invalid;
  return Reason::ok;
}

// dst = src * (k + alpha / summands * sum of src^2 over the window)^-beta, the window reaching
// (local_size - 1) / 2 on each side of the element along C (across) or each spatial dim (within),
// summands = local_size (across) or local_size^spatial dims (within), as oneDNN's ref_lrn.
void lrn_run(const Call& c) {
  const Desc& d = *c.desc;
  const std::vector<float> x = gather(c, Arg::src);
  const Shape s = shape_of(*d.desc(Arg::src));
  const bool across = d.alg == Alg::lrn_across;
  const int64_t half = (d.local_size - 1) / 2;
  const int nsp = s.ndims - 2;
  double summands = across ? d.local_size : 1;
  for (int k = 0; !across && k < nsp; ++k) summands *= d.local_size;
  std::vector<float> y(x.size());
  int64_t idx[kMaxDims] = {};
  for (int64_t at = 0; at < s.size; ++at) {
    int64_t rest = at;
    for (int k = s.ndims - 1; k >= 0; --k) idx[k] = rest % s.dims[k], rest /= s.dims[k];
    // The window: [lo, hi) per dim, only C (across) or only the spatial dims (within) widened.
    int64_t lo[kMaxDims], hi[kMaxDims], w[kMaxDims];
    for (int k = 0; k < s.ndims; ++k) {
      const bool widen = across ? k == 1 : k >= 2;
      lo[k] = widen ? std::max<int64_t>(idx[k] - half, 0) : idx[k];
      hi[k] = widen ? std::min<int64_t>(idx[k] + half + 1, s.dims[k]) : idx[k] + 1;
      w[k] = lo[k];
    }
    double sum = 0;
    for (;;) {
      int64_t off = 0;
      for (int k = 0; k < s.ndims; ++k) off += w[k] * s.strides[k];
      sum += static_cast<double>(x[off]) * x[off];
      int k = s.ndims - 1;
      while (k >= 0 && ++w[k] == hi[k]) w[k] = lo[k], --k;
      if (k < 0) break;
    }
    y[at] = static_cast<float>(x[at] * std::pow(d.k + d.alpha * sum / summands, -double(d.beta)));
  }
  scatter(c, Arg::dst, y.data());
}

}  // namespace sol::backends::reference::dnn
