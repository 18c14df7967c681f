// Where a job of a process-wide pool runs: on the CPUs of the thread that queued it. An unpack pass
// held to a pull's CPU budget runs on a thread confined to that pull's CPUs; the hashing, decoding
// and file writing it hands to threads that serve every pull then stay inside that budget too, and
// those threads go back to the process's CPUs after. The process's CPUs are its main thread's: a
// budget of the whole process confines every thread, the main one included, and the main thread
// never runs a pass.
//
// sched_getaffinity costs microseconds on a VM, and a job per small file would pay it twice (once to
// queue it, once to run it), so in the addon that sets threads' CPUs (setAffinity) and writes the
// small files, where FASTPULL_CPUS_KEPT is defined, each thread keeps its own set and reads it again
// only after the addon changed a thread's CPUs: every change counts in fastpull_affinity_changes,
// defined once in it. A change made from outside the process (taskset) is seen at its next change.
// Another addon (the parallel gunzip's, whose jobs are large) reads the set for every job: it cannot
// see the first addon's changes.
#ifndef FASTPULL_JOB_CPUS_H
#define FASTPULL_JOB_CPUS_H
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#ifdef FASTPULL_CPUS_KEPT
extern unsigned fastpull_affinity_changes;
#endif

typedef struct {
  cpu_set_t set;
  bool known;
} fastpull_job_cpus;

typedef struct {
  unsigned changes;
  fastpull_job_cpus own;
} fastpull_cpus_seen;

static __thread fastpull_cpus_seen fastpull_cpus_mine;

// A thread's CPUs changed (by this addon): every thread's kept set is read again.
static inline void fastpull_cpus_changed(void) {
#ifdef FASTPULL_CPUS_KEPT
  __atomic_add_fetch(&fastpull_affinity_changes, 1, __ATOMIC_ACQ_REL);
#endif
}

// The calling thread's CPUs: what it kept unless a change came since (or always read, see above).
static inline const fastpull_job_cpus* fastpull_cpus_own(void) {
  fastpull_cpus_seen* m = &fastpull_cpus_mine;
#ifdef FASTPULL_CPUS_KEPT
  // Zero is never a count that was kept: a thread's first call reads.
  unsigned now = __atomic_load_n(&fastpull_affinity_changes, __ATOMIC_ACQUIRE) + 1;
  if (now == 0) now = 1;
  if (m->changes == now) return &m->own;
  m->changes = now;
#endif
  m->own.known = sched_getaffinity(0, sizeof m->own.set, &m->own.set) == 0;
  return &m->own;
}

// On the queuing thread: the CPUs its job is to run on.
static inline void fastpull_cpus_capture(fastpull_job_cpus* p) { memcpy(p, fastpull_cpus_own(), sizeof *p); }

// On the thread that runs the job: moves it to the job's CPUs, unless it is there already. Returns
// whether it moved (then fastpull_cpus_leave moves it back).
static inline bool fastpull_cpus_enter(const fastpull_job_cpus* p) {
  const fastpull_job_cpus* now = fastpull_cpus_own();
  if (!p->known || !now->known || CPU_EQUAL(&now->set, &p->set)) return false;
  bool moved = sched_setaffinity(0, sizeof p->set, &p->set) == 0;
  fastpull_cpus_changed();
  return moved;
}

// After the job: back to the process's CPUs as they are now (a budget of the whole process set while
// the job ran holds, not the CPUs the thread had before it).
static inline void fastpull_cpus_leave(bool entered) {
  if (!entered) return;
  cpu_set_t process;
  if (sched_getaffinity(getpid(), sizeof process, &process) == 0) (void)sched_setaffinity(0, sizeof process, &process);
  fastpull_cpus_changed();
}

// A thread that serves every pull starts on the process's CPUs, not on those of a pass that happened
// to need it first (a new thread inherits its creator's).
static inline void fastpull_cpus_process_attr(pthread_attr_t* attr) {
  cpu_set_t process;
  if (sched_getaffinity(getpid(), sizeof process, &process) == 0) (void)pthread_attr_setaffinity_np(attr, sizeof process, &process);
}
#endif
