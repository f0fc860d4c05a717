/* fleet.c — PostgreSQL's fleet ops (store.h struct sbx_store_fleet_ops):
 * the nodes table, the shared execution queue and the fleet-wide tenant
 * counts (migration 0005_fleet.postgres.sql).  Node rows belong to no
 * tenant: those statements run without one.  What crosses tenants —
 * declaring nodes dead, claiming the next execution, renewing and
 * releasing a node's work — is one SECURITY DEFINER function each.  The
 * quota counts run in the tenant's own transaction under a per-tenant
 * advisory lock, so two nodes counting at once take turns. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/postgres/pg_int.h"

#define NODE_COLS                                                                               \
  "id, advertise, state, slots, used, ncpu, load1, mem_total, mem_avail, info_json,"            \
  " started_at, (extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::bigint, joins"

/* Advisory lock keys of the per-tenant counts (0005_fleet.postgres.sql). */
#define LOCK_EXEC_QUOTA "5862003"
#define LOCK_SESSION_QUOTA "5862004"

static void pp_node(struct pg_params *p, const struct sbx_node_row *n)
{
  pp_text(p, n->id);                              /* $1 */
  pp_text(p, n->advertise);                       /* $2 */
  pp_i64(p, n->slots);                            /* $3 */
  pp_i64(p, n->ncpu);                             /* $4 */
  pp_f64(p, n->load1);                            /* $5 */
  pp_i64(p, n->mem_total);                        /* $6 */
  pp_i64(p, n->mem_avail);                        /* $7 */
  pp_text(p, n->info_json ? n->info_json : "{}"); /* $8 */
  pp_i64(p, n->started_at);                       /* $9 */
}

static int node_join(struct sbx_store *st, const struct sbx_node_row *row, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_node(&p, row);
  return pg_run(st, PG_NO_TENANT, PGQ_NODE_JOIN,
                "INSERT INTO nodes (id, advertise, state, slots, used, ncpu, load1, mem_total,"
                " mem_avail, info_json, started_at, heartbeat_at, joins)"
                " VALUES ($1, $2, 'alive', $3, 0, $4, $5, $6, $7, $8, $9, clock_timestamp(), 1)"
                " ON CONFLICT (id) DO UPDATE SET advertise = $2, state = 'alive', slots = $3,"
                " used = 0, ncpu = $4, load1 = $5, mem_total = $6, mem_avail = $7,"
                " info_json = $8, started_at = $9, heartbeat_at = clock_timestamp(),"
                " joins = nodes.joins + 1",
                &p, NULL, err);
}

static int node_beat(struct sbx_store *st, const struct sbx_node_row *row, bool *alive,
                     struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_node(&p, row);
  _cleanup_pg_res_ PGresult *r = pg_run_keep(
      st, PG_NO_TENANT, PGQ_NODE_BEAT,
      "UPDATE nodes SET advertise = $2, slots = $3, ncpu = $4, load1 = $5, mem_total = $6,"
      " mem_avail = $7, info_json = $8, heartbeat_at = clock_timestamp()"
      " WHERE id = $1 AND state = 'alive' AND started_at = $9",
      &p, err);
  *alive = r && pg_changes(r) == 1;
  return r ? 0 : -1;
}

static int node_leave(struct sbx_store *st, const char *id, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, id);
  return pg_run(st, PG_NO_TENANT, PGQ_NODE_LEAVE,
                "UPDATE nodes SET state = 'left', used = 0 WHERE id = $1 AND state = 'alive'",
                &p, NULL, err);
}

static void node_from_row(const PGresult *r, int i, struct sbx_node_row *out)
{
  memset(out, 0, sizeof *out);
  pr_copy(r, i, 0, out->id, sizeof out->id);
  pr_copy(r, i, 1, out->advertise, sizeof out->advertise);
  pr_copy(r, i, 2, out->state, sizeof out->state);
  out->slots = pr_i64(r, i, 3);
  out->used = pr_i64(r, i, 4);
  out->ncpu = (int)pr_i64(r, i, 5);
  out->load1 = pr_f64(r, i, 6);
  out->mem_total = pr_i64(r, i, 7);
  out->mem_avail = pr_i64(r, i, 8);
  out->started_at = pr_i64(r, i, 10);
  out->heartbeat_age_ms = pr_i64(r, i, 11);
  out->joins = pr_i64(r, i, 12);
}

