/* oneDNN memory objects and the trace's dataflow graph: what counts is the buffer, not the object.
 * Each case has its own sizes, so that every execution is a signature of its own in graph.dot.
 *
 *   destroy:  a reorder writes a buffer oneDNN allocated (DNNL_MEMORY_ALLOCATE) for a memory
 *             object; the object is destroyed, which frees the buffer; a new object gets the same
 *             address; plain C writes it; a ReLU reads it (512x64).                      No edge.
 *   handle:   the same (384x64), but the object is given another data handle, which frees the
 *             buffer it owned.                                                           No edge.
 *   chain:    a reorder writes an allocated buffer, a ReLU reads it (12x64).   The edge: 3.0 KiB.
 *   user:     a reorder writes the program's own buffer through a memory object; the object is
 *             destroyed, the buffer is not; a new object on it is read by a ReLU (4x64).
 *                                                                               The edge: 1.0 KiB.
 *
 * Prints whether oneDNN's buffers came back at the same address ("reused destroy=1 handle=1").
 * Where a freed heap block is handed out again depends on its neighbours and on what else was
 * allocated meanwhile (libsol's own bookkeeping included), and glibc's posix_memalign asks for
 * more than the size, so an equal request does not even fit the block it freed. So the buffers of
 * the two reuse cases are mapped blocks: above a fixed threshold, with the top of the heap kept
 * too small to serve them, glibc maps each such block, and the kernel hands the range an
 * unmapping left to the next mapping of that size. */
#include <malloc.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                \
  do {                                                             \
    dnnl_status_t s_ = (call);                                     \
    if (s_ != dnnl_success) {                                      \
      fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)s_); \
      exit(1);                                                     \
    }                                                              \
  } while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static dnnl_memory_desc_t desc(int rows) {
  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {rows, 64};
  CHECK(dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab));
  return md;
}

static dnnl_memory_t memory(const dnnl_memory_desc_t* md, void* handle) {
  dnnl_memory_t m;
  CHECK(dnnl_memory_create(&m, md, engine, handle));
  return m;
}

static void* handle(dnnl_memory_t m) {
  void* p;
  CHECK(dnnl_memory_get_data_handle(m, &p));
  return p;
}

static void run(dnnl_primitive_desc_t pd, dnnl_memory_t src, dnnl_memory_t dst) {
  dnnl_primitive_t p;
  CHECK(dnnl_primitive_create(&p, pd));
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  CHECK(dnnl_primitive_execute(p, stream, 2, args));
  CHECK(dnnl_stream_wait(stream));
  CHECK(dnnl_primitive_destroy(p));
  CHECK(dnnl_primitive_desc_destroy(pd));
}

static void reorder(const dnnl_memory_desc_t* md, dnnl_memory_t src, dnnl_memory_t dst) {
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_reorder_primitive_desc_create(&pd, md, engine, md, engine, NULL));
  run(pd, src, dst);
}

static void relu(const dnnl_memory_desc_t* md, dnnl_memory_t src, dnnl_memory_t dst) {
  dnnl_eltwise_desc_t d;
  CHECK(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, dnnl_eltwise_relu, md, 0, 0));
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, &d, NULL, engine, NULL));
  run(pd, src, dst);
}

static void write_c(void* p, int rows) {
  float* f = p;
  for (int i = 0; i < rows * 64; ++i) f[i] = (float)(i % 9) - 4;
}

static double sum(void* p, int rows) {
  double s = 0;
  for (int i = 0; i < rows * 64; ++i) s += ((float*)p)[i];
  return s;
}

int main(void) {
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);  /* fixed: glibc would raise it at the first free */
  mallopt(M_TRIM_THRESHOLD, 0);
  mallopt(M_TOP_PAD, 0);
  CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
  float* in = malloc(512 * 64 * sizeof(float));
  float* out = malloc(512 * 64 * sizeof(float));
  write_c(in, 512);
  double check = 0;

  /* destroy */
  dnnl_memory_desc_t md = desc(512);
  dnnl_memory_t m_in = memory(&md, in), m_out = memory(&md, out);
  dnnl_memory_t own = memory(&md, DNNL_MEMORY_ALLOCATE);
  reorder(&md, m_in, own);
  const void* old_destroy = handle(own);
  CHECK(dnnl_memory_destroy(own));
  dnnl_memory_t again = memory(&md, DNNL_MEMORY_ALLOCATE);
  const int reused_destroy = handle(again) == old_destroy;
  write_c(handle(again), 512);
  relu(&md, again, m_out);
  check += sum(out, 512);
  CHECK(dnnl_memory_destroy(again));
  CHECK(dnnl_memory_destroy(m_in));
  CHECK(dnnl_memory_destroy(m_out));

  /* handle */
  md = desc(384);
  float* elsewhere = malloc(384 * 64 * sizeof(float));
  m_in = memory(&md, in);
  m_out = memory(&md, out);
  own = memory(&md, DNNL_MEMORY_ALLOCATE);
  reorder(&md, m_in, own);
  const void* old_handle = handle(own);
  CHECK(dnnl_memory_set_data_handle(own, elsewhere));
  again = memory(&md, DNNL_MEMORY_ALLOCATE);
  const int reused_handle = handle(again) == old_handle;
  write_c(handle(again), 384);
  relu(&md, again, m_out);
  check += sum(out, 384);
  CHECK(dnnl_memory_destroy(again));
  CHECK(dnnl_memory_destroy(own));
  CHECK(dnnl_memory_destroy(m_in));
  CHECK(dnnl_memory_destroy(m_out));

  /* chain */
  md = desc(12);
  m_in = memory(&md, in);
  m_out = memory(&md, out);
  own = memory(&md, DNNL_MEMORY_ALLOCATE);
  reorder(&md, m_in, own);
  relu(&md, own, m_out);
  check += sum(out, 12);
  CHECK(dnnl_memory_destroy(own));
  CHECK(dnnl_memory_destroy(m_in));
  CHECK(dnnl_memory_destroy(m_out));

  /* user */
  md = desc(4);
  float* mine = malloc(4 * 64 * sizeof(float));
  m_in = memory(&md, in);
  m_out = memory(&md, out);
  dnnl_memory_t view = memory(&md, mine);
  reorder(&md, m_in, view);
  CHECK(dnnl_memory_destroy(view));
  view = memory(&md, mine);
  relu(&md, view, m_out);
  check += sum(out, 4);
  CHECK(dnnl_memory_destroy(view));
  CHECK(dnnl_memory_destroy(m_in));
  CHECK(dnnl_memory_destroy(m_out));

  printf("reused destroy=%d handle=%d\n", reused_destroy, reused_handle);
  printf("checksum %.1f\n", check);
  CHECK(dnnl_stream_destroy(stream));
  CHECK(dnnl_engine_destroy(engine));
  return 0;
}
