/* Enough calls to fill many trace buffers, from several threads, with a fork in the middle:
 *   trace_volume THREADS CALLS
 * THREADS threads make CALLS sdot_ calls each. While they run, the main thread forks: the child
 * makes CALLS ddot_ calls in its one thread and exits; the parent makes CALLS ddot_ calls of its
 * own, then joins everything. Prints each process's sums, which do not depend on tracing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

float sdot_(const int*, const float*, const int*, const float*, const int*);
double ddot_(const int*, const double*, const int*, const double*, const int*);

static long g_calls;

static void* sdots(void* arg) {
  const int n = 4, inc = 1;
  const float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, (float)(size_t)arg};
  double sum = 0;
  for (long i = 0; i < g_calls; ++i) sum += sdot_(&n, x, &inc, y, &inc);
  return (void*)(size_t)sum;
}

static double ddots(void) {
  const int n = 3, inc = 1;
  const double x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
  double sum = 0;
  for (long i = 0; i < g_calls; ++i) sum += ddot_(&n, x, &inc, y, &inc);
  return sum;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 4;
  g_calls = argc > 2 ? atol(argv[2]) : 20000;
  pthread_t t[64];
  if (threads < 1 || threads > 64) return 2;
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, sdots, (void*)(size_t)i);
  const double before = ddots();  // the trace's writer runs by now: the fork finds it busy
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    printf("child ddot %.0f\n", ddots());
    exit(0);
  }
  const double after = ddots();
  size_t sdot = 0;
  for (int i = 0; i < threads; ++i) {
    void* r;
    pthread_join(t[i], &r);
    sdot += (size_t)r;
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("parent ddot %.0f sdot %zu\n", before + after, sdot);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
