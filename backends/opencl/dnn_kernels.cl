// SOL's OpenCL C kernels for DNN nodes (dnn.hpp), f32 only. One program, built on the first DNN
// node with -DSOL_ALG_<name>=<value> for every capture::dnn::Alg, so that the algorithm numbers
// here are the IR's own (no second list to keep in sync).
//
// Scheme: sol_dnn_copy moves a tensor between any two Layouts (gather into a dense canonical
// array, scatter back with zeros in blocked padding, or reorder directly); every other kernel
// computes on dense canonical arrays (N, C, D, H, W / G, O, I, D, H, W, row-major). One work-item
// per output element: no atomics, so results do not depend on scheduling. Long reductions are
// cut into chunks whose partial sums sol_dnn_reduce_chunks adds (more parallelism, and partial
// sums also round better than one long running sum).

// oneDNN's reference kernels compute a*b+c without contraction; so do these.
#pragma OPENCL FP_CONTRACT OFF

// ------------------------------------------------------------------------------------- layouts

// capture::dnn::Layout (see dnn.hpp: offset() is oneDNN's memory_desc_wrapper::off_v), as the
// host packs it: every field 8 bytes, so the host struct has no padding to disagree about.
typedef struct {
  long ndims, nblocks, offset0, unused;
  long dims[6], padded[6], strides[6];
  long block[4], block_dim[4];
} sol_layout;

inline long layout_offset(const sol_layout* l, const long* idx) {
  long pos[6];
  for (int d = 0; d < l->ndims; ++d) pos[d] = idx[d];
  long off = l->offset0, stride = 1;
  for (int b = (int)l->nblocks - 1; b >= 0; --b) {
    const int d = (int)l->block_dim[b];
    off += (pos[d] % l->block[b]) * stride;
    pos[d] /= l->block[b];
    stride *= l->block[b];
  }
  for (int d = 0; d < l->ndims; ++d) off += pos[d] * l->strides[d];
  return off;
}

// Every padded element of `to`: the element of `from` at the same logical index, or 0 in the
// padding of a blocked dim. `from` has the logical dims of `to` (its own padding is never read).
__kernel void sol_dnn_copy(__global const float* src, const sol_layout from, __global float* dst,
                           const sol_layout to, const long total) {
  const long i = get_global_id(0);
  if (i >= total) return;
  long idx[6];
  long rest = i;
  bool inside = true;
  for (int d = (int)to.ndims - 1; d >= 0; --d) {
    idx[d] = rest % to.padded[d];
    rest /= to.padded[d];
    inside = inside && idx[d] < to.dims[d];
  }
  dst[layout_offset(&to, idx)] = inside ? src[layout_offset(&from, idx)] : 0.f;
}

// ------------------------------------------------------------------------------ element-wise

// y = a * x + b * y; y is not read when b == 0 (a fresh output may hold anything).
__kernel void sol_dnn_axpby(__global const float* x, __global float* y, const long total, const float a,
                            const float b) {
  const long i = get_global_id(0);
  if (i >= total) return;
  const float v = a * x[i];
  y[i] = b == 0.f ? v : v + b * y[i];
}

// oneDNN 2.6's formulas (src/common/math_utils.hpp), as the reference backend computes them.
inline float logistic(float s) {
  // Past this bound expf(-s) overflows: 0 rather than 1 / (1 + inf).
  const float exp_overflow_bound = 88.72283172607421875f;
  const float in = -s;
  return in < exp_overflow_bound ? 1.f / (1.f + exp(in)) : 0.f;
}
inline float soft_relu(float s) {
  return s < log(FLT_MAX) ? log1p(exp(s)) : s;
}
inline float soft_relu_bwd(float dd, float s) {
  return dd / (1.f + exp(-s));
}
inline float bounded_relu(float s, float alpha) {
  s = s > 0.f ? s : 0.f;
  return s > alpha ? alpha : s;
}
inline float clip(float s, float alpha, float beta) {
  s = s > alpha ? s : alpha;
  return s > beta ? beta : s;
}

#define SQRT_2_OVER_PI 0.79788458347320556640625f
#define GELU_FITTING 0.044715f
#define SQRT_2_OVER_2 0.707106769084930419921875f
#define TWO_OVER_SQRT_PI 1.12837922573089599609375f

