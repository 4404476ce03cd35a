/* Every way a program may touch the result of a GEMM that a lazy device backend has not computed
 * yet, or the inputs it keeps on the device. Each case prints one line: its name and a digest of
 * what the program saw. The inputs are small integers, so every backend computes the same exact
 * results and the lines of a run under libsol (eager or lazy, any backend) equal those of a run
 * without it.
 *
 *   lazy_torture n [case...]      (no case: all of them)
 *
 * The matrices are n x n floats, allocated one by one with malloc, so that above SOL's serving
 * threshold each has pages of its own (capture/lazy/served.hpp); `shared` and `mmap` put operands
 * where SOL cannot guard them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
            const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);

static int n;
static size_t bytes;

static void gemm(const float* a, const float* b, float beta, float* c) {
  const float one = 1;
  sgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &beta, c, &n, 1, 1);
}

/* FNV-1a over the bytes: equal digests, equal results. */
static uint64_t digest(const void* p, size_t len) {
  const unsigned char* s = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; ++i) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

static float* matrix(int seed) {
  float* m = malloc(bytes);
  if (!m) exit(3);
  for (int i = 0; i < n * n; ++i) m[i] = (float)((i * 7 + seed) % 5) - 2;
  return m;
}

/* Small entries so that products stay exact in single precision: each of A, B in [-2, 2] and a
 * chain of three keeps every sum below 2^24 for n up to 512. */
static float* identityish(int seed) {
  float* m = calloc((size_t)n * n, sizeof(float));
  if (!m) exit(3);
  for (int i = 0; i < n; ++i) m[(size_t)i * n + i] = 1;
  m[(size_t)(seed % n) * n] = 1;
  return m;
}

static void report(const char* name, uint64_t h) {
  printf("%-10s %016llx\n", name, (unsigned long long)h);
  fflush(stdout);
}

/* A chain: each result feeds the next GEMM and the host reads only the last. */
static void case_chain(void) {
  float *a = matrix(1), *p = identityish(3), *c = matrix(0), *d = matrix(0), *e = matrix(0);
  gemm(a, p, 0, c);
  gemm(c, p, 0, d);
  gemm(d, p, 0, e);
  gemm(e, p, 1, c); /* beta = 1: C read and written */
  report("chain", digest(c, bytes) ^ digest(e, bytes));
  free(a), free(p), free(c), free(d), free(e);
}

/* The host changes an input the device holds, then the same GEMM runs again: it must see the
 * change. And reads an input (read-only pages) while the result is pending. */
static void case_inputs(void) {
  float *a = matrix(2), *b = matrix(3), *c = matrix(0);
  gemm(a, b, 0, c);
  float first = a[5]; /* a read of an input: no flush needed */
  a[5] += 1;          /* a write: the device's copy of A is stale now */
  gemm(a, b, 0, c);
  report("inputs", digest(c, bytes) ^ (uint64_t)(first * 16));
  free(a), free(b), free(c);
}

/* Several matrices in one allocation, with a counter on a page shared with C. */
static void case_shared(void) {
  char* block = malloc(3 * bytes + 64);
  float *a = (float*)block, *b = (float*)(block + bytes), *c = (float*)(block + 2 * bytes);
  int* counter = (int*)(block + 3 * bytes);
  memcpy(a, matrix(4), bytes);
  memcpy(b, matrix(5), bytes);
  *counter = 0;
  for (int i = 0; i < 3; ++i) {
    gemm(a, b, i ? 1 : 0, c);
    ++*counter;
  }
  report("shared", digest(c, bytes) + (uint64_t)*counter);
  free(block);
}

/* System calls given pending memory: the kernel must find it readable (write, pwritev, send)
 * and writable (read, pread, recv). */
