/* fleet.c — see fleet.h.  One thread per node (the beat) does the
 * fleet's periodic work: heartbeat with this host's load, renew the leases
 * of the executions this node holds, refresh the view of the other nodes
 * that placement and routing read, and declare silent nodes dead.  The
 * view is a copy under one mutex, at most a beat old: placement reserves
 * on the database row, so a stale view costs a retry, never an
 * oversubscribed node. */
#include "core/fleet.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "core/internal.h"
#include "obs/metrics.h"
#include "obs/trace.h"

#define BEAT_MS 1000
#define LEASE_MS 10000             /* renewed every beat: ten missed beats */
#define STALE_MS 3000              /* a node this silent is not placed on */
#define DEFAULT_DEAD_AFTER_MS 6000 /* ≤ 10 s from its last beat to its sessions lost */
#define MAX_NODES 256
#define PLACE_TRIES 3
#define PROFILES_MAX (64 << 10) /* a node's available profile names, joined */

struct node_view {
  char id[SBX_FLEET_ID_MAX];
  char url[SBX_FLEET_URL_MAX];
  bool alive;
  int64_t age_ms;
  double score;
  int64_t slots;
  unsigned workers;
  char *profiles; /* ",a,b," the profiles it has available */
};

struct sbx_fleet {
  struct sbx_core *core;
  char id[SBX_FLEET_ID_MAX];
  char url[SBX_FLEET_URL_MAX];
  unsigned k;
  int64_t slots;
  int64_t dead_after_ms;
  int64_t started_at;
  pthread_t beat;
  bool beat_started;
  pthread_mutex_t lock; /* the view, stopping */
  pthread_cond_t cond;  /* stopping */
  bool stopping;
  struct node_view *view;
  size_t nview;
  unsigned alive, fleet_workers;
  unsigned seed;
};

bool sbx_fleet_on(struct sbx_core *core) { return core && core->fleet; }

bool sbx_fleet_runs_work(struct sbx_core *core)
{
  return !core->fleet || core->fleet->slots > 0;
}

const char *sbx_fleet_node_id(struct sbx_core *core)
{
  return core && core->fleet ? core->fleet->id : "";
}

/* ---- this host ---- */

static int64_t default_slots(void)
{
  struct sysinfo si;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t by_cpu = (ncpu > 0 ? ncpu : 1) * 32;
  if (sysinfo(&si) != 0)
    return by_cpu;
  /* one slot per 128 MiB of RAM: the default session's memory limit */
  int64_t by_mem = (int64_t)((uint64_t)si.totalram * si.mem_unit / (128ULL << 20));
  return by_mem > 0 && by_mem < by_cpu ? by_mem : by_cpu;
}

static int64_t mem_available(void)
{
  FILE *f = fopen("/proc/meminfo", "re");
  long long kb = -1;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb < 0 ? 0 : (int64_t)kb * 1024;
}

/* What the node offers: each profile's state (and reason) and warm pool
 * size, its workers. */
static char *node_info(struct sbx_core *core)
{
  json_t *profiles = json_object();
  for (size_t i = 0; i < core->profiles.count; i++) {
    const struct sbx_profile *p = &core->profiles.items[i];
    int st = sbx_profile_state(p);
    json_object_set_new(profiles, p->name,
                        json_pack("{s:s, s:s, s:s, s:i}", "state",
                                  st == SBX_PROFILE_AVAILABLE ? "available"
                                  : st == SBX_PROFILE_PROBING ? "probing"
                                                              : "unavailable",
                                  "driver", p->driver_name, "reason", p->reason, "pool_size",
                                  p->pool_size));
  }
  json_t *info = json_pack("{s:o, s:i}", "profiles", profiles, "workers",
                           sbx_fleet_runs_work(core) ? (int)core->cfg.workers : 0);
  char *s = info ? json_dumps(info, JSON_COMPACT) : NULL;
  json_decref(info);
  return s;
}

