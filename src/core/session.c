/* session.c — sessions: a sandbox kept alive for many execs and file
 * operations.  The store holds the record (what the API shows, what survives
 * a restart); the live table holds the sandbox.  Deleting, expiring or
 * shutting down marks the live session dying, cancels its in-flight execs
 * and destroys the sandbox when the last user lets go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "core/fleet.h"
#include "core/internal.h"
#include "core/resources.h"
#include "image/image.h"
#include "net/net.h"
#include "obs/audit.h"
#include "obs/metrics.h"

/* ---- the live table (core->sess_lock) ---- */

static struct sbx_live_session *live_find_locked(struct sbx_core *core, int64_t tenant,
                                                 const char *id)
{
  for (struct sbx_live_session *ls = core->sessions; ls; ls = ls->next)
    if (ls->tenant_id == tenant && strcmp(ls->id, id) == 0)
      return ls;
  return NULL;
}

static void live_unlink_locked(struct sbx_core *core, struct sbx_live_session *ls)
{
  for (struct sbx_live_session **pp = &core->sessions; *pp; pp = &(*pp)->next)
    if (*pp == ls) {
      *pp = ls->next;
      core->nsessions--;
      return;
    }
}

static void live_free(struct sbx_live_session *ls)
{
  struct sbx_core_box box = {.image = ls->image, .sb = ls->sb, .net = ls->net};
  sbx_core_sandbox_down(&box);
  sbx_net_policy_free(ls->policy);
  free(ls->metadata_json);
  pthread_mutex_destroy(&ls->net_lock);
  pthread_mutex_destroy(&ls->cpu_lock);
  sbx_procs_free(ls->procs);
  sbx_strv_free(ls->env);
  free(ls);
}

/* Drops one reference; destroys the sandbox after the last one if dying. */
static void live_put(struct sbx_core *core, struct sbx_live_session *ls)
{
  pthread_mutex_lock(&core->sess_lock);
  bool last = --ls->refs == 0;
  pthread_mutex_unlock(&core->sess_lock);
  if (!last)
    return;
  sbx_session_cpu_charge(core, ls, true); /* every thread that ran in it is done */
  live_free(ls);
}

/* Marks dying, unlinks, cancels execs.  Caller holds sess_lock and one
 * reference (the table's), which it must drop with live_put afterwards. */
static void live_kill_locked(struct sbx_core *core, struct sbx_live_session *ls,
                             enum sbx_reason why)
{
  ls->dying = true;
  ls->dying_reason = why;
  live_unlink_locked(core, ls);
  /* Followers first: they end with `end` {reason}, not with the exit of a
   * process the cancel below kills (lock order: sess_lock, table, process). */
  sbx_procs_session_end(ls->procs, sbx_session_end_reason(why));
  for (struct sbx_exec_slot *s = ls->execs; s; s = s->next)
    sbx_cancel_fire(&s->cancel, why);
}

static int not_found(struct sbx_error *err, const char *id)
{
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "session %s not found", id);
  return sbx_err_fr(err, "Session %s introuvable", id);
}

static struct sbx_live_session *acquire(struct sbx_core *core, const struct sbx_principal *who,
                                        const char *id, bool touch, struct sbx_error *err)
{
  pthread_mutex_lock(&core->sess_lock);
  struct sbx_live_session *ls = live_find_locked(core, who->tenant_id, id);
  if (ls && !ls->dying) {
    ls->refs++;
    if (touch)
      ls->last_used_at = sbx_wall_s();
  } else
    ls = NULL;
  pthread_mutex_unlock(&core->sess_lock);
  if (ls)
    return ls;
  /* Not live: either absent/foreign (404) or ended (409 with its status). */
  struct sbx_session_row row = {0};
  if (core->store.ops->session_get(core->store.st, who->tenant_id, id, &row, err) < 0) {
    if (err->code == SBX_E_NOT_FOUND)
      not_found(err, id);
    return NULL;
  }
  if (strcmp(row.status, "ready") == 0 && row.node_id[0] &&
      strcmp(row.node_id, sbx_fleet_node_id(core)) != 0) {
    /* Live on another node of the fleet: /v1 routes are forwarded before
     * they get here; the E2B and MCP surfaces are served where called. */
    sbx_err_set(err, SBX_E_CONFLICT, 0,
                "session %s runs on node %s of the fleet; call that node (or the /v1 API, "
                "which any node forwards)",
                id, row.node_id);
    sbx_err_fr(err,
               "La session %s tourne sur le nœud %s de la flotte ; appelez ce nœud (ou l'API "
               "/v1, que tout nœud relaie)",
               id, row.node_id);
  } else {
    sbx_err_set(err, SBX_E_CONFLICT, 0, "session %s is %s (%s); create a new one", id,
                row.status, row.reason[0] ? row.reason : "ended");
    sbx_err_fr(err, "La session %s est dans l'état %s (%s) ; créez-en une nouvelle", id,
               row.status, row.reason[0] ? row.reason : "terminée");
  }
  sbx_session_row_free(&row);
  return NULL;
}

