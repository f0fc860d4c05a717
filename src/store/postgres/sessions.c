/* sessions.c — PostgreSQL queries for sessions.  Each runs in a
 * transaction scoped to its tenant (row-level security) and still filters
 * by tenant_id itself: the policy is the backstop, not the only check.
 * session_list_ready is the one cross-tenant read (sbx_sessions_ready()). */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/postgres/pg_int.h"

static int session_from_row(const PGresult *r, int i, void *row, struct sbx_error *err)
{
  struct sbx_session_row *out = row;
  memset(out, 0, sizeof *out);
  PR_HEAD(r, i, out);
  pr_copy(r, i, 5, out->runtime, sizeof out->runtime);
  pr_copy(r, i, 6, out->image, sizeof out->image);
  out->ttl_s = pr_i64(r, i, 11);
  out->created_at = pr_i64(r, i, 12);
  out->updated_at = pr_i64(r, i, 13);
  out->expires_at = pr_i64(r, i, 14);
  out->last_used_at = pr_i64(r, i, 15);
  pr_copy(r, i, 16, out->node_id, sizeof out->node_id);
  if (pr_strdup(r, i, 7, &out->limits_json, err) < 0 ||
      pr_strdup(r, i, 8, &out->network_json, err) < 0 ||
      pr_strdup(r, i, 9, &out->metadata_json, err) < 0 ||
      pr_strdup(r, i, 10, &out->env_json, err) < 0) {
    sbx_session_row_free(out);
    return -1;
  }
  return 0;
}

static const struct pg_kind sessions =
    SBX_STORE_KIND(PG, SESSIONS, session_from_row, PGQ_SES, SES_COLS, "sessions");

int pg_session_insert(struct sbx_store *st, const struct sbx_session_row *row,
                      struct sbx_error *err)
{
  int64_t created = row->created_at ? row->created_at : sbx_wall_s();
  struct pg_params p = {0};
  pp_head(&p, row->id, row->tenant_id, row->status, row->reason, row->profile);
  pp_text(&p, row->runtime);
  pp_text(&p, row->image);
  pp_text(&p, row->limits_json);
  pp_text(&p, row->network_json);
  pp_text(&p, row->metadata_json);
  pp_text(&p, row->env_json);
  pp_i64(&p, row->ttl_s);
  pp_i64(&p, created);
  pp_i64(&p, row->updated_at ? row->updated_at : created);
  pp_i64(&p, row->expires_at);
  pp_i64(&p, row->last_used_at ? row->last_used_at : created);
  pp_text(&p, row->node_id);
  return pg_run(st, row->tenant_id, PGQ_SES_INSERT,
                "INSERT INTO sessions (" SES_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                " $10, $11, $12, $13, $14, $15, $16, $17)",
                &p, NULL, err);
}

int pg_session_get(struct sbx_store *st, int64_t tenant_id, const char *id,
                   struct sbx_session_row *out, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  _cleanup_pg_res_ PGresult *r =
      pg_get_one(&tx, PGQ_SES_GET,
                 "SELECT " SES_COLS " FROM sessions WHERE tenant_id = $1 AND id = $2", tenant_id,
                 id, "session not found", err);
  int ret = r ? session_from_row(r, 0, out, err) : -1;
  return pg_end(&tx, ret, err);
}

int pg_session_list(struct sbx_store *st, int64_t tenant_id, const char *status,
                    const char *after, int limit, sbx_session_cb cb, void *ctx,
                    struct sbx_error *err)
{
  return pg_list_page(st, &sessions, tenant_id, status, after, limit,
                      (union sbx_store_cb){.session = cb}, ctx, err);
}

int pg_session_list_ready(struct sbx_store *st, sbx_session_cb cb, void *ctx,
                          struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  PGresult *r = pg_q(&tx, PGQ_SES_LIST_READY, "SELECT " SES_COLS " FROM sbx_sessions_ready()",
                     NULL, false, err);
  return pg_end_and_deliver(&sessions, &tx, r, (union sbx_store_cb){.session = cb}, ctx, err);
}

/* Runs an UPDATE naming one session of the tenant; NOT_FOUND if none. */
static int update_one(struct sbx_store *st, int64_t tenant_id, enum pg_slot slot,
                      const char *sql, const struct pg_params *p, struct sbx_error *err)
{
  return pg_run(st, tenant_id, slot, sql, p, "session not found", err);
}

int pg_session_set_status(struct sbx_store *st, int64_t tenant_id, const char *id,
                          const char *status, const char *reason, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, status);
  pp_text(&p, reason ? reason : "");
  pp_i64(&p, sbx_wall_s());
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  return update_one(st, tenant_id, PGQ_SES_SET_STATUS,
                    "UPDATE sessions SET status = $1, reason = $2, updated_at = $3"
                    " WHERE tenant_id = $4 AND id = $5",
                    &p, err);
}

int pg_session_update(struct sbx_store *st, int64_t tenant_id, const char *id,
                      const char *network_json, const char *metadata_json, int64_t ttl_s,
                      int64_t expires_at, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, network_json);
  pp_text(&p, metadata_json);
  pp_i64(&p, ttl_s);
  pp_i64(&p, expires_at);
  pp_i64(&p, sbx_wall_s());
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  return update_one(st, tenant_id, PGQ_SES_UPDATE,
                    "UPDATE sessions SET network_json = COALESCE($1, network_json),"
                    " metadata_json = COALESCE($2, metadata_json),"
                    " ttl_s = CASE WHEN $3::bigint < 0 THEN ttl_s ELSE $3 END,"
                    " expires_at = CASE WHEN $3::bigint < 0 THEN expires_at ELSE $4 END,"
                    " updated_at = $5 WHERE tenant_id = $6 AND id = $7",
                    &p, err);
}

int pg_session_touch(struct sbx_store *st, int64_t tenant_id, const char *id, int64_t now,
                     struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, now);
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  return update_one(st, tenant_id, PGQ_SES_TOUCH,
                    "UPDATE sessions SET last_used_at = $1 WHERE tenant_id = $2 AND id = $3", &p,
                    err);
}

int pg_session_count(struct sbx_store *st, int64_t tenant_id, const char *status, int64_t *count,
                     struct sbx_error *err)
{
  return pg_count(st, PGQ_SES_COUNT, PG_COUNT_SQL("sessions"), tenant_id, status, count, err);
}