static void node_row(struct sbx_fleet *f, struct sbx_node_row *row)
{
  struct sysinfo si;
  double load[1] = {0};
  memset(row, 0, sizeof *row);
  snprintf(row->id, sizeof row->id, "%s", f->id);
  snprintf(row->advertise, sizeof row->advertise, "%s", f->url);
  row->slots = f->slots;
  row->ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (getloadavg(load, 1) == 1)
    row->load1 = load[0];
  if (sysinfo(&si) == 0)
    row->mem_total = (int64_t)((uint64_t)si.totalram * si.mem_unit);
  row->mem_avail = mem_available();
  row->info_json = node_info(f->core);
  row->started_at = f->started_at;
}

/* ---- the view ---- */

/* Lower is better: free slots weigh most, then memory, then CPU. */
static double load_score(const struct sbx_node_row *n)
{
  double slots = n->slots > 0 ? (double)n->used / (double)n->slots : 1.0;
  double mem = n->mem_total > 0 ? 1.0 - (double)n->mem_avail / (double)n->mem_total : 1.0;
  double cpu = n->ncpu > 0 ? fmin(n->load1 / n->ncpu, 2.0) / 2.0 : 1.0;
  return slots + 0.5 * mem + 0.5 * cpu;
}

static char *available_profiles(const char *info_json)
{
  json_t *info = info_json ? json_loads(info_json, 0, NULL) : NULL;
  struct sbx_buf b = SBX_BUF_INIT(PROFILES_MAX);
  sbx_buf_append(&b, ",", 1);
  const char *name;
  json_t *p;
  json_object_foreach(json_object_get(info, "profiles"), name, p)
  {
    const char *st = json_string_value(json_object_get(p, "state"));
    if (st && strcmp(st, "available") == 0) {
      if (sbx_buf_append(&b, name, strlen(name)) < 0 || sbx_buf_append(&b, ",", 1) < 0)
        break; /* past the ceiling: the rest is not offered */
    }
  }
  json_decref(info);
  return sbx_buf_steal(&b, NULL);
}

struct collect {
  struct node_view *v;
  size_t n;
};

static int collect_node(void *ctx, const struct sbx_node_row *row)
{
  struct collect *c = ctx;
  if (c->n == MAX_NODES)
    return 1;
  struct node_view *nv = &c->v[c->n++];
  memset(nv, 0, sizeof *nv);
  snprintf(nv->id, sizeof nv->id, "%s", row->id);
  snprintf(nv->url, sizeof nv->url, "%s", row->advertise);
  nv->alive = strcmp(row->state, "alive") == 0;
  nv->age_ms = row->heartbeat_age_ms;
  nv->score = load_score(row);
  nv->slots = row->slots;
  json_t *info = row->info_json ? json_loads(row->info_json, 0, NULL) : NULL;
  nv->workers = (unsigned)json_integer_value(json_object_get(info, "workers"));
  json_decref(info);
  nv->profiles = available_profiles(row->info_json);
  return 0;
}

static void view_free(struct node_view *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(v[i].profiles);
  free(v);
}

static void refresh_view(struct sbx_fleet *f)
{
  struct sbx_core *core = f->core;
  struct collect c = {.v = calloc(MAX_NODES, sizeof(struct node_view))};
  struct sbx_error err = {0};
  if (!c.v)
    return;
  if (core->store.ops->fleet->node_list(core->store.st, collect_node, &c, &err) < 0) {
    sbx_warn("fleet", "listing nodes: %s", err.msg);
    view_free(c.v, c.n);
    return;
  }
  unsigned alive = 0, workers = 0;
  for (size_t i = 0; i < c.n; i++)
    if (c.v[i].alive) {
      alive++;
      workers += c.v[i].workers;
    }
  pthread_mutex_lock(&f->lock);
  struct node_view *old = f->view;
  size_t nold = f->nview;
  f->view = c.v;
  f->nview = c.n;
  f->alive = alive ? alive : 1;
  f->fleet_workers = workers;
  pthread_mutex_unlock(&f->lock);
  view_free(old, nold);
  sbx_metrics_fleet_nodes(alive, (unsigned)c.n - alive);
}

unsigned sbx_fleet_alive(struct sbx_core *core)
{
  if (!sbx_fleet_on(core))
    return 1;
  pthread_mutex_lock(&core->fleet->lock);
  unsigned n = core->fleet->alive;
  pthread_mutex_unlock(&core->fleet->lock);
  return n ? n : 1;
}

/* The fleet-wide cap on one tenant's running executions: one worker of
 * the whole fleet stays free for the other tenants, as on one node. */