struct sbx_live_session *sbx_session_acquire(struct sbx_core *core,
                                             const struct sbx_principal *who, const char *id,
                                             struct sbx_error *err)
{
  return acquire(core, who, id, true, err);
}

struct sbx_live_session *sbx_session_peek(struct sbx_core *core, const struct sbx_principal *who,
                                          const char *id, struct sbx_error *err)
{
  return acquire(core, who, id, false, err);
}

struct sbx_sandbox *sbx_live_sandbox(struct sbx_live_session *ls) { return ls->sb; }

void sbx_session_touch(struct sbx_core *core, struct sbx_live_session *ls)
{
  int64_t now = sbx_wall_s();
  pthread_mutex_lock(&core->sess_lock);
  bool due = now - ls->last_touch_stored >= 60;
  if (due)
    ls->last_touch_stored = now;
  pthread_mutex_unlock(&core->sess_lock);
  if (due)
    core->store.ops->session_touch(core->store.st, ls->tenant_id, ls->id, now, NULL);
}

void sbx_session_release(struct sbx_core *core, struct sbx_live_session *ls)
{
  if (ls)
    live_put(core, ls);
}

/* ---- JSON ---- */

static json_t *parse_or_empty(const char *txt)
{
  json_t *j = txt ? json_loads(txt, 0, NULL) : NULL;
  return j ? j : json_object();
}

json_t *sbx_time_json(int64_t t)
{
  if (t <= 0)
    return json_null();
  char buf[40];
  sbx_format_time(t, buf, sizeof buf);
  return json_string(buf);
}

static json_t *session_json(struct sbx_core *core, const struct sbx_session_row *row)
{
  json_t *caps = json_array();
  const struct sbx_driver *drv = sbx_driver_find(row->runtime);
  for (uint32_t bit = 1; drv && bit; bit <<= 1) /* every bit the driver has a name for */
    if ((drv->caps & bit) && sbx_cap_name(bit))
      json_array_append_new(caps, json_string(sbx_cap_name(bit)));
  (void)core;
  return json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o}",
                   "id", row->id, "status", row->status, "reason",
                   row->reason[0] ? json_string(row->reason) : json_null(), "profile",
                   row->profile, "runtime", row->runtime, "image", row->image, "limits",
                   parse_or_empty(row->limits_json), "network",
                   parse_or_empty(row->network_json), "capabilities", caps, "created_at",
                   sbx_time_json(row->created_at), "expires_at", sbx_time_json(row->expires_at),
                   "metadata", parse_or_empty(row->metadata_json), "updated_at",
                   sbx_time_json(row->updated_at), "ttl_s", (json_int_t)row->ttl_s, "node_id",
                   row->node_id[0] ? json_string(row->node_id) : json_null());
}

/* ---- create ---- */

struct create_req {
  struct sbx_sandbox_req rq;
  char **env; /* owned */
  int64_t ttl_s;
};

static void create_req_free(struct create_req *cr)
{
  sbx_core_sandbox_req_free(&cr->rq);
  sbx_strv_free(cr->env);
  cr->env = NULL;
}

