/* network.c — the core's side of egress policy (DESIGN §5): starts
 * and stops the net module with the daemon, refuses allowlists a profile
 * or this host cannot enforce (fail closed), attaches sandboxes, and turns
 * every allow/deny decision into a metric and a rate-limited audit event.
 *
 * Decisions arrive on the net module's DNS and proxy threads, where a store
 * write would stall a name lookup: they go through a bounded queue to one
 * writer thread.  A full queue drops the event (counted as suppressed), the
 * metric is always counted. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "core/internal.h"
#include "net/net.h"
#include "obs/audit.h"
#include "obs/metrics.h"
#include "runtime/driver.h"

#define DECISION_QUEUE 1024

struct queued_decision {
  int64_t tenant_id;
  char sandbox_id[96];
  char proto[8];
  char dest[300];
  char rule[300];
  char reason[160];
  bool allowed;
  uint64_t suppressed_before;
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t writer;
  bool running, stopping;
  struct sbx_core *core;
  struct queued_decision ring[DECISION_QUEUE];
  unsigned head, len;
} dq = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void on_decision(const struct sbx_net_decision *d, void *ud)
{
  (void)ud;
  sbx_metrics_network_decision(d->allowed ? "allow" : "deny", d->proto ? d->proto : "tcp");
  /* One limiter source per sandbox and outcome: a flood of denials from one
   * sandbox cannot hide another's, nor its own allows. */
  char source[128];
  snprintf(source, sizeof source, "net:%s:%s", d->sandbox_id ? d->sandbox_id : "?",
           d->allowed ? "allow" : "deny");
  uint64_t suppressed = 0;
  if (!sbx_audit_admit(source, &suppressed))
    return;
  pthread_mutex_lock(&dq.lock);
  if (!dq.running || dq.len == DECISION_QUEUE) {
    pthread_mutex_unlock(&dq.lock);
    sbx_metrics_audit_suppressed();
    return;
  }
  struct queued_decision *q = &dq.ring[(dq.head + dq.len++) % DECISION_QUEUE];
  memset(q, 0, sizeof *q);
  q->tenant_id = d->tenant ? strtoll(d->tenant, NULL, 10) : 0;
  snprintf(q->sandbox_id, sizeof q->sandbox_id, "%s", d->sandbox_id ? d->sandbox_id : "");
  snprintf(q->proto, sizeof q->proto, "%s", d->proto ? d->proto : "");
  snprintf(q->dest, sizeof q->dest, "%s", d->dest ? d->dest : "");
  snprintf(q->rule, sizeof q->rule, "%s", d->rule ? d->rule : "");
  snprintf(q->reason, sizeof q->reason, "%s", d->reason ? d->reason : "");
  q->allowed = d->allowed;
  q->suppressed_before = suppressed;
  pthread_cond_signal(&dq.cond);
  pthread_mutex_unlock(&dq.lock);
}

static void record(const struct queued_decision *q)
{
  json_t *d = json_pack("{s:s, s:s}", "proto", q->proto, "destination", q->dest);
  if (q->rule[0])
    json_object_set_new(d, "rule", json_string(q->rule));
  if (q->reason[0])
    json_object_set_new(d, "reason", json_string(q->reason));
  if (q->suppressed_before)
    json_object_set_new(d, "suppressed_before", json_integer((json_int_t)q->suppressed_before));
  sbx_audit_record(&dq.core->store, q->tenant_id, "sandbox", "network.egress", q->sandbox_id,
                   q->allowed ? "allowed" : "denied", d);
}

static void *writer_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&dq.lock);
  for (;;) {
    while (dq.len == 0 && !dq.stopping)
      pthread_cond_wait(&dq.cond, &dq.lock);
    if (dq.len == 0) /* stopping and drained */
      break;
    struct queued_decision q = dq.ring[dq.head];
    dq.head = (dq.head + 1) % DECISION_QUEUE;
    dq.len--;
    pthread_mutex_unlock(&dq.lock);
    record(&q);
    pthread_mutex_lock(&dq.lock);
  }
  pthread_mutex_unlock(&dq.lock);
  return NULL;
}

/* A short tag per state dir: names the nft table and the veths, so two
 * daemons (tests run several) never touch each other's. */
static void state_tag(const char *state_dir, char out[9])
{
  uint32_t h = 2166136261u; /* FNV-1a: a name, not a secret */
  for (const char *p = state_dir; *p; p++)
    h = (h ^ (uint8_t)*p) * 16777619u;
  snprintf(out, 9, "%08" PRIx32, h);
}