int64_t sbx_fleet_tenant_cap(struct sbx_core *core)
{
  if (core->cfg.workers_per_tenant)
    return core->cfg.workers_per_tenant;
  pthread_mutex_lock(&core->fleet->lock);
  unsigned w = core->fleet->fleet_workers;
  pthread_mutex_unlock(&core->fleet->lock);
  if (w < core->cfg.workers)
    w = core->cfg.workers;
  return w > 1 ? w - 1 : 1;
}

/* ---- the beat ---- */

static int reaped(void *ctx, const struct sbx_node_reaped *r)
{
  (void)ctx;
  sbx_warn("fleet",
           "node %s missed its heartbeats: declared dead; %lld session(s) lost, %lld running "
           "execution(s) ended node_lost, %lld taken execution(s) back in the queue",
           r->id, (long long)r->sessions, (long long)r->failed, (long long)r->requeued);
  sbx_metrics_fleet_node_dead();
  return 0;
}

static void beat_once(struct sbx_fleet *f)
{
  struct sbx_core *core = f->core;
  const struct sbx_store_fleet_ops *ops = core->store.ops->fleet;
  struct sbx_error err = {0};
  struct sbx_node_row row;
  node_row(f, &row);
  bool alive = true;
  if (ops->node_beat(core->store.st, &row, &alive, &err) < 0)
    sbx_warn("fleet", "heartbeat: %s", err.msg);
  else if (!alive) {
    /* Declared dead while it lived (a stall, a partition): the fleet has
     * already given its sessions up and re-queued its work. */
    sbx_warn("fleet",
             "node %s was declared dead by the fleet; ending its sessions and "
             "joining again",
             f->id);
    sbx_sessions_drop(core, "lost", SBX_RS_NODE_LOST);
    if (ops->node_join(core->store.st, &row, &err) < 0)
      sbx_warn("fleet", "joining again: %s", err.msg);
  }
  sbx_node_row_free(&row);
  if (ops->exec_renew(core->store.st, f->id, LEASE_MS, &err) < 0)
    sbx_warn("fleet", "renewing leases: %s", err.msg);
  if (ops->node_reap(core->store.st, f->dead_after_ms, reaped, f, &err) < 0)
    sbx_warn("fleet", "reaping nodes: %s", err.msg);
  int64_t depth = 0, age = 0;
  if (ops->queue_stats(core->store.st, &depth, &age, &err) == 0)
    sbx_metrics_fleet_queue((double)depth, (double)age);
  refresh_view(f);
}

