/* watch.c — GET …/watch?path=D: file events of a live session.
 *
 * sbx-init forks an inotify watcher inside the sandbox and hands back its
 * event pipe (runtime/sandbox.h, sbx_sandbox_watch).  One detached thread
 * per watch reads the pipe, turns each validated record into a JSON event
 * for the sink (the API's SSE stream) and never waits for the client: a
 * full stream drops the event and counts it, and the next event that fits
 * is preceded by an `overflow` event carrying the count.  The thread holds
 * the session and an exec slot (so delete, expiry and shutdown stop it at
 * once, and a watched session does not idle out); it ends when the client
 * leaves, the directory goes away or the session ends, then closes the
 * pipe, which stops the watcher. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/internal.h"
#include "core/resources.h"

#define TICK_MS 250 /* how often the thread looks whether the client left */

/* Concurrent watches per live session (SBX_WATCH_MAX_PER_SESSION). */
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
struct wcount {
  const struct sbx_live_session *ls;
  int n;
  struct wcount *next;
};
static struct wcount *counts;
static int threads; /* running watch threads (sbx_watch_drain) */
static pthread_cond_t threads_cond = PTHREAD_COND_INITIALIZER;

static bool count_take(const struct sbx_live_session *ls)
{
  pthread_mutex_lock(&count_lock);
  struct wcount *c = counts;
  while (c && c->ls != ls)
    c = c->next;
  if (!c && (c = calloc(1, sizeof *c))) {
    c->ls = ls;
    c->next = counts;
    counts = c;
  }
  bool ok = c && c->n < SBX_WATCH_MAX_PER_SESSION;
  if (ok)
    c->n++;
  pthread_mutex_unlock(&count_lock);
  return ok;
}

static void count_give(const struct sbx_live_session *ls)
{
  pthread_mutex_lock(&count_lock);
  for (struct wcount **pp = &counts; *pp; pp = &(*pp)->next) {
    struct wcount *c = *pp;
    if (c->ls != ls)
      continue;
    if (--c->n == 0) {
      *pp = c->next;
      free(c);
    }
    break;
  }
  pthread_mutex_unlock(&count_lock);
}

struct watch {
  struct sbx_core *core;
  struct sbx_live_session *ls;
  struct sbx_exec_slot *slot;
  int fd;
  struct sbx_watch_sink sink;
  char dir[4096];
  uint64_t dropped;
  struct sbx_watch_reader rd;
};

static const char *const kind_names[] = {
    [SBX_WATCH_CREATE] = "create",
    [SBX_WATCH_MODIFY] = "modify",
    [SBX_WATCH_DELETE] = "delete",
    [SBX_WATCH_MOVE] = "move",
};

static json_t *abs_path(const struct watch *w, const char *rel)
{
  char p[8200];
  snprintf(p, sizeof p, "%s%s%s", w->dir, *rel && strcmp(w->dir, "/") ? "/" : "", rel);
  return json_string(p);
}

/* 0 go on, -1 the client left. */
static int deliver(struct watch *w, const char *type, json_t *ev)
{
  if (w->dropped) {
    json_t *o = json_pack("{s:s, s:o, s:I}", "type", "overflow", "path", abs_path(w, ""),
                          "dropped", (json_int_t)w->dropped);
    int r = w->sink.event(w->sink.ctx, "overflow", o);
    if (r < 0) {
      json_decref(ev);
      return -1;
    }
    if (r == 0)
      w->dropped = 0;
  }
  int r = w->sink.event(w->sink.ctx, type, ev);
  if (r > 0)
    w->dropped++;
  return r < 0 ? -1 : 0;
}

/* 0 go on, 1 the directory is gone, -1 the client left. */
static int on_event(struct watch *w, const struct sbx_watch_event *e)
{
  if (e->kind == SBX_WATCH_GONE)
    return 1;
  if (e->kind == SBX_WATCH_READY)
    return deliver(w, "ready",
                   json_pack("{s:s, s:o}", "type", "ready", "path", abs_path(w, "")));
  if (e->kind == SBX_WATCH_OVERFLOW) {
    w->dropped += e->dropped ? e->dropped : 1;
    return 0;
  }
  const char *type = kind_names[e->kind];
  json_t *o = json_pack("{s:s, s:b}", "type", type, "dir", e->dir);
  if (e->kind == SBX_WATCH_MOVE) {
    json_object_set_new(o, "from", abs_path(w, e->path));
    json_object_set_new(o, "to", abs_path(w, e->to));
    json_object_set_new(o, "path", abs_path(w, e->to));
  } else {
    json_object_set_new(o, "path", abs_path(w, e->path));
  }
  return deliver(w, type, o);
}

