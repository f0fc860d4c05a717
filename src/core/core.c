/* core.c — start and stop of the daemon's world, the reaper thread,
 * readiness, and request counters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "core/fleet.h"
#include "core/internal.h"
#include "obs/metrics.h"

static void *reaper_main(void *arg)
{
  struct sbx_core *core = arg;
  pthread_mutex_lock(&core->reaper_lock);
  while (!core->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = core->cfg.reaper_interval_ms ? core->cfg.reaper_interval_ms : 1000;
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&core->reaper_cond, &core->reaper_lock, &ts);
    if (core->stopping)
      break;
    pthread_mutex_unlock(&core->reaper_lock);
    sbx_sessions_reap(core, sbx_wall_s());
    pthread_mutex_lock(&core->reaper_lock);
  }
  pthread_mutex_unlock(&core->reaper_lock);
  return NULL;
}

/* From a driver's probe thread: its leftovers go before it takes work. */
static void on_probed(void *ctx, const struct sbx_driver *d, bool ok)
{
  (void)ok; /* a driver that cannot run here may still have state of an earlier run */
  sbx_recover_driver(ctx, d);
}

/* After recovery cleared what a previous run left in the pools' cgroup
 * parent, and once the profile is available: keep it warm. */
static void on_ready(void *ctx, const struct sbx_profile *p)
{
  (void)ctx;
  if (p->pool_size > 0 && sbx_driver_has(p->driver, prewarm))
    p->driver->prewarm(p->name, &p->defaults);
}

int sbx_core_profile_ready(struct sbx_core *core, const struct sbx_profile *p,
                           struct sbx_error *err)
{
  unsigned wait_s = core->cfg.probe_wait_s ? core->cfg.probe_wait_s : 5;
  enum sbx_profile_state st = sbx_profile_wait(&core->profiles, p, wait_s * 1000ULL);
  if (st == SBX_PROFILE_AVAILABLE)
    return 0;
  if (st == SBX_PROFILE_UNAVAILABLE)
    return sbx_err_runtime_unavailable(err, p);
  sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
              "profile '%s' (driver %s) is not usable yet: the driver's start probe is still "
              "running after %u s of waiting; retry shortly (GET /v1/sandbox/profiles shows "
              "its state)",
              p->name, p->driver_name, wait_s);
  return sbx_err_fr(err,
                    "Le profil « %s » (pilote %s) n'est pas encore utilisable : la sonde de "
                    "démarrage du pilote tourne encore après %u s d'attente ; réessayez sous "
                    "peu — le code n'a pas été exécuté",
                    p->name, p->driver_name, wait_s);
}

enum sbx_profile_state sbx_core_profile_settle(struct sbx_core *core,
                                               const struct sbx_profile *p)
{
  enum sbx_profile_state st;
  while ((st = sbx_profile_wait(&core->profiles, p, 1000)) == SBX_PROFILE_PROBING &&
         !sbx_core_is_stopping(core) && !atomic_load(&core->profiles.stopping))
    ;
  return st;
}

static void init_sync(struct sbx_core *core)
{
  pthread_mutex_init(&core->sess_lock, NULL);
  pthread_mutex_init(&core->q_lock, NULL);
  pthread_cond_init(&core->q_cond, NULL);
  sbx_cond_init_monotonic(&core->done_cond); /* execution_get waits on it */
  pthread_cond_init(&core->stored_cond, NULL);
  pthread_mutex_init(&core->reaper_lock, NULL);
  pthread_cond_init(&core->reaper_cond, NULL);
}

/* The daemon's driver settings into the drivers' env. */
static int copy_driver_settings(struct sbx_core *core, const struct sbx_core_config *cfg,
                                struct sbx_error *err)
{
  size_t n = cfg->ndriver_settings;
  if (!n)
    return 0;
  if (!(core->drv_settings = calloc(n, sizeof *core->drv_settings)))
    return sbx_err_sys(err, ENOMEM, "driver settings");
  for (size_t i = 0; i < n; i++)
    core->drv_settings[i] =
        (struct sbx_driver_setting){cfg->driver_settings[i].key, cfg->driver_settings[i].value};
  core->drv_env.settings = core->drv_settings;
  core->drv_env.nsettings = n;
  return 0;
}