static int parse_create(struct sbx_core *core, json_t *body, struct create_req *cr,
                        struct sbx_error *err)
{
  static const char *const allowed[] = {"profile", "image",    "limits", "network",
                                        "env",     "metadata", "ttl_s",  NULL};
  memset(cr, 0, sizeof *cr);
  if (sbx_schema_only(body, "", allowed, err) < 0 ||
      sbx_core_sandbox_parse(core, body, &cr->rq, err) < 0)
    return -1;
  json_t *v;
  cr->ttl_s = core->cfg.default_ttl_s;
  if (sbx_schema_env(json_object_get(body, "env"), "env", &cr->env, err) < 0 ||
      ((v = json_object_get(body, "ttl_s")) && !json_is_null(v) &&
       sbx_schema_ttl(v, core->cfg.max_ttl_s, &cr->ttl_s, err) < 0)) {
    create_req_free(cr);
    return -1;
  }
  return 0;
}

static json_t *env_object(char *const *env)
{
  json_t *o = json_object();
  for (char *const *p = env; p && *p; p++) {
    char *eq = strchr(*p, '=');
    char key[160];
    snprintf(key, sizeof key, "%.*s", (int)(eq - *p), *p);
    json_object_set_new(o, key, json_string(eq + 1));
  }
  return o;
}

static char *dump(json_t *j)
{
  return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
}

static char *dump_new(json_t *j)
{
  char *s = dump(j);
  json_decref(j);
  return s;
}

static struct sbx_live_session *live_new(const struct sbx_principal *who, struct create_req *cr,
                                         struct sbx_error *err)
{
  struct sbx_live_session *ls = calloc(1, sizeof *ls);
  if (!ls) {
    sbx_err_sys(err, ENOMEM, "session");
    return NULL;
  }
  pthread_mutex_init(&ls->net_lock, NULL);
  pthread_mutex_init(&ls->cpu_lock, NULL);
  sbx_random_id("ses", ls->id, sizeof ls->id);
  ls->tenant_id = who->tenant_id;
  ls->profile = cr->rq.profile;
  ls->limits = cr->rq.limits;
  ls->env = cr->env;
  cr->env = NULL;
  return ls;
}

/* The sandbox, held by ls from here on (live_free takes it down). */
static int live_up(struct sbx_core *core, struct sbx_live_session *ls, struct create_req *cr,
                   struct sbx_error *err)
{
  struct sbx_box_want want = {.id = ls->id, .tenant_id = ls->tenant_id, .rq = &cr->rq};
  struct sbx_core_box box;
  enum sbx_box_stage failed;
  if (sbx_core_sandbox_up(core, &want, &box, &failed, err) < 0) {
    if (failed == SBX_BOX_CREATE)
      sbx_err_prefix(err, "creating the %s sandbox", ls->profile->driver_name);
    return -1;
  }
  ls->image = box.image;
  ls->sb = box.sb;
  ls->net = box.net;
  ls->policy = cr->rq.policy;
  cr->rq.policy = NULL;
  sbx_session_cpu_start(ls);
  return 0;
}

static void row_fill(struct sbx_core *core, struct sbx_session_row *row,
                     const struct sbx_live_session *ls, const struct create_req *cr, int64_t now)
{
  json_t *md = cr->rq.metadata;
  snprintf(row->id, sizeof row->id, "%s", ls->id);
  row->tenant_id = ls->tenant_id;
  snprintf(row->status, sizeof row->status, "ready");
  snprintf(row->profile, sizeof row->profile, "%s", ls->profile->name);
  snprintf(row->runtime, sizeof row->runtime, "%s", ls->profile->driver_name);
  snprintf(row->image, sizeof row->image, "%s", ls->image ? ls->image->ref : ls->profile->image);
  row->limits_json = dump_new(sbx_limits_json(&ls->limits));
  row->network_json = dump_new(sbx_net_policy_json(ls->policy));
  row->metadata_json = dump(md && json_is_object(md) ? md : NULL);
  row->env_json = dump_new(env_object(ls->env));
  row->ttl_s = cr->ttl_s;
  row->created_at = row->updated_at = row->last_used_at = now;
  row->expires_at = now + cr->ttl_s;
  snprintf(row->node_id, sizeof row->node_id, "%s", sbx_fleet_node_id(core));
}

