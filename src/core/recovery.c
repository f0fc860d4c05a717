/* recovery.c — reconciliation at start (DESIGN §6): nothing stays running
 * forever.  Each driver removes the sandboxes a previous run left (their
 * processes, cgroups, directories) once it has probed, before its profiles
 * take work; at start, executions that were running get a final status
 * (error, daemon_restarted), queued ones go back in the queue oldest first
 * (the scheduler then shares the workers between tenants; a worker waits
 * for their profile's probe), and sessions whose sandbox died with the old
 * daemon are marked lost. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "core/internal.h"

static int mark_restarted(void *ctx, const struct sbx_execution_row *r)
{
  struct sbx_core *core = ctx;
  struct sbx_execution_row fin = *r;
  snprintf(fin.status, sizeof fin.status, "error");
  snprintf(fin.reason, sizeof fin.reason, "daemon_restarted");
  fin.std_out.buf = fin.std_err.buf = NULL;
  fin.std_out.len = fin.std_err.len = 0;
  fin.error_json = "{\"reason\":\"daemon_restarted\",\"message\":\"the daemon restarted while "
                   "this execution was running; its sandbox was destroyed\"}";
  fin.finished_at = fin.updated_at = sbx_wall_s();
  fin.files = NULL;
  fin.nfiles = 0;
  struct sbx_error err = {0};
  if (core->store.ops->execution_finish(core->store.st, &fin, NULL, 0, NULL, &err) < 0)
    sbx_warn("recovery", "execution %s: %s", r->id, err.msg);
  else
    sbx_info("recovery", "execution %s was running: now error/daemon_restarted", r->id);
  return 0;
}

struct ids {
  struct id_entry {
    char id[64];
    int64_t tenant;
    int64_t created; /* queued executions only: their order */
  } * e;
  size_t n, cap;
};

static int collect_id(void *ctx, const char *id, int64_t tenant, int64_t created)
{
  struct ids *ids = ctx;
  size_t most = SIZE_MAX / sizeof *ids->e;
  if (sbx_array_grow(&ids->e, &ids->cap, ids->n + 1, sizeof *ids->e, most) < 0)
    return -1;
  struct id_entry *e = &ids->e[ids->n++];
  snprintf(e->id, sizeof e->id, "%s", id);
  e->tenant = tenant;
  e->created = created;
  return 0;
}

static int queued_cb(void *ctx, const struct sbx_execution_row *r)
{
  return collect_id(ctx, r->id, r->tenant_id, r->created_at);
}

static int by_age(const void *a, const void *b)
{
  const struct id_entry *x = a, *y = b;
  if (x->created != y->created)
    return x->created < y->created ? -1 : 1;
  return strcmp(x->id, y->id);
}

static int session_cb(void *ctx, const struct sbx_session_row *r)
{
  return collect_id(ctx, r->id, r->tenant_id, 0);
}

void sbx_recover_driver(struct sbx_core *core, const struct sbx_driver *d)
{
  if (!sbx_driver_has(d, recover))
    return;
  int n = d->recover(&core->drv_env);
  if (n > 0)
    sbx_info("recovery", "driver %s removed %d sandbox(es) left by a previous run", d->name, n);
}

/* Drivers recover from their probe threads (sbx_recover_driver): a driver
 * knows where its sandboxes live only once it has probed. */
void sbx_recover(struct sbx_core *core)
{
  struct sbx_error err = {0};
  if (core->store.ops->execution_list_status(core->store.st, "running", mark_restarted, core,
                                             &err) < 0)
    sbx_warn("recovery", "listing running executions: %s", err.msg);

  struct ids sessions = {0}, queued = {0};
  if (core->store.ops->session_list_ready(core->store.st, session_cb, &sessions, &err) < 0)
    sbx_warn("recovery", "listing sessions: %s", err.msg);
  for (size_t i = 0; i < sessions.n; i++) {
    core->store.ops->session_set_status(core->store.st, sessions.e[i].tenant, sessions.e[i].id,
                                        "lost", "daemon_restarted", NULL);
    sbx_info("recovery", "session %s lost its sandbox in the restart", sessions.e[i].id);
  }
  if (core->store.ops->execution_list_status(core->store.st, "queued", queued_cb, &queued,
                                             &err) < 0)
    sbx_warn("recovery", "listing queued executions: %s", err.msg);
  /* Oldest first, whatever order the store listed them in: each tenant's
   * executions start in the order they were submitted. */
  if (queued.n > 1)
    qsort(queued.e, queued.n, sizeof *queued.e, by_age);
  for (size_t i = 0; i < queued.n; i++)
    if (sbx_executions_enqueue(core, queued.e[i].id, queued.e[i].tenant) < 0)
      sbx_warn("recovery", "queue full: execution %s stays queued until the next start",
               queued.e[i].id);
  free(sessions.e);
  free(queued.e);
}
