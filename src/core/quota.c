/* quota.c — per-tenant quota and rate-limit state (see quota.h): live
 * session reservations, the ids of queued + running executions, the
 * CPU-seconds of the UTC day, and the request token bucket.  Tenants are
 * spread over lock stripes by id so the per-request rate check of one
 * tenant never waits on another's. */
#include "core/quota.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "core/fleet.h"
#include "core/internal.h"

#define STRIPES 16
#define FLEET_CPU_REFRESH_NS (2ULL * 1000000000ULL)

struct tstate {
  int64_t tenant_id;
  bool resolved; /* lim comes from the tenant's name */
  struct sbx_quota_limits lim;
  int pending_sessions; /* reserved by creates in flight */
  char (*execs)[64];    /* queued + running execution ids */
  size_t nexecs, capexecs;
  double cpu_used; /* CPU seconds of cpu_day */
  int64_t cpu_day; /* days since the epoch (UTC) */
  bool cpu_seeded;
  /* In a fleet: when the store was last read, and the CPU charged here
   * from cgroups that no stored record holds (other nodes' runs arrive
   * through the store, re-read every FLEET_CPU_REFRESH_NS). */
  uint64_t cpu_seed_ns;
  double cpu_charged;
  struct sbx_token_bucket bucket;
  struct tstate *next;
};

struct sbx_quota {
  struct sbx_core *core;
  struct {
    pthread_mutex_t lock;
    struct tstate *list;
  } stripe[STRIPES];
};

/* ---- the token bucket ---- */

bool sbx_token_bucket_take(struct sbx_token_bucket *b, double rate, double burst,
                           uint64_t now_ns, unsigned *retry_s)
{
  if (burst < 1)
    burst = 1;
  if (b->last_ns == 0)
    b->tokens = burst;
  else if (now_ns > b->last_ns)
    b->tokens = fmin(burst, b->tokens + (double)(now_ns - b->last_ns) / 1e9 * rate);
  if (now_ns > b->last_ns || b->last_ns == 0)
    b->last_ns = now_ns ? now_ns : 1;
  if (b->tokens >= 1.0) {
    b->tokens -= 1.0;
    return true;
  }
  double wait = rate > 0 ? (1.0 - b->tokens) / rate : 1.0;
  *retry_s = wait <= 1.0 ? 1u : (unsigned)ceil(wait - 1e-9); /* 8.999…/9.000…01 → 9 */
  return false;
}

/* ---- state ---- */

struct sbx_quota *sbx_quota_new(struct sbx_core *core)
{
  struct sbx_quota *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->core = core;
  for (int i = 0; i < STRIPES; i++)
    pthread_mutex_init(&q->stripe[i].lock, NULL);
  return q;
}

void sbx_quota_free(struct sbx_quota *q)
{
  if (!q)
    return;
  for (int i = 0; i < STRIPES; i++) {
    for (struct tstate *t = q->stripe[i].list, *n; t; t = n) {
      n = t->next;
      free(t->execs);
      free(t);
    }
    pthread_mutex_destroy(&q->stripe[i].lock);
  }
  free(q);
}

static pthread_mutex_t *lock_of(struct sbx_quota *q, int64_t tenant)
{
  return &q->stripe[(uint64_t)tenant % STRIPES].lock;
}

/* The tenant's state (created on first use); caller holds its stripe lock.
 * name may be NULL (a worker knows only the id): the limits are then the
 * defaults until a call that knows the name resolves them. */
static struct tstate *state_locked(struct sbx_quota *q, int64_t tenant, const char *name)
{
  struct tstate **head = &q->stripe[(uint64_t)tenant % STRIPES].list, *t;
  for (t = *head; t && t->tenant_id != tenant; t = t->next)
    ;
  if (!t) {
    if (!(t = calloc(1, sizeof *t)))
      return NULL;
    t->tenant_id = tenant;
    t->cpu_day = -1;
    t->next = *head;
    *head = t;
  }
  if (!t->resolved) {
    t->lim = sbx_quota_config_resolve(&q->core->cfg.quota, name,
                                      q->core->cfg.max_sessions_per_tenant);
    t->resolved = name != NULL;
  }
  return t;
}