/* Stored, then in the live table: a session is listed only once it is. */
static int live_publish(struct sbx_core *core, struct sbx_live_session *ls,
                        const struct create_req *cr, struct sbx_session_row *row,
                        struct sbx_error *err)
{
  int64_t now = sbx_wall_s();
  row_fill(core, row, ls, cr, now);
  ls->expires_at = row->expires_at;
  ls->last_used_at = now;
  if (!(ls->metadata_json = strdup(row->metadata_json)))
    return sbx_err_sys(err, ENOMEM, "session");
  if (core->store.ops->session_insert(core->store.st, row, err) < 0)
    return -1;
  ls->refs = 1; /* the table's */
  pthread_mutex_lock(&core->sess_lock);
  ls->next = core->sessions;
  core->sessions = ls;
  core->nsessions++;
  pthread_mutex_unlock(&core->sess_lock);
  return 0;
}

static void end_session(struct sbx_core *core, struct sbx_live_session *ls, const char *status,
                        enum sbx_reason why);

static int session_build(struct sbx_core *core, const struct sbx_principal *who,
                         struct create_req *cr, struct sbx_session_row *row, json_t **out,
                         struct sbx_error *err)
{
  struct sbx_live_session *ls = live_new(who, cr, err);
  if (!ls)
    return -1;
  if (live_up(core, ls, cr, err) < 0 || live_publish(core, ls, cr, row, err) < 0) {
    live_free(ls); /* destroys a half-made sandbox: nothing is left behind */
    return -1;
  }
  sbx_info("session", "created %s tenant=%s profile=%s", ls->id, who->tenant, ls->profile->name);
  if ((*out = session_json(core, row)))
    return 0;
  /* Nobody would learn its id: a session the caller cannot see must not
   * run on (out of memory building the answer). */
  pthread_mutex_lock(&core->sess_lock);
  live_kill_locked(core, ls, SBX_RS_RUNTIME_UNAVAILABLE);
  pthread_mutex_unlock(&core->sess_lock);
  end_session(core, ls, "failed", SBX_RS_RUNTIME_UNAVAILABLE);
  return sbx_err_sys(err, ENOMEM, "session %s", row->id);
}

int sbx_session_create(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                       json_t **out, struct sbx_error *err)
{
  return sbx_session_create_placed(core, who, body, false, out, err);
}

/* In a fleet a session holds one place on its node from its create to its
 * end: reserved by the placement that chose this node (placed), else here. */
static int fleet_place_here(struct sbx_core *core, bool placed, struct sbx_error *err)
{
  return !sbx_fleet_on(core) || placed ? 0 : sbx_fleet_reserve_here(core, err);
}

int sbx_session_create_placed(struct sbx_core *core, const struct sbx_principal *who,
                              json_t *body, bool placed, json_t **out, struct sbx_error *err)
{
  struct create_req cr;
  if (parse_create(core, body, &cr, err) < 0) {
    if (placed)
      sbx_fleet_unplace(core, sbx_fleet_node_id(core));
    return -1;
  }
  struct sbx_session_row row = {0};
  char hold[SBX_QUOTA_HOLD_MAX] = "";
  uint64_t t0 = sbx_now_ns(); /* sandbox_session_create_seconds */
  struct sbx_span *span = sbx_trace_op_begin("sandbox.session.create", who->tenant,
                                             cr.rq.profile->name, cr.rq.metadata, false);
  int rc = -1;
  /* A profile the tenant may use; waits while it is probing; the network
   * fails closed before any work; then a session-quota reservation. */
  if (sbx_quota_profile_check(core, who, cr.rq.profile->name, "profile", err) == 0 &&
      sbx_core_profile_ready(core, cr.rq.profile, err) == 0 &&
      sbx_core_net_check(cr.rq.profile, cr.rq.policy, err) == 0 &&
      sbx_quota_session_begin(core, who, hold, err) == 0) {
    if ((rc = fleet_place_here(core, placed, err)) == 0) {
      placed = true;
      rc = session_build(core, who, &cr, &row, out, err);
    }
    sbx_quota_session_done(core, who->tenant_id, hold);
  }
  if (rc < 0 && placed)
    sbx_fleet_unplace(core, sbx_fleet_node_id(core)); /* no session holds it */
  if (rc == 0)
    sbx_metrics_session_create(cr.rq.profile->name, (double)(sbx_now_ns() - t0) / 1e9);
  sbx_trace_op_end(span, "sandbox.session.id", row.id, rc == 0 ? "ready" : "error",
                   rc == 0 ? NULL : err->msg);
  sbx_session_row_free(&row);
  create_req_free(&cr);
  return rc;
}