inline float eltwise_fwd(int alg, float s, float alpha, float beta) {
  switch (alg) {
    case SOL_ALG_relu:
    case SOL_ALG_relu_dst: return s > 0.f ? s : s * alpha;
    case SOL_ALG_tanh:
    case SOL_ALG_tanh_dst: return tanh(s);
    case SOL_ALG_elu:
    case SOL_ALG_elu_dst: return s > 0.f ? s : alpha * expm1(s);
    case SOL_ALG_square: return s * s;
    case SOL_ALG_abs: return s > 0.f ? s : -s;
    case SOL_ALG_sqrt:
    case SOL_ALG_sqrt_dst: return sqrt(s);
    case SOL_ALG_linear: return alpha * s + beta;
    case SOL_ALG_bounded_relu: return bounded_relu(s, alpha);
    case SOL_ALG_soft_relu: return soft_relu(s);
    case SOL_ALG_logistic:
    case SOL_ALG_logistic_dst: return logistic(s);
    case SOL_ALG_exp:
    case SOL_ALG_exp_dst: return exp(s);
    case SOL_ALG_gelu_tanh: return 0.5f * s * (1.f + tanh(SQRT_2_OVER_PI * s * (1.f + GELU_FITTING * s * s)));
    case SOL_ALG_gelu_erf: return 0.5f * s * (1.f + erf(s * SQRT_2_OVER_2));
    case SOL_ALG_swish: return s * logistic(alpha * s);
    case SOL_ALG_log: return log(s);
    case SOL_ALG_clip:
    case SOL_ALG_clip_v2:
    case SOL_ALG_clip_v2_dst: return clip(s, alpha, beta);
    case SOL_ALG_pow: return alpha * pow(s, beta);
    case SOL_ALG_round: return rint(s);  // half to even, as nearbyint in the default mode
    case SOL_ALG_logsigmoid: return -soft_relu(-s);
    case SOL_ALG_mish: return s * tanh(soft_relu(s));
    case SOL_ALG_hardswish: return s * bounded_relu(s + 3.f, 6.f) / 6.f;
    default: return s;  // declined on the host
  }
}

// x is src, or dst for the *_dst algorithms.
inline float eltwise_bwd(int alg, float dd, float x, float alpha, float beta) {
  const float s = x, d = x;
  switch (alg) {
    case SOL_ALG_relu: return s > 0.f ? dd : dd * alpha;
    case SOL_ALG_relu_dst: return d > 0.f ? dd : dd * alpha;
    case SOL_ALG_tanh: {
      const float e = tanh(s);
      return dd * (1.f - e) * (1.f + e);
    }
    case SOL_ALG_tanh_dst: return dd * (1.f - d) * (1.f + d);
    case SOL_ALG_elu: return dd * (s > 0.f ? 1.f : alpha * exp(s));
    case SOL_ALG_elu_dst: return dd * (d > 0.f ? 1.f : d + alpha);
    case SOL_ALG_square: return dd * 2.f * s;
    case SOL_ALG_abs: return s > 0.f ? dd : s < 0.f ? -dd : 0.f;
    case SOL_ALG_sqrt: return dd / (2.f * sqrt(s));
    case SOL_ALG_sqrt_dst: return dd / (2.f * d);
    case SOL_ALG_linear: return dd * alpha;
    case SOL_ALG_bounded_relu: return dd * (0.f < s && s <= alpha ? 1.f : 0.f);
    case SOL_ALG_soft_relu: return soft_relu_bwd(dd, s);
    case SOL_ALG_logistic: {
      const float v = logistic(s);
      return dd * v * (1.f - v);
    }
    case SOL_ALG_logistic_dst: return dd * d * (1.f - d);
    case SOL_ALG_exp: return dd * exp(s);
    case SOL_ALG_exp_dst: return dd * d;
    case SOL_ALG_gelu_tanh: {
      const float g = SQRT_2_OVER_PI * s * (1.f + GELU_FITTING * s * s);
      const float dg = SQRT_2_OVER_PI * (1.f + 3.f * GELU_FITTING * s * s);
      const float v = tanh(g);
      return dd * 0.5f * (1.f + v) * (1.f + s * (1.f - v) * dg);
    }
    case SOL_ALG_gelu_erf: {
      const float v = s * SQRT_2_OVER_2;
      return dd * 0.5f * (1.f + erf(v) + v * TWO_OVER_SQRT_PI * exp(-v * v));
    }
    case SOL_ALG_swish: {
      const float v = logistic(alpha * s);
      return dd * (v + s * alpha * v * (1.f - v));
    }
    case SOL_ALG_log: return dd / s;
    case SOL_ALG_clip: return dd * (alpha < s && s <= beta ? 1.f : 0.f);
    case SOL_ALG_clip_v2: return dd * (alpha < s && s < beta ? 1.f : 0.f);
    case SOL_ALG_clip_v2_dst: return dd * (alpha < d && d < beta ? 1.f : 0.f);
    case SOL_ALG_pow: return beta == 0.f ? 0.f : dd * ((alpha * beta) * pow(s, beta - 1.f));
    case SOL_ALG_logsigmoid: return soft_relu_bwd(dd, -s);
    case SOL_ALG_mish: {
      const float t = tanh(soft_relu(s));
      return dd * (t + s * soft_relu_bwd(1.f, s) * (1.f - t * t));
    }
    case SOL_ALG_hardswish: return s < 3.f ? (s > -3.f ? dd * (2.f * s + 3.f) / 6.f : 0.f) : dd;
    default: return 0.f;  // declined on the host
  }
}

