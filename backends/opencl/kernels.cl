// SOL's own OpenCL C kernels: the BLAS routines CLBlast 1.5.3 does not implement (rot, rotm,
// tbsv, tpsv, sdsdot, dsdot, csscal) or implements with semantics other than the reference BLAS
// (nrm2 without scaling, amax ties and NaNs). Compiled once per precision with -DSOL_PREC_S, _D,
// _C or _Z; `elem` is the element type, `real` its real counterpart.
//
// Vectors arrive contiguous and in logical order (the host gathers strided and negative-increment
// vectors), so no kernel deals with increments. Reductions write one partial result per
// work-group; the host combines the partials exactly as the reference combines its terms.

// The reference BLAS is compiled without floating-point contraction; so are these kernels, so that
// a*b+c rounds the same way.
#pragma OPENCL FP_CONTRACT OFF

#if defined(SOL_PREC_D) || defined(SOL_PREC_Z)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#if defined(SOL_PREC_S)
typedef float real;
typedef float elem;
#define SOL_COMPLEX 0
#elif defined(SOL_PREC_D)
typedef double real;
typedef double elem;
#define SOL_COMPLEX 0
#elif defined(SOL_PREC_C)
typedef float real;
typedef float2 elem;
#define SOL_COMPLEX 1
#elif defined(SOL_PREC_Z)
typedef double real;
typedef double2 elem;
#define SOL_COMPLEX 1
#else
#error "build with -DSOL_PREC_S, -DSOL_PREC_D, -DSOL_PREC_C or -DSOL_PREC_Z"
#endif

#if SOL_COMPLEX
inline elem mul(elem a, elem b) { return (elem)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
inline elem conjugate(elem a) { return (elem)(a.x, -a.y); }
inline bool is_zero(elem a) { return a.x == 0 && a.y == 0; }
inline real abs1(elem a) { return fabs(a.x) + fabs(a.y); }
// Smith's algorithm, as gfortran divides complex numbers: no overflow for large |b|.
inline elem divide(elem a, elem b) {
  if (fabs(b.x) >= fabs(b.y)) {
    const real r = b.y / b.x;
    const real d = b.x + b.y * r;
    return (elem)((a.x + a.y * r) / d, (a.y - a.x * r) / d);
  }
  const real r = b.x / b.y;
  const real d = b.y + b.x * r;
  return (elem)((a.x * r + a.y) / d, (a.y * r - a.x) / d);
}
#else
inline elem mul(elem a, elem b) { return a * b; }
inline elem conjugate(elem a) { return a; }
inline bool is_zero(elem a) { return a == 0; }
inline real abs1(elem a) { return fabs(a); }
inline elem divide(elem a, elem b) { return a / b; }
#endif

// ------------------------------------------------------------------------------------ level 1

// srot, drot, csrot, zdrot: real c and s, as the reference applies them.
__kernel void sol_rot(const long n, __global elem* x, __global elem* y, const real c, const real s) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const elem xi = x[i];
  const elem yi = y[i];
  x[i] = c * xi + s * yi;
  y[i] = c * yi - s * xi;
}

#if !SOL_COMPLEX
// srotm, drotm. flag -2 (identity) never reaches the device.
__kernel void sol_rotm(const long n, __global elem* x, __global elem* y, const int flag, const real h11,
                       const real h21, const real h12, const real h22) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const real w = x[i];
  const real z = y[i];
  if (flag < 0) {
    x[i] = w * h11 + z * h12;
    y[i] = w * h21 + z * h22;
  } else if (flag == 0) {
    x[i] = w + z * h12;
    y[i] = w * h21 + z;
  } else {
    x[i] = w * h11 + z;
    y[i] = -w + h22 * z;
  }
}
#endif

#if SOL_COMPLEX
// csscal, zdscal: the real and imaginary parts scaled separately (not a complex multiply, which
// would turn an infinite part into NaN).
__kernel void sol_scal_real(const long n, const real alpha, __global elem* x) {
  const long i = get_global_id(0);
  if (i >= n) return;
  x[i] = (elem)(alpha * x[i].x, alpha * x[i].y);
}
#endif