/* Locks the tenant's stripe and returns its state, as state_locked (NULL:
 * out of memory); the stripe stays locked either way until unlock_tenant. */
static struct tstate *lock_tenant(struct sbx_quota *q, int64_t tenant, const char *name)
{
  pthread_mutex_lock(lock_of(q, tenant));
  return state_locked(q, tenant, name);
}

static void unlock_tenant(struct sbx_quota *q, int64_t tenant)
{
  pthread_mutex_unlock(lock_of(q, tenant));
}

/* The tenant's limits, resolved from its name. */
static struct sbx_quota_limits limits_of(struct sbx_quota *q, const struct sbx_principal *who)
{
  struct sbx_quota_limits lim = {0};
  struct tstate *t = lock_tenant(q, who->tenant_id, who->tenant);
  if (t)
    lim = t->lim;
  unlock_tenant(q, who->tenant_id);
  return lim;
}

int64_t sbx_quota_executions_limit(struct sbx_core *core, const struct sbx_principal *who)
{
  return core->quota ? limits_of(core->quota, who).executions : 0;
}

static int64_t today(void) { return sbx_wall_s() / 86400; }

static void cpu_roll(struct tstate *t)
{
  int64_t d = today();
  if (t->cpu_day != d) {
    t->cpu_day = d;
    t->cpu_used = 0;
    t->cpu_charged = 0;
  }
}

/* Under the tenant's lock: whether today's CPU seconds reached its daily
 * limit (the day rolled over first). */
static bool cpu_used_up(struct tstate *t)
{
  cpu_roll(t);
  return t->lim.cpu_seconds_per_day > 0 && t->cpu_used >= t->lim.cpu_seconds_per_day;
}

static int sum_cpu(void *ctx, const struct sbx_usage_group *g)
{
  *(double *)ctx += g->cpu_seconds;
  return 0;
}

/* Once per tenant: adds today's usage records from the store, so what was
 * used before a restart still counts.  Done at the tenant's first check or
 * run, before this process counted anything for it in memory; a run's
 * usage record is stored before sbx_quota_cpu_add is called, so when that
 * call is the first it finds its own run in the store already.  Returns
 * true when this call read the store successfully. */
static bool cpu_seed(struct sbx_quota *q, int64_t tenant)
{
  struct sbx_core *core = q->core;
  bool fleet = sbx_fleet_on(core);
  uint64_t now = sbx_now_ns();
  struct tstate *t = lock_tenant(q, tenant, NULL);
  bool need = t && (!t->cpu_seeded || (fleet && now - t->cpu_seed_ns > FLEET_CPU_REFRESH_NS));
  unlock_tenant(q, tenant);
  if (!need)
    return false;
  int64_t from = today() * 86400;
  double sum = 0;
  struct sbx_error err = {0};
  bool read = core->store.ops->usage_query &&
              core->store.ops->usage_query(core->store.st, tenant, "profile", from, 0, sum_cpu,
                                           &sum, &err) == 0;
  if (!read && err.msg[0])
    sbx_warn("quota", "tenant %lld: reading today's usage: %s", (long long)tenant, err.msg);
  bool seeded_here = false;
  if ((t = lock_tenant(q, tenant, NULL)) && fleet && read) {
    cpu_roll(t);
    if (t->cpu_day == from / 86400)
      t->cpu_used = sum + t->cpu_charged; /* every node's records, and ours not recorded */
    t->cpu_seeded = true;
    t->cpu_seed_ns = now;
    seeded_here = true;
  } else if (t && !t->cpu_seeded) {
    cpu_roll(t);
    if (t->cpu_day == from / 86400)
      t->cpu_used += sum;
    t->cpu_seeded = true;
    seeded_here = read;
  }
  unlock_tenant(q, tenant);
  return seeded_here;
}

/* ---- errors ---- */

static int exceeded(struct sbx_error *err, const char *limit, double value)
{
  snprintf(err->field, sizeof err->field, "%s:%.15g", limit, value);
  return -1;
}

