/* audit_usage.c — PostgreSQL queries for the audit chain (audit_events)
 * and the usage records that double as the FinOps outbox (usage_records).
 * Contracts in store/store.h.
 *
 * The chain is one chain across tenants.  audit_append holds an advisory
 * transaction lock (PG_LOCK_AUDIT) from before it reads the head until its
 * insert commits, so appenders — threads here or other daemons on the same
 * database — never chain to the same predecessor; the head is read through
 * sbx_audit_head() (it may be another tenant's row) and the row is written
 * under the event's own tenant.  Whole-chain reads (admin listing, verify)
 * and the outbox worker go through SECURITY DEFINER functions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "store/postgres/pg_int.h"

#define AUD_SCAN_PAGE 512

static int64_t wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int audit_head(struct pg_tx *tx, int64_t *seq, char *hash, struct sbx_error *err)
{
  char sql[64];
  snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", PG_LOCK_AUDIT);
  _cleanup_pg_res_ PGresult *l = pg_q(tx, PGQ_AUD_LOCK, sql, NULL, false, err);
  if (!l)
    return -1;
  _cleanup_pg_res_ PGresult *r =
      pg_q(tx, PGQ_AUD_HEAD, "SELECT seq, hash FROM sbx_audit_head()", NULL, false, err);
  if (!r)
    return -1;
  if (PQntuples(r) == 0) {
    *seq = 0;
    snprintf(hash, 65, "%s", SBX_AUDIT_GENESIS);
  } else {
    *seq = pr_i64(r, 0, 0);
    pr_copy(r, 0, 1, hash, 65);
  }
  return 0;
}

static int audit_insert(struct pg_tx *tx, const struct sbx_audit_row *row, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, row->seq);
  pp_i64(&p, row->time_ms);
  pp_i64(&p, row->tenant_id);
  pp_text(&p, row->actor);
  pp_text(&p, row->action);
  pp_text(&p, row->target);
  pp_text(&p, row->outcome);
  pp_text(&p, row->details_json ? row->details_json : "{}");
  pp_text(&p, row->prev_hash);
  pp_text(&p, row->hash);
  return pg_exec(tx, PGQ_AUD_INSERT,
                 "INSERT INTO audit_events (" AUD_COLS
                 ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
                 " $9, $10)",
                 &p, err);
}

int pg_audit_append(struct sbx_store *st, struct sbx_audit_row *row, sbx_audit_hash_fn hash,
                    void *ctx, struct sbx_error *err)
{
  if (!row->time_ms)
    row->time_ms = wall_ms();
  struct pg_tx tx;
  if (pg_begin(st, &tx, row->tenant_id, err) < 0)
    return -1;
  int64_t last = 0;
  int ret = audit_head(&tx, &last, row->prev_hash, err);
  if (ret == 0) {
    row->seq = last + 1;
    row->hash[0] = '\0';
    if (hash(ctx, row) < 0)
      ret = sbx_err_set(err, SBX_E_INTERNAL, 0, "store: hashing the audit event failed");
  }
  if (ret == 0)
    ret = audit_insert(&tx, row, err);
  return pg_end(&tx, ret, err);
}

static int audit_deliver(PGresult *r, sbx_audit_cb cb, void *ctx, int *stopped,
                         struct sbx_error *err)
{
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(r); i++) {
    struct sbx_audit_row a;
    memset(&a, 0, sizeof a);
    a.seq = pr_i64(r, i, 0);
    a.time_ms = pr_i64(r, i, 1);
    a.tenant_id = pr_i64(r, i, 2);
    pr_copy(r, i, 3, a.actor, sizeof a.actor);
    pr_copy(r, i, 4, a.action, sizeof a.action);
    pr_copy(r, i, 5, a.target, sizeof a.target);
    pr_copy(r, i, 6, a.outcome, sizeof a.outcome);
    if (pr_strdup(r, i, 7, &a.details_json, err) < 0) {
      PQclear(r);
      return -1;
    }
    pr_copy(r, i, 8, a.prev_hash, sizeof a.prev_hash);
    pr_copy(r, i, 9, a.hash, sizeof a.hash);
    rc = cb(ctx, &a);
    free(a.details_json);
  }
  PQclear(r);
  if (stopped)
    *stopped = rc != 0;
  if (rc < 0)
    return err && err->code ? -1 : sbx_err_set(err, SBX_E_INTERNAL, 0, "audit callback failed");
  return 0;
}

/* One page of the whole chain (every tenant), through sbx_audit_all(). */
static PGresult *audit_all(struct sbx_store *st, int64_t after_seq, const char *action,
                           int limit, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return NULL;
  struct pg_params p = {0};
  pp_i64(&p, after_seq);
  pp_text(&p, action);
  if (limit > 0)
    pp_i64(&p, limit);
  else
    pp_text(&p, NULL);
  PGresult *r = pg_q(&tx, PGQ_AUD_ALL, "SELECT " AUD_COLS " FROM sbx_audit_all($1, $2, $3)", &p,
                     false, err);
  if (!(r = pg_end_keep(&tx, r, err)))
    return NULL;
  return r;
}