// dst = scale * f(src): eltwise forward (scale 1) and eltwise post-ops (in place).
__kernel void sol_dnn_eltwise_fwd(__global const float* src, __global float* dst, const long total, const int alg,
                                  const float alpha, const float beta, const float scale) {
  const long i = get_global_id(0);
  if (i >= total) return;
  dst[i] = scale * eltwise_fwd(alg, src[i], alpha, beta);
}

__kernel void sol_dnn_eltwise_bwd(__global const float* diff_dst, __global const float* x, __global float* diff_src,
                                  const long total, const int alg, const float alpha, const float beta) {
  const long i = get_global_id(0);
  if (i >= total) return;
  diff_src[i] = eltwise_bwd(alg, diff_dst[i], x[i], alpha, beta);
}

inline float binary_op(int alg, float x, float y) {
  switch (alg) {
    case SOL_ALG_add: return x + y;
    case SOL_ALG_mul: return x * y;
    case SOL_ALG_max: return x > y ? x : y;
    case SOL_ALG_min: return x < y ? x : y;
    case SOL_ALG_div: return x / y;
    case SOL_ALG_sub: return x - y;
    case SOL_ALG_ge: return x >= y ? 1.f : 0.f;
    case SOL_ALG_gt: return x > y ? 1.f : 0.f;
    case SOL_ALG_le: return x <= y ? 1.f : 0.f;
    case SOL_ALG_lt: return x < y ? 1.f : 0.f;
    case SOL_ALG_eq: return x == y ? 1.f : 0.f;
    case SOL_ALG_ne: return x != y ? 1.f : 0.f;
    default: return x;  // declined on the host
  }
}

// Numpy-style broadcasting of dense operands: the dims of y, and each operand's dense strides
// with 0 along the dims it broadcasts.
typedef struct {
  long ndims, unused;
  long dims[6], a[6], b[6];
} sol_bcast;

// y = a <alg> b; y may be a (binary post-ops run in place).
__kernel void sol_dnn_binary(__global const float* a, __global const float* b, __global float* y, const sol_bcast s,
                             const long total, const int alg) {
  const long i = get_global_id(0);
  if (i >= total) return;
  long rest = i, ao = 0, bo = 0;
  for (int d = (int)s.ndims - 1; d >= 0; --d) {
    const long x = rest % s.dims[d];
    rest /= s.dims[d];
    ao += x * s.a[d];
    bo += x * s.b[d];
  }
  y[i] = binary_op(alg, a[ao], b[bo]);
}

// ---------------------------------------------------------------------------------- reductions

// out[i] = scale * sum over chunks of partial[chunk * count + i].
__kernel void sol_dnn_reduce_chunks(__global const float* partial, __global float* out, const long count,
                                    const long chunks, const float scale) {
  const long i = get_global_id(0);
  if (i >= count) return;
  float sum = 0.f;
  for (long c = 0; c < chunks; ++c) sum += partial[c * count + i];
  out[i] = scale * sum;
}

