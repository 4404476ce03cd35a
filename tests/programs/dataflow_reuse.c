/* Memory that is given back and handed out again at the same address: the trace's dataflow graph
 * must not link a call that wrote the old block with one that reads the new one. Each case has its
 * own GEMM shapes, so that every call is a signature of its own in graph.dot.
 *
 *   free:    sgemm m=12 n=20 k=16 writes a malloc'd block; free; malloc of the same size; plain C
 *            writes it; sgemm m=12 n=8 k=20 reads it as A.                       No edge.
 *   realloc: sgemm m=10 n=9 k=7 writes a block; realloc moves it away; malloc of the old size;
 *            plain C writes it; sgemm m=10 n=5 k=9 reads it as A.                  No edge.
 *   munmap:  sgemm m=32 n=32 k=4 writes a page of its own (mmap); munmap; mmap again; plain C
 *            writes it; sgemm m=32 n=6 k=32 reads it as A.                        No edge.
 *   chain:   sgemm m=12 n=10 k=16 writes T; sgemm m=6 n=10 k=12 reads T as B.
 *            The one edge: 12x10 f32, 480 B.
 *
 * Prints whether each block came back at the same address ("reused free=1 realloc=1 munmap=1");
 * where one did not, its case shows nothing. The heap blocks are under 1 KiB, which glibc keeps
 * in per-size lists, last freed first out: whatever else is allocated meanwhile (libsol's own
 * bookkeeping included) does not take them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*, size_t, size_t);

static float* filled(size_t n, float v) {
  float* p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) p[i] = v + (float)(i % 7);
  return p;
}

/* C (m x n, column-major, ldc = m) = A (m x k) * B (k x n). */
static void gemm(int m, int n, int k, const float* a, const float* b, float* c) {
  const float one = 1, zero = 0;
  sgemm_("N", "N", &m, &n, &k, &one, a, &m, b, &k, &zero, c, &m, 1, 1);
}

static double sum(const float* p, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

int main(void) {
  double check = 0;

  /* free */
  float* a1 = filled(12 * 16, 1), *b1 = filled(16 * 20, 2);
  float* block = malloc(12 * 20 * sizeof(float));
  gemm(12, 20, 16, a1, b1, block);
  check += sum(block, 12 * 20);
  const uintptr_t old_free = (uintptr_t)block;
  free(block);
  float* again = malloc(12 * 20 * sizeof(float));
  const int reused_free = (uintptr_t)again == old_free;
  for (int i = 0; i < 12 * 20; ++i) again[i] = (float)(i % 5);
  float* b2 = filled(20 * 8, 3), *c2 = malloc(12 * 8 * sizeof(float));
  gemm(12, 8, 20, again, b2, c2);
  check += sum(c2, 12 * 8);

  /* realloc: grown far beyond what fits in place (glibc then maps a new block) */
  float* a3 = filled(10 * 7, 1), *b3 = filled(7 * 9, 2);
  float* moving = malloc(10 * 9 * sizeof(float));
  gemm(10, 9, 7, a3, b3, moving);
  const volatile uintptr_t old_realloc = (uintptr_t)moving;  /* only compared: not a use */
  float* moved = realloc(moving, 1 << 20);
  check += sum(moved, 10 * 9);
  float* back = malloc(10 * 9 * sizeof(float));
  const int reused_realloc = (uintptr_t)moved != old_realloc && (uintptr_t)back == old_realloc;
  for (int i = 0; i < 10 * 9; ++i) back[i] = (float)(i % 3);
  float* b4 = filled(9 * 5, 3), *c4 = malloc(10 * 5 * sizeof(float));
  gemm(10, 5, 9, back, b4, c4);
  check += sum(c4, 10 * 5);

  /* munmap */
  const size_t len = 32 * 32 * sizeof(float);
  float* a5 = filled(32 * 4, 1), *b5 = filled(4 * 32, 2);
  float* page = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 1;
  gemm(32, 32, 4, a5, b5, page);
  check += sum(page, 32 * 32);
  const uintptr_t old_map = (uintptr_t)page;
  munmap(page, len);
  float* remapped = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (remapped == MAP_FAILED) return 1;
  const int reused_map = (uintptr_t)remapped == old_map;
  for (int i = 0; i < 32 * 32; ++i) remapped[i] = (float)(i % 4);
  float* b6 = filled(32 * 6, 3), *c6 = malloc(32 * 6 * sizeof(float));
  gemm(32, 6, 32, remapped, b6, c6);
  check += sum(c6, 32 * 6);

  /* chain */
  float* a7 = filled(12 * 16, 1), *b7 = filled(16 * 10, 2), *t = malloc(12 * 10 * sizeof(float));
  gemm(12, 10, 16, a7, b7, t);
  float* a8 = filled(6 * 12, 3), *c8 = malloc(6 * 10 * sizeof(float));
  gemm(6, 10, 12, a8, t, c8);
  check += sum(c8, 6 * 10);

  printf("reused free=%d realloc=%d munmap=%d\n", reused_free, reused_realloc, reused_map);
  printf("checksum %.1f\n", check);
  return 0;
}