/* A core holding cfg (defaults for what it leaves at 0) and its locks;
 * nothing started yet.  NULL when out of memory. */
static struct sbx_core *core_new(const struct sbx_core_config *cfg)
{
  struct sbx_core *core = calloc(1, sizeof *core);
  if (!core)
    return NULL;
  core->cfg = *cfg;
  if (!core->cfg.workers)
    core->cfg.workers = 4;
  if (!core->cfg.queue_max)
    core->cfg.queue_max = 1024;
  if (core->cfg.default_ttl_s <= 0)
    core->cfg.default_ttl_s = 3600;
  if (core->cfg.max_ttl_s <= 0)
    core->cfg.max_ttl_s = 7 * 24 * 3600;
  core->state_dir = strdup(cfg->state_dir);
  core->started_at = sbx_wall_s();
  init_sync(core);
  return core;
}

/* What the drivers are told of this host, and their settings. */
static int setup_driver_env(struct sbx_core *core, const struct sbx_core_config *cfg,
                            struct sbx_error *err)
{
  core->drv_env = (struct sbx_driver_env){
      .state_dir = core->state_dir,
      .init_path = cfg->init_path,
      .runsc_path = cfg->runsc_path,
      .unsafe_process_enabled = cfg->unsafe_process_driver,
      .probe_timeout_ms = (cfg->probe_timeout_s ? cfg->probe_timeout_s : 10) * 1000u,
      .kvm_probe_timeout_ms =
          (cfg->gvisor_kvm_timeout_s ? cfg->gvisor_kvm_timeout_s : 2) * 1000u,
      .kvm_off = cfg->gvisor_kvm_off};
  return copy_driver_settings(core, cfg, err);
}

int sbx_core_start(const struct sbx_core_config *cfg, struct sbx_core **out,
                   struct sbx_error *err)
{
  struct sbx_core *core = core_new(cfg);
  if (!core)
    return sbx_err_sys(err, ENOMEM, "core");
  sbx_trace_start(); /* OTLP export when OTEL_* asks for it */
  if (!(core->quota = sbx_quota_new(core))) {
    sbx_err_sys(err, ENOMEM, "quotas");
    goto fail;
  }
  if (setup_driver_env(core, cfg, err) < 0)
    goto fail;
  if (sbx_profiles_build(cfg->profiles, cfg->nprofiles, cfg->default_profile, &core->profiles,
                         err) < 0)
    goto fail;
  if (sbx_store_open(cfg->database_url, core->state_dir, &core->store, err) < 0)
    goto fail;
  if (sbx_obs_core_start(core, err) < 0) /* metric gauges, FinOps outbox */
    goto fail;
  sbx_core_net_start(core);    /* before any sandbox can ask for an allowlist */
  sbx_core_images_start(core); /* the image store under the state dir */
  /* A fleet node ends what it held before a crash and joins before its
   * workers take from the shared queue. */
  if (sbx_fleet_start(core, err) < 0)
    goto fail;
  if (sbx_executions_start_workers(core, err) < 0)
    goto fail;
  /* The store's recovery now; each driver's, then its pool, from its probe
   * thread: the daemon serves while drivers probe (a hung runsc must not
   * keep /healthz silent), and work for a profile waits for its probe.
   * In a fleet the store is shared: the node's own part was done above. */
  if (!sbx_fleet_on(core))
    sbx_recover(core);
  struct sbx_probe_hooks hooks = {.probed = on_probed, .ready = on_ready, .ctx = core};
  if (sbx_profiles_probe_start(&core->profiles, &core->drv_env, &hooks, err) < 0)
    goto fail;
  if (pthread_create(&core->reaper, NULL, reaper_main, core) != 0) {
    sbx_err_sys(err, errno, "starting the reaper");
    goto fail;
  }
  core->reaper_started = true;
  *out = core;
  return 0;
fail:
  sbx_core_stop(core);
  sbx_core_free(core);
  return -1;
}