// Per channel c of dense (N, C, S) arrays, over chunk `chunk` of the N * S values of the channel,
// Kahan-compensated sums into partial[chunk][k][C]:
//   mode 0: k = 0: sum a                           (bias gradients, batch-norm means)
//   mode 1: k = 0: sum (a - mean)^2                (batch-norm variances)
//   mode 2: k = 0: sum b, k = 1: sum b * (a - mean) (batch-norm backward: a = src, b = diff_dst)
// In mode 2 a non-null `mask` (the fused ReLU's bits, one per element in canonical order) zeroes
// b where the forward pass's ReLU did.
__kernel void sol_dnn_channel_sums(__global const float* a, __global const float* b, __global const float* mean,
                                   __global const uchar* mask, const int use_mask, const long n, const long c,
                                   const long s, const long chunks, const int mode, __global float* partial) {
  const long i = get_global_id(0);
  if (i >= c * chunks) return;
  const long ch = i % c, chunk = i / c;
  const long len = n * s, per = (len + chunks - 1) / chunks;
  const long lo = chunk * per, hi = min(len, lo + per);
  const float m = mode == 0 ? 0.f : mean[ch];
  float s0 = 0.f, c0 = 0.f, s1 = 0.f, c1 = 0.f;
  for (long r = lo; r < hi; ++r) {
    const long at = ((r / s) * c + ch) * s + r % s;
    float v0, v1 = 0.f;
    if (mode == 0) {
      v0 = a[at];
    } else if (mode == 1) {
      const float x = a[at] - m;
      v0 = x * x;
    } else {
      float dy = b[at];
      if (use_mask && !((mask[at >> 3] >> (at & 7)) & 1)) dy = 0.f;
      v0 = dy;
      v1 = dy * (a[at] - m);
    }
    float y = v0 - c0, t = s0 + y;
    c0 = (t - s0) - y;
    s0 = t;
    y = v1 - c1, t = s1 + y;
    c1 = (t - s1) - y;
    s1 = t;
  }
  partial[(chunk * (mode == 2 ? 2 : 1)) * c + ch] = s0;
  if (mode == 2) partial[(chunk * 2 + 1) * c + ch] = s1;
}

// ------------------------------------------------------------------------- convolution family

// The direct correlation between an x side (larger spatial extent) and a y side, as the
// reference backend formulates it (backends/reference/dnn/conv.cpp): x = y * stride - pad + k *
// dilation. Spatial dims are right-aligned in (D, H, W), absent ones 1. Weights per group are
// (Cy, Cx, K) for a convolution and (Cx, Cy, K) for a deconvolution: wy and wx are the strides
// of a y and an x channel, wg of a group.
typedef struct {
  long n, g, cx, cy;
  long x[3], y[3], k[3], s[3], d[3], p[3];
  long wg, wy, wx, unused;
} sol_conv;

#define KVOL(c) ((c).k[0] * (c).k[1] * (c).k[2])
#define XVOL(c) ((c).x[0] * (c).x[1] * (c).x[2])
#define YVOL(c) ((c).y[0] * (c).y[1] * (c).y[2])

// y = corr(x, w) (+ bias per y channel). `bump` is added to element 0: see dnn.cpp (tests only).
__kernel void sol_dnn_conv_fwd(__global const float* x, __global const float* w, __global const float* bias,
                               const int has_bias, __global float* y, const sol_conv c, const float bump) {
  const long i = get_global_id(0);
  if (i >= c.n * c.g * c.cy * YVOL(c)) return;
  long r = i;
  const long ow = r % c.y[2];
  r /= c.y[2];
  const long oh = r % c.y[1];
  r /= c.y[1];
  const long od = r % c.y[0];
  r /= c.y[0];
  const long cy = r % c.cy;
  r /= c.cy;
  const long gr = r % c.g, n = r / c.g;
  __global const float* xg = x + (n * c.g + gr) * c.cx * XVOL(c);
  __global const float* wg = w + gr * c.wg + cy * c.wy;
  float acc = 0.f;
  for (long kd = 0; kd < c.k[0]; ++kd) {
    const long id = od * c.s[0] - c.p[0] + kd * c.d[0];
    if (id < 0 || id >= c.x[0]) continue;
    for (long kh = 0; kh < c.k[1]; ++kh) {
      const long ih = oh * c.s[1] - c.p[1] + kh * c.d[1];
      if (ih < 0 || ih >= c.x[1]) continue;
      for (long kw = 0; kw < c.k[2]; ++kw) {
        const long iw = ow * c.s[2] - c.p[2] + kw * c.d[2];
        if (iw < 0 || iw >= c.x[2]) continue;
        const long xo = (id * c.x[1] + ih) * c.x[2] + iw, wo = (kd * c.k[1] + kh) * c.k[2] + kw;
        for (long cx = 0; cx < c.cx; ++cx) acc += xg[cx * XVOL(c) + xo] * wg[cx * c.wx + wo];
      }
    }
  }
  if (has_bias) acc += bias[gr * c.cy + cy];
  y[i] = i == 0 ? acc + bump : acc;
}

