/* process_int.h — the background-process object shared by core/process.c
 * (table, start, the exec thread) and core/process_io.c (output, stdin,
 * signals, resize, JSON).  Internal to core. */
#ifndef SBX_CORE_PROCESS_INT_H
#define SBX_CORE_PROCESS_INT_H

#include <pthread.h>

#include "common/capture.h"
#include "core/internal.h"

#define SBX_PROC_MAX_RUNNING 64 /* per session → 429 */
#define SBX_PROC_MAX_EXITED 64  /* records of ended processes kept per session */

/* One background process.  Refcounted (the table, its exec thread, each
 * attached follower); `lock` guards everything below it, `cond` signals
 * start, new output and the end. */
struct sbx_proc {
  pthread_mutex_t lock;
  pthread_cond_t cond;     /* CLOCK_MONOTONIC */
  pthread_mutex_t in_lock; /* serialises stdin writers (never held with lock) */
  int refs;
  pid_t pid;       /* inside the sandbox; 0 until started */
  json_t *command; /* argv as a JSON array */
  bool pty;
  unsigned cols, rows;
  int stdin_w;        /* pipe write end (no pty); -1 once closed */
  int stdin_r;        /* its read end until the workload has it */
  int ctl_fd, pty_fd; /* from on_started; -1 before and after the end */
  bool started, done;
  int64_t started_at, finished_at;
  struct sbx_capture cap[2]; /* stdout, stderr: head + tail, never blocking */
  json_t *result;            /* once done: the result, without the output (in cap) */
  int64_t tenant;
  uint64_t mem;               /* retained-output bytes reserved (core/resources.c) */
  unsigned fds;               /* daemon fds charged to its session (core/resources.c) */
  struct sbx_exec_slot *slot; /* the running exec's, NULL once it ended */
  const char *stop_reason;    /* why the daemon stopped it ("quota"), else NULL */
  const char *end_reason;     /* set when its session ended: followers stop */
  struct sbx_proc *next;      /* in the table (table lock) */
};

struct sbx_proc_table {
  pthread_mutex_t lock;
  struct sbx_proc *head;
};

void sbx_proc_ref(struct sbx_proc *p);
void sbx_proc_unref(struct sbx_proc *p);
/* The process pid of session id (a new reference), or NULL with err
 * (404 for an unknown pid, like a missing session). */
struct sbx_proc *sbx_proc_find(struct sbx_core *core, const struct sbx_principal *who,
                               const char *sid, const char *pid, struct sbx_error *err);
/* Process JSON for list/get (lock held). */
json_t *sbx_proc_json_locked(struct sbx_proc *p, bool full);
/* Result object of an ended process: the exec's status with the output
 * taken from the process's own buffers (lock held). */
json_t *sbx_proc_result_locked(struct sbx_proc *p, const struct sbx_exec_result *res);
/* The result with the kept output (a new reference; NULL before the end). */
json_t *sbx_proc_result_full_locked(struct sbx_proc *p);
/* Frees an ended process's kept output (totals stay: offsets stay right,
 * readers see it dropped); returns the bytes given back (lock held). */
uint64_t sbx_proc_drop_output_locked(struct sbx_proc *p);

#endif
