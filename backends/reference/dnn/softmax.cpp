// Softmax and logsoftmax along `axis`, forward and backward. The tensor is viewed as
// (outer, C, inner) with C the axis; each (outer, inner) pair is one independent row of C values.
#include <algorithm>
#include <cmath>

#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

struct Rows {
  int64_t outer = 1, c = 1, inner = 1;
};

Rows rows_of(const TensorDesc& t, int axis) {
  Rows r;
  for (int i = 0; i < t.layout.ndims; ++i) {
    const int64_t n = t.layout.dims[i];
    if (i < axis) r.outer *= n;
    else if (i == axis) r.c = n;
    else r.inner *= n;
  }
  return r;
}

// Calls f(first offset, stride) for each row.
template <class F>
void each_row(const Rows& r, F&& f) {
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) f(o * r.c * r.inner + i, r.inner);
}

}  // namespace

Reason softmax_check(const Desc& d) noexcept {
  return capture::dnn::check_softmax_tensors(d);
}

void softmax_run(const Call& c) {
  const Desc& d = *c.desc;
  const bool log = d.kind == Op::logsoftmax;
  const Rows r = rows_of(*d.desc(Arg::dst), d.axis);
  if (forward(d)) {
    std::vector<float> v = gather(c, Arg::src);
    each_row(r, [&](int64_t first, int64_t stride) {
      float max = v[first];
      for (int64_t k = 1; k < r.c; ++k) max = std::max(max, v[first + k * stride]);
      double sum = 0;
      for (int64_t k = 0; k < r.c; ++k) sum += std::exp(static_cast<double>(v[first + k * stride]) - max);
      for (int64_t k = 0; k < r.c; ++k) {
        float& x = v[first + k * stride];
        const double shifted = static_cast<double>(x) - max;
        x = static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
      }
    });
    scatter(c, Arg::dst, v.data());
    return;
  }
  const std::vector<float> y = gather(c, Arg::dst);
  std::vector<float> g = gather(c, Arg::diff_dst);
  each_row(r, [&](int64_t first, int64_t stride) {
    // softmax: dx = y * (dy - sum(dy * y)); logsoftmax: dx = dy - exp(y) * sum(dy)
    double sum = 0;
    for (int64_t k = 0; k < r.c; ++k) {
      const int64_t at = first + k * stride;
      sum += log ? g[at] : static_cast<double>(g[at]) * y[at];
    }
    for (int64_t k = 0; k < r.c; ++k) {
      const int64_t at = first + k * stride;
      g[at] = static_cast<float>(log ? g[at] - std::exp(static_cast<double>(y[at])) * sum : y[at] * (g[at] - sum));
    }
  });
  scatter(c, Arg::diff_src, g.data());
}

}  // namespace sol::backends::reference::dnn