void sbx_core_net_start(struct sbx_core *core)
{
  static char tag[9];
  state_tag(core->state_dir, tag);
  dq.core = core;
  dq.stopping = false;
  if (pthread_create(&dq.writer, NULL, writer_main, NULL) == 0)
    dq.running = true;
  sbx_net_set_decision_hook(on_decision, core);
  sbx_net_recover(tag);
  struct sbx_net_config nc = {.tag = tag,
                              .pool4 = core->cfg.net_pool4,
                              .pool6 = core->cfg.net_pool6,
                              .dns_upstream = core->cfg.dns_upstream,
                              .resolve = core->cfg.resolve};
  struct sbx_error err = {0};
  if (sbx_net_start(&nc, &err) < 0) {
    sbx_warn("core", "egress allowlists unavailable: %s", err.msg);
    return;
  }
  sbx_drivers_set_resolv_conf(sbx_net_resolv_conf());
  sbx_info("core", "egress allowlists enforced (table inet sandboxd_%s)", tag);
}

void sbx_core_net_stop(struct sbx_core *core)
{
  (void)core;
  sbx_net_stop();
  sbx_net_set_decision_hook(NULL, NULL);
  pthread_mutex_lock(&dq.lock);
  bool running = dq.running;
  dq.stopping = true;
  pthread_cond_signal(&dq.cond);
  pthread_mutex_unlock(&dq.lock);
  if (running)
    pthread_join(dq.writer, NULL);
  dq.running = false;
}

int sbx_core_net_check(const struct sbx_profile *profile, const struct sbx_net_policy *policy,
                       struct sbx_error *err)
{
  if (!policy || policy->egress == SBX_NET_EGRESS_NONE)
    return 0;
  if (sbx_profile_require(profile, SBX_CAP_EGRESS, "network.egress",
                          "cannot enforce an egress allowlist",
                          "ne peut pas appliquer de liste d'accès sortants", err) < 0)
    return -1;
  char why[256];
  if (!sbx_net_available(why, sizeof why)) {
    sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                "egress allowlists are unavailable on this host: %s", why);
    return sbx_err_fr(err, "Les listes d'accès sortants sont indisponibles sur cet hôte : %s",
                      why);
  }
  return 0;
}

/* spec.net_prepare: called by the driver, inside create(), with a pid in
 * the sandbox's new netns before anything runs there. */
static int prepare_cb(void *ctx, pid_t netns_pid, struct sbx_error *err)
{
  struct sbx_core_net_prep *prep = ctx;
  if (prep->att)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "net: sandbox %s linked twice", prep->sandbox_id);
  char tenant[24];
  snprintf(tenant, sizeof tenant, "%" PRId64, prep->tenant_id);
  if (sbx_net_attach(prep->sandbox_id, tenant, netns_pid, prep->policy, &prep->att, err) < 0)
    return sbx_err_prefix(err, "linking the sandbox to its egress policy");
  return 0;
}

void sbx_core_net_prepare(struct sbx_core_net_prep *prep, const struct sbx_profile *profile,
                          const char *sandbox_id, int64_t tenant_id,
                          const struct sbx_net_policy *policy, struct sbx_sandbox_spec *spec)
{
  *prep = (struct sbx_core_net_prep){.sandbox_id = sandbox_id,
                                     .tenant_id = tenant_id,
                                     .policy = policy};
  if (!policy || policy->egress != SBX_NET_EGRESS_ALLOWLIST ||
      !(profile->driver->caps & SBX_CAP_EGRESS_AT_START))
    return;
  spec->net_prepare = prepare_cb;
  spec->net_ctx = prep;
  spec->net_resolv_conf = sbx_net_resolv_conf();
}

void sbx_core_net_prep_drop(struct sbx_core_net_prep *prep)
{
  if (prep && prep->att)
    sbx_net_detach(prep->att);
  if (prep)
    prep->att = NULL;
}

int sbx_core_net_attach(const char *sandbox_id, int64_t tenant_id, struct sbx_sandbox *sb,
                        const struct sbx_net_policy *policy, struct sbx_core_net_prep *prep,
                        struct sbx_net_attachment **out, struct sbx_error *err)
{
  *out = NULL;
  if (!policy || policy->egress == SBX_NET_EGRESS_NONE)
    return 0;              /* the none path: nothing to do, nothing to pay */
  if (prep && prep->att) { /* the driver's create linked it already */
    *out = prep->att;
    prep->att = NULL;
    return 0;
  }
  if (sb->driver->caps & SBX_CAP_EGRESS_AT_START) /* its init_pid is not in its netns */
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "the %s sandbox was not linked at create",
                       sb->driver->name);
  char tenant[24];
  snprintf(tenant, sizeof tenant, "%" PRId64, tenant_id);
  if (sbx_net_attach(sandbox_id, tenant, sb->init_pid, policy, out, err) < 0)
    return sbx_err_prefix(err, "linking the sandbox to its egress policy");
  return 0;
}