// x = corr^T(y, w) (+ bias per x channel: deconvolution forward).
__kernel void sol_dnn_conv_bwd_data(__global const float* y, __global const float* w, __global const float* bias,
                                    const int has_bias, __global float* x, const sol_conv c) {
  const long i = get_global_id(0);
  if (i >= c.n * c.g * c.cx * XVOL(c)) return;
  long r = i;
  const long iw = r % c.x[2];
  r /= c.x[2];
  const long ih = r % c.x[1];
  r /= c.x[1];
  const long id = r % c.x[0];
  r /= c.x[0];
  const long cx = r % c.cx;
  r /= c.cx;
  const long gr = r % c.g, n = r / c.g;
  __global const float* yg = y + (n * c.g + gr) * c.cy * YVOL(c);
  __global const float* wg = w + gr * c.wg + cx * c.wx;
  float acc = 0.f;
  for (long kd = 0; kd < c.k[0]; ++kd) {
    const long td = id + c.p[0] - kd * c.d[0];
    if (td < 0 || td % c.s[0]) continue;
    const long od = td / c.s[0];
    if (od >= c.y[0]) continue;
    for (long kh = 0; kh < c.k[1]; ++kh) {
      const long th = ih + c.p[1] - kh * c.d[1];
      if (th < 0 || th % c.s[1]) continue;
      const long oh = th / c.s[1];
      if (oh >= c.y[1]) continue;
      for (long kw = 0; kw < c.k[2]; ++kw) {
        const long tw = iw + c.p[2] - kw * c.d[2];
        if (tw < 0 || tw % c.s[2]) continue;
        const long ow = tw / c.s[2];
        if (ow >= c.y[2]) continue;
        const long yo = (od * c.y[1] + oh) * c.y[2] + ow, wo = (kd * c.k[1] + kh) * c.k[2] + kw;
        for (long cy = 0; cy < c.cy; ++cy) acc += yg[cy * YVOL(c) + yo] * wg[cy * c.wy + wo];
      }
    }
  }
  if (has_bias) acc += bias[gr * c.cx + cx];
  x[i] = acc;
}

// w = corr(x, y), chunk `chunk` of the N * Y positions: partial[chunk][weight element in the
// weights tensor's canonical order].
__kernel void sol_dnn_conv_bwd_weights(__global const float* x, __global const float* y, __global float* partial,
                                       const sol_conv c, const long chunks) {
  const long wsize = c.g * c.wg;
  const long i = get_global_id(0);
  if (i >= wsize * chunks) return;
  const long wi = i % wsize, chunk = i / wsize;
  const long kvol = KVOL(c);
  const long ko = wi % kvol, gr = wi / c.wg;
  const long cy = (wi % c.wg) / c.wy % c.cy, cx = (wi % c.wg) / c.wx % c.cx;
  const long kw = ko % c.k[2], kh = ko / c.k[2] % c.k[1], kd = ko / (c.k[2] * c.k[1]);
  const long len = c.n * YVOL(c), per = (len + chunks - 1) / chunks;
  const long lo = chunk * per, hi = min(len, lo + per);
  float acc = 0.f;
  for (long r = lo; r < hi; ++r) {
    const long n = r / YVOL(c), yo = r % YVOL(c);
    const long ow = yo % c.y[2], oh = yo / c.y[2] % c.y[1], od = yo / (c.y[2] * c.y[1]);
    const long id = od * c.s[0] - c.p[0] + kd * c.d[0];
    const long ih = oh * c.s[1] - c.p[1] + kh * c.d[1];
    const long iw = ow * c.s[2] - c.p[2] + kw * c.d[2];
    if (id < 0 || id >= c.x[0] || ih < 0 || ih >= c.x[1] || iw < 0 || iw >= c.x[2]) continue;
    const long xo = ((n * c.g + gr) * c.cx + cx) * XVOL(c) + (id * c.x[1] + ih) * c.x[2] + iw;
    const long yy = ((n * c.g + gr) * c.cy + cy) * YVOL(c) + yo;
    acc += x[xo] * y[yy];
  }
  partial[chunk * wsize + wi] = acc;
}

