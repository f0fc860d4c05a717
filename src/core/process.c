/* process.c — background processes: `background:true` on a
 * session exec starts the command on a thread of its own and answers with
 * its pid at once.  The thread runs an ordinary sbx_sandbox_exec() whose
 * output goes into the process's own head+tail buffers (never blocking the
 * child, whoever reads), with stdin a pipe the daemon keeps open (or a
 * pty), until the command ends, is signalled to death, times out or its
 * session goes away (its exec slot is cancelled).  The record stays, with
 * its result, so a client can re-attach and read what was kept. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/process_int.h"
#include "core/resources.h"

#define START_WAIT_MS 30000
#define DEFAULT_BUF (1024 * 1024)

/* Threads (process and streamed exec) still running: shutdown waits. */
static atomic_int live_threads;

void sbx_proc_ref(struct sbx_proc *p)
{
  pthread_mutex_lock(&p->lock);
  p->refs++;
  pthread_mutex_unlock(&p->lock);
}

static void close_fd(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

void sbx_proc_unref(struct sbx_proc *p)
{
  if (!p)
    return;
  pthread_mutex_lock(&p->lock);
  bool last = --p->refs == 0;
  pthread_mutex_unlock(&p->lock);
  if (!last)
    return;
  close_fd(&p->stdin_w);
  close_fd(&p->stdin_r);
  close_fd(&p->ctl_fd);
  close_fd(&p->pty_fd);
  sbx_capture_free(&p->cap[0]);
  sbx_capture_free(&p->cap[1]);
  sbx_res_mem_give(p->tenant, p->mem);
  json_decref(p->command);
  json_decref(p->result);
  pthread_mutex_destroy(&p->lock);
  pthread_mutex_destroy(&p->in_lock);
  pthread_cond_destroy(&p->cond);
  free(p);
}

static struct sbx_proc *proc_new(const struct sbx_exec_spec *spec, size_t bufcap, int64_t tenant,
                                 uint64_t mem)
{
  struct sbx_proc *p = calloc(1, sizeof *p);
  if (!p) {
    sbx_res_mem_give(tenant, mem);
    return NULL;
  }
  p->tenant = tenant;
  p->mem = mem; /* given back with the buffers, whatever happens below */
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->in_lock, NULL);
  sbx_cond_init_monotonic(&p->cond);
  p->refs = 1;
  p->stdin_w = p->stdin_r = p->ctl_fd = p->pty_fd = -1;
  p->pty = spec->pty;
  p->cols = spec->pty_cols;
  p->rows = spec->pty_rows;
  p->command = json_array();
  for (char **a = spec->argv; a && *a; a++)
    json_array_append_new(p->command, json_string(*a));
  int fds[2];
  bool ok = sbx_capture_init(&p->cap[0], bufcap) == 0 &&
            sbx_capture_init(&p->cap[1], bufcap) == 0 &&
            (spec->pty || pipe2(fds, O_CLOEXEC) == 0);
  if (ok && !spec->pty) {
    p->stdin_r = fds[0];
    p->stdin_w = fds[1];
    sbx_set_nonblock(p->stdin_w, 1);
  }
  if (!ok || !p->command) {
    sbx_proc_unref(p);
    return NULL;
  }
  return p;
}

/* ---- the session's table ---- */

static struct sbx_proc_table *table_of(struct sbx_core *core, struct sbx_live_session *ls)
{
  pthread_mutex_lock(&core->sess_lock);
  if (!ls->procs && (ls->procs = calloc(1, sizeof *ls->procs)))
    pthread_mutex_init(&ls->procs->lock, NULL);
  struct sbx_proc_table *t = ls->procs;
  pthread_mutex_unlock(&core->sess_lock);
  return t;
}

void sbx_procs_free(struct sbx_proc_table *t)
{
  if (!t)
    return;
  for (struct sbx_proc *p = t->head, *next; p; p = next) {
    next = p->next;
    sbx_proc_unref(p);
  }
  pthread_mutex_destroy(&t->lock);
  free(t);
}

static bool proc_done(struct sbx_proc *p)
{
  pthread_mutex_lock(&p->lock);
  bool d = p->done;
  pthread_mutex_unlock(&p->lock);
  return d;
}

/* Drops the oldest ended records beyond the keep limit (table lock held). */
static void evict_exited_locked(struct sbx_proc_table *t)
{
  unsigned kept = 0;
  for (struct sbx_proc **pp = &t->head; *pp;) {
    struct sbx_proc *p = *pp;
    if (proc_done(p) && ++kept > SBX_PROC_MAX_EXITED) {
      *pp = p->next;
      sbx_proc_unref(p);
      continue;
    }
    pp = &p->next;
  }
}