int pg_audit_list(struct sbx_store *st, int64_t tenant_id, const char *action, int64_t after_seq,
                  int limit, sbx_audit_cb cb, void *ctx, struct sbx_error *err)
{
  PGresult *r = NULL;
  if (tenant_id < 0) {
    r = audit_all(st, after_seq, action, limit, err);
  } else {
    struct pg_tx tx;
    if (pg_begin(st, &tx, tenant_id, err) < 0)
      return -1;
    struct pg_params p = {0};
    pp_i64(&p, after_seq);
    pp_i64(&p, tenant_id);
    pp_text(&p, action);
    if (limit > 0)
      pp_i64(&p, limit);
    else
      pp_text(&p, NULL);
    r = pg_q(&tx, PGQ_AUD_LIST,
             "SELECT " AUD_COLS " FROM audit_events WHERE seq > $1 AND tenant_id = $2"
             " AND ($3::text IS NULL OR action = $3) ORDER BY seq LIMIT $4",
             &p, false, err);
    if (!(r = pg_end_keep(&tx, r, err)))
      return -1;
  }
  if (!r)
    return -1;
  return audit_deliver(r, cb, ctx, NULL, err);
}

int pg_audit_scan(struct sbx_store *st, int64_t after_seq, sbx_audit_cb cb, void *ctx,
                  struct sbx_error *err)
{
  for (;;) {
    PGresult *r = audit_all(st, after_seq, NULL, AUD_SCAN_PAGE, err);
    if (!r)
      return -1;
    int n = PQntuples(r);
    if (n)
      after_seq = pr_i64(r, n - 1, 0);
    int stopped = 0;
    if (audit_deliver(r, cb, ctx, &stopped, err) < 0)
      return -1;
    if (stopped || n < AUD_SCAN_PAGE)
      return 0;
  }
}

/* ---- usage records and the outbox ---- */

int pg_usage_insert(struct sbx_store *st, const struct sbx_usage_row *row, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, row->tenant_id, err) < 0)
    return -1;
  return pg_end(&tx, pg_usage_insert_tx(&tx, row, err), err);
}

int pg_usage_insert_tx(struct pg_tx *tx, const struct sbx_usage_row *row, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, row->id);
  pp_i64(&p, row->tenant_id);
  pp_text(&p, row->tenant);
  pp_text(&p, row->kind);
  pp_text(&p, row->source_id);
  pp_text(&p, row->profile);
  pp_text(&p, row->status);
  pp_text(&p, row->project);
  pp_text(&p, row->agent);
  pp_text(&p, row->run);
  pp_f64(&p, row->cpu_seconds);
  pp_f64(&p, row->memory_mb_seconds);
  pp_f64(&p, row->duration_seconds);
  pp_i64(&p, row->created_at ? row->created_at : sbx_wall_s());
  pp_text(&p, row->delivery[0] ? row->delivery : "none");
  pp_i64(&p, row->attempts);
  pp_i64(&p, row->next_attempt_at);
  pp_i64(&p, row->delivered_at);
  pp_text(&p, row->last_error);
  return pg_exec(tx, PGQ_USE_INSERT,
                 "INSERT INTO usage_records (" USE_COLS
                 ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
                 " $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)",
                 &p, err);
}

/* The group_by column is one of three fixed statements, never text pasted
 * from a request. */
static int usage_slot(const char *group_by, enum pg_slot *slot, const char **sql,
                      struct sbx_error *err)
{
#define GROUP_SQL(col)                                                                          \
  "SELECT " col ", COUNT(*), SUM(cpu_seconds), SUM(memory_mb_seconds),"                         \
  " SUM(duration_seconds) FROM usage_records WHERE tenant_id = $1 AND created_at >= $2"         \
  " AND ($3::bigint <= 0 OR created_at < $3) GROUP BY " col " ORDER BY " col " COLLATE \"C\""
  if (!strcmp(group_by, "profile")) {
    *slot = PGQ_USE_BY_PROFILE;
    *sql = GROUP_SQL("profile");
  } else if (!strcmp(group_by, "project")) {
    *slot = PGQ_USE_BY_PROJECT;
    *sql = GROUP_SQL("project");
  } else if (!strcmp(group_by, "agent")) {
    *slot = PGQ_USE_BY_AGENT;
    *sql = GROUP_SQL("agent");
  } else {
    return sbx_err_field(err, "group_by", "group_by must be profile, project or agent");
  }
#undef GROUP_SQL
  return 0;
}