// ------------------------------------------------------------------------ inner product, matmul

// Batch dims of a matmul (up to 4): y's dims, and each operand's dense stride along them (0 where
// it broadcasts); bias: its strides along y's batch dims, then M and N.
typedef struct {
  long nb, unused;
  long dims[4], a[4], b[4], bias[6];
} sol_batch;

// c[batch][m][n] = sum_k a[m * am + k * ak] * b[k * bk + n * bn] (+ bias), per batch.
__kernel void sol_dnn_gemm(__global const float* a, __global const float* b, __global const float* bias,
                           const int has_bias, __global float* c, const long m, const long n, const long k,
                           const long am, const long ak, const long bk, const long bn, const sol_batch bt,
                           const long total) {
  const long i = get_global_id(0);
  if (i >= total) return;
  const long j = i % n, row = i / n % m;
  long rest = i / (n * m), ao = 0, bo = 0, biaso = 0;
  for (int d = (int)bt.nb - 1; d >= 0; --d) {
    const long x = rest % bt.dims[d];
    rest /= bt.dims[d];
    ao += x * bt.a[d];
    bo += x * bt.b[d];
    biaso += x * bt.bias[d];
  }
  __global const float* ar = a + ao + row * am;
  __global const float* bc = b + bo + j * bn;
  float acc = 0.f;
  for (long p = 0; p < k; ++p) acc += ar[p * ak] * bc[p * bk];
  if (has_bias) acc += bias[biaso + row * bt.bias[bt.nb] + j * bt.bias[bt.nb + 1]];
  c[i] = acc;
}

// ------------------------------------------------------------------------------------- pooling

// Geometry as sol_conv's (x: src side, y: dst side); planes = N * C.
typedef struct {
  long planes, alg, unused0, unused1;
  long x[3], y[3], k[3], s[3], d[3], p[3];
} sol_pool;

// Kernel positions of output o along dim `dim` that fall inside the input.
inline long pool_valid(const sol_pool* g, int dim, long o) {
  long count = 0;
  for (long k = 0; k < g->k[dim]; ++k) {
    const long i = o * g->s[dim] - g->p[dim] + k * g->d[dim];
    count += i >= 0 && i < g->x[dim];
  }
  return count;
}

inline long pool_divisor(const sol_pool* g, long od, long oh, long ow) {
  if (g->alg == SOL_ALG_pool_avg_include_padding) return g->k[0] * g->k[1] * g->k[2];
  return pool_valid(g, 0, od) * pool_valid(g, 1, oh) * pool_valid(g, 2, ow);
}

// The logical index (N, C, spatial) of dense y element i in a tensor of nsp spatial dims.
inline void pool_index(long plane, long c, long od, long oh, long ow, long nsp, long* idx) {
  idx[0] = plane / c;
  idx[1] = plane % c;
  const long sp[3] = {od, oh, ow};
  for (long s = 0; s < nsp; ++s) idx[2 + s] = sp[3 - nsp + s];
}

