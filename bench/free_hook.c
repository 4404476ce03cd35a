/* Cost of libsol's allocation hooks (interpose/alloc_hooks.cpp): small malloc/free pairs whose free
 * is libsol's, and pairs whose malloc and free are both libsol's, against the same pairs from libc,
 * in one process and one run.
 *
 *   bench_free_hook /path/to/libsol.so [pairs per round] [--traced]
 *
 * The program re-executes itself with LD_PRELOAD=libsol.so. Its own malloc and free then bind to
 * libsol's, while dlopen(libc.so.6, RTLD_NOLOAD) + dlsym yields libc's. All are called through
 * function pointers, in alternating rounds; the minimum time per round is kept, the statistic least
 * disturbed by a shared, noisy machine. libc's pair is timed twice per round: the difference
 * between its two figures is the noise floor of the libsol figures. Without --traced nothing
 * observes frees and nothing is served: each hook's cost is a test or two and a jump. With
 * --traced (SOL_TRACE=1) the trace's dataflow observes frees: each also asks malloc_usable_size and
 * finds that the block holds nothing the dataflow knows. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*free_fn)(void*);
typedef void* (*malloc_fn)(size_t);

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One copy of the loop for every variant: inlined copies would differ in alignment, which on
 * its own moves a 15 ns loop by several ns. */
__attribute__((noinline)) static double time_pairs(malloc_fn m, free_fn f, long pairs) {
  const double t0 = now_ns();
  for (long i = 0; i < pairs; ++i) {
    void* volatile p = m(48 + (i & 7) * 16);  // a few tcache bins, as a program's frees are
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
    fprintf(stderr, "usage: %s /path/to/libsol.so [pairs per round] [--traced]\n", argv[0]);
    return 2;
  }
  const int traced = argc > 2 && strcmp(argv[argc - 1], "--traced") == 0;
  char trace_dir[] = "/tmp/sol-bench-free-XXXXXX";
  if (!getenv("BENCH_PRELOADED")) {
    setenv("LD_PRELOAD", argv[1], 1);
    setenv("BENCH_PRELOADED", "1", 1);
    unsetenv("SOL_TRACE");
    if (traced) {
      /* Tracing writes files only at a process's first traced call, and this one makes none. */
      if (!mkdtemp(trace_dir)) {
        perror("mkdtemp");
        return 1;
      }
      setenv("SOL_TRACE", "1", 1);
      setenv("SOL_TRACE_DIR", trace_dir, 1);
    }
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  if (getenv("SOL_TRACE_DIR")) rmdir(getenv("SOL_TRACE_DIR"));
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  free_fn libc_free = libc ? (free_fn)dlsym(libc, "free") : NULL;
  malloc_fn libc_malloc = libc ? (malloc_fn)dlsym(libc, "malloc") : NULL;
  free_fn sol_free = (free_fn)dlsym(RTLD_DEFAULT, "free");
  malloc_fn sol_malloc = (malloc_fn)dlsym(RTLD_DEFAULT, "malloc");
  if (!libc_free || !libc_malloc || !strstr(object_of((void*)sol_free), "libsol")) {
    fprintf(stderr, "bench: free resolves to %s, not libsol; is %s a libsol.so?\n", object_of((void*)sol_free),
            argv[1]);
    return 1;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);  // one core: no migrations inside a round

  const long pairs = argc > 2 && argv[2][0] != '-' ? atol(argv[2]) : 1000000;
  const int rounds = 25;
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  for (int r = 0; r < rounds; ++r) {
    double t;
    if ((t = time_pairs(libc_malloc, libc_free, pairs)) < best[0]) best[0] = t;
    if ((t = time_pairs(libc_malloc, sol_free, pairs)) < best[1]) best[1] = t;
    if ((t = time_pairs(libc_malloc, libc_free, pairs)) < best[2]) best[2] = t;
    if ((t = time_pairs(sol_malloc, sol_free, pairs)) < best[3]) best[3] = t;
  }
  const double libc_ns = best[0] < best[2] ? best[0] : best[2];
  printf("free hook: malloc/free pairs, %s, %d rounds x %ld pairs, min per round\n",
         traced ? "traced (the dataflow observes every free)" : "nothing observes frees", rounds, pairs);
  printf("%-14s %10s %10s %10s %8s %14s\n", "pair", "libc ns", "libsol ns", "added ns", "ratio", "libc vs libc");
  printf("%-14s %10.2f %10.2f %10.2f %8.3f %14.2f\n", "free", libc_ns, best[1], best[1] - libc_ns, best[1] / libc_ns,
         best[2] - best[0]);
  printf("%-14s %10.2f %10.2f %10.2f %8.3f %14.2f\n", "malloc+free", libc_ns, best[3], best[3] - libc_ns,
         best[3] / libc_ns, best[2] - best[0]);
  return 0;
}