// Work-group tree reduction of `scratch` (local size a power of two); the sum ends in scratch[0].
#define SOL_REDUCE_SUM(scratch)                                             \
  for (uint stride = get_local_size(0) / 2; stride > 0; stride /= 2) {     \
    barrier(CLK_LOCAL_MEM_FENCE);                                           \
    if (lid < stride) scratch[lid] += scratch[lid + stride];                \
  }                                                                         \
  barrier(CLK_LOCAL_MEM_FENCE)

// sasum, dasum, scasum, dzasum: sum of |re| + |im|. One partial sum per work-group.
__kernel void sol_asum(const long n, __global const elem* x, __global real* partial, __local real* scratch) {
  const uint lid = get_local_id(0);
  real sum = 0;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) sum += abs1(x[i]);
  scratch[lid] = sum;
  SOL_REDUCE_SUM(scratch);
  if (lid == 0) partial[get_group_id(0)] = scratch[0];
}

// snrm2 ... dznrm2: the three accumulators of the reference (Blue's algorithm, LAPACK 3.10+):
// squares of values above tbig scaled down by sbig, below tsml scaled up by ssml, the rest as
// they are. Complex elements contribute their real and imaginary parts. Three partials per
// work-group (big, medium, small); the host combines them as the reference does.
inline void nrm2_add(real ax, real tsml, real tbig, real ssml, real sbig, real* big, real* med, real* sml) {
  if (ax > tbig) {
    const real t = ax * sbig;
    *big += t * t;
  } else if (ax < tsml) {
    const real t = ax * ssml;
    *sml += t * t;
  } else {
    *med += ax * ax;
  }
}

__kernel void sol_nrm2(const long n, __global const elem* x, __global real* partial, __local real* scratch,
                       const real tsml, const real tbig, const real ssml, const real sbig) {
  const uint lid = get_local_id(0);
  const uint size = get_local_size(0);
  real big = 0, med = 0, sml = 0;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
#if SOL_COMPLEX
    nrm2_add(fabs(x[i].x), tsml, tbig, ssml, sbig, &big, &med, &sml);
    nrm2_add(fabs(x[i].y), tsml, tbig, ssml, sbig, &big, &med, &sml);
#else
    nrm2_add(fabs(x[i]), tsml, tbig, ssml, sbig, &big, &med, &sml);
#endif
  }
  __local real* lbig = scratch;
  __local real* lmed = scratch + size;
  __local real* lsml = scratch + 2 * size;
  lbig[lid] = big;
  lmed[lid] = med;
  lsml[lid] = sml;
  for (uint stride = size / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) {
      lbig[lid] += lbig[lid + stride];
      lmed[lid] += lmed[lid + stride];
      lsml[lid] += lsml[lid + stride];
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    const size_t g = get_group_id(0);
    partial[3 * g] = lbig[0];
    partial[3 * g + 1] = lmed[0];
    partial[3 * g + 2] = lsml[0];
  }
}

// isamax ... izamax, as the reference (3.11) scans: the first index whose |re| + |im| is strictly
// greater than every earlier one. A NaN never compares greater, so it is skipped, except in first
// position, where the reference keeps it: that element counts as +infinity at index 0, which no
// later element beats. Per work-group: the best value and its index (ties: the lower index).
__kernel void sol_iamax(const long n, __global const elem* x, __global real* partial_value,
                        __global long* partial_index, __local real* svalue, __local long* sindex) {
  const uint lid = get_local_id(0);
  real best = -1;
  long at = LONG_MAX;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    real v = abs1(x[i]);
    if (i == 0 && isnan(v)) v = INFINITY;
    if (v > best) {
      best = v;
      at = i;
    }
  }
  svalue[lid] = best;
  sindex[lid] = at;
  for (uint stride = get_local_size(0) / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) {
      const real v = svalue[lid + stride];
      const long j = sindex[lid + stride];
      if (v > svalue[lid] || (v == svalue[lid] && j < sindex[lid])) {
        svalue[lid] = v;
        sindex[lid] = j;
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    partial_value[get_group_id(0)] = svalue[0];
    partial_index[get_group_id(0)] = sindex[0];
  }
}