/* ---- read, list, patch ---- */

int sbx_session_get(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                    json_t **out, struct sbx_error *err)
{
  struct sbx_session_row row = {0};
  if (core->store.ops->session_get(core->store.st, who->tenant_id, id, &row, err) < 0)
    return err->code == SBX_E_NOT_FOUND ? not_found(err, id) : -1;
  *out = session_json(core, &row);
  sbx_session_row_free(&row);
  return 0;
}

struct list_ctx {
  struct sbx_core *core;
  json_t *arr;
  char last[64];
  int n;
};

static int list_cb(void *ctx, const struct sbx_session_row *row)
{
  struct list_ctx *lc = ctx;
  json_array_append_new(lc->arr, session_json(lc->core, row));
  snprintf(lc->last, sizeof lc->last, "%s", row->id);
  lc->n++;
  return 0;
}

int sbx_session_list(struct sbx_core *core, const struct sbx_principal *who, const char *status,
                     const char *cursor, int limit, json_t **out, struct sbx_error *err)
{
  static const char *const statuses[] = {"ready",  "terminated", "expired",
                                         "failed", "lost",       NULL};
  bool known = status == NULL;
  for (const char *const *p = statuses; !known && *p; p++)
    known = strcmp(*p, status) == 0;
  if (!known) {
    sbx_err_field(err, "status",
                  "unknown session status '%s' (ready, terminated, expired, "
                  "failed, lost)",
                  status);
    return sbx_err_fr(err, "Requête invalide : statut de session inconnu « %s »", status);
  }
  struct list_ctx lc = {.core = core, .arr = json_array()};
  if (core->store.ops->session_list(core->store.st, who->tenant_id, status, cursor ? cursor : "",
                                    limit + 1, list_cb, &lc, err) < 0) {
    json_decref(lc.arr);
    if (err->code == SBX_E_INVALID)
      snprintf(err->field, sizeof err->field, "cursor");
    return -1;
  }
  json_t *next = json_null();
  if (lc.n > limit) { /* one more than asked: there is a next page */
    json_array_remove(lc.arr, (size_t)limit);
    json_t *lastobj = json_array_get(lc.arr, (size_t)limit - 1);
    next = json_incref(json_object_get(lastobj, "id"));
  }
  *out = json_pack("{s:o, s:o}", "sessions", lc.arr, "next_cursor", next);
  return 0;
}

/* "Install, then lock": the new policy holds for new connections
 * before the PATCH answers.  A session that was none gets its link now
 * (except where the link is only made at start: gvisor, 409); one going
 * back to none keeps its link but admits nothing.  Takes *policy. */
static int apply_policy(struct sbx_core *core, struct sbx_live_session *ls,
                        struct sbx_net_policy **policy, struct sbx_error *err)
{
  (void)core;
  if (sbx_core_net_check(ls->profile, *policy, err) < 0)
    return -1;
  pthread_mutex_lock(&ls->net_lock);
  int rc = 0;
  if (ls->net)
    rc = sbx_net_update(ls->net, *policy, err);
  else if ((*policy)->egress == SBX_NET_EGRESS_ALLOWLIST &&
           (ls->profile->driver->caps & SBX_CAP_EGRESS_AT_START)) {
    sbx_err_set(err, SBX_E_CONFLICT, 0,
                "%s sandboxes get their network link at create: create "
                "the session with an allowlist (\"allow\": [] admits nothing) to change it "
                "later",
                ls->profile->driver_name);
    rc = sbx_err_fr(err,
                    "Les bacs à sable %s reçoivent leur lien réseau à la création : créez "
                    "la session avec une liste d'accès (\"allow\": [] n'admet rien) pour la "
                    "changer ensuite",
                    ls->profile->driver_name);
  } else if ((*policy)->egress == SBX_NET_EGRESS_ALLOWLIST)
    rc = sbx_core_net_attach(ls->id, ls->tenant_id, ls->sb, *policy, NULL, &ls->net, err);
  if (rc == 0) {
    sbx_net_policy_free(ls->policy);
    ls->policy = *policy;
    *policy = NULL;
  }
  pthread_mutex_unlock(&ls->net_lock);
  return rc;
}