static int cpu_error(struct sbx_error *err, const struct tstate *t)
{
  sbx_err_set(err, SBX_E_QUOTA, 0,
              "quota exceeded: this tenant used %.3f CPU seconds today "
              "(UTC), its daily limit is %g; it resets at 00:00 UTC",
              t->cpu_used, t->lim.cpu_seconds_per_day);
  sbx_err_fr(err,
             "Quota dépassé : ce locataire a utilisé %.3f secondes CPU aujourd'hui (UTC), "
             "sa limite quotidienne est %g ; remise à zéro à 00:00 UTC",
             t->cpu_used, t->lim.cpu_seconds_per_day);
  return exceeded(err, "cpu_seconds_per_day", t->lim.cpu_seconds_per_day);
}

int sbx_quota_executions_error(struct sbx_error *err, int64_t count, int64_t limit)
{
  sbx_err_set(err, SBX_E_QUOTA, 0,
              "quota exceeded: this tenant has %lld executions queued "
              "or running and may have %lld; retry when one finishes",
              (long long)count, (long long)limit);
  sbx_err_fr(err,
             "Quota dépassé : ce locataire a %lld exécutions en attente ou en cours et "
             "peut en avoir %lld ; réessayez quand l'une sera terminée",
             (long long)count, (long long)limit);
  return exceeded(err, "executions", (double)limit);
}

static int execs_error(struct sbx_error *err, const struct tstate *t)
{
  return sbx_quota_executions_error(err, (int64_t)t->nexecs, t->lim.executions);
}

static int oom(struct sbx_error *err) { return sbx_err_sys(err, ENOMEM, "quota state"); }

/* ---- the checks ---- */

int sbx_quota_request(struct sbx_core *core, const struct sbx_principal *who, unsigned *retry_s,
                      struct sbx_error *err)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return 0;
  /* In a fleet each live node takes its share of the rate and burst, so
   * the fleet as a whole holds the tenant's rate whatever node it calls. */
  double share = 1.0 / sbx_fleet_alive(core);
  struct tstate *t = lock_tenant(q, who->tenant_id, who->tenant);
  bool ok = !t || t->lim.rps <= 0 ||
            sbx_token_bucket_take(&t->bucket, t->lim.rps * share, t->lim.burst * share,
                                  sbx_now_ns(), retry_s);
  double rps = t ? t->lim.rps : 0, burst = t ? t->lim.burst : 0;
  unlock_tenant(q, who->tenant_id);
  if (ok)
    return 0;
  sbx_err_set(err, SBX_E_RATE, 0,
              "rate limit exceeded: this tenant may make %g requests per "
              "second (bursts of %g); retry in %u s",
              rps, burst, *retry_s);
  sbx_err_fr(err,
             "Limite de débit dépassée : ce locataire peut faire %g requêtes par seconde "
             "(rafales de %g) ; réessayez dans %u s",
             rps, burst, *retry_s);
  return exceeded(err, "requests_per_second", rps);
}

static bool list_has(const char *list, const char *name)
{
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return true;
    p += len + (end != NULL);
  }
  return false;
}

int sbx_quota_profile_check(struct sbx_core *core, const struct sbx_principal *who,
                            const char *profile, const char *field, struct sbx_error *err)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return 0;
  char allowed[SBX_QUOTA_PROFILES_MAX] = "";
  struct tstate *t = lock_tenant(q, who->tenant_id, who->tenant);
  if (t)
    memcpy(allowed, t->lim.profiles, sizeof allowed);
  unlock_tenant(q, who->tenant_id);
  if (!t)
    return oom(err);
  if (!allowed[0] || list_has(allowed, profile))
    return 0;
  sbx_err_set(err, SBX_E_FORBIDDEN, 0,
              "this tenant may not use profile '%s'; it may use: %s (allowed_profiles)", profile,
              allowed);
  sbx_err_fr(err,
             "Ce locataire ne peut pas utiliser le profil « %s » ; il peut utiliser : %s "
             "(allowed_profiles)",
             profile, allowed);
  snprintf(err->field, sizeof err->field, "%s", field);
  return -1;
}

static unsigned live_sessions(struct sbx_core *core, int64_t tenant)
{
  unsigned n = 0;
  pthread_mutex_lock(&core->sess_lock);
  for (struct sbx_live_session *ls = core->sessions; ls; ls = ls->next)
    n += ls->tenant_id == tenant;
  pthread_mutex_unlock(&core->sess_lock);
  return n;
}

