/* The malloc family at work on every path that SOL's served blocks change (capture/lazy/served.hpp,
 * interpose/alloc_hooks.cpp): small and large blocks from malloc, calloc, realloc (growing,
 * shrinking, across any threshold), posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * reallocarray, given back with free, their sizes from malloc_usable_size; from several threads at
 * once, and across fork. Every block's contents are checked whenever they must have been kept.
 *
 *   served_alloc [--expect-served BYTES]   prints checksums that do not depend on the allocator
 *   served_alloc dataflow                  the trace's dataflow over a large block freed and reused
 *
 * With --expect-served, every allocation of at least BYTES (with an alignment up to a page) must
 * be page-aligned with a usable size in whole pages: what SOL serves, and what glibc never hands out
 * for such sizes (its mapped chunks start 16 bytes into a page). Exits 1 with a line on stderr at
 * the first check that fails. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t g_expect = 0; /* 0: no expectation about where blocks come from */
static long g_page = 4096;
static int g_served_seen = 0;

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "served_alloc: %s:%d: ", __func__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                            \
      fputc('\n', stderr);                                     \
      exit(1);                                                 \
    }                                                          \
  } while (0)

/* Not const void*: GCC takes a const pointer to a fresh block for a read of its contents
 * (-Wmaybe-uninitialized), which this never does. */
static void expect_block(void* p, size_t n, const char* how) {
  CHECK(p != NULL || n == 0, "%s(%zu) failed", how, n);
  if (!p) return;
  CHECK(malloc_usable_size(p) >= n, "%s(%zu): usable size %zu", how, n, malloc_usable_size(p));
  if (!g_expect || n < g_expect) return;
  const int aligned = (uintptr_t)p % (uintptr_t)g_page == 0 && malloc_usable_size(p) % (size_t)g_page == 0;
  CHECK(aligned, "%s(%zu) = %p, usable %zu: not a served block", how, n, p, malloc_usable_size(p));
  g_served_seen = 1;
}

/* Contents that depend on the block's identity, word by word (i a multiple of 8): a mix-up of two
 * blocks shows. */
static uint64_t pattern(uint32_t id, size_t i) {
  return ((uint64_t)id * 0x9e3779b97f4a7c15ull) ^ (i * 0xff51afd7ed558ccdull);
}
static unsigned char pattern_byte(uint32_t id, size_t i) { /* byte i of the pattern, little-endian */
  return (unsigned char)(pattern(id, i & ~(size_t)7) >> (8 * (i & 7)));
}
static void fill(unsigned char* p, size_t n, uint32_t id) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t w = pattern(id, i);
    memcpy(p + i, &w, 8);
  }
  for (; i < n; ++i) p[i] = pattern_byte(id, i);
}
static int holds(const unsigned char* p, size_t n, uint32_t id) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    if (w != pattern(id, i)) return 0;
  }
  for (; i < n; ++i)
    if (p[i] != pattern_byte(id, i)) return 0;
  return 1;
}
static int zero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return 0;
  return 1;
}
static uint64_t digest(const unsigned char* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i += 61) h = (h ^ p[i]) * 1099511628211ull;
  return h ^ n;
}

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Small, near any threshold, large. */
static size_t pick_size(uint64_t* s) {
  switch (rng_next(s) % 6) {
    case 0: return 1 + rng_next(s) % 512;
    case 1: return 512 + rng_next(s) % 60000;
    case 2: return 65536 - 64 + rng_next(s) % 128;
    case 3: return 65536 + rng_next(s) % (1 << 20);
    case 4: return (1 << 20) + rng_next(s) % (2 << 20);
    default: return 4096 * (1 + rng_next(s) % 64);
  }
}

