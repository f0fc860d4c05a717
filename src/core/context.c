/* context.c — stateful interpreter contexts: the registry, the
 * per-context thread that runs the interpreter, and create / list / get /
 * delete / restart.  A run is context_run.c; the protocol context_io.c; the
 * model is described in context_int.h.
 *
 * Lifecycle: starting → ready ⇄ busy → dead.  An interpreter dies when a
 * run exceeds its timeout (the daemon kills it: its state is lost), when it
 * crashes or exits, or on restart.  A dead context answers runs with 409
 * until `restart` starts a fresh interpreter under the same id (we do not
 * restart behind the caller's back: silently lost variables are worse than
 * an explicit error).  Contexts end with their session. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/context_int.h"
#include "core/contexts/drivers.h"
#include "core/resources.h"

#define MAX_PER_SESSION 8
#define START_TIMEOUT_MS 30000
#define DRAIN_TIMEOUT_MS 10000

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER; /* nthreads changed */
static struct sbx_context *registry;
static unsigned nthreads;

/* ---- registry ---- */

static void ctx_free(struct sbx_context *c)
{
  if (c->wake_fd >= 0)
    close(c->wake_fd);
  sbx_ctx_reset_run_locked(c); /* the reply, undelivered chunks (nobody else holds c) */
  free(c->frame);
  free(c->stray[0]);
  free(c->stray[1]);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void sbx_ctx_unref(struct sbx_context *c)
{
  pthread_mutex_lock(&reg_lock);
  bool last = --c->refs == 0;
  pthread_mutex_unlock(&reg_lock);
  if (last)
    ctx_free(c);
}

/* Takes the context out of the registry (dropping the registry's ref). */
static void unlist(struct sbx_context *c)
{
  pthread_mutex_lock(&reg_lock);
  bool was = c->listed;
  for (struct sbx_context **pp = &registry; was && *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  c->listed = false;
  pthread_mutex_unlock(&reg_lock);
  if (was)
    sbx_ctx_unref(c);
}

/* The context cid of the session ls, with a reference; NULL → 404. */
static struct sbx_context *find_ref(struct sbx_live_session *ls, const char *cid,
                                    struct sbx_error *err)
{
  pthread_mutex_lock(&reg_lock);
  struct sbx_context *c = registry;
  while (c && !(c->ls == ls && strcmp(c->id, cid) == 0))
    c = c->next;
  if (c)
    c->refs++;
  pthread_mutex_unlock(&reg_lock);
  if (!c) {
    sbx_err_set(err, SBX_E_NOT_FOUND, 0, "context %s not found in session %s", cid, ls->id);
    sbx_err_fr(err, "Contexte %s introuvable dans la session %s", cid, ls->id);
  }
  return c;
}

/* ---- the interpreter thread ---- */

static void on_output(void *ctx, int stream, const char *data, size_t len, uint64_t offset)
{
  struct sbx_context *c = ctx;
  pthread_mutex_lock(&c->lock);
  sbx_ctx_feed_locked(c, stream, data, len);
  pthread_mutex_unlock(&c->lock);
}

/* The exec started: sbx-init has its copy of the stdin pipe's read end, so
 * ours goes (the interpreter's death then turns our writes into EPIPE). */
static void on_started(void *ctx, pid_t pid, int ctl_fd, int pty_fd)
{
  struct sbx_context *c = ctx;
  if (ctl_fd >= 0)
    close(ctl_fd);
  if (pty_fd >= 0)
    close(pty_fd);
  pthread_mutex_lock(&c->lock);
  if (c->stdin_r >= 0)
    close(c->stdin_r);
  c->stdin_r = -1;
  pthread_mutex_unlock(&c->lock);
}

static char **interpreter_argv(const char *language)
{
  static char py[] = "python3", u[] = "-u", dc[] = "-c", node[] = "node", de[] = "-e";
  static char *pyv[] = {py, u, dc, (char *)sbx_ctx_python_driver, NULL};
  static char *nodev[] = {node, de, (char *)sbx_ctx_node_driver, NULL};
  return strcmp(language, "node") == 0 ? nodev : pyv;
}

/* Why the daemon killed the interpreter (c->kill says which way). */
static void record_kill(struct sbx_context *c)
{
  const char *lang = c->language;
  switch (c->kill) {
  case SBX_CTX_KILL_QUOTA:
    snprintf(c->dead_why, sizeof c->dead_why,
             "the tenant's CPU seconds of the day "
             "(cpu_seconds_per_day) are used up: the %s interpreter was stopped",
             lang);
    c->dead_reason = SBX_RS_CANCELLED;
    c->dead_quota = true;
    break;
  case SBX_CTX_KILL_TIMEOUT:
    snprintf(c->dead_why, sizeof c->dead_why,
             "a run exceeded its timeout: the %s "
             "interpreter was killed and its state is lost; restart the context",
             lang);
    c->dead_reason = SBX_RS_TIMEOUT;
    break;
  case SBX_CTX_KILL_RESTART:
    snprintf(c->dead_why, sizeof c->dead_why, "restarted");
    c->dead_reason = SBX_RS_CANCELLED;
    break;
  case SBX_CTX_KILL_DELETE:
    snprintf(c->dead_why, sizeof c->dead_why, "context deleted");
    c->dead_reason = SBX_RS_CANCELLED;
    break;
  case SBX_CTX_KILL_PROTOCOL:
    snprintf(c->dead_why, sizeof c->dead_why,
             "the %s interpreter did not follow the driver "
             "protocol (no hello in time, a stuck stdin or a reply too large) and was killed",
             lang);
    c->dead_reason = SBX_RS_CANCELLED;
    break;
  case SBX_CTX_KILL_NONE:
    break;
  }
}

/* Why the interpreter ended when the daemon did not kill it. */
static void record_end(struct sbx_context *c, int rc, const struct sbx_exec_result *res,
                       const struct sbx_error *err, bool was_ready)
{
  const char *lang = c->language;
  if (rc < 0) {
    snprintf(c->dead_why, sizeof c->dead_why, "%s", err->msg);
  } else if (res->reason == SBX_RS_SHEPHERD_LOST) {
    snprintf(c->dead_why, sizeof c->dead_why,
             "the %s interpreter's supervisor in the sandbox "
             "was killed (by a kill -1 from inside?): its state is lost; restart the context",
             lang);
  } else if (res->status == SBX_ST_KILLED && res->reason != SBX_RS_SIGNAL) {
    snprintf(c->dead_why, sizeof c->dead_why, "the session ended (%s)",
             sbx_reason_name(res->reason));
  } else if (!was_ready) {
    /* It never said hello: what it printed says why (e.g. not installed). */
    snprintf(c->dead_why, sizeof c->dead_why,
             "the %s interpreter did not start (exit %d): "
             "%.180s",
             lang, res->exit_code, res->std_err.buf ? res->std_err.buf : "");
  } else if (res->signal) {
    snprintf(c->dead_why, sizeof c->dead_why, "the %s interpreter was killed by signal %d%s",
             lang, res->signal, res->status == SBX_ST_OOM_KILLED ? " (out of memory)" : "");
    if (res->status == SBX_ST_OOM_KILLED)
      c->dead_reason = SBX_RS_MEMORY;
  } else {
    snprintf(c->dead_why, sizeof c->dead_why, "the %s interpreter exited with code %d", lang,
             res->exit_code);
  }
}

/* Why the interpreter ended, for the context's `error` and a dying run. */
static void record_death(struct sbx_context *c, int rc, const struct sbx_exec_result *res,
                         const struct sbx_error *err, bool was_ready)
{
  c->dead_reason = res->reason;
  c->dead_quota = false;
  if (c->kill != SBX_CTX_KILL_NONE)
    record_kill(c);
  else
    record_end(c, rc, res, err, was_ready);
}

/* New interpreter: a fresh nonce, a stdin pipe; first line the nonce. */
static int prepare(struct sbx_context *c, int *stdin_r)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return -1;
  sbx_set_nonblock(p[1], 1);
  unsigned char raw[SBX_CTX_NONCE_LEN / 2];
  sbx_random_bytes(raw, sizeof raw);
  pthread_mutex_lock(&c->lock);
  sbx_hex(raw, sizeof raw, c->nonce);
  c->stdin_w = p[1];
  c->stdin_r = p[0];
  c->incarnation++;
  pthread_cond_broadcast(&c->cond);
  c->execution_count = 0;
  c->kill = SBX_CTX_KILL_NONE;
  c->frame_len = 0;
  sbx_ctx_reset_run_locked(c);
  char line[SBX_CTX_NONCE_LEN + 2];
  snprintf(line, sizeof line, "%s\n", c->nonce);
  pthread_mutex_unlock(&c->lock);
  *stdin_r = p[0];
  return write(p[1], line, strlen(line)) == (ssize_t)strlen(line) ? 0 : -1; /* pipe empty */
}

static void run_interpreter(struct sbx_context *c, struct sbx_exec_slot *slot)
{
  struct sbx_exec_result res = {0};
  struct sbx_error err = {0};
  int stdin_r = -1, rc = -1;
  static char *const extra[] = {"MPLBACKEND=Agg", "PYTHONUNBUFFERED=1",
                                "PYTHONDONTWRITEBYTECODE=1", NULL};
  char **env = sbx_session_run_env(c->ls, extra);
  if (prepare(c, &stdin_r) < 0 || !env) {
    sbx_err_sys(&err, errno ? errno : ENOMEM, "context %s: interpreter pipes", c->id);
  } else {
    struct sbx_exec_live live = {.stdin_fd = stdin_r, .on_started = on_started};
    struct sbx_exec_request req = {.argv = interpreter_argv(c->language),
                                   .env = env,
                                   .cwd = "/work",
                                   .output_cap = 4096,
                                   .cancel = &slot->cancel,
                                   .on_output = on_output,
                                   .on_output_ctx = c,
                                   .live = &live};
    rc = sbx_sandbox_exec(c->ls->sb, &req, &res, &err);
  }
  sbx_strv_free(env);
  pthread_mutex_lock(&c->lock);
  if (c->stdin_r >= 0)
    close(c->stdin_r);
  c->stdin_r = -1;
  if (c->stdin_w >= 0)
    close(c->stdin_w);
  c->stdin_w = -1;
  record_death(c, rc, &res, &err, c->state != SBX_CTX_STARTING);
  c->state = SBX_CTX_DEAD;
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
  sbx_session_cpu_exec_done(c->core, c->ls, c->ls->tenant_id, &res, false);
  sbx_exec_result_free(&res);
}

/* Dead: waits for a restart, a delete (wake_fd) or the session's end. */
static void wait_wake(struct sbx_context *c, struct sbx_exec_slot *slot)
{
  struct pollfd p[2] = {{.fd = c->wake_fd, .events = POLLIN},
                        {.fd = slot->cancel.efd, .events = POLLIN}};
  while (poll(p, 2, -1) < 0 && errno == EINTR)
    ;
  uint64_t v;
  if (p[0].revents)
    (void)!read(c->wake_fd, &v, sizeof v);
}

static bool session_dying(struct sbx_context *c)
{
  pthread_mutex_lock(&c->core->sess_lock);
  bool d = c->ls->dying;
  pthread_mutex_unlock(&c->core->sess_lock);
  return d;
}

/* One turn: an interpreter's life, or a wait while dead.  False when the
 * context ends (deleted, or its session ends). */
static bool turn(struct sbx_context *c)
{
  struct sbx_exec_slot *slot = sbx_session_slot_add(c->core, c->ls);
  pthread_mutex_lock(&c->lock);
  c->slot = slot;
  bool start = slot && !c->deleted && c->state == SBX_CTX_STARTING;
  pthread_mutex_unlock(&c->lock);
  if (!slot)
    return false;
  if (start)
    run_interpreter(c, slot);
  else
    wait_wake(c, slot);
  pthread_mutex_lock(&c->lock);
  c->slot = NULL;
  pthread_mutex_unlock(&c->lock);
  sbx_session_slot_remove(c->core, c->ls, slot);
  bool dying = session_dying(c);
  pthread_mutex_lock(&c->lock);
  bool go_on = !dying && !c->deleted;
  if (go_on && c->want_restart) {
    c->want_restart = false;
    c->state = SBX_CTX_STARTING;
  }
  if (!go_on) {
    c->state = SBX_CTX_DEAD;
    c->ended = true;
  }
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
  return go_on;
}

static void *ctx_thread(void *arg)
{
  struct sbx_context *c = arg;
  struct sbx_core *core = c->core;
  struct sbx_live_session *ls = c->ls;
  while (turn(c))
    ;
  unlist(c);
  sbx_ctx_unref(c); /* the thread's */
  sbx_res_fds_give(ls->tenant_id, ls->id, SBX_RES_FDS_CONTEXT);
  sbx_session_release(core, ls); /* may destroy the sandbox: after the last use */
  pthread_mutex_lock(&reg_lock);
  nthreads--;
  pthread_cond_broadcast(&reg_cond);
  pthread_mutex_unlock(&reg_lock);
  return NULL;
}

unsigned sbx_contexts_quota_stop(struct sbx_live_session *ls)
{
  struct sbx_context *v[MAX_PER_SESSION];
  size_t n = 0;
  unsigned stopped = 0;
  pthread_mutex_lock(&reg_lock);
  for (struct sbx_context *c = registry; c && n < MAX_PER_SESSION; c = c->next)
    if (c->ls == ls) {
      c->refs++;
      v[n++] = c;
    }
  pthread_mutex_unlock(&reg_lock);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&v[i]->lock);
    if (v[i]->state != SBX_CTX_DEAD && v[i]->slot) {
      sbx_ctx_poke_locked(v[i], SBX_CTX_KILL_QUOTA);
      sbx_info("contexts", "%s: context %s stopped: CPU quota used up", ls->id, v[i]->id);
      stopped++;
    }
    pthread_mutex_unlock(&v[i]->lock);
    sbx_ctx_unref(v[i]);
  }
  return stopped;
}

