/* Cost per call of a tiny BLAS call through libsol in native (passthrough) mode, against the same
 * native symbol called directly, in one process and one run; and of a 40x40x40 sgemm_, large
 * enough for auto to measure its class at its first call and route it by that class after (with an
 * optimized native library, a class that stays native: what the routed path costs such a call).
 *
 *   bench_passthrough /path/to/libsol.so [calls]
 *
 * Under SOL_BACKEND=openblas every call of libsol's takes the routed path to a backend instead:
 * the "added ns" column is then that path's cost.
 *
 * Its profile goes to a directory of its own, removed at the end: what it measures is not kept.
 *
 * The program re-executes itself with LD_PRELOAD=libsol.so. Its own sgemm_/saxpy_ then bind to
 * libsol's entry points, while dlopen(libblas.so.3, RTLD_NOLOAD) + dlsym yields the native ones.
 * Both are called through function pointers, in alternating rounds; the minimum time per round is
 * kept, the statistic least disturbed by a shared, noisy machine. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*sgemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*,
                         const float*, const int*, const float*, const int*, const float*, float*, const int*,
                         size_t, size_t);
typedef void (*saxpy_fn)(const int*, const float*, const float*, const int*, float*, const int*);

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4], x[1] = {1}, y[1] = {0};
static const int two = 2, one = 1;
static const float alpha = 1, beta = 0, tiny = 1e-30f;

static double time_sgemm(sgemm_fn f, long calls) {
  const double t0 = now_ns();
  for (long i = 0; i < calls; ++i)
    f("N", "N", &two, &two, &two, &alpha, a, &two, b, &two, &beta, c, &two, 1, 1);
  return (now_ns() - t0) / calls;
}

enum { kRouted = 40 };
static float ra[kRouted * kRouted], rb[kRouted * kRouted], rc[kRouted * kRouted];
static const int routed = kRouted;

static double time_routed(sgemm_fn f, long calls) {
  const double t0 = now_ns();
  for (long i = 0; i < calls; ++i)
    f("N", "N", &routed, &routed, &routed, &alpha, ra, &routed, rb, &routed, &beta, rc, &routed, 1, 1);
  return (now_ns() - t0) / calls;
}

static double time_saxpy(saxpy_fn f, long calls) {
  const double t0 = now_ns();
  for (long i = 0; i < calls; ++i) f(&one, &tiny, x, &one, y, &one);
  return (now_ns() - t0) / calls;
}

static const char* object_of(void* p) {
  Dl_info info;
  return dladdr(p, &info) && info.dli_fname ? info.dli_fname : "?";
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s /path/to/libsol.so [calls per round]\n", argv[0]);
    return 2;
  }
  void* blas = dlopen("libblas.so.3", RTLD_NOW | RTLD_NOLOAD);
  if (!getenv("BENCH_PRELOADED")) {
    char cache[] = "/tmp/sol-bench-passthrough-XXXXXX";
    if (!mkdtemp(cache)) {
      perror("mkdtemp");
      return 1;
    }
    const pid_t child = fork();
    if (child > 0) {
      int status = 1;
      waitpid(child, &status, 0);
      char rm[64];
      snprintf(rm, sizeof rm, "rm -rf %s", cache);
      if (system(rm) != 0) fprintf(stderr, "bench: could not remove %s\n", cache);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("LD_PRELOAD", argv[1], 1);
    setenv("BENCH_PRELOADED", "1", 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  if (!blas) blas = dlopen("libblas.so.3", RTLD_NOW);
  sgemm_fn sol_sgemm = (sgemm_fn)dlsym(RTLD_DEFAULT, "sgemm_");
  saxpy_fn sol_saxpy = (saxpy_fn)dlsym(RTLD_DEFAULT, "saxpy_");
  sgemm_fn nat_sgemm = (sgemm_fn)dlsym(blas, "sgemm_");
  saxpy_fn nat_saxpy = (saxpy_fn)dlsym(blas, "saxpy_");
  if (!strstr(object_of((void*)sol_sgemm), "libsol")) {
    fprintf(stderr, "bench: sgemm_ resolves to %s, not libsol; is %s a libsol.so?\n",
            object_of((void*)sol_sgemm), argv[1]);
    return 1;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);  // one core: no migrations inside a round

  const long calls = argc > 2 ? atol(argv[2]) : 200000;
  const int rounds = 25;
  double best[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
  sol_sgemm("N", "N", &two, &two, &two, &alpha, a, &two, b, &two, &beta, c, &two, 1, 1);  // resolve, warm up
  sol_saxpy(&one, &tiny, x, &one, y, &one);
  for (int i = 0; i < kRouted * kRouted; ++i) ra[i] = (float)(i % 7) / 7, rb[i] = (float)(i % 5) / 5;
  // The routed call's first use measures its class; a trial in use may follow (well under a second).
  for (const double until = now_ns() + 1e9; now_ns() < until;) time_routed(sol_sgemm, 100);
  for (int r = 0; r < rounds; ++r) {
    double t;
    if ((t = time_sgemm(nat_sgemm, calls)) < best[0]) best[0] = t;
    if ((t = time_sgemm(sol_sgemm, calls)) < best[1]) best[1] = t;
    if ((t = time_saxpy(nat_saxpy, calls)) < best[2]) best[2] = t;
    if ((t = time_saxpy(sol_saxpy, calls)) < best[3]) best[3] = t;
    if ((t = time_routed(nat_sgemm, calls / 50)) < best[4]) best[4] = t;
    if ((t = time_routed(sol_sgemm, calls / 50)) < best[5]) best[5] = t;
  }
  const char* mode = getenv("SOL_BACKEND") ? getenv("SOL_BACKEND") : "default";
  printf("passthrough: native %s, libsol %s, SOL_BACKEND=%s, %d rounds x %ld calls, min per round\n",
         object_of((void*)nat_sgemm), argv[1], mode, rounds, calls);
  printf("%-14s %10s %10s %10s %8s\n", "call", "native ns", "libsol ns", "added ns", "ratio");
  printf("%-14s %10.2f %10.2f %10.2f %8.3f\n", "sgemm_ 2x2", best[0], best[1], best[1] - best[0],
         best[1] / best[0]);
  printf("%-14s %10.2f %10.2f %10.2f %8.3f\n", "saxpy_ n=1", best[2], best[3], best[3] - best[2],
         best[3] / best[2]);
  printf("%-14s %10.2f %10.2f %10.2f %8.3f\n", "sgemm_ 40^3", best[4], best[5], best[5] - best[4],
         best[5] / best[4]);
  return 0;
}