int pg_usage_query(struct sbx_store *st, int64_t tenant_id, const char *group_by, int64_t from,
                   int64_t to, sbx_usage_group_cb cb, void *ctx, struct sbx_error *err)
{
  enum pg_slot slot = PGQ_USE_BY_PROFILE;
  const char *sql = NULL;
  if (usage_slot(group_by, &slot, &sql, err) < 0)
    return -1;
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_i64(&p, from);
  pp_i64(&p, to);
  PGresult *r = pg_q(&tx, slot, sql, &p, false, err);
  if (!(r = pg_end_keep(&tx, r, err)))
    return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(r); i++) {
    struct sbx_usage_group g;
    memset(&g, 0, sizeof g);
    pr_copy(r, i, 0, g.key, sizeof g.key);
    g.records = pr_i64(r, i, 1);
    g.cpu_seconds = pr_f64(r, i, 2);
    g.memory_mb_seconds = pr_f64(r, i, 3);
    g.duration_seconds = pr_f64(r, i, 4);
    rc = cb(ctx, &g);
  }
  PQclear(r);
  return rc < 0 ? -1 : 0;
}

static void usage_from_row(const PGresult *r, int i, struct sbx_usage_row *u)
{
  memset(u, 0, sizeof *u);
  pr_copy(r, i, 0, u->id, sizeof u->id);
  u->tenant_id = pr_i64(r, i, 1);
  pr_copy(r, i, 2, u->tenant, sizeof u->tenant);
  pr_copy(r, i, 3, u->kind, sizeof u->kind);
  pr_copy(r, i, 4, u->source_id, sizeof u->source_id);
  pr_copy(r, i, 5, u->profile, sizeof u->profile);
  pr_copy(r, i, 6, u->status, sizeof u->status);
  pr_copy(r, i, 7, u->project, sizeof u->project);
  pr_copy(r, i, 8, u->agent, sizeof u->agent);
  pr_copy(r, i, 9, u->run, sizeof u->run);
  u->cpu_seconds = pr_f64(r, i, 10);
  u->memory_mb_seconds = pr_f64(r, i, 11);
  u->duration_seconds = pr_f64(r, i, 12);
  u->created_at = pr_i64(r, i, 13);
  pr_copy(r, i, 14, u->delivery, sizeof u->delivery);
  u->attempts = (int)pr_i64(r, i, 15);
  u->next_attempt_at = pr_i64(r, i, 16);
  u->delivered_at = pr_i64(r, i, 17);
  pr_copy(r, i, 18, u->last_error, sizeof u->last_error);
}

int pg_outbox_due(struct sbx_store *st, int64_t now, int limit, sbx_usage_cb cb, void *ctx,
                  struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_i64(&p, now);
  if (limit > 0)
    pp_i64(&p, limit);
  else
    pp_text(&p, NULL);
  PGresult *r =
      pg_q(&tx, PGQ_OUT_DUE, "SELECT " USE_COLS " FROM sbx_outbox_due($1, $2)", &p, false, err);
  if (!(r = pg_end_keep(&tx, r, err)))
    return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(r); i++) {
    struct sbx_usage_row u;
    usage_from_row(r, i, &u);
    rc = cb(ctx, &u);
  }
  PQclear(r);
  return rc < 0 ? -1 : 0;
}

/* At most max bytes of s, cut on a UTF-8 character boundary (PostgreSQL
 * rejects a text value ending in half a character). */
static void utf8_cut(char *dst, size_t size, const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n > max) {
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
      n--;
  }
  if (n >= size)
    n = size - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

int pg_outbox_mark(struct sbx_store *st, const char *id, bool delivered, int64_t next_attempt_at,
                   const char *error, struct sbx_error *err)
{
  char msg[256];
  utf8_cut(msg, sizeof msg, error ? error : "", 255);
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_text(&p, id);
  pp_bool(&p, delivered);
  pp_i64(&p, sbx_wall_s());
  pp_i64(&p, next_attempt_at);
  pp_text(&p, msg);
  _cleanup_pg_res_ PGresult *r =
      pg_q1(&tx, PGQ_OUT_MARK, "SELECT sbx_outbox_mark($1, $2, $3, $4, $5)", &p, "no result",
            err);
  int ret = r ? 0 : -1;
  if (r && pr_i64(r, 0, 0) == 0)
    ret = sbx_err_set(err, SBX_E_NOT_FOUND, 0, "usage record %s not found", id);
  return pg_end(&tx, ret, err);
}
