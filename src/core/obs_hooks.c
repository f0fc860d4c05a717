/* obs_hooks.c — the core's side of observability:
 * starting the FinOps outbox and the metric gauges with the core, and the
 * one-line hooks the session and execution code call when a run finishes
 * (metrics + usage record).  Kept here so obs/ never reaches into the
 * core's structures: obs gets values and callbacks, nothing else. */
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "obs/metrics.h"
#include "obs/usage.h"
#include "core/internal.h"

/* ---- gauges, read at scrape time ---- */

static void sessions_active(void *ctx, sbx_metrics_emit_fn emit, void *ectx)
{
  struct sbx_core *core = ctx;
  for (size_t i = 0; i < core->profiles.count; i++) {
    const struct sbx_profile *p = &core->profiles.items[i];
    unsigned n = 0;
    pthread_mutex_lock(&core->sess_lock);
    for (struct sbx_live_session *ls = core->sessions; ls; ls = ls->next)
      n += ls->profile == p && !ls->dying;
    pthread_mutex_unlock(&core->sess_lock);
    emit(ectx, p->name, n);
  }
}

/* Profiles whose driver keeps a warm pool: its own count of what is idle
 * for the key prewarming registered (core.c on_ready: the defaults). */
static void pool_idle(void *ctx, sbx_metrics_emit_fn emit, void *ectx)
{
  struct sbx_core *core = ctx;
  for (size_t i = 0; i < core->profiles.count; i++) {
    const struct sbx_profile *p = &core->profiles.items[i];
    if (!p->available || !p->driver || !sbx_driver_has(p->driver, pool_idle))
      continue;
    emit(ectx, p->name, p->driver->pool_idle(p->name, &p->defaults));
  }
}

int sbx_obs_core_start(struct sbx_core *core, struct sbx_error *err)
{
  struct sbx_outbox_config oc = {.url = core->cfg.finops_url};
  if (sbx_outbox_start(&core->store, &oc, err) < 0)
    return -1;
  struct sbx_metrics_gauges g = {.sessions_active = sessions_active,
                                 .pool_idle = pool_idle,
                                 .ctx = core};
  sbx_metrics_set_gauges(&g);
  return 0;
}

void sbx_obs_core_stop(struct sbx_core *core)
{
  (void)core;
  sbx_metrics_set_gauges(NULL);
  sbx_outbox_stop();
}

bool sbx_core_metrics_auth(struct sbx_core *core) { return core->cfg.metrics_auth; }

/* ---- runs finishing ---- */

void sbx_obs_exec_done(struct sbx_core *core, const struct sbx_principal *who,
                       struct sbx_live_session *ls, const struct sbx_exec_result *res)
{
  const char *status = sbx_status_name(res->status);
  double dur = (double)res->duration_ms / 1000.0;
  sbx_metrics_execution(ls->profile->name, status, res->cpu_seconds, dur);
  /* The session's metadata (project/agent/run) as PATCH last stored it. */
  _cleanup_free_ char *md = sbx_session_metadata(ls);
  struct sbx_error err = {0};
  struct sbx_usage_input in = {.tenant_id = ls->tenant_id,
                               .tenant = who ? who->tenant : NULL,
                               .kind = "exec",
                               .source_id = ls->id,
                               .profile = ls->profile->name,
                               .status = status,
                               .metadata_json = md,
                               .cpu_seconds = res->cpu_seconds,
                               /* Same estimate as executions: peak memory × duration. */
                               .memory_mb_seconds =
                                   (double)res->memory_peak_bytes / 1048576.0 * dur,
                               .duration_seconds = dur};
  if (sbx_usage_record(&core->store, &in, NULL, &err) < 0)
    sbx_warn("usage", "recording the usage of an exec in %s: %s", ls->id, err.msg);
}

void sbx_obs_execution_done(struct sbx_core *core, const struct sbx_execution_row *row,
                            const struct sbx_usage_row *usage)
{
  sbx_metrics_execution(row->profile, row->status, row->cpu_seconds, row->duration_seconds);
  sbx_usage_stored(usage);
}

void sbx_obs_execution_usage(const struct sbx_execution_row *row, struct sbx_usage_row *out)
{
  struct sbx_usage_input in = {.tenant_id = row->tenant_id,
                               .kind = "execution",
                               .source_id = row->id,
                               .profile = row->profile,
                               .status = row->status,
                               .metadata_json = row->metadata_json,
                               .cpu_seconds = row->cpu_seconds,
                               .memory_mb_seconds = row->memory_mb_seconds,
                               .duration_seconds = row->duration_seconds};
  sbx_usage_row_of(&in, out);
}
