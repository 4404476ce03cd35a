/* A small CNN through oneDNN's C API, forward and backward, every primitive executed once on
 * deterministic data: convolution (with a ReLU post-op, and one on oneDNN's blocked layouts with
 * its reorders), max and average pooling, tanh, batch normalization (inference and training, and
 * its backward pass), inner product, softmax, their backward passes, a deconvolution, binary,
 * sum and concat. Prints one line per output tensor: "<name> n=<elements> sum=<sum>
 * abs=<sum of |x|>", then "primitives=<executions>".
 *
 * scripts/gpu/cuda_backend.sh runs it natively and under libsol with SOL_BACKEND=cuda and compares
 * the lines: the same program, its primitives on the GPU (cuDNN).
 *
 *   dnnl_cnn [batch]     (default 4) */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                \
  do {                                                                             \
    dnnl_status_t s_ = (call);                                                     \
    if (s_ != dnnl_success) {                                                      \
      fprintf(stderr, "dnnl_cnn:%d: %s: status %d\n", __LINE__, #call, (int)s_);   \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static int executions;

/* A tensor: its descriptor, its buffer (ours), its memory object. */
typedef struct {
  dnnl_memory_desc_t md;
  float* data;
  dnnl_memory_t mem;
} tensor;

static tensor make_md(const dnnl_memory_desc_t* md) {
  tensor t;
  t.md = *md;
  t.data = calloc(dnnl_memory_desc_get_size(md) / sizeof(float) + 1, sizeof(float));
  CHECK(dnnl_memory_create(&t.mem, &t.md, engine, t.data));
  return t;
}

static tensor make(int ndims, const dnnl_dim_t* dims, dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  CHECK(dnnl_memory_desc_init_by_tag(&md, ndims, dims, dnnl_f32, tag));
  return make_md(&md);
}

/* Values in [-1, 1) (or (0.5, 1.5) with `positive`) from a hash of the position and a seed. */
static void fill(tensor* t, unsigned seed, int positive) {
  const size_t n = dnnl_memory_desc_get_size(&t->md) / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 40503u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    const float u = (float)(h & 0xffffff) / 16777216.f;
    t->data[i] = positive ? 0.5f + u : 2.f * u - 1.f;
  }
}

static void print(const char* name, const tensor* t) {
  const size_t n = dnnl_memory_desc_get_size(&t->md) / sizeof(float);
  double sum = 0, abs_sum = 0;
  for (size_t i = 0; i < n; ++i) sum += t->data[i], abs_sum += fabs(t->data[i]);
  printf("%s n=%zu sum=%.9g abs=%.9g\n", name, n, sum, abs_sum);
}

/* Creates the primitive of `pd`, executes it on the arguments (pairs of DNNL_ARG_*, tensor*), and
 * destroys both. */
static void run(dnnl_primitive_desc_t pd, int nargs, ...) {
  dnnl_exec_arg_t args[16];
  va_list ap;
  va_start(ap, nargs);
  for (int i = 0; i < nargs; ++i) {
    args[i].arg = va_arg(ap, int);
    args[i].memory = va_arg(ap, tensor*)->mem;
  }
  va_end(ap);
  dnnl_primitive_t p;
  CHECK(dnnl_primitive_create(&p, pd));
  CHECK(dnnl_primitive_execute(p, stream, nargs, args));
  CHECK(dnnl_stream_wait(stream));
  dnnl_primitive_destroy(p);
  dnnl_primitive_desc_destroy(pd);
  ++executions;
}

static dnnl_primitive_desc_t pd_of(const void* op, const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint) {
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, op, attr, engine, hint));
  return pd;
}

static void reorder(tensor* from, tensor* to) {
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_reorder_primitive_desc_create(&pd, &from->md, engine, &to->md, engine, NULL));
  run(pd, 2, DNNL_ARG_FROM, from, DNNL_ARG_TO, to);
}

static const dnnl_memory_desc_t* query(dnnl_primitive_desc_t pd, int arg) {
  return dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
}