void sbx_contexts_drain(void)
{
  uint64_t deadline = sbx_now_ms() + DRAIN_TIMEOUT_MS;
  pthread_mutex_lock(&reg_lock);
  while (nthreads > 0 && sbx_now_ms() < deadline) {
    pthread_mutex_unlock(&reg_lock);
    usleep(20 * 1000); /* bounded; the threads are ending with their sessions */
    pthread_mutex_lock(&reg_lock);
  }
  if (nthreads)
    sbx_warn("contexts", "%u context threads still running at shutdown", nthreads);
  pthread_mutex_unlock(&reg_lock);
}

/* ---- JSON ---- */

static const char *state_name(enum sbx_ctx_state s)
{
  static const char *const n[] = {"starting", "ready", "busy", "dead"};
  return n[s];
}

static json_t *ctx_json_locked(const struct sbx_context *c)
{
  char created[40];
  sbx_format_time(c->created_at, created, sizeof created);
  return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:o, s:s}", "id", c->id, "language",
                   c->language, "status", state_name(c->state), "session_id", c->ls->id,
                   "execution_count", (json_int_t)c->execution_count, "version", c->version,
                   "error", c->state == SBX_CTX_DEAD ? json_string(c->dead_why) : json_null(),
                   "created_at", created);
}

static json_t *ctx_json(struct sbx_context *c)
{
  pthread_mutex_lock(&c->lock);
  json_t *j = ctx_json_locked(c);
  pthread_mutex_unlock(&c->lock);
  return j;
}