static int sessions_error(struct sbx_error *err, long long live, long long limit)
{
  sbx_err_set(err, SBX_E_QUOTA, 0,
              "quota exceeded: this tenant has %lld live sessions and may "
              "have %lld; delete one first",
              live, limit);
  sbx_err_fr(err,
             "Quota dépassé : ce locataire a %lld sessions actives et peut en avoir %lld ; "
             "supprimez-en une d'abord",
             live, limit);
  return exceeded(err, "sessions", (double)limit);
}

/* In a fleet the count is every node's: a hold in the database, counted
 * with the ready sessions under the tenant's lock there. */
static int fleet_session_begin(struct sbx_core *core, const struct sbx_principal *who,
                               int64_t limit, char hold[SBX_QUOTA_HOLD_MAX],
                               struct sbx_error *err)
{
  sbx_random_id("hold", hold, SBX_QUOTA_HOLD_MAX);
  int64_t count = 0;
  if (core->store.ops->fleet->session_hold(core->store.st, who->tenant_id, hold,
                                           sbx_fleet_node_id(core), limit, 600, &count,
                                           err) == 0)
    return 0;
  hold[0] = '\0';
  return err->code == SBX_E_QUOTA ? sessions_error(err, count, limit) : -1;
}

int sbx_quota_session_begin(struct sbx_core *core, const struct sbx_principal *who,
                            char hold[SBX_QUOTA_HOLD_MAX], struct sbx_error *err)
{
  struct sbx_quota *q = core->quota;
  hold[0] = '\0';
  if (!q)
    return 0;
  if (sbx_fleet_on(core)) {
    int64_t limit = limits_of(q, who).sessions;
    return limit > 0 ? fleet_session_begin(core, who, limit, hold, err) : 0;
  }
  /* The stripe lock is held while counting: a concurrent create is either
   * in the live table already or still pending, never neither, so the
   * limit is never overshot (lock order: stripe, then sess_lock). */
  struct tstate *t = lock_tenant(q, who->tenant_id, who->tenant);
  if (!t) {
    unlock_tenant(q, who->tenant_id);
    return oom(err);
  }
  int64_t limit = t->lim.sessions;
  unsigned live = limit > 0 ? live_sessions(core, who->tenant_id) : 0;
  bool room = limit <= 0 || (int64_t)live + t->pending_sessions < limit;
  if (room)
    t->pending_sessions++;
  unlock_tenant(q, who->tenant_id);
  if (room)
    return 0;
  return sessions_error(err, live, limit);
}

void sbx_quota_session_done(struct sbx_core *core, int64_t tenant_id, const char *hold)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return;
  if (hold && hold[0]) {
    struct sbx_error err = {0};
    if (core->store.ops->fleet->session_unhold(core->store.st, tenant_id, hold, &err) < 0)
      sbx_warn("quota", "releasing session hold %s: %s (it lapses by itself)", hold, err.msg);
    return;
  }
  if (sbx_fleet_on(core))
    return;
  struct tstate *t = lock_tenant(q, tenant_id, NULL);
  if (t && t->pending_sessions > 0)
    t->pending_sessions--;
  unlock_tenant(q, tenant_id);
}

static bool execs_has(const struct tstate *t, const char *id)
{
  for (size_t i = 0; i < t->nexecs; i++)
    if (strcmp(t->execs[i], id) == 0)
      return true;
  return false;
}

static int execs_add(struct tstate *t, const char *id)
{
  if (execs_has(t, id))
    return 0;
  if (t->nexecs == t->capexecs) {
    size_t cap = t->capexecs ? t->capexecs * 2 : 16;
    void *n = realloc(t->execs, cap * sizeof *t->execs);
    if (!n)
      return -1;
    t->execs = n;
    t->capexecs = cap;
  }
  snprintf(t->execs[t->nexecs++], sizeof t->execs[0], "%s", id);
  return 0;
}

/* The checks before work that burns CPU: the tenant's CPU of the day and,
 * for an execution (exec_id), its executions limit, which then counts
 * exec_id in.  Without memory for the tenant's state an execution, which
 * must be counted, is refused; a CPU check alone lets the work go. */