static int node_list(struct sbx_store *st, sbx_node_cb cb, void *ctx, struct sbx_error *err)
{
  _cleanup_pg_res_ PGresult *r =
      pg_run_keep(st, PG_NO_TENANT, PGQ_NODE_LIST, "SELECT " NODE_COLS " FROM nodes ORDER BY id",
                  NULL, err);
  if (!r)
    return -1;
  for (int i = 0; i < PQntuples(r); i++) {
    struct sbx_node_row row;
    node_from_row(r, i, &row);
    if (pr_strdup(r, i, 9, &row.info_json, err) < 0)
      return -1;
    int rc = cb(ctx, &row);
    sbx_node_row_free(&row);
    if (rc != 0)
      return rc < 0 ? -1 : 0;
  }
  return 0;
}

static int node_reserve(struct sbx_store *st, const char *id, int64_t delta, bool *ok,
                        struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, id);
  pp_i64(&p, delta);
  _cleanup_pg_res_ PGresult *r =
      pg_run_keep(st, PG_NO_TENANT, PGQ_NODE_RESERVE,
                  "UPDATE nodes SET used = GREATEST(used + $2, 0) WHERE id = $1"
                  " AND ($2 < 0 OR (state = 'alive' AND used + $2 <= slots))",
                  &p, err);
  *ok = r && pg_changes(r) == 1;
  return r ? 0 : -1;
}

static void reaped_from_row(const PGresult *r, int i, struct sbx_node_reaped *out)
{
  memset(out, 0, sizeof *out);
  pr_copy(r, i, 0, out->id, sizeof out->id);
  out->sessions = pr_i64(r, i, 1);
  out->failed = pr_i64(r, i, 2);
  out->requeued = pr_i64(r, i, 3);
}

static int node_reap(struct sbx_store *st, int64_t dead_after_ms, sbx_reap_cb cb, void *ctx,
                     struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, dead_after_ms);
  _cleanup_pg_res_ PGresult *r =
      pg_run_keep(st, PG_NO_TENANT, PGQ_NODE_REAP, "SELECT * FROM sbx_fleet_reap($1)", &p, err);
  if (!r)
    return -1;
  for (int i = 0; i < PQntuples(r); i++) {
    struct sbx_node_reaped one;
    reaped_from_row(r, i, &one);
    if (cb && cb(ctx, &one) < 0)
      return -1;
  }
  return 0;
}

static int node_release(struct sbx_store *st, const char *id, const char *reason,
                        struct sbx_node_reaped *out, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, id);
  pp_text(&p, reason);
  _cleanup_pg_res_ PGresult *r =
      pg_run_keep(st, PG_NO_TENANT, PGQ_NODE_RELEASE,
                  "SELECT $1::text, sessions, failed, 0 FROM sbx_fleet_release($1, $2)", &p,
                  err);
  if (!r)
    return -1;
  if (PQntuples(r) == 1)
    reaped_from_row(r, 0, out);
  return 0;
}

static int exec_claim(struct sbx_store *st, const char *node, int64_t cap, int64_t lease_ms,
                      char id[64], int64_t *tenant, bool *lease_expired, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, node);
  pp_i64(&p, cap);
  pp_i64(&p, lease_ms);
  _cleanup_pg_res_ PGresult *r =
      pg_run_keep(st, PG_NO_TENANT, PGQ_EXEC_CLAIM,
                  "SELECT id, tenant_id, lease_expired FROM sbx_fleet_claim($1, $2, $3)", &p,
                  err);
  if (!r)
    return -1;
  if (PQntuples(r) != 1)
    return 0;
  pr_copy(r, 0, 0, id, 64);
  *tenant = pr_i64(r, 0, 1);
  *lease_expired = PQgetvalue(r, 0, 2)[0] == 't';
  return 1;
}

static int queue_stats(struct sbx_store *st, int64_t *depth, int64_t *oldest_age_s,
                       struct sbx_error *err)
{
  _cleanup_pg_res_ PGresult *r =
      pg_run_keep(st, PG_NO_TENANT, PGQ_QUEUE_STATS,
                  "SELECT depth, oldest_age FROM sbx_fleet_queue()", NULL, err);
  if (!r)
    return -1;
  *depth = PQntuples(r) == 1 ? pr_i64(r, 0, 0) : 0;
  *oldest_age_s = PQntuples(r) == 1 ? pr_i64(r, 0, 1) : 0;
  return 0;
}

