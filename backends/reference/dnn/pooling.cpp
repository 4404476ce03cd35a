// Pooling: max (with the workspace of dnn.hpp) and average, including or excluding the padding
// from the divisor, forward and backward, 1 to 3 spatial dims, with dilation.
#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/common/dnn_workspace.hpp"
#include "backends/reference/dnn/detail.hpp"

namespace sol::backends::reference::dnn {
namespace {

using Geo = capture::dnn::PoolGeometry;  // capture/dnn/validate.hpp

// Kernel positions of output o along one dim that fall inside the input.
int64_t valid(const Geo& g, int dim, int64_t o) {
  int64_t count = 0;
  for (int64_t k = 0; k < g.k[dim]; ++k) {
    const int64_t i = o * g.s[dim] - g.p[dim] + k * g.d[dim];
    count += i >= 0 && i < g.x[dim];
  }
  return count;
}

// Calls f(window position, x offset) for each kernel position of output (n*c plane, od, oh, ow)
// that falls inside the input.
template <class F>
void window(const Geo& g, int64_t plane, int64_t od, int64_t oh, int64_t ow, F&& f) {
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
    if (id < 0 || id >= g.x[0]) continue;
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
      if (ih < 0 || ih >= g.x[1]) continue;
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
        if (iw < 0 || iw >= g.x[2]) continue;
        f((kd * g.k[1] + kh) * g.k[2] + kw, ((plane * g.x[0] + id) * g.x[1] + ih) * g.x[2] + iw);
      }
    }
  }
}

// Calls f(y offset, plane, od, oh, ow) for every output element in canonical order.
template <class F>
void outputs(const Geo& g, F&& f) {
  int64_t at = 0;
  for (int64_t plane = 0; plane < g.n * g.c; ++plane)
    for (int64_t od = 0; od < g.y[0]; ++od)
      for (int64_t oh = 0; oh < g.y[1]; ++oh)
        for (int64_t ow = 0; ow < g.y[2]; ++ow) f(at++, plane, od, oh, ow);
}

int64_t divisor(const Desc& d, const Geo& g, int64_t od, int64_t oh, int64_t ow) {
  if (d.alg == Alg::pool_avg_include_padding) return g.volume();
  return valid(g, 0, od) * valid(g, 1, oh) * valid(g, 2, ow);
}

// The workspace's element at the layout offset of a dst element.
void ws_store(const TensorDesc& t, void* base, int64_t off, int32_t v) {
  if (t.dtype == DType::u8)
    static_cast<uint8_t*>(base)[off] = static_cast<uint8_t>(v);
  else
    std::memcpy(static_cast<int32_t*>(base) + off, &v, sizeof v);
}
int32_t ws_load(const TensorDesc& t, const void* base, int64_t off) {
  if (t.dtype == DType::u8) return static_cast<const uint8_t*>(base)[off];
  int32_t v;
  std::memcpy(&v, static_cast<const int32_t*>(base) + off, sizeof v);
  return v;
}

// Calls f(canonical index of a dst element, its layout offset in the workspace).
template <class F>
void ws_elements(const TensorDesc& ws, F&& f) {
  const Shape s = shape_of(ws);
  int64_t idx[kMaxDims] = {};
  for (int64_t at = 0; at < s.size; ++at) {
    int64_t rest = at;
    for (int dd = s.ndims - 1; dd >= 0; --dd) idx[dd] = rest % s.dims[dd], rest /= s.dims[dd];
    f(at, ws.layout.offset(idx));
  }
}

}  // namespace

Reason pooling_check(const Desc& d) noexcept {
  if (Reason r = capture::dnn::check_pool_tensors(d); r != Reason::ok) return r;
  Geo g;
  capture::dnn::pool_geometry(d, g);
  return check_pool_workspace(d, g.volume());
}

void pooling_run(const Call& c) {
  const Desc& d = *c.desc;
  Geo g;
  capture::dnn::pool_geometry(d, g);
  const int ws_i = d.find(Arg::workspace);
  const bool max = d.alg == Alg::pool_max;

  if (forward(d)) {
    const std::vector<float> x = gather(c, Arg::src);
    const Epilogue epilogue(c);
    const int64_t ny = g.n * g.c * g.y[0] * g.y[1] * g.y[2];
    std::vector<double> y(ny);
    std::vector<int32_t> arg(max ? ny : 0);
    outputs(g, [&](int64_t at, int64_t plane, int64_t od, int64_t oh, int64_t ow) {
      if (max) {
        float best = std::numeric_limits<float>::lowest();
        int32_t where = 0;
        window(g, plane, od, oh, ow, [&](int64_t k, int64_t xo) {
          if (x[xo] > best) best = x[xo], where = static_cast<int32_t>(k);
        });
        y[at] = best, arg[at] = where;
      } else {
        double sum = 0;
        window(g, plane, od, oh, ow, [&](int64_t, int64_t xo) { sum += x[xo]; });
        const int64_t div = divisor(d, g, od, oh, ow);
        y[at] = div ? sum / div : 0;
      }
    });
    scatter(c, Arg::dst, y.data(), &epilogue);
    if (max && ws_i >= 0 && d.prop == Prop::forward_training) {
      const TensorDesc& ws = d.tensors[ws_i].desc;
      ws_elements(ws, [&](int64_t at, int64_t off) { ws_store(ws, c.data[ws_i], off, arg[at]); });
    }
    return;
  }

  const std::vector<float> dy = gather(c, Arg::diff_dst);
  std::vector<int32_t> arg;
  if (max) {
    const TensorDesc& ws = d.tensors[ws_i].desc;
    arg.resize(dy.size());
    ws_elements(ws, [&](int64_t at, int64_t off) { arg[at] = ws_load(ws, c.data[ws_i], off); });
  }
  std::vector<double> dx(static_cast<size_t>(g.n * g.c * g.x[0] * g.x[1] * g.x[2]), 0.0);
  outputs(g, [&](int64_t at, int64_t plane, int64_t od, int64_t oh, int64_t ow) {
    if (max) {
      window(g, plane, od, oh, ow, [&](int64_t k, int64_t xo) {
        if (k == arg[at]) dx[xo] += dy[at];
      });
    } else {
      const int64_t div = divisor(d, g, od, oh, ow);
      if (div) window(g, plane, od, oh, ow, [&](int64_t, int64_t xo) { dx[xo] += dy[at] / div; });
    }
  });
  scatter(c, Arg::diff_src, dx.data());
}

}  // namespace sol::backends::reference::dnn