/* ---- operations ---- */

bool sbx_ctx_wait_locked(struct sbx_context *c, uint64_t deadline_ms)
{
  uint64_t now = sbx_now_ms();
  if (now >= deadline_ms)
    return false;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (deadline_ms - now) * 1000000ull;
  ts.tv_sec += (time_t)(ns / 1000000000ull);
  ts.tv_nsec = (long)(ns % 1000000000ull);
  pthread_cond_timedwait(&c->cond, &c->lock, &ts);
  return true;
}

static int parse_language(json_t *body, const char **lang, struct sbx_error *err)
{
  static const char *const allowed[] = {"language", NULL};
  if (sbx_schema_only(body, "", allowed, err) < 0)
    return -1;
  const char *l = json_string_value(json_object_get(body, "language"));
  if (!l || (strcmp(l, "python") != 0 && strcmp(l, "node") != 0)) {
    sbx_err_field(err, "language", "language must be \"python\" or \"node\"");
    return sbx_err_fr(err, "Requête invalide : language doit valoir \"python\" ou \"node\"");
  }
  *lang = l;
  return 0;
}

static int count_room(struct sbx_live_session *ls, struct sbx_error *err)
{
  unsigned n = 0;
  pthread_mutex_lock(&reg_lock);
  for (struct sbx_context *c = registry; c; c = c->next)
    n += c->ls == ls;
  pthread_mutex_unlock(&reg_lock);
  if (n < MAX_PER_SESSION)
    return 0;
  sbx_err_set(err, SBX_E_QUOTA, 0, "session %s already has %u contexts (the limit)", ls->id, n);
  return sbx_err_fr(err, "La session %s a déjà %u contextes (la limite)", ls->id, n);
}

