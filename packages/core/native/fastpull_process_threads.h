// Threads an addon starts for the whole process (the file writers, the parallel gunzip's decoders):
// detached, living as long as the process, so the addon that holds their code must stay loaded too.
#ifndef FASTPULL_PROCESS_THREADS_H
#define FASTPULL_PROCESS_THREADS_H
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "fastpull_job_cpus.h"

// Node.js unloads an addon when the last isolate that loaded it ends, which would pull the threads'
// code from under them: a second reference to the addon (the one holding `symbol`) that is never
// dropped, and RTLD_NODELETE, keep it mapped. Call under the caller's lock.
static void fastpull_pin_addon(void* symbol) {
  static bool pinned = false;
  if (pinned) return;
  Dl_info self;
  if (dladdr(symbol, &self) != 0 && self.dli_fname != NULL) {
    pinned = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
  }
}

// Under the caller's lock: starts threads running `main` until `*count` reaches `want` (at most
// `max`), with `stack` bytes of stack each. 0, or pthread_create's error when none runs at all.
static int fastpull_start_threads(int* count, int want, int max, void* (*main)(void*), size_t stack) {
  if (want > max) want = max;
  if (*count < want) fastpull_pin_addon((void*)main);
  while (*count < want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, stack);
    fastpull_cpus_process_attr(&attr);
    int r = pthread_create(&t, &attr, main, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0) return *count > 0 ? 0 : r;
    (*count)++;
  }
  return 0;
}
#endif
