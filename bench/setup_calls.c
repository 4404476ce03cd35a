/* A stream of oneDNN set-up calls, as PyTorch makes them around each primitive (an engine, a
 * memory descriptor and object, primitive attributes, each created and destroyed): 97 % of the
 * calls of the example CNN, and most of what tracing it costs.
 *   bench_setup_calls N     makes N rounds of 6 calls and prints the time per call */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static float buf[64 * 16 * 8 * 8];

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? atol(argv[1]) : 100000;
  const dnnl_dims_t dims = {64, 16, 8, 8};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < rounds; ++i) {
    dnnl_engine_t engine;
    dnnl_memory_desc_t md;
    dnnl_memory_t memory;
    dnnl_primitive_attr_t attr;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_create(&memory, &md, engine, buf) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success) {
      fprintf(stderr, "bench_setup_calls: a oneDNN call failed\n");
      return 1;
    }
    dnnl_primitive_attr_destroy(attr);
    dnnl_memory_destroy(memory);
    dnnl_engine_destroy(engine);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.3f ns/call\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (rounds * 6.0));
  return 0;
}