static struct sbx_context *ctx_new(struct sbx_core *core, struct sbx_live_session *ls,
                                   const char *lang)
{
  struct sbx_context *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->wake_fd < 0) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  sbx_random_id("ctx", c->id, sizeof c->id);
  snprintf(c->language, sizeof c->language, "%s", lang);
  c->core = core;
  c->ls = ls;
  c->created_at = sbx_wall_s();
  c->stdin_w = c->stdin_r = -1;
  c->state = SBX_CTX_STARTING;
  c->refs = 3; /* the registry's, the thread's, the caller's */
  return c;
}

/* Starts the thread; it owns the session reference `ls` from now on. */
static int ctx_launch(struct sbx_context *c, struct sbx_error *err)
{
  pthread_mutex_lock(&reg_lock);
  c->listed = true;
  c->next = registry;
  registry = c;
  nthreads++;
  pthread_mutex_unlock(&reg_lock);
  int e = sbx_thread_detached(ctx_thread, c);
  if (e == 0)
    return 0;
  pthread_mutex_lock(&reg_lock);
  nthreads--;
  pthread_mutex_unlock(&reg_lock);
  unlist(c);
  sbx_ctx_unref(c); /* the thread's */
  sbx_session_release(c->core, c->ls);
  return sbx_err_sys(err, e, "context thread");
}