/* Drains the pipe; returns NULL to go on, else why the watch ends. */
static const char *pump(struct watch *w)
{
  int f = sbx_watch_reader_fill(&w->rd, w->fd);
  struct sbx_watch_event ev;
  int r;
  while ((r = sbx_watch_reader_next(&w->rd, &ev)) == 1) {
    int s = on_event(w, &ev);
    if (s > 0)
      return "the watched directory was removed or moved";
    if (s < 0)
      return "client gone";
  }
  if (r < 0) {
    sbx_warn("watch", "%s: the watcher sent a malformed event; watch ended", w->ls->id);
    return "the watcher misbehaved";
  }
  if (f > 0)
    return "the watcher ended";
  return f < 0 ? "the watcher's pipe failed" : NULL;
}

static void *watch_main(void *arg)
{
  struct watch *w = arg;
  const char *why = NULL;
  while (!why) {
    struct pollfd p[2] = {{.fd = w->fd, .events = POLLIN},
                          {.fd = w->slot->cancel.efd, .events = POLLIN}};
    int r = poll(p, 2, TICK_MS);
    if (r < 0 && errno != EINTR)
      why = "poll failed";
    else if (p[1].revents) /* the session ended: its followers learn why */
      why = sbx_session_end_reason(w->slot->cancel.why);
    else if (p[0].revents)
      why = pump(w);
    if (!why && w->sink.gone(w->sink.ctx))
      why = "client gone";
  }
  close(w->fd); /* the watcher sees EPIPE/POLLERR and exits */
  sbx_session_slot_remove(w->core, w->ls, w->slot);
  sbx_res_fds_give(w->ls->tenant_id, w->ls->id, SBX_RES_FDS_WATCH);
  count_give(w->ls);
  sbx_session_release(w->core, w->ls);
  w->sink.end(w->sink.ctx, why);
  free(w);
  pthread_mutex_lock(&count_lock);
  if (--threads == 0)
    pthread_cond_broadcast(&threads_cond);
  pthread_mutex_unlock(&count_lock);
  return NULL;
}

void sbx_watch_drain(unsigned timeout_ms)
{
  struct timespec until;
  sbx_timespec_in(CLOCK_REALTIME, timeout_ms, &until);
  pthread_mutex_lock(&count_lock);
  while (threads > 0)
    if (pthread_cond_timedwait(&threads_cond, &count_lock, &until) != 0)
      break;
  pthread_mutex_unlock(&count_lock);
}

static void norm_dir(const char *dir, char *out, size_t len)
{
  snprintf(out, len, "%s%s", dir[0] == '/' ? "" : "/work/", dir);
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/')
    out[--n] = '\0';
}

static int too_many(struct sbx_error *err)
{
  sbx_err_set(err, SBX_E_QUOTA, 0, "this session already has %d watches (the limit)",
              SBX_WATCH_MAX_PER_SESSION);
  return sbx_err_fr(err, "cette session a déjà %d surveillances (la limite)",
                    SBX_WATCH_MAX_PER_SESSION);
}

int sbx_session_watch(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                      const char *dir, bool recursive, const struct sbx_watch_sink *sink,
                      struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_acquire_cap(core, who, id, SBX_CAP_WATCH, err);
  if (!ls)
    return -1;
  if (!count_take(ls)) {
    sbx_session_release(core, ls);
    return too_many(err);
  }
  if (sbx_res_fds_take(core, ls->tenant_id, ls->id, SBX_RES_FDS_WATCH, err) < 0) {
    count_give(ls);
    sbx_session_release(core, ls);
    return -1;
  }
  struct watch *w = calloc(1, sizeof *w);
  if (!w) {
    sbx_err_sys(err, ENOMEM, "watch");
    goto fail;
  }
  *w = (struct watch){.core = core, .ls = ls, .fd = -1, .sink = *sink};
  norm_dir(dir, w->dir, sizeof w->dir);
  if (sbx_sandbox_watch(ls->sb, w->dir, recursive, SBX_WATCH_MAX_DIRS, &w->fd, err) < 0)
    goto fail;
  if (!(w->slot = sbx_session_slot_add(core, ls))) {
    sbx_err_sys(err, ENOMEM, "watch");
    goto fail;
  }
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&count_lock);
  threads++;
  pthread_mutex_unlock(&count_lock);
  int e = pthread_create(&t, &at, watch_main, w);
  pthread_attr_destroy(&at);
  if (e == 0)
    return 0;
  pthread_mutex_lock(&count_lock);
  threads--;
  pthread_mutex_unlock(&count_lock);
  sbx_err_sys(err, e, "watch thread");
  sbx_session_slot_remove(core, ls, w->slot);
fail:
  if (w && w->fd >= 0)
    close(w->fd);
  free(w);
  sbx_res_fds_give(ls->tenant_id, ls->id, SBX_RES_FDS_WATCH);
  count_give(ls);
  sbx_session_release(core, ls);
  return -1;
}