static void case_syscalls(void) {
  float *a = matrix(6), *b = matrix(7), *c = matrix(0), *d = matrix(0);
  char path[] = "/tmp/lazy_torture_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) exit(4);
  unlink(path);
  gemm(a, b, 0, c);
  if (write(fd, c, bytes) != (ssize_t)bytes) printf("write: %s\n", strerror(errno));
  gemm(a, b, 0, d);
  /* Reading into a pending output: the GEMM's result is overwritten by the file's bytes. */
  if (pread(fd, d, bytes, 0) != (ssize_t)bytes) printf("pread: %s\n", strerror(errno));
  uint64_t h = digest(d, bytes);
  gemm(a, b, 0, c);
  struct iovec iov[2] = {{c, bytes / 2}, {(char*)c + bytes / 2, bytes / 2}};
  if (pwritev(fd, iov, 2, (off_t)bytes) != (ssize_t)bytes) printf("pwritev: %s\n", strerror(errno));
  gemm(b, a, 0, d);
  if (lseek(fd, (off_t)bytes, SEEK_SET) < 0 || read(fd, d, bytes) != (ssize_t)bytes) printf("read: %s\n", strerror(errno));
  h ^= digest(d, bytes) * 3;
  close(fd);
  /* A socket pair: send a pending result, receive into another pending one. */
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) exit(5);
  size_t chunk = bytes < 65536 ? bytes : 65536; /* within the socket's buffer */
  gemm(a, a, 0, c);
  gemm(b, b, 0, d);
  if (send(sv[0], c, chunk, 0) != (ssize_t)chunk) printf("send: %s\n", strerror(errno));
  if (recv(sv[1], d, chunk, MSG_WAITALL) != (ssize_t)chunk) printf("recv: %s\n", strerror(errno));
  h ^= digest(d, bytes) * 5;
  close(sv[0]), close(sv[1]);
  report("syscalls", h);
  free(a), free(b), free(c), free(d);
}

/* A pending output freed before it is read, its memory reused at once; a pending output
 * reallocated (grown and shrunk). */
static void case_allocator(void) {
  float *a = matrix(8), *b = matrix(9), *c = matrix(0);
  gemm(a, b, 0, c);
  free(c); /* never read: the result is discarded, nothing may land in the next block */
  float* reused = matrix(10);
  uint64_t h = digest(reused, bytes);
  float* d = matrix(0);
  gemm(a, b, 0, d);
  d = realloc(d, 2 * bytes);
  memset((char*)d + bytes, 0, bytes);
  h ^= digest(d, 2 * bytes) * 3;
  gemm(a, b, 0, d);
  d = realloc(d, bytes / 2);
  h ^= digest(d, bytes / 2) * 5;
  report("allocator", h);
  free(a), free(b), free(d), free(reused);
}

/* The program's own SIGSEGV handler, for its own faults, while results are pending. */
static sigjmp_buf g_jump;
static volatile sig_atomic_t g_own_faults;
static void own_handler(int sig) {
  (void)sig;
  ++g_own_faults;
  siglongjmp(g_jump, 1);
}
static void case_signals(void) {
  struct sigaction sa = {0}, old;
  sa.sa_handler = own_handler;
  sigaction(SIGSEGV, &sa, &old);
  char* trap = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  /* volatile: live across sigsetjmp, which may return twice */
  float* volatile a = matrix(11);
  float* volatile b = matrix(12);
  float* volatile c = matrix(0);
  gemm(a, b, 0, c);
  for (int i = 0; i < 3; ++i)
    if (sigsetjmp(g_jump, 1) == 0) *(volatile char*)trap = 1; /* the program's own fault */
  gemm(c, b, 0, a);                                          /* pending still */
  uint64_t h = digest(a, bytes) + (uint64_t)g_own_faults;   /* SOL's fault, handled by SOL */
  sigaction(SIGSEGV, &old, NULL);
  munmap(trap, 4096);
  report("signals", h);
  free(a), free(b), free(c);
}

/* Threads: each submits its own chain while another reads its results. */
struct work {
  float *a, *b, *c;
  uint64_t h;
};
static void* worker(void* p) {
  struct work* w = p;
  for (int i = 0; i < 4; ++i) {
    gemm(w->a, w->b, i ? 1 : 0, w->c);
    w->h ^= digest(w->c, 64) * (uint64_t)(i + 1); /* a read of a pending page, every round */
  }
  return NULL;
}
static void case_threads(void) {
  struct work w[3];
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = (struct work){matrix(13 + i), matrix(17 + i), matrix(0), 0};
    pthread_create(&t[i], NULL, worker, &w[i]);
  }
  uint64_t h = 0;
  for (int i = 0; i < 3; ++i) {
    pthread_join(t[i], NULL);
    h ^= (digest(w[i].c, bytes) + w[i].h) * (uint64_t)(2 * i + 1);
    free(w[i].a), free(w[i].b), free(w[i].c);
  }
  report("threads", h);
}

