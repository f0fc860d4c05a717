/* session_cpu.c — a session's CPU, measured where it is actually spent: the
 * sandbox's cgroup (cpu.stat usage_usec on v2, cpuacct.usage on v1, through
 * the driver's `usage` op).  Background processes and context interpreters
 * run for minutes without an exec ending; charging only finished execs let
 * them burn CPU the daily quota never saw.  See internal.h for how the
 * charge and the usage records relate. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "core/internal.h"
#include "obs/usage.h"

/* A usage record for less than this is not worth a row. */
#define RECORD_MIN_S 0.001
/* Write the session's record once this much is pending, or this long after
 * the last one, so a crash loses little and the store is not flooded. */
#define RECORD_BATCH_S 1.0
#define RECORD_EVERY_S 60

void sbx_session_cpu_start(struct sbx_live_session *ls)
{
  struct sbx_usage u;
  ls->cpu_metered =
      ls->sb && sbx_driver_has(ls->sb->driver, usage) && ls->sb->driver->usage(ls->sb, &u) == 0;
  /* What the sandbox's own start-up cost is the daemon's, not the tenant's. */
  ls->cpu_seen = ls->cpu_metered ? u.cpu_seconds : 0;
  ls->cpu_recorded_at = sbx_wall_s();
  ls->cpu_mark_ms[0] = ls->cpu_mark_ms[1] = sbx_now_ms();
  ls->cpu_mark[0] = ls->cpu_mark[1] = ls->cpu_seen;
}

/* Keeps the newest reading, once the last kept one is a second old (cpu_lock). */
static void mark_locked(struct sbx_live_session *ls, uint64_t now_ms, double cpu)
{
  if (now_ms - ls->cpu_mark_ms[0] < 1000)
    return;
  ls->cpu_mark_ms[1] = ls->cpu_mark_ms[0];
  ls->cpu_mark[1] = ls->cpu_mark[0];
  ls->cpu_mark_ms[0] = now_ms;
  ls->cpu_mark[0] = cpu;
}

int sbx_session_cpu_sample(struct sbx_live_session *ls, double *cpu_seconds, double *cores)
{
  struct sbx_usage u;
  if (!ls->cpu_metered)
    return -1;
  pthread_mutex_lock(&ls->cpu_lock);
  int rc = ls->sb->driver->usage(ls->sb, &u);
  uint64_t now = sbx_now_ms();
  if (rc == 0) {
    int base = now - ls->cpu_mark_ms[0] >= 1000 ? 0 : 1;
    uint64_t ms = now - ls->cpu_mark_ms[base];
    double used = u.cpu_seconds - ls->cpu_mark[base];
    *cpu_seconds = u.cpu_seconds;
    *cores = ms > 0 && used > 0 ? used / ((double)ms / 1000.0) : 0;
    mark_locked(ls, now, u.cpu_seconds);
  }
  pthread_mutex_unlock(&ls->cpu_lock);
  return rc;
}

static void record(struct sbx_core *core, struct sbx_live_session *ls, double cpu, bool final)
{
  char *md = sbx_session_metadata(ls);
  struct sbx_error err = {0};
  struct sbx_usage_input in = {.tenant_id = ls->tenant_id,
                               .kind = "session",
                               .source_id = ls->id,
                               .profile = ls->profile->name,
                               .status = final ? "ended" : "running",
                               .metadata_json = md,
                               .cpu_seconds = cpu};
  if (sbx_usage_record(&core->store, &in, NULL, &err) < 0)
    sbx_warn("usage", "recording the CPU of session %s: %s", ls->id, err.msg);
  free(md);
}

/* flush: write what is pending now (the usage report then matches what
 * the quota counted). */