/* Random operations on 48 slots; returns a digest of everything it checked. */
static uint64_t churn(uint64_t seed, int steps) {
  enum { kSlots = 48 };
  unsigned char* p[kSlots] = {0};
  size_t n[kSlots] = {0};
  uint32_t id[kSlots] = {0};
  uint64_t s = seed, h = 1469598103934665603ull;
  for (int step = 0; step < steps; ++step) {
    const int k = (int)(rng_next(&s) % kSlots);
    const size_t size = pick_size(&s);
    const uint32_t fresh = (uint32_t)(seed * 1000003u + (uint64_t)step);
    if (p[k]) CHECK(holds(p[k], n[k], id[k]), "slot %d (%zu bytes) lost its contents", k, n[k]);
    switch (rng_next(&s) % 5) {
      case 0: /* free, then malloc */
        free(p[k]);
        p[k] = malloc(size);
        expect_block(p[k], size, "malloc");
        break;
      case 1: /* free, then calloc */
        free(p[k]);
        p[k] = calloc(size / 8 + 1, 8);
        expect_block(p[k], size / 8 * 8 + 8, "calloc");
        CHECK(zero(p[k], size / 8 * 8 + 8), "calloc(%zu) not zero", size);
        n[k] = size / 8 * 8 + 8;
        fill(p[k], n[k], id[k] = fresh);
        h = digest(p[k], n[k], h);
        continue;
      case 2: { /* realloc: the common prefix is kept */
        const size_t keep = n[k] < size ? n[k] : size;
        unsigned char* q = realloc(p[k], size);
        expect_block(q, size, "realloc");
        CHECK(holds(q, keep, id[k]), "realloc(%zu -> %zu) lost the prefix", n[k], size);
        h = digest(q, keep, h);
        p[k] = q;
        break;
      }
      case 3: { /* aligned */
        free(p[k]);
        const size_t align = (size_t)8 << (rng_next(&s) % 10); /* 8 .. 4096 */
        void* q = NULL;
        CHECK(posix_memalign(&q, align, size) == 0, "posix_memalign(%zu, %zu)", align, size);
        CHECK((uintptr_t)q % align == 0, "posix_memalign(%zu): %p", align, q);
        expect_block(q, size, "posix_memalign");
        p[k] = q;
        break;
      }
      default: /* given back */
        free(p[k]);
        p[k] = NULL;
        n[k] = 0;
        continue;
    }
    n[k] = size;
    fill(p[k], size, id[k] = fresh);
    h = digest(p[k], size, h);
  }
  for (int k = 0; k < kSlots; ++k) {
    if (p[k]) CHECK(holds(p[k], n[k], id[k]), "slot %d lost its contents at the end", k);
    free(p[k]);
  }
  return h;
}

/* Each entry point once, with the sizes that matter. */
static void entry_points(void) {
  const uint32_t id = 7;
  unsigned char* a = malloc(1000);
  expect_block(a, 1000, "malloc");
  fill(a, 1000, id);
  a = realloc(a, 300000); /* small to large: copied */
  expect_block(a, 300000, "realloc");
  CHECK(holds(a, 1000, id), "realloc up across the threshold");
  fill(a, 300000, id);
  a = realloc(a, 5 << 20); /* large to larger */
  expect_block(a, 5 << 20, "realloc");
  CHECK(holds(a, 300000, id), "realloc up");
  fill(a, 5 << 20, id);
  a = realloc(a, 70000); /* large to smaller, still large: in place */
  expect_block(a, 70000, "realloc");
  CHECK(holds(a, 70000, id), "realloc down");
  a = realloc(a, 100); /* large to small: copied */
  expect_block(a, 100, "realloc");
  CHECK(holds(a, 100, id), "realloc down across the threshold");
  a = reallocarray(a, 1000, 1000);
  expect_block(a, 1000000, "reallocarray");
  CHECK(holds(a, 100, id), "reallocarray");
  CHECK(realloc(a, 0) == NULL, "realloc(p, 0) did not free"); /* glibc's, and so SOL's */
  a = realloc(NULL, 200000);
  expect_block(a, 200000, "realloc(NULL)");
  free(a);

  unsigned char* c = calloc(1000, 1000);
  expect_block(c, 1000000, "calloc");
  CHECK(zero(c, 1000000), "calloc");
  volatile size_t huge = SIZE_MAX / 2; /* volatile: the compiler would warn of the overflow */
  CHECK(calloc(huge, 4) == NULL, "calloc overflow");
  free(c);

  void* q = NULL;
  CHECK(posix_memalign(&q, 64, 1 << 20) == 0 && (uintptr_t)q % 64 == 0, "posix_memalign 64");
  expect_block(q, 1 << 20, "posix_memalign");
  free(q);
  CHECK(posix_memalign(&q, (size_t)g_page * 4, 1 << 20) == 0 && (uintptr_t)q % ((uintptr_t)g_page * 4) == 0,
        "posix_memalign above a page");
  CHECK(malloc_usable_size(q) >= 1 << 20, "posix_memalign above a page: usable size");
  free(q);
  CHECK(posix_memalign(&q, 24, 1 << 20) == 22 /* EINVAL */, "posix_memalign with an invalid alignment");

  void* b = aligned_alloc(256, 3 << 20);
  CHECK((uintptr_t)b % 256 == 0, "aligned_alloc");
  expect_block(b, 3 << 20, "aligned_alloc");
  free(b);
  b = memalign(128, 90000);
  CHECK((uintptr_t)b % 128 == 0, "memalign");
  expect_block(b, 90000, "memalign");
  free(b);
  b = valloc(100000);
  CHECK((uintptr_t)b % (uintptr_t)g_page == 0, "valloc");
  expect_block(b, 100000, "valloc");
  free(b);
  b = pvalloc(70001);
  CHECK((uintptr_t)b % (uintptr_t)g_page == 0 && malloc_usable_size(b) >= 70001, "pvalloc");
  expect_block(b, 70001, "pvalloc");
  free(b);
  free(NULL);
  CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
}