char *sbx_session_metadata(struct sbx_live_session *ls)
{
  pthread_mutex_lock(&ls->net_lock);
  char *md = ls->metadata_json ? strdup(ls->metadata_json) : NULL;
  pthread_mutex_unlock(&ls->net_lock);
  return md;
}

char **sbx_session_run_env(struct sbx_live_session *ls, char *const *request_env)
{
  pthread_mutex_lock(&ls->net_lock);
  char **env = sbx_run_env(sbx_core_image_env(ls->image), ls->net ? sbx_net_env(ls->net) : NULL,
                           ls->env, request_env);
  pthread_mutex_unlock(&ls->net_lock);
  return env;
}

int sbx_session_patch(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                      json_t *body, json_t **out, struct sbx_error *err)
{
  static const char *const allowed[] = {"network", "ttl_s", "metadata", NULL};
  if (sbx_schema_only(body, "", allowed, err) < 0)
    return -1;
  _cleanup_free_ char *net_txt = NULL, *md_txt = NULL;
  __attribute__((cleanup(sbx_net_policy_freep))) struct sbx_net_policy *policy = NULL;
  json_t *v;
  if ((v = json_object_get(body, "network"))) {
    if (sbx_schema_network(v, "network", &policy, err) < 0)
      return -1;
    json_t *net = sbx_net_policy_json(policy);
    net_txt = dump(net);
    json_decref(net);
  }
  if ((v = json_object_get(body, "metadata"))) {
    if (sbx_schema_metadata(v, "metadata", err) < 0)
      return -1;
    md_txt = dump(json_is_object(v) ? v : NULL);
  }
  int64_t ttl = -1, expires = 0;
  if ((v = json_object_get(body, "ttl_s")) &&
      sbx_schema_ttl(v, core->cfg.max_ttl_s, &ttl, err) < 0)
    return -1;
  struct sbx_live_session *ls = sbx_session_acquire(core, who, id, err);
  if (!ls)
    return -1;
  if (policy && apply_policy(core, ls, &policy, err) < 0) {
    sbx_session_release(core, ls);
    return -1;
  }
  if (ttl > 0) { /* a new TTL counts from now */
    expires = sbx_wall_s() + ttl;
    pthread_mutex_lock(&core->sess_lock);
    ls->expires_at = expires;
    pthread_mutex_unlock(&core->sess_lock);
  }
  /* Under net_lock: the cached metadata follows the store's order. */
  pthread_mutex_lock(&ls->net_lock);
  int rc = core->store.ops->session_update(core->store.st, who->tenant_id, id, net_txt, md_txt,
                                           ttl, expires, err);
  if (rc == 0 && md_txt) {
    free(ls->metadata_json);
    ls->metadata_json = steal_pointer(&md_txt);
  }
  pthread_mutex_unlock(&ls->net_lock);
  sbx_session_release(core, ls);
  return rc < 0 ? -1 : sbx_session_get(core, who, id, out, err);
}

/* ---- ending sessions ---- */

/* The final status, retried: a write lost to a transient store error
 * would leave the row "ready" for a sandbox that is gone (a lasting
 * outage is corrected by recovery at the next start). */
static void record_end(struct sbx_core *core, struct sbx_live_session *ls, const char *status,
                       enum sbx_reason why)
{
  for (int attempt = 0; attempt < 4; attempt++) {
    struct sbx_error err = {0};
    if (core->store.ops->session_set_status(core->store.st, ls->tenant_id, ls->id, status,
                                            sbx_reason_name(why), &err) == 0)
      return;
    sbx_warn("session", "recording %s as %s: %s", ls->id, status, err.msg);
    nanosleep(&(struct timespec){0, (10L << attempt) * 1000000L}, NULL);
  }
}

static void end_session(struct sbx_core *core, struct sbx_live_session *ls, const char *status,
                        enum sbx_reason why)
{
  record_end(core, ls, status, why);
  sbx_fleet_unplace(core, sbx_fleet_node_id(core)); /* its place on this node */
  sbx_info("session", "%s %s (%s)", ls->id, status, sbx_reason_name(why));
  /* A delete through the API is audited by the dispatcher; endings the
   * daemon decides (expiry, a dead sandbox, shutdown) are audited here. */
  if (why != SBX_RS_SESSION_DELETED)
    sbx_audit_record(&core->store, ls->tenant_id, "system", "sandbox.session.end", ls->id,
                     status, json_pack("{s:s}", "reason", sbx_reason_name(why)));
  live_put(core, ls); /* the table's reference */
}