void sbx_ctx_poke_locked(struct sbx_context *c, enum sbx_ctx_kill why)
{
  c->kill = why;
  if (c->slot)
    sbx_cancel_fire(&c->slot->cancel, SBX_RS_CANCELLED);
  uint64_t one = 1;
  (void)!write(c->wake_fd, &one, sizeof one);
}

/* 0 when the (new) interpreter is ready.  Else err; a context that never
 * started (create) is deleted, a restarted one stays dead. */
static int await_ready(struct sbx_context *c, bool delete_on_failure, struct sbx_error *err)
{
  pthread_mutex_lock(&c->lock);
  uint64_t deadline = sbx_now_ms() + START_TIMEOUT_MS;
  while (c->state == SBX_CTX_STARTING && sbx_ctx_wait_locked(c, deadline))
    ;
  enum sbx_ctx_state st = c->state;
  bool failed = st == SBX_CTX_STARTING || st == SBX_CTX_DEAD;
  if (st == SBX_CTX_STARTING) {
    sbx_err_set(err, SBX_E_INTERNAL, ETIMEDOUT,
                "the %s interpreter did not start within "
                "%d s",
                c->language, START_TIMEOUT_MS / 1000);
    if (!delete_on_failure)
      sbx_ctx_poke_locked(c, SBX_CTX_KILL_PROTOCOL);
  } else if (st == SBX_CTX_DEAD) {
    sbx_err_set(err, SBX_E_CONFLICT, 0, "%s", c->dead_why);
  }
  if (failed && delete_on_failure) {
    c->deleted = true;
    sbx_ctx_poke_locked(c, SBX_CTX_KILL_DELETE);
  }
  pthread_mutex_unlock(&c->lock);
  if (failed && delete_on_failure)
    unlist(c);
  return failed ? -1 : 0;
}

int sbx_context_create(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       json_t *body, json_t **out, struct sbx_error *err)
{
  const char *lang = NULL;
  if (parse_language(body, &lang, err) < 0 || sbx_quota_cpu_check(core, who, err) < 0)
    return -1;
  struct sbx_live_session *ls = sbx_session_acquire_cap(core, who, sid, SBX_CAP_CONTEXTS, err);
  if (!ls)
    return -1;
  int64_t tenant = ls->tenant_id;
  if (count_room(ls, err) < 0 ||
      sbx_res_fds_take(core, ls->tenant_id, ls->id, SBX_RES_FDS_CONTEXT, err) < 0) {
    sbx_session_release(core, ls);
    return -1;
  }
  struct sbx_context *c = ctx_new(core, ls, lang);
  if (!c) {
    sbx_res_fds_give(tenant, sid, SBX_RES_FDS_CONTEXT);
    sbx_session_release(core, ls);
    return sbx_err_sys(err, ENOMEM, "context");
  }
  if (ctx_launch(c, err) < 0) { /* it released the session */
    sbx_res_fds_give(tenant, sid, SBX_RES_FDS_CONTEXT);
    sbx_ctx_unref(c);
    return -1;
  }
  int rc = await_ready(c, true, err);
  if (rc == 0) {
    *out = ctx_json(c);
    sbx_info("contexts", "%s: %s context %s started", sid, lang, c->id);
  }
  sbx_ctx_unref(c);
  return rc;
}

