/* spawner.h — one long-lived thread that runs jobs for callers who wait.
 *
 * Why a thread of its own: PR_SET_PDEATHSIG fires when the *thread* that
 * forked a child exits, so a child forked from a request thread would be
 * killed whenever that thread ends.  A process forked from a spawner, which
 * lives as long as the daemon, dies only with the daemon.  The thread runs
 * with every signal blocked (nothing interrupts a spawn; a child resets its
 * mask before exec) and takes the jobs one at a time, in order; the slow
 * part of a start belongs in the caller, after the job returned, so that
 * sandboxes still build in parallel.
 *
 * A spawner is a static object (SBX_SPAWNER_INIT); its thread starts on
 * the first sbx_spawner_start() or sbx_spawner_call() and never ends. */
#ifndef SBX_COMMON_SPAWNER_H
#define SBX_COMMON_SPAWNER_H

#include <pthread.h>
#include <stdbool.h>

#include "common/err.h"

struct sbx_spawn_job;

struct sbx_spawner {
  const char *name;       /* "isolation", "gvisor": the start error names it */
  void (*on_start)(void); /* MAY be NULL: runs first on the new thread */
  pthread_mutex_t lock;
  pthread_cond_t wake; /* a job was queued */
  pthread_cond_t done; /* a job finished */
  struct sbx_spawn_job *head, *tail;
  bool started;
};

#define SBX_SPAWNER_INIT(name_, on_start_)                                                      \
  {                                                                                             \
    .name = (name_), .on_start = (on_start_), .lock = PTHREAD_MUTEX_INITIALIZER,                \
    .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER                          \
  }

/* Starts the thread unless it runs already.  0, or -1 with err. */
int sbx_spawner_start(struct sbx_spawner *s, struct sbx_error *err);
/* Runs fn(arg, job_err) on the spawner's thread (starting it if need be)
 * and waits for it.  fn returns 0 or -1 having filled job_err (cleared
 * before the call); that is copied to err (may be NULL).  Returns fn's
 * result, or -1 if the thread could not start.  arg is borrowed. */
int sbx_spawner_call(struct sbx_spawner *s, int (*fn)(void *arg, struct sbx_error *job_err),
                     void *arg, struct sbx_error *err);

#endif