int sbx_session_delete(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                       struct sbx_error *err)
{
  pthread_mutex_lock(&core->sess_lock);
  struct sbx_live_session *ls = live_find_locked(core, who->tenant_id, id);
  if (ls && !ls->dying)
    live_kill_locked(core, ls, SBX_RS_SESSION_DELETED);
  else
    ls = NULL;
  pthread_mutex_unlock(&core->sess_lock);
  if (ls) {
    end_session(core, ls, "terminated", SBX_RS_SESSION_DELETED);
    return 0;
  }
  /* Not live: 404 if absent or foreign; deleting an ended session is a no-op. */
  struct sbx_session_row row = {0};
  if (core->store.ops->session_get(core->store.st, who->tenant_id, id, &row, err) < 0)
    return err->code == SBX_E_NOT_FOUND ? not_found(err, id) : -1;
  sbx_session_row_free(&row);
  return 0;
}

void sbx_sessions_reap(struct sbx_core *core, int64_t now)
{
  sbx_sessions_cpu_tick(core);
  for (;;) {
    struct sbx_live_session *victim = NULL;
    const char *status = "expired";
    enum sbx_reason why = SBX_RS_TIMEOUT;
    pthread_mutex_lock(&core->sess_lock);
    for (struct sbx_live_session *ls = core->sessions; ls && !victim; ls = ls->next) {
      bool idle = core->cfg.idle_timeout_s > 0 && ls->execs == NULL &&
                  now - ls->last_used_at >= core->cfg.idle_timeout_s;
      if (now >= ls->expires_at || idle) {
        victim = ls;
      } else if (!sbx_sandbox_alive(ls->sb)) { /* sbx-init died: the sandbox is gone */
        victim = ls;
        status = "failed";
        why = SBX_RS_SANDBOX_LOST;
      }
    }
    if (victim)
      live_kill_locked(core, victim, why);
    pthread_mutex_unlock(&core->sess_lock);
    if (!victim)
      return;
    end_session(core, victim, status, why);
  }
}

void sbx_sessions_drop(struct sbx_core *core, const char *status, enum sbx_reason why)
{
  for (;;) {
    pthread_mutex_lock(&core->sess_lock);
    struct sbx_live_session *ls = core->sessions;
    if (ls)
      live_kill_locked(core, ls, why);
    pthread_mutex_unlock(&core->sess_lock);
    if (!ls)
      break;
    end_session(core, ls, status, why);
  }
}

bool sbx_session_is_live_here(struct sbx_core *core, const struct sbx_principal *who,
                              const char *id)
{
  pthread_mutex_lock(&core->sess_lock);
  bool live = live_find_locked(core, who->tenant_id, id) != NULL;
  pthread_mutex_unlock(&core->sess_lock);
  return live;
}

void sbx_sessions_shutdown(struct sbx_core *core)
{
  sbx_sessions_drop(core, "terminated", SBX_RS_DAEMON_SHUTDOWN);
  sbx_procs_drain();    /* background processes end with their sessions */
  sbx_contexts_drain(); /* so do contexts */
}

/* ---- exec ---- */

static struct sbx_exec_slot *slot_add(struct sbx_core *core, struct sbx_live_session *ls)
{
  struct sbx_exec_slot *s = calloc(1, sizeof *s);
  if (!s || sbx_cancel_init(&s->cancel) < 0) {
    free(s);
    return NULL;
  }
  pthread_mutex_lock(&core->sess_lock);
  s->next = ls->execs;
  ls->execs = s;
  if (ls->dying) /* deleted between acquire and now */
    sbx_cancel_fire(&s->cancel, ls->dying_reason);
  pthread_mutex_unlock(&core->sess_lock);
  return s;
}

struct sbx_exec_slot *sbx_session_slot_add(struct sbx_core *core, struct sbx_live_session *ls)
{
  return slot_add(core, ls);
}

