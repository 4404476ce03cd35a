/* GEMMs for a device backend's transfer accounting: `calls` sgemm calls of m x n x k, the first
 * with beta = 0 (C is not read), the others with beta = 1. With "fork", the process forks after
 * its first call; the child makes the remaining calls and the parent one more. With "wait=MS", it
 * sleeps MS milliseconds before its first call (a program's start-up, for the device's); with
 * "fork-at=MS", it forks MS milliseconds after it started, before any call, and both processes
 * make every call. With "paced=MS", it writes "device_gemms: call I returned" to stderr after each
 * call and sleeps MS milliseconds (a program that calls now and then, whose calls a device's
 * start-up must not hold up). With "until=PATH", it waits until PATH exists (for at most two
 * minutes) before its first call, as with "wait=MS"; after "paced=MS", the paced calls go on until
 * PATH exists, and then `calls` more. A test that creates PATH once a device is up then sees the
 * start-up done before the first call, or calls on both sides of it, however long it took; the
 * process writes "device_gemms: N calls" to stderr. Prints C's sum.
 *
 *   device_gemms m n k calls [fork | wait=MS | fork-at=MS | paced=MS] [until=PATH] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether `path` exists, or two minutes have passed since the first ask. */
static int arrived(const char* path, int step_ms) {
  static int waited_ms = 0;
  struct stat st;
  waited_ms += step_ms;
  return stat(path, &st) == 0 || waited_ms > 120000;
}

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  const int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), calls = atoi(argv[4]);
  const int forks = argc > 5 && strcmp(argv[5], "fork") == 0;
  const int paced = argc > 5 && strncmp(argv[5], "paced=", 6) == 0 ? atoi(argv[5] + 6) : -1;
  const char* until = NULL;
  for (int i = 5; i < argc; ++i)
    if (strncmp(argv[i], "until=", 6) == 0) until = argv[i] + 6;
  pid_t child = -1;
  if (argc > 5 && strncmp(argv[5], "wait=", 5) == 0) usleep(1000 * atoi(argv[5] + 5));
  if (argc > 5 && strncmp(argv[5], "fork-at=", 8) == 0) {
    usleep(1000 * atoi(argv[5] + 8));
    child = fork();
    if (child < 0) return 1;
  }
  float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc((size_t)m * n * 4);
  for (int i = 0; i < m * k; ++i) a[i] = (float)(i % 5) / 5;
  for (int i = 0; i < k * n; ++i) b[i] = (float)(i % 3) / 3;
  const float one = 1, zero = 0;
  if (until && paced < 0)
    while (!arrived(until, 10)) usleep(10000);
  int end = until && paced >= 0 ? -1 : calls; /* -1: until PATH exists */
  for (int i = 0; end < 0 || i < end; ++i) {
    if (end < 0 && arrived(until, paced > 0 ? paced : 0)) end = i + calls;
    sgemm_("N", "N", &m, &n, &k, &one, a, &m, b, &k, i ? &one : &zero, c, &m, 1, 1);
    if (paced >= 0) {
      fprintf(stderr, "device_gemms: call %d returned\n", i);
      usleep(1000 * paced);
    }
    if (forks && i == 0) {
      child = fork();
      if (child > 0) {  /* the parent: one more call, then wait */
        sgemm_("N", "N", &m, &n, &k, &one, a, &m, b, &k, &one, c, &m, 1, 1);
        break;
      }
    }
  }
  if (child > 0) waitpid(child, NULL, 0);
  if (until) fprintf(stderr, "device_gemms: %d calls\n", end);
  double sum = 0;
  for (int i = 0; i < m * n; ++i) sum += c[i];
  printf("%s sum %.1f\n", child == 0 ? "child" : "process", sum);
  fflush(stdout);
  return 0;
}