// Max: the first maximum in window order, and its position (kd * KH + kh) * KW + kw stored into
// the workspace (u8 or s32, at the workspace layout's offset of the dst element) when ws_kind is
// 1 (u8) or 4 (s32). Average: the sum over the window's inside part divided as the alg says.
__kernel void sol_dnn_pool_fwd(__global const float* x, __global float* y, const sol_pool g,
                               __global uchar* ws, const int ws_kind, const sol_layout wl, const long channels) {
  const long i = get_global_id(0);
  if (i >= g.planes * g.y[0] * g.y[1] * g.y[2]) return;
  const long ow = i % g.y[2], oh = i / g.y[2] % g.y[1], od = i / (g.y[2] * g.y[1]) % g.y[0];
  const long plane = i / (g.y[2] * g.y[1] * g.y[0]);
  __global const float* xp = x + plane * g.x[0] * g.x[1] * g.x[2];
  float best = -FLT_MAX, sum = 0.f;
  int where = 0;
  for (long kd = 0; kd < g.k[0]; ++kd) {
    const long id = od * g.s[0] - g.p[0] + kd * g.d[0];
    if (id < 0 || id >= g.x[0]) continue;
    for (long kh = 0; kh < g.k[1]; ++kh) {
      const long ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
      if (ih < 0 || ih >= g.x[1]) continue;
      for (long kw = 0; kw < g.k[2]; ++kw) {
        const long iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
        if (iw < 0 || iw >= g.x[2]) continue;
        const float v = xp[(id * g.x[1] + ih) * g.x[2] + iw];
        sum += v;
        if (v > best) {
          best = v;
          where = (int)((kd * g.k[1] + kh) * g.k[2] + kw);
        }
      }
    }
  }
  if (g.alg != SOL_ALG_pool_max) {
    const long div = pool_divisor(&g, od, oh, ow);
    y[i] = div ? sum / (float)div : 0.f;
    return;
  }
  y[i] = best;
  if (ws_kind == 0) return;
  long idx[6];
  pool_index(plane, channels, od, oh, ow, wl.ndims - 2, idx);
  const long off = layout_offset(&wl, idx);
  if (ws_kind == 1)
    ws[off] = (uchar)where;
  else
    ((__global int*)ws)[off] = where;
}

// diff_src element by element: the sum over the outputs whose window covers it (max: only where
// the workspace names this position).
__kernel void sol_dnn_pool_bwd(__global const float* dy, __global float* dx, const sol_pool g,
                               __global const uchar* ws, const int ws_kind, const sol_layout wl, const long channels) {
  const long i = get_global_id(0);
  if (i >= g.planes * g.x[0] * g.x[1] * g.x[2]) return;
  const long iw = i % g.x[2], ih = i / g.x[2] % g.x[1], id = i / (g.x[2] * g.x[1]) % g.x[0];
  const long plane = i / (g.x[2] * g.x[1] * g.x[0]);
  __global const float* yp = dy + plane * g.y[0] * g.y[1] * g.y[2];
  float acc = 0.f;
  for (long kd = 0; kd < g.k[0]; ++kd) {
    const long td = id + g.p[0] - kd * g.d[0];
    if (td < 0 || td % g.s[0]) continue;
    const long od = td / g.s[0];
    if (od >= g.y[0]) continue;
    for (long kh = 0; kh < g.k[1]; ++kh) {
      const long th = ih + g.p[1] - kh * g.d[1];
      if (th < 0 || th % g.s[1]) continue;
      const long oh = th / g.s[1];
      if (oh >= g.y[1]) continue;
      for (long kw = 0; kw < g.k[2]; ++kw) {
        const long tw = iw + g.p[2] - kw * g.d[2];
        if (tw < 0 || tw % g.s[2]) continue;
        const long ow = tw / g.s[2];
        if (ow >= g.y[2]) continue;
        const float v = yp[(od * g.y[1] + oh) * g.y[2] + ow];
        if (g.alg == SOL_ALG_pool_max) {
          long idx[6];
          pool_index(plane, channels, od, oh, ow, wl.ndims - 2, idx);
          const long off = layout_offset(&wl, idx);
          const long at = ws_kind == 1 ? ws[off] : ((__global const int*)ws)[off];
          if (at == (kd * g.k[1] + kh) * g.k[2] + kw) acc += v;
        } else {
          acc += v / (float)pool_divisor(&g, od, oh, ow);
        }
      }
    }
  }
  dx[i] = acc;
}

// --------------------------------------------------------------------------- batch normalization

// y = scale * (x - mean) / sqrt(var + eps) + shift per channel of dense (N, C, S); with fuse_relu
// negative results become 0.
__kernel void sol_dnn_bnorm_fwd(__global const float* x, __global const float* mean, __global const float* var,
                                __global const float* scale, __global const float* shift, const int flags,
                                __global float* y, const long c, const long s, const float eps, const long total) {
  const long i = get_global_id(0);
  if (i >= total) return;
  const long ch = i / s % c;
  const float inv = 1.f / sqrt(var[ch] + eps);
  const float gamma = flags & 1 ? scale[ch] : 1.f, beta = flags & 2 ? shift[ch] : 0.f;
  float v = gamma * (x[i] - mean[ch]) * inv + beta;
  if (flags & 4) v = v > 0.f ? v : 0.f;
  y[i] = v;
}