int main(int argc, char** argv) {
  const dnnl_dim_t N = argc > 1 ? atoi(argv[1]) : 4;
  CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
  const dnnl_dims_t s1 = {1, 1}, s2 = {2, 2}, p1 = {1, 1}, p0 = {0, 0}, k2 = {2, 2}, d0 = {0, 0};

  /* conv1: 3 -> 8 channels, 3x3, padding 1, bias, ReLU post-op (training: the backward pass). */
  const dnnl_dims_t xd = {N, 3, 16, 16}, w1d = {8, 3, 3, 3}, b1d = {8}, c1d = {N, 8, 16, 16};
  tensor x = make(4, xd, dnnl_nchw), w1 = make(4, w1d, dnnl_oihw), b1 = make(1, b1d, dnnl_x),
         c1 = make(4, c1d, dnnl_nchw);
  fill(&x, 1, 0), fill(&w1, 2, 0), fill(&b1, 3, 0);
  dnnl_convolution_desc_t cd;
  CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &x.md, &w1.md, &b1.md,
                                           &c1.md, s1, p1, p1));
  dnnl_primitive_attr_t relu_attr;
  dnnl_post_ops_t po;
  CHECK(dnnl_primitive_attr_create(&relu_attr));
  CHECK(dnnl_post_ops_create(&po));
  CHECK(dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f));
  CHECK(dnnl_primitive_attr_set_post_ops(relu_attr, po));
  run(pd_of(&cd, relu_attr, NULL), 4, DNNL_ARG_SRC, &x, DNNL_ARG_WEIGHTS, &w1, DNNL_ARG_BIAS, &b1, DNNL_ARG_DST, &c1);
  print("conv1_relu", &c1);

  /* pool1: max 2x2, stride 2, inference. */
  const dnnl_dims_t p1d = {N, 8, 8, 8};
  tensor q1 = make(4, p1d, dnnl_nchw);
  dnnl_pooling_v2_desc_t pool;
  CHECK(dnnl_pooling_v2_forward_desc_init(&pool, dnnl_forward_inference, dnnl_pooling_max, &c1.md, &q1.md, s2, k2, d0,
                                          p0, p0));
  run(pd_of(&pool, NULL, NULL), 2, DNNL_ARG_SRC, &c1, DNNL_ARG_DST, &q1);
  print("pool1_max", &q1);

  /* conv2 on oneDNN's own layouts: 8 -> 16 channels, reorders in and out. */
  const dnnl_dims_t w2d = {16, 8, 3, 3}, b2d = {16}, c2d = {N, 16, 8, 8};
  tensor w2 = make(4, w2d, dnnl_oihw), b2 = make(1, b2d, dnnl_x), c2 = make(4, c2d, dnnl_nchw);
  fill(&w2, 4, 0), fill(&b2, 5, 0);
  {
    dnnl_memory_desc_t sa, wa, da;
    CHECK(dnnl_memory_desc_init_by_tag(&sa, 4, p1d, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wa, 4, w2d, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&da, 4, c2d, dnnl_f32, dnnl_format_tag_any));
    dnnl_convolution_desc_t c;
    CHECK(dnnl_convolution_forward_desc_init(&c, dnnl_forward_inference, dnnl_convolution_direct, &sa, &wa, &b2.md, &da,
                                             s1, p1, p1));
    dnnl_primitive_desc_t pd = pd_of(&c, NULL, NULL);
    tensor src = make_md(query(pd, DNNL_ARG_SRC)), wei = make_md(query(pd, DNNL_ARG_WEIGHTS)),
           dst = make_md(query(pd, DNNL_ARG_DST));
    reorder(&q1, &src);
    reorder(&w2, &wei);
    run(pd, 4, DNNL_ARG_SRC, &src, DNNL_ARG_WEIGHTS, &wei, DNNL_ARG_BIAS, &b2, DNNL_ARG_DST, &dst);
    reorder(&dst, &c2);
  }
  print("conv2_blocked", &c2);

  /* tanh, then batch normalization with given statistics, then average pooling. */
  tensor t2 = make(4, c2d, dnnl_nchw);
  dnnl_eltwise_desc_t el;
  CHECK(dnnl_eltwise_forward_desc_init(&el, dnnl_forward_training, dnnl_eltwise_tanh, &c2.md, 0.f, 0.f));
  run(pd_of(&el, NULL, NULL), 2, DNNL_ARG_SRC, &c2, DNNL_ARG_DST, &t2);
  print("tanh", &t2);

  const dnnl_dims_t chd = {16};
  tensor mean = make(1, chd, dnnl_x), var = make(1, chd, dnnl_x), gamma = make(1, chd, dnnl_x),
         beta = make(1, chd, dnnl_x), n2 = make(4, c2d, dnnl_nchw);
  fill(&mean, 6, 0), fill(&var, 7, 1), fill(&gamma, 8, 1), fill(&beta, 9, 0);
  dnnl_batch_normalization_desc_t bn;
  CHECK(dnnl_batch_normalization_forward_desc_init(&bn, dnnl_forward_inference, &t2.md, 1e-5f,
                                                   dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift));
  run(pd_of(&bn, NULL, NULL), 6, DNNL_ARG_SRC, &t2, DNNL_ARG_MEAN, &mean, DNNL_ARG_VARIANCE, &var, DNNL_ARG_SCALE,
      &gamma, DNNL_ARG_SHIFT, &beta, DNNL_ARG_DST, &n2);
  print("bnorm_inference", &n2);

  const dnnl_dims_t q2d = {N, 16, 4, 4};
  tensor q2 = make(4, q2d, dnnl_nchw);
  dnnl_pooling_v2_desc_t avg, avg_b;
  CHECK(dnnl_pooling_v2_forward_desc_init(&avg, dnnl_forward_training, dnnl_pooling_avg_exclude_padding, &n2.md, &q2.md,
                                          s2, k2, d0, p0, p0));
  run(pd_of(&avg, NULL, NULL), 2, DNNL_ARG_SRC, &n2, DNNL_ARG_DST, &q2);
  print("pool2_avg", &q2);

  /* Inner product to 10 classes, softmax. */
  const dnnl_dims_t wfd = {10, 16, 4, 4}, bfd = {10}, yd = {N, 10};
  tensor wf = make(4, wfd, dnnl_oihw), bf = make(1, bfd, dnnl_x), y = make(2, yd, dnnl_nc), sm = make(2, yd, dnnl_nc);
  fill(&wf, 10, 0), fill(&bf, 11, 0);
  dnnl_inner_product_desc_t ip, ip_bd, ip_bw;
  CHECK(dnnl_inner_product_forward_desc_init(&ip, dnnl_forward_training, &q2.md, &wf.md, &bf.md, &y.md));
  run(pd_of(&ip, NULL, NULL), 4, DNNL_ARG_SRC, &q2, DNNL_ARG_WEIGHTS, &wf, DNNL_ARG_BIAS, &bf, DNNL_ARG_DST, &y);
  print("inner_product", &y);
  dnnl_softmax_desc_t sd, sd_b;
  CHECK(dnnl_softmax_forward_desc_init(&sd, dnnl_forward_training, &y.md, 1));
  run(pd_of(&sd, NULL, NULL), 2, DNNL_ARG_SRC, &y, DNNL_ARG_DST, &sm);
  print("softmax", &sm);

  /* Backward: softmax, inner product (data and weights), average pooling, tanh, conv2 (weights and
   * data, plain layouts), the ReLU of conv1. */
  tensor g = make(2, yd, dnnl_nc), dy = make(2, yd, dnnl_nc);
  fill(&g, 12, 0);
  CHECK(dnnl_softmax_backward_desc_init(&sd_b, &dy.md, &sm.md, 1));
  run(pd_of(&sd_b, NULL, pd_of(&sd, NULL, NULL)), 3, DNNL_ARG_DST, &sm, DNNL_ARG_DIFF_DST, &g, DNNL_ARG_DIFF_SRC, &dy);
  print("softmax_bwd", &dy);

  tensor dq2 = make(4, q2d, dnnl_nchw), dwf = make(4, wfd, dnnl_oihw), dbf = make(1, bfd, dnnl_x);
  CHECK(dnnl_inner_product_backward_data_desc_init(&ip_bd, &dq2.md, &wf.md, &dy.md));
  run(pd_of(&ip_bd, NULL, pd_of(&ip, NULL, NULL)), 3, DNNL_ARG_DIFF_DST, &dy, DNNL_ARG_WEIGHTS, &wf, DNNL_ARG_DIFF_SRC,
      &dq2);
  print("inner_product_bwd_data", &dq2);
  CHECK(dnnl_inner_product_backward_weights_desc_init(&ip_bw, &q2.md, &dwf.md, &dbf.md, &dy.md));
  run(pd_of(&ip_bw, NULL, pd_of(&ip, NULL, NULL)), 4, DNNL_ARG_SRC, &q2, DNNL_ARG_DIFF_DST, &dy, DNNL_ARG_DIFF_WEIGHTS,
      &dwf, DNNL_ARG_DIFF_BIAS, &dbf);
  print("inner_product_bwd_weights", &dwf);
  print("inner_product_bwd_bias", &dbf);

  tensor dn2 = make(4, c2d, dnnl_nchw);
  CHECK(dnnl_pooling_v2_backward_desc_init(&avg_b, dnnl_pooling_avg_exclude_padding, &dn2.md, &dq2.md, s2, k2, d0, p0,
                                           p0));
  run(pd_of(&avg_b, NULL, pd_of(&avg, NULL, NULL)), 2, DNNL_ARG_DIFF_DST, &dq2, DNNL_ARG_DIFF_SRC, &dn2);
  print("pool2_avg_bwd", &dn2);

  tensor dc2 = make(4, c2d, dnnl_nchw);
  dnnl_eltwise_desc_t el_b;
  CHECK(dnnl_eltwise_backward_desc_init(&el_b, dnnl_eltwise_tanh, &dn2.md, &c2.md, 0.f, 0.f));
  run(pd_of(&el_b, NULL, pd_of(&el, NULL, NULL)), 3, DNNL_ARG_SRC, &c2, DNNL_ARG_DIFF_DST, &dn2, DNNL_ARG_DIFF_SRC,
      &dc2);
  print("tanh_bwd", &dc2);

  tensor dw2 = make(4, w2d, dnnl_oihw), db2 = make(1, b2d, dnnl_x), dq1 = make(4, p1d, dnnl_nchw);
  dnnl_convolution_desc_t c2f, c2bw, c2bd;
  CHECK(dnnl_convolution_forward_desc_init(&c2f, dnnl_forward_training, dnnl_convolution_direct, &q1.md, &w2.md, &b2.md,
                                           &c2.md, s1, p1, p1));
  CHECK(dnnl_convolution_backward_weights_desc_init(&c2bw, dnnl_convolution_direct, &q1.md, &dw2.md, &db2.md, &dc2.md,
                                                    s1, p1, p1));
  run(pd_of(&c2bw, NULL, pd_of(&c2f, NULL, NULL)), 4, DNNL_ARG_SRC, &q1, DNNL_ARG_DIFF_DST, &dc2,
      DNNL_ARG_DIFF_WEIGHTS, &dw2, DNNL_ARG_DIFF_BIAS, &db2);
  print("conv2_bwd_weights", &dw2);
  print("conv2_bwd_bias", &db2);
  CHECK(dnnl_convolution_backward_data_desc_init(&c2bd, dnnl_convolution_direct, &dq1.md, &w2.md, &dc2.md, s1, p1, p1));
  run(pd_of(&c2bd, NULL, pd_of(&c2f, NULL, NULL)), 3, DNNL_ARG_DIFF_DST, &dc2, DNNL_ARG_WEIGHTS, &w2,
      DNNL_ARG_DIFF_SRC, &dq1);
  print("conv2_bwd_data", &dq1);

  tensor gc1 = make(4, c1d, dnnl_nchw), dc1 = make(4, c1d, dnnl_nchw);
  fill(&gc1, 13, 0);
  dnnl_eltwise_desc_t relu_f;
  CHECK(dnnl_eltwise_forward_desc_init(&relu_f, dnnl_forward_training, dnnl_eltwise_relu, &c1.md, 0.f, 0.f));
  {
    /* The ReLU's backward pass over conv1's output before its ReLU: recomputed without post-op. */
    tensor pre = make(4, c1d, dnnl_nchw);
    CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &x.md, &w1.md,
                                             &b1.md, &pre.md, s1, p1, p1));
    run(pd_of(&cd, NULL, NULL), 4, DNNL_ARG_SRC, &x, DNNL_ARG_WEIGHTS, &w1, DNNL_ARG_BIAS, &b1, DNNL_ARG_DST, &pre);
    print("conv1", &pre);
    dnnl_eltwise_desc_t rb;
    CHECK(dnnl_eltwise_backward_desc_init(&rb, dnnl_eltwise_relu, &gc1.md, &pre.md, 0.f, 0.f));
    run(pd_of(&rb, NULL, pd_of(&relu_f, NULL, NULL)), 3, DNNL_ARG_SRC, &pre, DNNL_ARG_DIFF_DST, &gc1,
        DNNL_ARG_DIFF_SRC, &dc1);
    print("relu_bwd", &dc1);

    /* Batch normalization with batch statistics, and its backward pass. */
    const dnnl_dims_t c8 = {8};
    tensor bm = make(1, c8, dnnl_x), bv = make(1, c8, dnnl_x), bg = make(1, c8, dnnl_x), bb = make(1, c8, dnnl_x),
           bo = make(4, c1d, dnnl_nchw), dbi = make(4, c1d, dnnl_nchw), dg = make(1, c8, dnnl_x),
           dbb = make(1, c8, dnnl_x);
    fill(&bg, 14, 1), fill(&bb, 15, 0);
    dnnl_batch_normalization_desc_t tr, trb;
    const unsigned flags = dnnl_use_scale | dnnl_use_shift;
    CHECK(dnnl_batch_normalization_forward_desc_init(&tr, dnnl_forward_training, &pre.md, 1e-5f, flags));
    run(pd_of(&tr, NULL, NULL), 6, DNNL_ARG_SRC, &pre, DNNL_ARG_SCALE, &bg, DNNL_ARG_SHIFT, &bb, DNNL_ARG_DST, &bo,
        DNNL_ARG_MEAN, &bm, DNNL_ARG_VARIANCE, &bv);
    print("bnorm_training", &bo);
    print("bnorm_mean", &bm);
    print("bnorm_variance", &bv);
    CHECK(dnnl_batch_normalization_backward_desc_init(&trb, dnnl_backward, &gc1.md, &pre.md, 1e-5f, flags));
    run(pd_of(&trb, NULL, pd_of(&tr, NULL, NULL)), 9, DNNL_ARG_SRC, &pre, DNNL_ARG_SHIFT, &bb, DNNL_ARG_MEAN, &bm, DNNL_ARG_VARIANCE, &bv,
        DNNL_ARG_DIFF_DST, &gc1, DNNL_ARG_SCALE, &bg, DNNL_ARG_DIFF_SRC, &dbi, DNNL_ARG_DIFF_SCALE, &dg,
        DNNL_ARG_DIFF_SHIFT, &dbb);
    print("bnorm_bwd", &dbi);
    print("bnorm_bwd_scale", &dg);
    print("bnorm_bwd_shift", &dbb);
  }

  /* conv1's backward data pass; a deconvolution back to 16x16; binary, sum and concat. */
  tensor dx = make(4, xd, dnnl_nchw);
  dnnl_convolution_desc_t c1bd;
  CHECK(dnnl_convolution_backward_data_desc_init(&c1bd, dnnl_convolution_direct, &dx.md, &w1.md, &dc1.md, s1, p1, p1));
  run(pd_of(&c1bd, NULL, pd_of(&cd, NULL, NULL)), 3, DNNL_ARG_DIFF_DST, &dc1, DNNL_ARG_WEIGHTS, &w1, DNNL_ARG_DIFF_SRC,
      &dx);
  print("conv1_bwd_data", &dx);

  const dnnl_dims_t wdd = {4, 8, 2, 2}, upd = {N, 4, 16, 16};
  tensor wd = make(4, wdd, dnnl_oihw), up = make(4, upd, dnnl_nchw);
  fill(&wd, 16, 0);
  dnnl_deconvolution_desc_t dd;
  CHECK(dnnl_deconvolution_forward_desc_init(&dd, dnnl_forward_inference, dnnl_deconvolution_direct, &q1.md, &wd.md,
                                             NULL, &up.md, s2, p0, p0));
  run(pd_of(&dd, NULL, NULL), 3, DNNL_ARG_SRC, &q1, DNNL_ARG_WEIGHTS, &wd, DNNL_ARG_DST, &up);
  print("deconv", &up);

  const dnnl_dims_t bcd = {1, 16, 1, 1}, cat_d = {N, 32, 8, 8};
  tensor bc = make(4, bcd, dnnl_nchw), badd = make(4, c2d, dnnl_nchw), sum = make(4, c2d, dnnl_nchw),
         cat_ = make(4, cat_d, dnnl_nchw);
  fill(&bc, 17, 0);
  dnnl_binary_desc_t bd;
  CHECK(dnnl_binary_desc_init(&bd, dnnl_binary_add, &c2.md, &bc.md, &badd.md));
  run(pd_of(&bd, NULL, NULL), 3, DNNL_ARG_SRC_0, &c2, DNNL_ARG_SRC_1, &bc, DNNL_ARG_DST, &badd);
  print("binary_add", &badd);
  {
    const float scales[] = {0.5f, 2.f};
    const dnnl_memory_desc_t srcs[] = {c2.md, t2.md};
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_sum_primitive_desc_create(&pd, &sum.md, 2, scales, srcs, NULL, engine));
    run(pd, 3, DNNL_ARG_MULTIPLE_SRC, &c2, DNNL_ARG_MULTIPLE_SRC + 1, &t2, DNNL_ARG_DST, &sum);
    print("sum", &sum);
    CHECK(dnnl_concat_primitive_desc_create(&pd, &cat_.md, 2, 1, srcs, NULL, engine));
    run(pd, 3, DNNL_ARG_MULTIPLE_SRC, &c2, DNNL_ARG_MULTIPLE_SRC + 1, &t2, DNNL_ARG_DST, &cat_);
    print("concat", &cat_);
  }
  printf("primitives=%d\n", executions);
  return 0;
}