static int table_add(struct sbx_proc_table *t, struct sbx_proc *p, struct sbx_error *err)
{
  pthread_mutex_lock(&t->lock);
  unsigned running = 0;
  for (struct sbx_proc *q = t->head; q; q = q->next)
    running += !proc_done(q);
  if (running >= SBX_PROC_MAX_RUNNING) {
    pthread_mutex_unlock(&t->lock);
    sbx_err_set(err, SBX_E_QUOTA, 0,
                "this session already runs %u background processes "
                "(the limit)",
                running);
    sbx_err_fr(err,
               "Cette session exécute déjà %u processus en arrière-plan (la "
               "limite)",
               running);
    snprintf(err->field, sizeof err->field, "background_processes:%u", /* details (quota.h) */
             SBX_PROC_MAX_RUNNING);
    return -1;
  }
  evict_exited_locked(t);
  sbx_proc_ref(p);
  p->next = t->head; /* newest first: a recycled pid finds its newest owner */
  t->head = p;
  pthread_mutex_unlock(&t->lock);
  return 0;
}

static void table_remove(struct sbx_proc_table *t, struct sbx_proc *p)
{
  pthread_mutex_lock(&t->lock);
  for (struct sbx_proc **pp = &t->head; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      sbx_proc_unref(p);
      break;
    }
  pthread_mutex_unlock(&t->lock);
}

static int no_such_process(struct sbx_error *err, const char *pid)
{
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "process %.32s not found in this session", pid);
  return sbx_err_fr(err, "Processus %.32s introuvable dans cette session", pid);
}

struct sbx_proc *sbx_proc_find(struct sbx_core *core, const struct sbx_principal *who,
                               const char *sid, const char *pid, struct sbx_error *err)
{
  char *end;
  long want = strtol(pid, &end, 10);
  if (*end || end == pid || want <= 0 || want > 0x7fffffff) {
    no_such_process(err, pid);
    return NULL;
  }
  struct sbx_live_session *ls = sbx_session_acquire(core, who, sid, err);
  if (!ls)
    return NULL;
  struct sbx_proc_table *t = table_of(core, ls);
  struct sbx_proc *found = NULL;
  if (t) {
    pthread_mutex_lock(&t->lock);
    for (struct sbx_proc *p = t->head; p && !found; p = p->next) {
      pthread_mutex_lock(&p->lock);
      if (p->started && p->pid == (pid_t)want) {
        found = p;
        p->refs++;
      }
      pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&t->lock);
  }
  sbx_session_release(core, ls);
  if (!found)
    no_such_process(err, pid);
  return found;
}

/* ---- the exec thread ---- */

struct proc_job {
  struct sbx_core *core;
  struct sbx_live_session *ls; /* the thread's reference */
  struct sbx_exec_slot *slot;
  struct sbx_proc *proc; /* the thread's reference */
  struct sbx_exec_spec spec;
  char **env;
  uint64_t timeout_ms;
  int64_t tenant;
};