static void *beat_main(void *arg)
{
  struct sbx_fleet *f = arg;
  pthread_mutex_lock(&f->lock);
  while (!f->stopping) {
    pthread_mutex_unlock(&f->lock);
    beat_once(f);
    pthread_mutex_lock(&f->lock);
    struct timespec until;
    sbx_timespec_in(CLOCK_MONOTONIC, BEAT_MS, &until);
    while (!f->stopping && pthread_cond_timedwait(&f->cond, &f->lock, &until) != ETIMEDOUT)
      ;
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

int sbx_fleet_start(struct sbx_core *core, struct sbx_error *err)
{
  const struct sbx_core_config *cfg = &core->cfg;
  if (!cfg->cluster)
    return 0;
  if (!core->store.ops->fleet)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "--cluster needs a shared PostgreSQL database (--database "
                       "postgres://…); the %s store serves one daemon",
                       core->store.ops->name);
  if (!cfg->node_id || !cfg->node_id[0] || strlen(cfg->node_id) >= SBX_FLEET_ID_MAX)
    return sbx_err_set(err, SBX_E_INVALID, 0, "--cluster needs --node-id (1 to %d characters)",
                       SBX_FLEET_ID_MAX - 1);
  if (!cfg->advertise || strncmp(cfg->advertise, "http://", 7) != 0 ||
      strlen(cfg->advertise) >= SBX_FLEET_URL_MAX)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "--cluster needs --advertise http://HOST:PORT, the address the other "
                       "nodes reach this one at");
  struct sbx_fleet *f = calloc(1, sizeof *f);
  if (!f)
    return sbx_err_sys(err, ENOMEM, "fleet");
  f->core = core;
  snprintf(f->id, sizeof f->id, "%s", cfg->node_id);
  snprintf(f->url, sizeof f->url, "%s", cfg->advertise);
  size_t ul = strlen(f->url);
  while (ul > 7 && f->url[ul - 1] == '/')
    f->url[--ul] = '\0';
  f->k = cfg->placement_k ? cfg->placement_k : 3;
  f->slots = cfg->node_slots >= 0 ? cfg->node_slots : default_slots();
  f->dead_after_ms = cfg->node_dead_after_ms ? cfg->node_dead_after_ms : DEFAULT_DEAD_AFTER_MS;
  f->started_at = sbx_wall_s();
  f->seed = (unsigned)sbx_now_ns();
  f->alive = 1;
  pthread_mutex_init(&f->lock, NULL);
  sbx_cond_init_monotonic(&f->cond);
  core->fleet = f;
  /* What this node held before a crash is ended first: its sandboxes died
   * with it (recovery does the same for a single daemon). */
  struct sbx_node_reaped rel = {0};
  if (core->store.ops->fleet->node_release(core->store.st, f->id, "daemon_restarted", &rel,
                                           err) < 0)
    return -1;
  if (rel.sessions || rel.failed)
    sbx_info("fleet", "node %s restarted: %lld session(s) lost, %lld execution(s) ended", f->id,
             (long long)rel.sessions, (long long)rel.failed);
  struct sbx_node_row row;
  node_row(f, &row);
  int rc = core->store.ops->fleet->node_join(core->store.st, &row, err);
  sbx_node_row_free(&row);
  if (rc < 0)
    return -1;
  refresh_view(f);
  if (pthread_create(&f->beat, NULL, beat_main, f) != 0)
    return sbx_err_sys(err, errno, "starting the fleet heartbeat");
  f->beat_started = true;
  sbx_trace_set_instance(f->id);
  sbx_info("fleet", "node %s joined at %s: %lld slots, best-of-%u placement, dead after %lld ms",
           f->id, f->url, (long long)f->slots, f->k, (long long)f->dead_after_ms);
  return 0;
}

void sbx_fleet_stop(struct sbx_core *core)
{
  struct sbx_fleet *f = core->fleet;
  if (!f)
    return;
  pthread_mutex_lock(&f->lock);
  f->stopping = true;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  if (f->beat_started)
    pthread_join(f->beat, NULL);
  f->beat_started = false;
  struct sbx_error err = {0};
  struct sbx_node_reaped rel = {0};
  const struct sbx_store_fleet_ops *ops = core->store.ops->fleet;
  if (ops->node_release(core->store.st, f->id, "node_left", &rel, &err) < 0 ||
      ops->node_leave(core->store.st, f->id, &err) < 0)
    sbx_warn("fleet", "leaving: %s", err.msg);
  else
    sbx_info("fleet", "node %s left the fleet", f->id);
}

void sbx_fleet_free(struct sbx_core *core)
{
  struct sbx_fleet *f = core->fleet;
  if (!f)
    return;
  view_free(f->view, f->nview);
  pthread_mutex_destroy(&f->lock);
  pthread_cond_destroy(&f->cond);
  free(f);
  core->fleet = NULL;
}

/* ---- placement ---- */

static bool offers(const struct node_view *n, const char *profile)
{
  char key[80];
  snprintf(key, sizeof key, ",%s,", profile);
  return n->alive && n->age_ms < STALE_MS && n->profiles && strstr(n->profiles, key);
}

/* Best-of-K over the candidates (the view copied under the lock), this
 * node preferred when its score is within 0.05 of the best sampled. */
static int choose(struct sbx_fleet *f, struct node_view *cand, size_t n, json_t *sampled)
{
  int best = -1, here = -1;
  unsigned k = f->k < n ? f->k : (unsigned)n;
  for (unsigned i = 0; i < k; i++) { /* a partial Fisher-Yates: k distinct samples */
    size_t j = i + (size_t)rand_r(&f->seed) % (n - i);
    struct node_view t = cand[i];
    cand[i] = cand[j];
    cand[j] = t;
    json_array_append_new(sampled, json_pack("{s:s, s:f}", "node", cand[i].id, "score",
                                             round(cand[i].score * 1000) / 1000));
    if (best < 0 || cand[i].score < cand[best].score)
      best = (int)i;
  }
  for (size_t i = 0; i < n; i++)
    if (strcmp(cand[i].id, f->id) == 0)
      here = (int)i;
  if (here >= 0 && best >= 0 && cand[here].score <= cand[best].score + 0.05)
    return here;
  return best;
}

