/* Makes libdw look uninstalled: a preload library whose dlopen fails for libdw.so.1, as on a
 * machine without Debian's libdw1, and is libc's for every other file. The trace tests use it to
 * check the fallback to dladdr's names (capture/trace/symbolize.cpp). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

void* dlopen(const char* file, int mode) {
  static void* (*libc_dlopen)(const char*, int);
  if (!libc_dlopen) libc_dlopen = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
  if (file && strcmp(file, "libdw.so.1") == 0) return NULL;
  return libc_dlopen(file, mode);
}