/* From the exec thread: never blocks on anything but the process lock. */
static void on_output(void *ctx, int stream, const char *data, size_t len, uint64_t offset)
{
  struct sbx_proc *p = ctx;
  (void)offset; /* the buffer's own total is the same count */
  pthread_mutex_lock(&p->lock);
  sbx_capture_feed(&p->cap[stream - 1], data, len);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

/* ---- stopping, the session's end ---- */

unsigned sbx_procs_stop(struct sbx_proc_table *t, const char *why)
{
  unsigned n = 0;
  if (!t)
    return 0;
  pthread_mutex_lock(&t->lock);
  for (struct sbx_proc *p = t->head; p; p = p->next) {
    pthread_mutex_lock(&p->lock);
    if (!p->done && p->slot && !p->stop_reason) {
      p->stop_reason = why;
      sbx_cancel_fire(&p->slot->cancel, SBX_RS_CANCELLED);
      sbx_info("process", "pid %d stopped: %s", (int)p->pid, why);
      n++;
    }
    pthread_mutex_unlock(&p->lock);
  }
  pthread_mutex_unlock(&t->lock);
  return n;
}

void sbx_procs_session_end(struct sbx_proc_table *t, const char *reason)
{
  if (!t)
    return;
  pthread_mutex_lock(&t->lock);
  for (struct sbx_proc *p = t->head; p; p = p->next) {
    pthread_mutex_lock(&p->lock);
    p->end_reason = reason;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
  }
  pthread_mutex_unlock(&t->lock);
}

/* Gives back the kept output of ended processes of the tenant's sessions,
 * oldest first, until `need` bytes are free or none is left: a running
 * process's output matters more than an ended one's log. */
static void reclaim_ended(struct sbx_core *core, int64_t tenant, uint64_t need)
{
  uint64_t freed = 0;
  pthread_mutex_lock(&core->sess_lock);
  for (struct sbx_live_session *ls = core->sessions; ls && freed < need; ls = ls->next) {
    if (ls->tenant_id != tenant || !ls->procs)
      continue;
    struct sbx_proc_table *t = ls->procs;
    pthread_mutex_lock(&t->lock);
    while (freed < need) {
      struct sbx_proc *oldest = NULL;
      int64_t at = 0;
      for (struct sbx_proc *p = t->head; p; p = p->next) {
        pthread_mutex_lock(&p->lock);
        if (p->done && p->mem && (!oldest || p->finished_at <= at)) {
          oldest = p; /* the table lock keeps it listed, hence alive */
          at = p->finished_at;
        }
        pthread_mutex_unlock(&p->lock);
      }
      if (!oldest)
        break;
      pthread_mutex_lock(&oldest->lock);
      freed += sbx_proc_drop_output_locked(oldest);
      pthread_mutex_unlock(&oldest->lock);
    }
    pthread_mutex_unlock(&t->lock);
  }
  pthread_mutex_unlock(&core->sess_lock);
}

static size_t reserve_output(struct sbx_core *core, int64_t tenant, size_t bufcap, uint64_t *got)
{
  uint64_t want = 2 * (uint64_t)bufcap;
  if (sbx_res_mem_room(core, tenant) < 8 * want)
    reclaim_ended(core, tenant, 8 * want);
  return (size_t)sbx_res_output_take(core, tenant, bufcap, got);
}

static void on_started(void *ctx, pid_t pid, int ctl_fd, int pty_fd)
{
  struct sbx_proc *p = ctx;
  pthread_mutex_lock(&p->lock);
  p->pid = pid;
  p->ctl_fd = ctl_fd;
  p->pty_fd = pty_fd;
  p->started = true;
  p->started_at = sbx_wall_s();
  /* The workload has its copy: ours would hide its exit from writers. */
  close_fd(&p->stdin_r);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

static void proc_finish(struct sbx_proc *p, const struct sbx_exec_result *res)
{
  pthread_mutex_lock(&p->lock);
  p->done = true;
  p->slot = NULL; /* removed by the caller right after */
  p->finished_at = sbx_wall_s();
  p->result = sbx_proc_result_locked(p, res);
  if (p->stop_reason && p->result)
    json_object_set_new(p->result, "reason", json_string(p->stop_reason));
  close_fd(&p->ctl_fd);
  close_fd(&p->pty_fd);
  close_fd(&p->stdin_r);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  pthread_mutex_lock(&p->in_lock);
  close_fd(&p->stdin_w);
  pthread_mutex_unlock(&p->in_lock);
}

static void *proc_main(void *arg)
{
  struct proc_job *job = arg;
  struct sbx_proc *p = job->proc;
  struct sbx_exec_live live = {.stdin_fd = p->stdin_r,
                               .pty = p->pty,
                               .cols = p->cols,
                               .rows = p->rows,
                               .on_started = on_started};
  /* The process's own buffers keep the output; the exec's capture only
   * needs to exist. */
  struct sbx_exec_request tmpl = {.timeout_ms = job->timeout_ms,
                                  .output_cap = 2,
                                  .cancel = &job->slot->cancel,
                                  .on_output = on_output,
                                  .on_output_ctx = p,
                                  .live = &live};
  struct sbx_exec_result res = {0};
  struct sbx_error err = {0};
  pthread_mutex_lock(&p->lock);
  p->slot = job->slot;
  pthread_mutex_unlock(&p->lock);
  int rc = sbx_run_spec_ex(job->ls->sb, &job->spec, job->env, &tmpl, &res, &err);
  if (rc < 0 && !res.error[0])
    snprintf(res.error, sizeof res.error, "%s", err.msg);
  proc_finish(p, &res);
  sbx_info("process", "session %s pid %d ended: %s", job->ls->id, (int)p->pid,
           sbx_status_name(res.status));
  sbx_session_exec_done(job->core, job->ls, NULL, &res, rc == 0 && p->started, NULL);
  sbx_exec_result_free(&res);
  pthread_mutex_lock(&p->lock);
  unsigned fds = p->fds; /* less what a closed stdin gave back already */
  p->fds = 0;
  pthread_mutex_unlock(&p->lock);
  sbx_res_fds_give(job->tenant, job->ls->id, fds);
  sbx_session_slot_remove(job->core, job->ls, job->slot);
  sbx_session_touch(job->core, job->ls);
  sbx_session_release(job->core, job->ls);
  sbx_proc_unref(p);
  sbx_strv_free(job->env);
  sbx_exec_spec_free(&job->spec);
  free(job);
  atomic_fetch_sub(&live_threads, 1);
  return NULL;
}

void sbx_procs_thread_enter(void) { atomic_fetch_add(&live_threads, 1); }
void sbx_procs_thread_leave(void) { atomic_fetch_sub(&live_threads, 1); }
void sbx_core_thread_enter(void) { sbx_procs_thread_enter(); }
void sbx_core_thread_leave(void) { sbx_procs_thread_leave(); }

void sbx_procs_drain(void)
{
  /* The sessions were killed (their slots cancelled): threads end within
   * the exec's kill grace.  Bounded, so a wedged sandbox cannot hang exit. */
  for (int i = 0; i < 1000 && atomic_load(&live_threads) > 0; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static int spawn(struct proc_job *job, struct sbx_error *err)
{
  atomic_fetch_add(&live_threads, 1);
  int rc = sbx_thread_detached(proc_main, job);
  if (rc != 0) {
    atomic_fetch_sub(&live_threads, 1);
    return sbx_err_sys(err, rc, "starting the process thread");
  }
  return 0;
}

/* ---- start ---- */

static int check_caps(struct sbx_live_session *ls, const struct sbx_exec_spec *spec,
                      struct sbx_error *err)
{
  if (!spec->pty || (ls->sb->driver->caps & SBX_CAP_TERMINAL))
    return 0;
  sbx_err_set(err, SBX_E_CONFLICT, 0,
              "the %s driver of this session has no terminal "
              "capability: pty is not available (use a container session)",
              ls->sb->driver->name);
  return sbx_err_fr(err,
                    "Le pilote %s de cette session n'a pas la capacité terminal : pty "
                    "n'est pas disponible (utilisez une session container)",
                    ls->sb->driver->name);
}

/* Why a process never started: the program could not be executed (its
 * fault: 400 on `command`), or the sandbox could not fork it (out of pids,
 * memory: 409, with the sandbox's words). */
static int not_started(json_t *result, struct sbx_error *err)
{
  json_t *ec = json_object_get(result, "exit_code"), *se = json_object_get(result, "stderr");
  json_t *em = json_object_get(json_object_get(result, "error"), "message");
  bool exec_failed = json_is_integer(ec) && json_integer_value(ec) >= 126;
  const char *msg = exec_failed && json_is_string(se) && json_string_length(se)
                        ? json_string_value(se)
                    : json_is_string(em) ? json_string_value(em)
                                         : "the command did not start";
  if (exec_failed) {
    sbx_err_field(err, "command", "%.300s", msg);
    return sbx_err_fr(err, "La commande n'a pas pu être exécutée : %.300s", msg);
  }
  sbx_err_set(err, SBX_E_CONFLICT, 0, "the sandbox could not start the process: %.300s", msg);
  return sbx_err_fr(err, "Le bac à sable n'a pas pu démarrer le processus : %.300s", msg);
}

/* Waits for the workload to start (202 {pid}) or to fail to (an error
 * now, rather than a pid that never existed). */
static int wait_started(struct sbx_proc *p, json_t **out, struct sbx_error *err)
{
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += START_WAIT_MS / 1000;
  pthread_mutex_lock(&p->lock);
  while (!p->started && !p->done)
    if (pthread_cond_timedwait(&p->cond, &p->lock, &until) != 0)
      break;
  int rc = 0;
  if (p->started) {
    *out = json_pack("{s:i}", "pid", (int)p->pid);
  } else if (p->done) {
    json_t *full = sbx_proc_result_full_locked(p);
    rc = not_started(full, err);
    json_decref(full);
  } else
    rc = sbx_err_set(err, SBX_E_INTERNAL, 0, "the sandbox did not start the process in time");
  pthread_mutex_unlock(&p->lock);
  return rc;
}

static int parse_start(struct sbx_core *core, struct sbx_live_session *ls, json_t *body,
                       struct sbx_exec_spec *spec, struct sbx_error *err)
{
  static const char *const allowed[] = {"command", "language",  "code",       "stdin", "env",
                                        "cwd",     "timeout_s", "background", "pty",   NULL};
  (void)core;
  if (sbx_schema_only(body, "", allowed, err) < 0 ||
      sbx_schema_exec(body, ls->profile->max.timeout_s, true, spec, err) < 0)
    return -1;
  if (sbx_core_image_exec(ls->image, spec, false, err) < 0) { /* image config */
    sbx_exec_spec_free(spec);
    return -1;
  }
  if (check_caps(ls, spec, err) < 0) {
    sbx_exec_spec_free(spec);
    return -1;
  }
  return 0;
}

/* Makes the process and its job; the job takes spec and the session
 * reference only once everything is in place. */
static struct proc_job *job_new(struct sbx_core *core, struct sbx_live_session *ls,
                                const struct sbx_principal *who, struct sbx_exec_spec *spec,
                                struct sbx_error *err)
{
  size_t bufcap = ls->limits.output_bytes ? (size_t)ls->limits.output_bytes : DEFAULT_BUF;
  uint64_t mem = 0;
  bufcap = reserve_output(core, who->tenant_id, bufcap, &mem);
  struct proc_job *job = calloc(1, sizeof *job);
  if (!job)
    sbx_res_mem_give(who->tenant_id, mem);
  if (!job || !(job->proc = proc_new(spec, bufcap, who->tenant_id, mem)) ||
      !(job->env = sbx_session_run_env(ls, spec->env)) ||
      !(job->slot = sbx_session_slot_add(core, ls))) {
    if (job) {
      sbx_proc_unref(job->proc);
      sbx_strv_free(job->env);
    }
    free(job);
    sbx_err_sys(err, ENOMEM, "process");
    return NULL;
  }
  job->core = core;
  job->ls = ls;
  job->tenant = who->tenant_id;
  /* A background process has no timeout unless it asks for one: it lives
   * as long as its session (whose TTL bounds it). */
  job->timeout_ms = spec->timeout_s > 0 ? (uint64_t)(spec->timeout_s * 1000.0) : 0;
  job->spec = *spec;
  memset(spec, 0, sizeof *spec);
  return job;
}

static void job_abort(struct proc_job *job)
{
  sbx_session_slot_remove(job->core, job->ls, job->slot);
  sbx_proc_unref(job->proc);
  sbx_strv_free(job->env);
  sbx_exec_spec_free(&job->spec);
  free(job);
}

int sbx_process_start(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                      json_t *body, json_t **out, struct sbx_error *err)
{
  if (sbx_quota_cpu_check(core, who, err) < 0) /* it would burn CPU the quota has not got */
    return -1;
  struct sbx_live_session *ls = sbx_session_acquire(core, who, sid, err);
  if (!ls)
    return -1;
  struct sbx_exec_spec spec;
  struct sbx_proc_table *t = NULL;
  struct proc_job *job = NULL;
  bool fds = false;
  if (parse_start(core, ls, body, &spec, err) < 0)
    goto fail;
  if (sbx_res_fds_take(core, who->tenant_id, ls->id, SBX_RES_FDS_PROCESS, err) < 0) {
    sbx_exec_spec_free(&spec);
    goto fail;
  }
  fds = true;
  t = table_of(core, ls);
  job = t ? job_new(core, ls, who, &spec, err) : NULL;
  sbx_exec_spec_free(&spec);
  if (!job) {
    if (!t)
      sbx_err_sys(err, ENOMEM, "process table");
    goto fail;
  }
  struct sbx_proc *p = job->proc;
  p->fds = SBX_RES_FDS_PROCESS;
  sbx_proc_ref(p); /* ours, for the wait below */
  if (table_add(t, p, err) < 0) {
    sbx_proc_unref(p);
    job_abort(job);
    goto fail;
  }
  if (spawn(job, err) < 0) { /* the job still holds the session reference */
    table_remove(t, p);
    sbx_proc_unref(p);
    job_abort(job);
    goto fail;
  }
  /* From here the thread owns job, the session reference and the fds. */
  int rc = wait_started(p, out, err);
  if (rc < 0)
    table_remove(t, p);
  else
    sbx_info("process", "session %s: started pid %d", sid, (int)p->pid);
  sbx_proc_unref(p);
  return rc;
fail:
  if (fds)
    sbx_res_fds_give(who->tenant_id, ls->id, SBX_RES_FDS_PROCESS);
  sbx_session_release(core, ls);
  return -1;
}