static void* thread_main(void* arg) {
  static uint64_t results[8];
  const int t = (int)(intptr_t)arg;
  results[t] = churn(1000 + (uint64_t)t, 300);
  return &results[t];
}

static uint64_t threads(void) {
  pthread_t th[8];
  for (int t = 0; t < 8; ++t) CHECK(pthread_create(&th[t], NULL, thread_main, (void*)(intptr_t)t) == 0, "thread");
  uint64_t h = 0;
  for (int t = 0; t < 8; ++t) {
    void* r;
    pthread_join(th[t], &r);
    h = h * 31 + *(uint64_t*)r;
  }
  return h;
}

/* A child forked while other threads allocate: it finds its parent's blocks, allocates and frees
 * on its own, and its writes stay its own. */
static volatile int g_stop = 0;
static void* busy(void* arg) {
  uint64_t s = (uint64_t)(intptr_t)arg;
  while (!g_stop) {
    void* p = malloc(pick_size(&s));
    free(p);
  }
  return NULL;
}

static void forks(void) {
  const size_t size = 2 << 20;
  unsigned char* kept = malloc(size);
  expect_block(kept, size, "malloc");
  fill(kept, size, 99);
  pthread_t th[3];
  for (int t = 0; t < 3; ++t) pthread_create(&th[t], NULL, busy, (void*)(intptr_t)(t + 5));
  for (int i = 0; i < 10; ++i) {
    fflush(NULL);
    const pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
      alarm(60);
      if (!holds(kept, size, 99)) _exit(2);
      kept = realloc(kept, 3 * size);
      if (!kept || !holds(kept, size, 99)) _exit(3);
      fill(kept, 3 * size, 100);
      churn(77 + (uint64_t)i, 200);
      free(kept);
      _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork %d: child status %d", i, status);
  }
  g_stop = 1;
  for (int t = 0; t < 3; ++t) pthread_join(th[t], NULL);
  CHECK(holds(kept, size, 99), "the parent's block changed with its children");
  free(kept);
}

/* sgemm_ writes a large block, which is freed and handed out again at the same address (SOL keeps
 * a few given-back blocks as they are); plain C writes it and sgemm_ reads it: no dataflow edge,
 * unless the free was missed. A second large block written by one sgemm_ and read by another: the
 * one edge. */
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*, size_t, size_t);

static void gemm(int m, int n, int k, const float* a, const float* b, float* c) {
  const float one = 1, zero_ = 0;
  sgemm_("N", "N", &m, &n, &k, &one, a, &m, b, &k, &zero_, c, &m, 1, 1);
}

static float* floats(size_t n, float v) {
  float* p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) p[i] = v + (float)(i % 7);
  return p;
}

static int dataflow(void) {
  double check = 0;
  float* a = floats(256 * 4, 1), *b = floats(4 * 256, 2);
  float* block = malloc(256 * 256 * sizeof(float));
  gemm(256, 256, 4, a, b, block);
  for (int i = 0; i < 256 * 256; i += 97) check += block[i];
  const uintptr_t old = (uintptr_t)block;
  free(block);
  float* again = malloc(256 * 256 * sizeof(float));
  const int reused = (uintptr_t)again == old;
  for (int i = 0; i < 256 * 256; ++i) again[i] = (float)(i % 5);
  float* b2 = floats(256 * 8, 3), *c2 = malloc(256 * 8 * sizeof(float));
  gemm(256, 8, 256, again, b2, c2);
  for (int i = 0; i < 256 * 8; ++i) check += c2[i];

  float* t = malloc(128 * 128 * sizeof(float));
  float* a3 = floats(128 * 4, 1), *b3 = floats(4 * 128, 2);
  gemm(128, 128, 4, a3, b3, t);
  float* a4 = floats(6 * 128, 3), *c4 = malloc(6 * 128 * sizeof(float));
  gemm(6, 128, 128, a4, t, c4);
  for (int i = 0; i < 6 * 128; ++i) check += c4[i];
  printf("reused=%d\nchecksum %.1f\n", reused, check);
  return 0;
}

int main(int argc, char** argv) {
  g_page = sysconf(_SC_PAGESIZE);
  if (argc > 1 && strcmp(argv[1], "dataflow") == 0) return dataflow();
  if (argc > 2 && strcmp(argv[1], "--expect-served") == 0) g_expect = strtoull(argv[2], NULL, 10);
  entry_points();
  printf("single %016llx\n", (unsigned long long)churn(1, 2000));
  printf("threads %016llx\n", (unsigned long long)threads());
  forks();
  CHECK(!g_expect || g_served_seen, "nothing was served");
  printf("ok\n");
  return 0;
}
