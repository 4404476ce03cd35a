/* The cost the DNN node path adds to a oneDNN primitive that still runs natively: a tiny
 * convolution executed in a loop, timed without libsol and with libsol under a [[route]] rule
 * that names convolutions but does not match this one (so every dnnl_* call goes through the
 * oneDNN frontend: the primitive is described, each execution bound into a DNN node, planned and
 * run natively).
 *
 * usage: bench_dnn_node_path LIBSOL   (re-executes itself with and without LD_PRELOAD)
 * Target: <= 1 us per execution. Prints both times and the difference, best of several rounds. */
#define _GNU_SOURCE
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                   \
  do {                                                             \
    if ((x) != dnnl_success) {                                     \
      fprintf(stderr, "bench_dnn_node_path: %s failed\n", #x);     \
      exit(1);                                                     \
    }                                                              \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* ns per execution of a 1x1x4x4 3x3 convolution, best of `rounds` rounds of `iters`. */
static double measure(int rounds, int iters) {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
  dnnl_memory_desc_t src, wei, dst;
  dnnl_dims_t sd = {1, 1, 4, 4}, wd = {1, 1, 3, 3}, dd = {1, 1, 4, 4};
  CHECK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_nchw));
  CHECK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_oihw));
  CHECK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_nchw));
  dnnl_dims_t strides = {1, 1}, pad = {1, 1};
  dnnl_convolution_desc_t cd;
  CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                           NULL, &dst, strides, pad, pad));
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, &cd, NULL, engine, NULL));
  dnnl_primitive_t conv;
  CHECK(dnnl_primitive_create(&conv, pd));
  dnnl_memory_t ms, mw, md;
  CHECK(dnnl_memory_create(&ms, &src, engine, DNNL_MEMORY_ALLOCATE));
  CHECK(dnnl_memory_create(&mw, &wei, engine, DNNL_MEMORY_ALLOCATE));
  CHECK(dnnl_memory_create(&md, &dst, engine, DNNL_MEMORY_ALLOCATE));
  dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    for (int i = 0; i < iters; ++i) CHECK(dnnl_primitive_execute(conv, stream, 3, args));
    double t = (now() - t0) / iters * 1e9;
    if (t < best) best = t;
  }
  dnnl_primitive_destroy(conv);
  dnnl_primitive_desc_destroy(pd);
  return best;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) {
    printf("%.1f\n", measure(7, 20000));
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBSOL\n", argv[0]);
    return 2;
  }
  char cfg[] = "/tmp/sol-bench-dnn-XXXXXX";
  int fd = mkstemp(cfg);
  const char* rule = "backend = \"native\"\n[[route]]\nop = \"convolution\"\nbackend = \"reference\"\nmin_flops = 1e15\n";
  if (fd < 0 || write(fd, rule, strlen(rule)) < 0) return 1;
  close(fd);
  double t[2];
  for (int with = 0; with < 2; ++with) {
    char full[8192];
    snprintf(full, sizeof full, "%s%s%s%s %s --child", with ? "LD_PRELOAD=" : "env -u LD_PRELOAD ",
             with ? argv[1] : "", with ? " SOL_CONFIG=" : "", with ? cfg : "", argv[0]);
    FILE* p = popen(full, "r");
    if (!p || fscanf(p, "%lf", &t[with]) != 1) return 1;
    pclose(p);
  }
  unlink(cfg);
  printf("dnn node path, tiny convolution run natively: %.0f ns without libsol, %.0f ns with, %+.0f ns per "
         "execution (target <= 1000 ns)\n",
         t[0], t[1], t[1] - t[0]);
  return 0;
}