/* fork with results pending: the child reads them, the parent too. */
static void case_fork(void) {
  float *a = matrix(20), *b = matrix(21), *c = matrix(0);
  gemm(a, b, 0, c);
  int fds[2];
  if (pipe(fds) != 0) exit(6);
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t h = digest(c, bytes);
    gemm(c, b, 0, a); /* the child computes too */
    h ^= digest(a, bytes);
    if (write(fds[1], &h, sizeof h) != sizeof h) _exit(1);
    _exit(0);
  }
  uint64_t child = 0;
  if (read(fds[0], &child, sizeof child) != sizeof child) child = 0;
  waitpid(pid, NULL, 0);
  close(fds[0]), close(fds[1]);
  uint64_t h = digest(c, bytes);
  gemm(c, b, 0, a);
  h ^= digest(a, bytes);
  report("fork", h ^ (child * 3));
  free(a), free(b), free(c);
}

/* The program's own mmap'd memory as an operand, and mprotect/madvise of a pending block. */
static void case_mapped(void) {
  float* m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  float *a = matrix(22), *b = matrix(23), *c = matrix(0);
  gemm(a, b, 0, m);
  uint64_t h = digest(m, bytes);
  gemm(a, b, 0, c);
  mprotect(c, bytes, PROT_READ); /* the program's own protection of a pending output */
  h ^= digest(c, bytes) * 3;
  mprotect(c, bytes, PROT_READ | PROT_WRITE);
  c[0] += 1;
  gemm(b, a, 0, c);
  madvise(c, bytes, MADV_DONTNEED); /* pending results dropped by the program: zeros for malloc'd
                                       anonymous pages, or its data for glibc's heap: not digested */
  c[1] = 5;
  gemm(a, b, 0, c);
  h ^= digest(c, bytes) * 5;
  munmap(m, bytes);
  report("mapped", h);
  free(a), free(b), free(c);
}

/* Signals arriving every 100 us while results are pending, computed and written back (a signal
 * during a flush): the copies and waits retry, nothing is lost. The handler touches no operand. */
static volatile sig_atomic_t g_ticks;
static void tick(int sig) {
  (void)sig;
  ++g_ticks;
}
static void case_interrupts(void) {
  struct sigaction sa = {0}, old;
  sa.sa_handler = tick;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, &old);
  struct itimerval every = {{0, 100}, {0, 100}}, off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &every, NULL);
  float *a = matrix(26), *p = identityish(5), *c = matrix(0), *d = matrix(0);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) {
    gemm(a, p, 0, c);
    gemm(c, p, 0, d);
    h = h * 31 + digest(d, bytes); /* a fault, a flush, a write-back: under a rain of signals */
  }
  setitimer(ITIMER_REAL, &off, NULL);
  sigaction(SIGALRM, &old, NULL);
  report("interrupts", h);
  free(a), free(p), free(c), free(d);
}

/* Results still pending when the program exits. */
static void case_exit(void) {
  float *a = matrix(24), *b = matrix(25), *c = matrix(0);
  gemm(a, b, 0, c);
  gemm(c, b, 0, a);
  report("exit", 0);
  exit(0);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  n = atoi(argv[1]);
  bytes = (size_t)n * n * sizeof(float);
  static const struct {
    const char* name;
    void (*run)(void);
  } cases[] = {{"chain", case_chain},       {"inputs", case_inputs},   {"shared", case_shared},
               {"syscalls", case_syscalls}, {"allocator", case_allocator}, {"signals", case_signals},
               {"threads", case_threads},   {"fork", case_fork},       {"mapped", case_mapped}, {"interrupts", case_interrupts},
               {"exit", case_exit}};
  const int count = sizeof cases / sizeof cases[0];
  for (int i = 0; i < count; ++i) {
    int wanted = argc == 2;
    for (int j = 2; j < argc; ++j) wanted |= strcmp(argv[j], cases[i].name) == 0;
    if (wanted) cases[i].run();
  }
  return 0;
}