/* The session (with the contexts capability) and its context cid. */
static struct sbx_context *lookup(struct sbx_core *core, const struct sbx_principal *who,
                                  const char *sid, const char *cid, struct sbx_live_session **ls,
                                  struct sbx_error *err)
{
  *ls = sbx_session_acquire_cap(core, who, sid, SBX_CAP_CONTEXTS, err);
  if (!*ls)
    return NULL;
  struct sbx_context *c = find_ref(*ls, cid, err);
  if (!c)
    sbx_session_release(core, *ls);
  return c;
}

int sbx_context_list(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                     json_t **out, struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_acquire_cap(core, who, sid, SBX_CAP_CONTEXTS, err);
  if (!ls)
    return -1;
  json_t *arr = json_array();
  pthread_mutex_lock(&reg_lock);
  for (struct sbx_context *c = registry; c; c = c->next)
    if (c->ls == ls)
      json_array_append_new(arr, ctx_json(c));
  pthread_mutex_unlock(&reg_lock);
  sbx_session_release(core, ls);
  *out = json_pack("{s:o}", "contexts", arr);
  return 0;
}

int sbx_context_get(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                    const char *cid, json_t **out, struct sbx_error *err)
{
  struct sbx_live_session *ls;
  struct sbx_context *c = lookup(core, who, sid, cid, &ls, err);
  if (!c)
    return -1;
  *out = ctx_json(c);
  sbx_ctx_unref(c);
  sbx_session_release(core, ls);
  return 0;
}

int sbx_context_delete(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *cid, struct sbx_error *err)
{
  struct sbx_live_session *ls;
  struct sbx_context *c = lookup(core, who, sid, cid, &ls, err);
  if (!c)
    return -1;
  pthread_mutex_lock(&c->lock);
  c->deleted = true;
  sbx_ctx_poke_locked(c, SBX_CTX_KILL_DELETE);
  pthread_mutex_unlock(&c->lock);
  unlist(c); /* gone from the API at once; its thread ends on its own */
  sbx_ctx_unref(c);
  sbx_session_release(core, ls);
  return 0;
}

int sbx_context_restart(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                        const char *cid, json_t **out, struct sbx_error *err)
{
  if (sbx_quota_cpu_check(core, who, err) < 0) /* a new interpreter burns CPU */
    return -1;
  struct sbx_live_session *ls;
  struct sbx_context *c = lookup(core, who, sid, cid, &ls, err);
  if (!c)
    return -1;
  pthread_mutex_lock(&c->lock);
  uint64_t inc = c->incarnation;
  c->want_restart = true;
  sbx_ctx_poke_locked(c, SBX_CTX_KILL_RESTART);
  /* Wait for the new interpreter to begin, then for it to be ready. */
  uint64_t deadline = sbx_now_ms() + START_TIMEOUT_MS;
  while (c->incarnation == inc && !c->ended && sbx_ctx_wait_locked(c, deadline))
    ;
  bool began = c->incarnation != inc;
  pthread_mutex_unlock(&c->lock);
  int rc = began ? await_ready(c, false, err)
                 : sbx_err_set(err, SBX_E_CONFLICT, 0,
                               "context %s could not be restarted "
                               "(its session is ending)",
                               cid);
  if (rc == 0)
    *out = ctx_json(c);
  sbx_ctx_unref(c);
  sbx_session_release(core, ls);
  return rc;
}

/* For context_run.c: the session's context cid with a reference. */
struct sbx_context *sbx_ctx_lookup(struct sbx_core *core, const struct sbx_principal *who,
                                   const char *sid, const char *cid,
                                   struct sbx_live_session **ls, struct sbx_error *err)
{
  return lookup(core, who, sid, cid, ls, err);
}