#if defined(SOL_PREC_D)
// sdsdot, dsdot: single-precision vectors, products accumulated in double precision.
__kernel void sol_dsdot(const long n, __global const float* x, __global const float* y, __global double* partial,
                        __local double* scratch) {
  const uint lid = get_local_id(0);
  double sum = 0;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) sum += (double)x[i] * (double)y[i];
  scratch[lid] = sum;
  SOL_REDUCE_SUM(scratch);
  if (lid == 0) partial[get_group_id(0)] = scratch[0];
}
#endif

// ------------------------------------------------------------------------------------ level 2

// Triangular solve op(A) x = b for band (tbsv), packed (tpsv) and full (trsv) storage, in one
// work-group: the columns are sequential, the work within a column parallel. The loops mirror the
// reference's, including its skip of a zero x(j) in the non-transposed case (so a zero pivot
// with a zero right-hand side gives 0, not NaN). One kernel per direction keeps every barrier
// out of conditional code: pocl 3.1 miscompiled one kernel holding both directions behind a
// uniform `if (trans)` (work-items ran loop iterations outside their range).
//   storage  0 full (lda), 1 band (k, lda), 2 packed
inline long tri_at(int storage, int upper, long n, long k, long lda, long i, long j) {
  if (storage == 2) return upper ? i + j * (j + 1) / 2 : i + j * (2 * n - j - 1) / 2;
  if (storage == 1) return upper ? (k + i - j) + j * lda : (i - j) + j * lda;
  return i + j * lda;
}

// x := inv(A) x, column by column: upper from the last column, lower from the first.
__kernel void sol_tsv_n(const long n, const long k, __global const elem* a, const long lda, __global elem* x,
                        const int storage, const int upper, const int unit) {
  __local elem pivot;
  __local int skip;
  const uint lid = get_local_id(0);
  const uint size = get_local_size(0);
  for (long step = 0; step < n; ++step) {
    const long j = upper ? n - 1 - step : step;
    const long lo = upper ? (j > k ? j - k : 0) : j + 1;  // the off-diagonal rows of column j
    const long hi = upper ? j - 1 : (j + k < n - 1 ? j + k : n - 1);
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);  // x(j) final, last step's pivot read
    // One work-item solves x(j) and hands it to the others through local memory.
    if (lid == 0) {
      elem xj = x[j];
      skip = is_zero(xj);
      if (!skip && !unit) {
        xj = divide(xj, a[tri_at(storage, upper, n, k, lda, j, j)]);
        x[j] = xj;
      }
      pivot = xj;
    }
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (!skip) {
      const elem xj = pivot;
      for (long i = lo + lid; i <= hi; i += size) x[i] -= mul(xj, a[tri_at(storage, upper, n, k, lda, i, j)]);
    }
  }
}

// x := inv(op(A)) x for op = transpose (conj 0) or conjugate transpose (conj 1), one dot product
// per column: upper from the first column, lower from the last. `scratch`: one elem per work-item.
__kernel void sol_tsv_t(const long n, const long k, __global const elem* a, const long lda, __global elem* x,
                        const int storage, const int upper, const int unit, const int conj, __local elem* scratch) {
  const uint lid = get_local_id(0);
  const uint size = get_local_size(0);
  for (long step = 0; step < n; ++step) {
    const long j = upper ? step : n - 1 - step;
    const long lo = upper ? (j > k ? j - k : 0) : j + 1;
    const long hi = upper ? j - 1 : (j + k < n - 1 ? j + k : n - 1);
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);  // x(lo..hi) final
    elem sum = 0;
    for (long i = lo + lid; i <= hi; i += size) {
      const elem aij = a[tri_at(storage, upper, n, k, lda, i, j)];
      sum += mul(conj ? conjugate(aij) : aij, x[i]);
    }
    scratch[lid] = sum;
    SOL_REDUCE_SUM(scratch);
    if (lid == 0) {
      elem t = x[j] - scratch[0];
      if (!unit) {
        const elem ajj = a[tri_at(storage, upper, n, k, lda, j, j)];
        t = divide(t, conj ? conjugate(ajj) : ajj);
      }
      x[j] = t;
    }
  }
}