static void slot_remove(struct sbx_core *core, struct sbx_live_session *ls,
                        struct sbx_exec_slot *s)
{
  pthread_mutex_lock(&core->sess_lock);
  for (struct sbx_exec_slot **pp = &ls->execs; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  ls->last_used_at = sbx_wall_s();
  pthread_mutex_unlock(&core->sess_lock);
  sbx_cancel_destroy(&s->cancel);
  free(s);
}

void sbx_session_slot_remove(struct sbx_core *core, struct sbx_live_session *ls,
                             struct sbx_exec_slot *s)
{
  slot_remove(core, ls, s);
}

struct sbx_live_session *sbx_session_exec_acquire(struct sbx_core *core,
                                                  const struct sbx_principal *who,
                                                  const char *id, json_t *body,
                                                  struct sbx_error *err)
{
  static const char *const allowed[] = {"command", "language",  "code",       "stdin", "env",
                                        "cwd",     "timeout_s", "background", "pty",   NULL};
  if (sbx_schema_only(body, "", allowed, err) < 0 || sbx_quota_cpu_check(core, who, err) < 0)
    return NULL;
  return sbx_session_acquire(core, who, id, err);
}

/* One buffered exec in slot, its capture and fds charged to the budgets
 * while it runs.  0 with *out the result, -1 with err. */
static int run_buffered(struct sbx_core *core, struct sbx_live_session *ls,
                        const struct sbx_principal *who, struct sbx_exec_spec *spec, char **env,
                        struct sbx_exec_slot *slot, struct sbx_span *span, json_t **out,
                        struct sbx_error *err)
{
  /* The session's limits.timeout_s (from its create request, else the
   * profile's default) is the default of each exec; an exec may ask for
   * more, up to the profile's ceiling (checked by the schema). */
  double t = spec->timeout_s > 0 ? spec->timeout_s : (double)ls->limits.timeout_s;
  /* Concurrent buffered execs share the output budgets with background
   * processes: under pressure an exec keeps a shorter head and tail. */
  uint64_t held = 0, cap = sbx_res_output_take(core, ls->tenant_id,
                                               ls->limits.output_bytes ? ls->limits.output_bytes
                                                                       : 1u << 20,
                                               &held);
  struct sbx_exec_result res = {0};
  int rc =
      sbx_run_spec(ls->sb, spec, env, (uint64_t)(t * 1000.0), cap, &slot->cancel, &res, err);
  if (rc == 0)
    *out = sbx_result_json(&res);
  sbx_session_exec_done(core, ls, who, &res, rc == 0, span);
  sbx_exec_result_free(&res);
  sbx_res_mem_give(ls->tenant_id, held);
  return rc;
}

int sbx_session_exec(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                     json_t *body, json_t **out, struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_exec_acquire(core, who, id, body, err);
  if (!ls)
    return -1;
  struct sbx_exec_spec spec;
  if (sbx_schema_exec(body, ls->profile->max.timeout_s, false, &spec, err) < 0 ||
      sbx_core_image_exec(ls->image, &spec, false, err) < 0) {
    sbx_exec_spec_free(&spec);
    sbx_session_release(core, ls);
    return -1;
  }
  int rc = -1;
  struct sbx_span *span = sbx_exec_span_begin(core, who, ls); /* TRACEPARENT in env */
  char **env = sbx_session_run_env(ls, spec.env);
  if (!env)
    sbx_err_sys(err, ENOMEM, "exec");
  else if (sbx_res_fds_take(core, ls->tenant_id, ls->id, SBX_RES_FDS_EXEC, err) == 0) {
    struct sbx_exec_slot *slot = slot_add(core, ls);
    if (!slot)
      sbx_err_sys(err, ENOMEM, "exec");
    else {
      rc = run_buffered(core, ls, who, &spec, env, slot, span, out, err);
      slot_remove(core, ls, slot);
      sbx_session_touch(core, ls);
    }
    sbx_res_fds_give(ls->tenant_id, ls->id, SBX_RES_FDS_EXEC);
  }
  sbx_trace_op_end(span, NULL, NULL, rc == 0 ? NULL : "error", rc == 0 ? NULL : err->msg);
  sbx_strv_free(env);
  sbx_exec_spec_free(&spec);
  sbx_session_release(core, ls);
  return rc;
}