// The fused ReLU's workspace (dnn.hpp): bit b of byte j says whether dense element 8j + b is > 0.
__kernel void sol_dnn_bnorm_mask(__global const float* y, __global uchar* ws, const long total) {
  const long j = get_global_id(0);
  if (j * 8 >= total) return;
  uint bits = 0;
  for (int b = 0; b < 8 && j * 8 + b < total; ++b) bits |= (y[j * 8 + b] > 0.f ? 1u : 0u) << b;
  ws[j] = (uchar)bits;
}

// diff_src = gamma / sqrt(var + eps) * (dy - (sum_dy + xhat * sum_dy_xhat) / len), the sums
// (sums[0][c] = sum dy, sums[1][c] = sum dy * (x - mean)) only with computed statistics.
__kernel void sol_dnn_bnorm_bwd(__global const float* x, __global const float* dy, __global const float* mean,
                                __global const float* var, __global const float* scale, __global const float* sums,
                                __global const uchar* mask, const int flags, __global float* dx, const long c,
                                const long s, const long len, const float eps, const long total) {
  const long i = get_global_id(0);
  if (i >= total) return;
  const long ch = i / s % c;
  const float inv = 1.f / sqrt(var[ch] + eps);
  const float gamma = flags & 1 ? scale[ch] : 1.f;
  float g = dy[i];
  if ((flags & 4) && !((mask[i >> 3] >> (i & 7)) & 1)) g = 0.f;
  if (!(flags & 8)) {
    const float xhat = (x[i] - mean[ch]) * inv;
    g -= (sums[ch] + xhat * sums[c + ch] * inv) / (float)len;
  }
  dx[i] = gamma * inv * g;
}

// diff_scale = sum dy * (x - mean) / sqrt(var + eps), diff_shift = sum dy, from the sums of
// sol_dnn_channel_sums' mode 2.
__kernel void sol_dnn_bnorm_diff_params(__global const float* sums, __global const float* var, const float eps,
                                        const long c, __global float* diff_scale, __global float* diff_shift) {
  const long ch = get_global_id(0);
  if (ch >= c) return;
  diff_scale[ch] = sums[c + ch] * (1.f / sqrt(var[ch] + eps));
  diff_shift[ch] = sums[ch];
}

// ------------------------------------------------------------------------------------- softmax

// One row (outer, inner) of C values per work-item. log: logsoftmax.
__kernel void sol_dnn_softmax_fwd(__global const float* x, __global float* y, const long outer, const long c,
                                  const long inner, const int log_softmax) {
  const long i = get_global_id(0);
  if (i >= outer * inner) return;
  const long first = i / inner * c * inner + i % inner;
  float max = x[first];
  for (long k = 1; k < c; ++k) max = fmax(max, x[first + k * inner]);
  float sum = 0.f, comp = 0.f;
  for (long k = 0; k < c; ++k) {
    const float v = exp(x[first + k * inner] - max) - comp, t = sum + v;
    comp = (t - sum) - v;
    sum = t;
  }
  const float lsum = log(sum);
  for (long k = 0; k < c; ++k) {
    const float shifted = x[first + k * inner] - max;
    y[first + k * inner] = log_softmax ? shifted - lsum : exp(shifted) / sum;
  }
}

// softmax: dx = y * (dy - sum(dy * y)); logsoftmax: dx = dy - exp(y) * sum(dy).
__kernel void sol_dnn_softmax_bwd(__global const float* y, __global const float* dy, __global float* dx,
                                  const long outer, const long c, const long inner, const int log_softmax) {
  const long i = get_global_id(0);
  if (i >= outer * inner) return;
  const long first = i / inner * c * inner + i % inner;
  float sum = 0.f, comp = 0.f;
  for (long k = 0; k < c; ++k) {
    const long at = first + k * inner;
    const float v = (log_softmax ? dy[at] : dy[at] * y[at]) - comp, t = sum + v;
    comp = (t - sum) - v;
    sum = t;
  }
  for (long k = 0; k < c; ++k) {
    const long at = first + k * inner;
    dx[at] = log_softmax ? dy[at] - exp(y[at]) * sum : y[at] * (dy[at] - sum);
  }
}