static int admit(struct sbx_core *core, const struct sbx_principal *who, const char *exec_id,
                 struct sbx_error *err)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return 0;
  cpu_seed(q, who->tenant_id);
  struct tstate *t = lock_tenant(q, who->tenant_id, who->tenant);
  int rc = 0;
  if (!t)
    rc = exec_id ? oom(err) : 0;
  else if (cpu_used_up(t))
    rc = cpu_error(err, t);
  else if (exec_id && sbx_fleet_on(core))
    ; /* counted fleet-wide where the row is inserted (fleet exec_insert_capped) */
  else if (exec_id && t->lim.executions > 0 && (int64_t)t->nexecs >= t->lim.executions)
    rc = execs_error(err, t);
  else if (exec_id && execs_add(t, exec_id) < 0)
    rc = oom(err);
  unlock_tenant(q, who->tenant_id);
  return rc;
}

int sbx_quota_exec_admit(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                         struct sbx_error *err)
{
  return admit(core, who, id, err);
}

void sbx_quota_exec_track(struct sbx_core *core, int64_t tenant_id, const char *id)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return;
  struct tstate *t = lock_tenant(q, tenant_id, NULL);
  if (t && execs_add(t, id) < 0)
    sbx_warn("quota", "out of memory counting execution %s", id);
  unlock_tenant(q, tenant_id);
}

void sbx_quota_exec_end(struct sbx_core *core, int64_t tenant_id, const char *id)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return;
  struct tstate *t = lock_tenant(q, tenant_id, NULL);
  for (size_t i = 0; t && i < t->nexecs; i++)
    if (strcmp(t->execs[i], id) == 0) {
      memcpy(t->execs[i], t->execs[--t->nexecs], sizeof t->execs[0]);
      break;
    }
  unlock_tenant(q, tenant_id);
}

int sbx_quota_cpu_check(struct sbx_core *core, const struct sbx_principal *who,
                        struct sbx_error *err)
{
  return admit(core, who, NULL, err);
}

static void cpu_used_add(struct sbx_quota *q, int64_t tenant_id, double seconds)
{
  struct tstate *t = lock_tenant(q, tenant_id, NULL);
  if (t) {
    cpu_roll(t);
    t->cpu_used += seconds;
  }
  unlock_tenant(q, tenant_id);
}

void sbx_quota_cpu_add(struct sbx_core *core, int64_t tenant_id, double seconds)
{
  struct sbx_quota *q = core->quota;
  if (!q || !(seconds > 0))
    return;
  if (cpu_seed(q, tenant_id))
    return; /* the store already had this run's usage record: counted */
  cpu_used_add(q, tenant_id, seconds);
}

/* ---- CPU measured on session cgroups (core/session_cpu.c) ---- */

void sbx_quota_cpu_charge(struct sbx_core *core, int64_t tenant_id, double seconds)
{
  struct sbx_quota *q = core->quota;
  if (!q || !(seconds > 0))
    return;
  cpu_seed(q, tenant_id); /* these seconds are in no stored record yet */
  cpu_used_add(q, tenant_id, seconds);
  struct tstate *t = lock_tenant(q, tenant_id, NULL);
  if (t)
    t->cpu_charged += seconds;
  unlock_tenant(q, tenant_id);
}

/* Under the tenant's lock: whether it has a daily CPU limit (or its limits
 * are not resolved yet), or, used_up, whether it has used that limit up. */
static bool cpu_query(struct sbx_core *core, int64_t tenant_id, bool used_up)
{
  struct sbx_quota *q = core->quota;
  if (!q)
    return false;
  struct tstate *t = lock_tenant(q, tenant_id, NULL);
  bool out = !t || !t->resolved || t->lim.cpu_seconds_per_day > 0;
  if (used_up)
    out = t && cpu_used_up(t);
  unlock_tenant(q, tenant_id);
  return out;
}

bool sbx_quota_cpu_limited(struct sbx_core *core, int64_t tenant_id)
{
  return cpu_query(core, tenant_id, false);
}

bool sbx_quota_cpu_exhausted(struct sbx_core *core, int64_t tenant_id)
{
  return cpu_query(core, tenant_id, true);
}