/* The place just reserved, counted in the view until the next refresh
 * reads it back from the database. */
static void view_reserved(struct sbx_fleet *f, const char *node)
{
  pthread_mutex_lock(&f->lock);
  for (size_t i = 0; i < f->nview; i++)
    if (strcmp(f->view[i].id, node) == 0 && f->view[i].slots > 0)
      f->view[i].score += 1.0 / (double)f->view[i].slots;
  pthread_mutex_unlock(&f->lock);
}

int sbx_fleet_place(struct sbx_core *core, const char *profile, struct sbx_fleet_placement *out,
                    struct sbx_error *err)
{
  struct sbx_fleet *f = core->fleet;
  memset(out, 0, sizeof *out);
  uint64_t t0 = sbx_now_ns();
  struct node_view cand[MAX_NODES];
  size_t n = 0;
  pthread_mutex_lock(&f->lock);
  for (size_t i = 0; i < f->nview; i++)
    if (offers(&f->view[i], profile)) {
      cand[n] = f->view[i];
      cand[n++].profiles = NULL; /* not copied: the view owns it */
    }
  pthread_mutex_unlock(&f->lock);
  for (int attempt = 0; attempt < PLACE_TRIES && n > 0; attempt++) {
    json_t *sampled = json_array();
    int c = choose(f, cand, n, sampled);
    bool ok = false;
    if (core->store.ops->fleet->node_reserve(core->store.st, cand[c].id, 1, &ok, err) < 0) {
      json_decref(sampled);
      return -1;
    }
    if (ok) {
      view_reserved(f, cand[c].id); /* the next placement sees it before the next beat */
      snprintf(out->to.node, sizeof out->to.node, "%s", cand[c].id);
      snprintf(out->to.url, sizeof out->to.url, "%s", cand[c].url);
      out->here = strcmp(cand[c].id, f->id) == 0;
      double us = (double)(sbx_now_ns() - t0) / 1e3;
      out->decision = json_pack("{s:s, s:f, s:i, s:o, s:f}", "node", cand[c].id, "score",
                                round(cand[c].score * 1000) / 1000, "k", (int)f->k, "candidates",
                                sampled, "micros", round(us));
      sbx_metrics_fleet_placement(out->here, us / 1e6);
      return 0;
    }
    json_decref(sampled);
    cand[c] = cand[--n]; /* full since the view was read: the others */
  }
  sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
              "no live node of the fleet has room for a '%s' session; retry later", profile);
  sbx_err_fr(err,
             "Aucun nœud actif de la flotte n'a de place pour une session « %s » ; réessayez "
             "plus tard",
             profile);
  snprintf(err->field, sizeof err->field, "profile");
  return -1;
}

void sbx_fleet_unplace(struct sbx_core *core, const char *node)
{
  if (!sbx_fleet_on(core))
    return;
  bool ok;
  struct sbx_error err = {0};
  if (core->store.ops->fleet->node_reserve(core->store.st, node, -1, &ok, &err) < 0)
    sbx_warn("fleet", "releasing a place on %s: %s", node, err.msg);
}

void sbx_fleet_placement_free(struct sbx_fleet_placement *p)
{
  json_decref(p->decision);
  p->decision = NULL;
}

/* A create that came without a placement (the E2B and MCP surfaces call
 * the core directly): its place on this node. */
int sbx_fleet_reserve_here(struct sbx_core *core, struct sbx_error *err)
{
  bool ok = false;
  if (core->store.ops->fleet->node_reserve(core->store.st, core->fleet->id, 1, &ok, err) < 0)
    return -1;
  if (ok)
    return 0;
  return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                     "this node has no free sandbox slot (%lld in use)",
                     (long long)core->fleet->slots);
}

/* ---- routing ---- */

