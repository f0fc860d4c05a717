/* tools.c — PostgreSQL queries for a tenant's tools (store.h tool_*), in
 * transactions scoped to the tenant (row-level security).  An apply is
 * one transaction; each row is an INSERT … ON CONFLICT DO NOTHING, then an
 * UPDATE guarded by the digest, so two daemons applying the same name at
 * once serialise on the row instead of failing on the key. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/postgres/pg_int.h"

static int tool_from_row(const PGresult *r, int i, void *row, struct sbx_error *err)
{
  struct sbx_tool_row *out = row;
  memset(out, 0, sizeof *out);
  out->tenant_id = pr_i64(r, i, 0);
  pr_copy(r, i, 1, out->name, sizeof out->name);
  pr_copy(r, i, 2, out->profile, sizeof out->profile);
  pr_copy(r, i, 3, out->image, sizeof out->image);
  pr_copy(r, i, 4, out->digest, sizeof out->digest);
  out->generation = pr_i64(r, i, 6);
  out->created_at = pr_i64(r, i, 7);
  out->updated_at = pr_i64(r, i, 8);
  return pr_strdup(r, i, 5, &out->manifest_json, err);
}

static const struct pg_kind tools = {.table = SBX_STORE_TOOLS, .from_row = tool_from_row};

#define TOOL_GET_SQL "SELECT " TOOL_COLS " FROM tools WHERE tenant_id = $1 AND name = $2"

/* Inserts or updates one row inside tx; *action says which. */
static int put_one(struct pg_tx *tx, struct sbx_tool_row *t, int64_t now,
                   enum sbx_tool_action *action, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, t->tenant_id);
  pp_text(&p, t->name);
  pp_text(&p, t->profile);
  pp_text(&p, t->image);
  pp_text(&p, t->digest);
  pp_text(&p, t->manifest_json);
  pp_i64(&p, now);
  _cleanup_pg_res_ PGresult *ins =
      pg_q(tx, PGQ_TOOL_INSERT,
           "INSERT INTO tools (" TOOL_COLS ") VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7)"
           " ON CONFLICT (tenant_id, name) DO NOTHING",
           &p, false, err);
  if (!ins)
    return -1;
  *action = SBX_TOOL_CREATED;
  if (pg_changes(ins) == 0) {
    _cleanup_pg_res_ PGresult *upd =
        pg_q(tx, PGQ_TOOL_UPDATE,
             "UPDATE tools SET profile = $3, image = $4, digest = $5, manifest_json = $6,"
             " generation = generation + 1, updated_at = $7"
             " WHERE tenant_id = $1 AND name = $2 AND digest <> $5",
             &p, false, err);
    if (!upd)
      return -1;
    *action = pg_changes(upd) ? SBX_TOOL_UPDATED : SBX_TOOL_UNCHANGED;
  }
  _cleanup_pg_res_ PGresult *r =
      pg_get_one(tx, PGQ_TOOL_GET, TOOL_GET_SQL, t->tenant_id, t->name, "tool not found", err);
  if (!r)
    return -1;
  t->generation = pr_i64(r, 0, 6);
  t->created_at = pr_i64(r, 0, 7);
  t->updated_at = pr_i64(r, 0, 8);
  return 0;
}

int pg_tool_put(struct sbx_store *st, int64_t tenant_id, struct sbx_tool_row *rows, size_t n,
                enum sbx_tool_action *actions, struct sbx_error *err)
{
  int64_t now = sbx_wall_s();
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  int ret = 0;
  for (size_t i = 0; ret == 0 && i < n; i++) {
    rows[i].tenant_id = tenant_id;
    ret = put_one(&tx, &rows[i], now, &actions[i], err);
  }
  return pg_end(&tx, ret, err);
}

int pg_tool_get(struct sbx_store *st, int64_t tenant_id, const char *name,
                struct sbx_tool_row *out, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  _cleanup_pg_res_ PGresult *r =
      pg_get_one(&tx, PGQ_TOOL_GET, TOOL_GET_SQL, tenant_id, name, "tool not found", err);
  int ret = r ? tool_from_row(r, 0, out, err) : -1;
  return pg_end(&tx, ret, err);
}

int pg_tool_list(struct sbx_store *st, int64_t tenant_id, const char *after, int limit,
                 sbx_tool_cb cb, void *ctx, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, after ? after : "");
  if (limit > 0)
    pp_i64(&p, limit);
  else
    pp_text(&p, NULL); /* LIMIT NULL = no limit */
  PGresult *r = pg_q(&tx, PGQ_TOOL_LIST,
                     "SELECT " TOOL_COLS " FROM tools WHERE tenant_id = $1"
                     " AND name COLLATE \"C\" > $2 ORDER BY name COLLATE \"C\" LIMIT $3",
                     &p, false, err);
  return pg_end_and_deliver(&tools, &tx, r, (union sbx_store_cb){.tool = cb}, ctx, err);
}

int pg_tool_delete(struct sbx_store *st, int64_t tenant_id, const char *name,
                   struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, name);
  return pg_run(st, tenant_id, PGQ_TOOL_DELETE,
                "DELETE FROM tools WHERE tenant_id = $1 AND name = $2", &p, "tool not found",
                err);
}

int pg_tool_count(struct sbx_store *st, int64_t tenant_id, int64_t *count, struct sbx_error *err)
{
  /* $2 IS NULL: the shared count statement's status filter, unused here. */
  return pg_count(st, PGQ_TOOL_COUNT,
                  "SELECT COUNT(*) FROM tools WHERE tenant_id = $1 AND $2::text IS NULL",
                  tenant_id, NULL, count, err);
}
