/* A stand-in for the CUDA runtime's event calls, preloaded with libsol so that the device time of
 * CUDA library calls (interpose/cuda/device_time.cpp) can be tested without a GPU. An event
 * "completes" when recorded: it holds the host's monotonic clock at cudaEventRecord, so the
 * "device time" of a call is the host time between its two events, which contains the call.
 *
 *   FAKE_CUDART_NEVER_READY=1  cudaEventQuery always says cudaErrorNotReady: nothing is read
 *                              before the process's end, which must wait (cudaEventSynchronize)
 *   FAKE_CUDART_CAPTURING=1    every stream is being captured into a CUDA graph
 *
 * At exit it prints to stderr how many events were created and synchronized. Only the functions
 * SOL calls are defined, with cuda_runtime_api.h's types reduced to their ABI (int for enums,
 * opaque pointers). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct fake_event {
  long long t_ns;
  int recorded;
};

static int created, synchronized;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int cudaGetDevice(int* device) {
  *device = 0;
  return 0;
}

int cudaStreamIsCapturing(void* stream, int* status) {
  (void)stream;
  *status = getenv("FAKE_CUDART_CAPTURING") ? 1 : 0; /* cudaStreamCaptureStatusActive : None */
  return 0;
}

int cudaEventCreateWithFlags(struct fake_event** event, unsigned flags) {
  (void)flags;
  *event = calloc(1, sizeof **event);
  if (!*event) return 2; /* cudaErrorMemoryAllocation */
  ++created;
  return 0;
}

int cudaEventRecord(struct fake_event* event, void* stream) {
  (void)stream;
  event->t_ns = now_ns();
  event->recorded = 1;
  return 0;
}

int cudaEventQuery(struct fake_event* event) {
  if (!event->recorded || getenv("FAKE_CUDART_NEVER_READY")) return 600; /* cudaErrorNotReady */
  return 0;
}

int cudaEventSynchronize(struct fake_event* event) {
  ++synchronized;
  return event->recorded ? 0 : 400; /* cudaErrorInvalidResourceHandle */
}

int cudaEventElapsedTime(float* ms, struct fake_event* start, struct fake_event* end) {
  if (!start->recorded || !end->recorded) return 600;
  *ms = (float)((double)(end->t_ns - start->t_ns) / 1e6);
  return 0;
}

int cudaEventDestroy(struct fake_event* event) {
  free(event);
  return 0;
}

__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "fake_cudart: %d events created, %d synchronized\n", created, synchronized);
}