static int exec_renew(struct sbx_store *st, const char *node, int64_t lease_ms,
                      struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, node);
  pp_i64(&p, lease_ms);
  return pg_run(st, PG_NO_TENANT, PGQ_EXEC_RENEW, "SELECT sbx_fleet_renew($1, $2)", &p, NULL,
                err);
}

/* Takes the tenant's lock `key` and counts with `count_sql` ($1 tenant):
 * SBX_E_QUOTA when the count reached limit (> 0). */
static int count_under_lock(struct pg_tx *tx, enum pg_slot lock_slot, const char *lock_sql,
                            enum pg_slot count_slot, const char *count_sql, int64_t tenant_id,
                            int64_t limit, int64_t *count, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  _cleanup_pg_res_ PGresult *l = pg_q(tx, lock_slot, lock_sql, &p, false, err);
  if (!l)
    return -1;
  _cleanup_pg_res_ PGresult *c = pg_q(tx, count_slot, count_sql, &p, false, err);
  if (!c)
    return -1;
  *count = PQntuples(c) == 1 ? pr_i64(c, 0, 0) : 0;
  if (limit > 0 && *count >= limit)
    return sbx_err_set(err, SBX_E_QUOTA, 0, "tenant quota reached fleet-wide (%lld of %lld)",
                       (long long)*count, (long long)limit);
  return 0;
}

static int exec_insert_capped(struct sbx_store *st, const struct sbx_execution_row *row,
                              int64_t limit, int64_t *count, struct sbx_error *err)
{
  *count = 0;
  if (limit > 0) {
    struct pg_tx tx;
    if (pg_begin(st, &tx, row->tenant_id, err) < 0)
      return -1;
    int rc = count_under_lock(
        &tx, PGQ_EXEC_QUOTA_LOCK, "SELECT pg_advisory_xact_lock(" LOCK_EXEC_QUOTA ", $1::int)",
        PGQ_EXEC_QUOTA_COUNT,
        "SELECT count(*) FROM executions WHERE tenant_id = $1 AND status IN ('queued', 'running')",
        row->tenant_id, limit, count, err);
    if (rc == 0)
      rc = pg_execution_insert_tx(&tx, row, err);
    return pg_end(&tx, rc, err);
  }
  return pg_execution_insert(st, row, err);
}

static int session_hold(struct sbx_store *st, int64_t tenant_id, const char *hold_id,
                        const char *node, int64_t limit, int64_t ttl_s, int64_t *count,
                        struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  int64_t now = sbx_wall_s();
  int rc = count_under_lock(
      &tx, PGQ_SES_QUOTA_LOCK, "SELECT pg_advisory_xact_lock(" LOCK_SESSION_QUOTA ", $1::int)",
      PGQ_SES_QUOTA_COUNT,
      "SELECT (SELECT count(*) FROM sessions WHERE tenant_id = $1 AND status = 'ready')"
      " + (SELECT count(*) FROM session_holds WHERE tenant_id = $1"
      " AND expires_at > extract(epoch FROM clock_timestamp())::bigint)",
      tenant_id, limit, count, err);
  if (rc == 0) {
    struct pg_params p = {0};
    pp_text(&p, hold_id);
    pp_i64(&p, tenant_id);
    pp_text(&p, node);
    pp_i64(&p, now + ttl_s);
    _cleanup_pg_res_ PGresult *r =
        pg_q(&tx, PGQ_SES_HOLD,
             "INSERT INTO session_holds (id, tenant_id, node_id, expires_at)"
             " VALUES ($1, $2, $3, $4)",
             &p, false, err);
    rc = r ? 0 : -1;
  }
  return pg_end(&tx, rc, err);
}

static int session_unhold(struct sbx_store *st, int64_t tenant_id, const char *hold_id,
                          struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, hold_id);
  return pg_run(st, tenant_id, PGQ_SES_UNHOLD,
                "DELETE FROM session_holds WHERE tenant_id = $1 AND id = $2", &p, NULL, err);
}

const struct sbx_store_fleet_ops pg_fleet_ops = {
    .node_join = node_join,
    .node_beat = node_beat,
    .node_leave = node_leave,
    .node_list = node_list,
    .node_reserve = node_reserve,
    .node_reap = node_reap,
    .node_release = node_release,
    .exec_claim = exec_claim,
    .exec_renew = exec_renew,
    .queue_stats = queue_stats,
    .exec_insert_capped = exec_insert_capped,
    .session_hold = session_hold,
    .session_unhold = session_unhold,
};
