/* Cost of SOL's served blocks (capture/lazy/served.hpp): malloc + free pairs of large blocks served
 * from SOL's pages, against the same pairs from glibc, in one process and one run.
 *
 *   bench_served_alloc /path/to/libsol.so [rounds]
 *
 * The program re-executes itself with LD_PRELOAD=libsol.so and SOL_TEST_SERVE_FROM=65536. Its own
 * malloc and free then bind to libsol's, which serve every block of 64 KiB and more, while
 * dlopen(libc.so.6, RTLD_NOLOAD) + dlsym yields glibc's. Both are called through function pointers,
 * in alternating rounds; the minimum time per round is kept, the statistic least disturbed by a
 * shared, noisy machine.
 *
 * Each size is timed untouched (malloc, free) and touched (one byte written per page in between, as
 * a program that fills its buffer does). glibc's steady state for these sizes is its heap: its
 * dynamic mmap threshold rises to the size of a mapped block freed, so from the second pair on the
 * block is reused with its pages in place. Served blocks up to 64 MiB are kept in SOL's small cache
 * when freed, so they are reused in place as well; a larger one is remapped when freed, and every
 * page of the next one faults when first written, as glibc's own mapped blocks (above 32 MiB) do. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void* (*malloc_fn)(size_t);
typedef void (*free_fn)(void*);

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static long g_page = 4096;

/* One copy of the loop for every variant (inlined copies would differ in alignment). */
__attribute__((noinline)) static double time_pairs(malloc_fn m, free_fn f, size_t bytes, int touch, int pairs) {
  const double t0 = now_ns();
  for (int i = 0; i < pairs; ++i) {
    char* volatile p = m(bytes);
    if (touch)
      for (size_t off = 0; off < bytes; off += (size_t)g_page) p[off] = (char)off;
    f(p);
  }
  return (now_ns() - t0) / pairs;
}

static const char* object_of(void* p) {
  Dl_info info;
  return dladdr(p, &info) && info.dli_fname ? info.dli_fname : "?";
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s /path/to/libsol.so [rounds]\n", argv[0]);
    return 2;
  }
  if (!getenv("BENCH_PRELOADED")) {
    setenv("LD_PRELOAD", argv[1], 1);
    setenv("BENCH_PRELOADED", "1", 1);
    setenv("SOL_TEST_SERVE_FROM", "65536", 1);
    unsetenv("SOL_TRACE");
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  g_page = sysconf(_SC_PAGESIZE);
  const int rounds = argc > 2 ? atoi(argv[2]) : 15;
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  malloc_fn libc_malloc = libc ? (malloc_fn)dlsym(libc, "malloc") : NULL;
  free_fn libc_free = libc ? (free_fn)dlsym(libc, "free") : NULL;
  malloc_fn sol_malloc = (malloc_fn)dlsym(RTLD_DEFAULT, "malloc");
  free_fn sol_free = (free_fn)dlsym(RTLD_DEFAULT, "free");
  if (!libc_malloc || !libc_free || !strstr(object_of((void*)sol_malloc), "libsol")) {
    fprintf(stderr, "bench: malloc resolves to %s, not libsol; is %s a libsol.so?\n", object_of((void*)sol_malloc),
            argv[1]);
    return 1;
  }
  void* probe = sol_malloc(1 << 20);
  const int served = (uintptr_t)probe % (uintptr_t)g_page == 0;
  sol_free(probe);
  if (!served) {
    fprintf(stderr, "bench: libsol does not serve 1 MiB blocks (SOL_TEST_SERVE_FROM ignored?)\n");
    return 1;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(sched_getcpu(), &set);
  sched_setaffinity(0, sizeof set, &set);

  static const struct {
    size_t bytes;
    int pairs;
  } sizes[] = {{1 << 20, 200}, {16 << 20, 20}, {96 << 20, 3}};
  printf("malloc + free, ns per pair (min of %d rounds); served: SOL_TEST_SERVE_FROM=65536\n", rounds);
  printf("%-8s %-9s %12s %12s %7s\n", "size", "pages", "glibc", "served", "ratio");
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    for (int touch = 0; touch < 2; ++touch) {
      const size_t bytes = sizes[s].bytes;
      const int pairs = sizes[s].pairs;
      time_pairs(libc_malloc, libc_free, bytes, touch, pairs); /* warm-up: glibc's threshold, SOL's cache */
      time_pairs(sol_malloc, sol_free, bytes, touch, pairs);
      double best_libc = 1e300, best_sol = 1e300;
      for (int r = 0; r < rounds; ++r) {
        const double a = time_pairs(libc_malloc, libc_free, bytes, touch, pairs);
        const double b = time_pairs(sol_malloc, sol_free, bytes, touch, pairs);
        if (a < best_libc) best_libc = a;
        if (b < best_sol) best_sol = b;
      }
      printf("%4zu MiB %-9s %12.0f %12.0f %6.2fx\n", bytes >> 20, touch ? "touched" : "untouched", best_libc,
             best_sol, best_sol / best_libc);
    }
  }
  return 0;
}