static bool alive_url(struct sbx_fleet *f, const char *node, struct sbx_fleet_target *to)
{
  bool found = false;
  pthread_mutex_lock(&f->lock);
  for (size_t i = 0; i < f->nview; i++)
    if (strcmp(f->view[i].id, node) == 0 && f->view[i].alive) {
      snprintf(to->node, sizeof to->node, "%s", node);
      snprintf(to->url, sizeof to->url, "%s", f->view[i].url);
      found = true;
    }
  pthread_mutex_unlock(&f->lock);
  return found;
}

/* A stored object in its live status (live) held by another node that is
 * alive: where its requests go. */
static bool held_elsewhere(struct sbx_fleet *f, bool live, const char *node,
                           struct sbx_fleet_target *to)
{
  return live && node[0] && strcmp(node, f->id) != 0 && alive_url(f, node, to);
}

int sbx_fleet_session_elsewhere(struct sbx_core *core, const struct sbx_principal *who,
                                const char *id, struct sbx_fleet_target *to,
                                struct sbx_error *err)
{
  if (!sbx_fleet_on(core) || sbx_session_is_live_here(core, who, id))
    return 0;
  struct sbx_session_row row = {0};
  if (core->store.ops->session_get(core->store.st, who->tenant_id, id, &row, err) < 0)
    return err->code == SBX_E_NOT_FOUND ? 0 : -1;
  bool remote = held_elsewhere(core->fleet, strcmp(row.status, "ready") == 0, row.node_id, to);
  sbx_session_row_free(&row);
  return remote;
}

int sbx_fleet_execution_elsewhere(struct sbx_core *core, const struct sbx_principal *who,
                                  const char *id, struct sbx_fleet_target *to,
                                  struct sbx_error *err)
{
  if (!sbx_fleet_on(core))
    return 0;
  struct sbx_execution_row row = {0};
  if (core->store.ops->execution_get(core->store.st, who->tenant_id, id, &row, err) < 0)
    return err->code == SBX_E_NOT_FOUND ? 0 : -1;
  bool remote = held_elsewhere(core->fleet, strcmp(row.status, "running") == 0, row.node_id, to);
  sbx_execution_row_free(&row);
  return remote;
}

void sbx_fleet_count_forward(const char *result, double seconds)
{
  sbx_metrics_fleet_forward(result, seconds);
}

bool sbx_fleet_traceparent(char out[64])
{
  struct sbx_trace_ctx ctx;
  if (!sbx_trace_current(&ctx))
    return false;
  sbx_traceparent_format(&ctx, out);
  return true;
}

/* ---- GET /v1/cluster/nodes ---- */

static int node_json(void *ctx, const struct sbx_node_row *row)
{
  json_t *info = row->info_json ? json_loads(row->info_json, 0, NULL) : NULL;
  json_t *n =
      json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:f, s:I, s:I, s:f, s:I, s:o, s:o, s:I}", "id",
                row->id, "advertise", row->advertise, "state", row->state, "slots",
                (json_int_t)row->slots, "used", (json_int_t)row->used, "cpus", row->ncpu,
                "load1", row->load1, "memory_bytes", (json_int_t)row->mem_total,
                "memory_available_bytes", (json_int_t)row->mem_avail, "score",
                round(load_score(row) * 1000) / 1000, "heartbeat_age_ms",
                (json_int_t)row->heartbeat_age_ms, "started_at", sbx_time_json(row->started_at),
                "profiles", json_incref(json_object_get(info, "profiles")) ?: json_object(),
                "joins", (json_int_t)row->joins);
  json_decref(info);
  return n && json_array_append_new(ctx, n) == 0 ? 0 : -1;
}

int sbx_fleet_nodes_json(struct sbx_core *core, json_t **out, struct sbx_error *err)
{
  json_t *items = json_array();
  if (!items)
    return sbx_err_sys(err, ENOMEM, "nodes");
  if (sbx_fleet_on(core) &&
      core->store.ops->fleet->node_list(core->store.st, node_json, items, err) < 0) {
    json_decref(items);
    return -1;
  }
  *out = json_pack("{s:b, s:s, s:o}", "cluster", sbx_fleet_on(core), "node",
                   sbx_fleet_node_id(core), "items", items);
  return *out ? 0 : sbx_err_sys(err, ENOMEM, "nodes");
}