static void charge(struct sbx_core *core, struct sbx_live_session *ls, bool flush, bool final)
{
  if (!ls->cpu_metered)
    return;
  struct sbx_usage u;
  pthread_mutex_lock(&ls->cpu_lock);
  if (ls->sb->driver->usage(ls->sb, &u) < 0) {
    pthread_mutex_unlock(&ls->cpu_lock);
    return;
  }
  mark_locked(ls, sbx_now_ms(), u.cpu_seconds);
  double d = u.cpu_seconds > ls->cpu_seen ? u.cpu_seconds - ls->cpu_seen : 0;
  if (u.cpu_seconds > ls->cpu_seen)
    ls->cpu_seen = u.cpu_seconds;
  ls->cpu_unrecorded += d;
  int64_t now = sbx_wall_s();
  double take = 0;
  if (ls->cpu_unrecorded >= RECORD_MIN_S && (flush || ls->cpu_unrecorded >= RECORD_BATCH_S ||
                                             now - ls->cpu_recorded_at >= RECORD_EVERY_S)) {
    take = ls->cpu_unrecorded;
    ls->cpu_unrecorded = 0;
    ls->cpu_recorded_at = now;
  }
  pthread_mutex_unlock(&ls->cpu_lock);
  sbx_quota_cpu_charge(core, ls->tenant_id, d);
  if (take > 0)
    record(core, ls, take, final);
}

void sbx_session_cpu_charge(struct sbx_core *core, struct sbx_live_session *ls, bool final)
{
  charge(core, ls, final, final);
}

void sbx_session_cpu_exec_done(struct sbx_core *core, struct sbx_live_session *ls,
                               int64_t tenant, const struct sbx_exec_result *res, bool recorded)
{
  if (!ls->cpu_metered) {
    sbx_quota_cpu_add(core, tenant, res->cpu_seconds);
    return;
  }
  if (recorded && res->cpu_seconds > 0) { /* its own record holds that much already */
    pthread_mutex_lock(&ls->cpu_lock);
    ls->cpu_unrecorded -= res->cpu_seconds;
    pthread_mutex_unlock(&ls->cpu_lock);
  }
  /* Under a CPU limit the next request must see it at once; without one
   * the reaper's tick charges it (a cgroup read per exec is most of what
   * the daemon itself spends on an exec). */
  if (sbx_quota_cpu_limited(core, tenant))
    sbx_session_cpu_charge(core, ls, false);
}

static void stop_overdrawn(struct sbx_core *core, struct sbx_live_session *ls)
{
  if (!sbx_quota_cpu_exhausted(core, ls->tenant_id))
    return;
  pthread_mutex_lock(&core->sess_lock);
  struct sbx_proc_table *t = ls->procs;
  pthread_mutex_unlock(&core->sess_lock);
  unsigned n = sbx_procs_stop(t, "quota") + sbx_contexts_quota_stop(ls);
  if (n) /* the usage report then shows what the quota counted */
    charge(core, ls, true, false);
}

void sbx_sessions_cpu_tick(struct sbx_core *core)
{
  pthread_mutex_lock(&core->sess_lock);
  size_t n = 0, cap = core->nsessions;
  struct sbx_live_session **v = cap ? calloc(cap, sizeof *v) : NULL;
  for (struct sbx_live_session *ls = core->sessions; v && ls && n < cap; ls = ls->next)
    if (!ls->dying) {
      ls->refs++;
      v[n++] = ls;
    }
  pthread_mutex_unlock(&core->sess_lock);
  for (size_t i = 0; i < n; i++) {
    sbx_session_cpu_charge(core, v[i], false);
    stop_overdrawn(core, v[i]);
  }
  for (size_t i = 0; i < n; i++)
    sbx_session_release(core, v[i]);
  free(v);
}

const char *sbx_session_end_reason(enum sbx_reason why)
{
  switch (why) {
  case SBX_RS_SESSION_DELETED:
    return "session_deleted";
  case SBX_RS_TIMEOUT:
    return "session_expired";
  case SBX_RS_SANDBOX_LOST:
    return "sandbox_lost";
  case SBX_RS_DAEMON_SHUTDOWN:
    return "daemon_shutdown";
  default:
    return "session_ended";
  }
}