void sbx_core_stop(struct sbx_core *core)
{
  if (!core || core->stopped)
    return;
  core->stopped = true;
  /* Probes first: they give up at once (env.cancel), and none starts a
   * pool or recovery after this. */
  sbx_profiles_probe_stop(&core->profiles);
  sbx_executions_shutdown(core); /* sets stopping, cancels running work */
  if (core->reaper_started) {
    pthread_mutex_lock(&core->reaper_lock);
    pthread_cond_signal(&core->reaper_cond);
    pthread_mutex_unlock(&core->reaper_lock);
    pthread_join(core->reaper, NULL);
  }
  if (core->store.ops)
    sbx_sessions_shutdown(core);
  sbx_fleet_stop(core); /* after its sessions ended: its places are free */
  sbx_watch_drain(2000);
  sbx_core_net_stop(core); /* after every sandbox was detached */
  for (const struct sbx_driver *const *d = sbx_drivers_all(); *d; d++)
    if (sbx_driver_has(*d, shutdown))
      (*d)->shutdown();
  sbx_obs_core_stop(core); /* after the last run recorded its usage */
}

void sbx_core_free(struct sbx_core *core)
{
  if (!core)
    return;
  sbx_fleet_free(core);
  if (core->store.ops)
    sbx_store_close(&core->store);
  sbx_profiles_free(&core->profiles);
  sbx_quota_free(core->quota);
  sbx_trace_stop();
  free(core->drv_settings);
  free(core->state_dir);
  free(core);
}

struct sbx_store_handle *sbx_core_store(struct sbx_core *core) { return &core->store; }

bool sbx_core_is_stopping(struct sbx_core *core)
{
  pthread_mutex_lock(&core->q_lock);
  bool s = core->stopping;
  pthread_mutex_unlock(&core->q_lock);
  return s;
}

const struct sbx_profile_set *sbx_core_profiles(struct sbx_core *core)
{
  return &core->profiles;
}

json_t *sbx_core_readiness(struct sbx_core *core, bool *ready)
{
  struct sbx_error err = {0};
  bool store_ok = core->store.ops->ping(core->store.st, &err) == 0;
  json_t *drivers = json_object(), *probing = json_array();
  bool any = false, default_probed = false;
  const struct sbx_profile *def = sbx_profile_find(&core->profiles, NULL, NULL);
  for (size_t i = 0; i < core->profiles.count; i++) {
    const struct sbx_profile *p = &core->profiles.items[i];
    enum sbx_profile_state st = sbx_profile_state(p);
    any |= st == SBX_PROFILE_AVAILABLE;
    if (p == def)
      default_probed = st != SBX_PROFILE_PROBING;
    if (st == SBX_PROFILE_PROBING)
      json_array_append_new(probing, json_string(p->name));
    json_object_set_new(drivers, p->name,
                        st == SBX_PROFILE_AVAILABLE ? json_string("ok")
                        : st == SBX_PROFILE_PROBING ? json_string("probing")
                                                    : json_string(p->reason));
  }
  /* An API node of a fleet runs no sandbox: the store is what it needs. */
  bool runs = sbx_fleet_runs_work(core);
  *ready = store_ok && (!runs || (any && default_probed)) && !core->stopping;
  return json_pack("{s:s, s:{s:s, s:o, s:o}}", "status", *ready ? "ready" : "not_ready",
                   "checks", "store", store_ok ? "ok" : err.msg, "profiles", drivers, "probing",
                   probing);
}

void sbx_core_observe_http(struct sbx_core *core, const char *route, int status, uint64_t us)
{
  sbx_metrics_http(route, status, (double)us / 1e6);
  atomic_fetch_add(&core->http_requests, 1);
  if (status >= 500)
    atomic_fetch_add(&core->http_errors, 1);
}
