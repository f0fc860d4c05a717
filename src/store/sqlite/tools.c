/* tools.c — SQLite queries for a tenant's tools (store.h tool_*).  An
 * apply is one write transaction; each row is an INSERT that does nothing
 * for a known name, then an UPDATE that does nothing for the same digest,
 * so the two tell created, updated and unchanged apart without a read. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

static int tool_from_row(sqlite3_stmt *s, void *row, struct sbx_error *err)
{
  struct sbx_tool_row *out = row;
  memset(out, 0, sizeof *out);
  out->tenant_id = sqlite3_column_int64(s, 0);
  sq_col_copy(s, 1, out->name, sizeof out->name);
  sq_col_copy(s, 2, out->profile, sizeof out->profile);
  sq_col_copy(s, 3, out->image, sizeof out->image);
  sq_col_copy(s, 4, out->digest, sizeof out->digest);
  out->generation = sqlite3_column_int64(s, 6);
  out->created_at = sqlite3_column_int64(s, 7);
  out->updated_at = sqlite3_column_int64(s, 8);
  return sq_col_strdup(s, 5, &out->manifest_json, err);
}

static const struct sq_kind tools = {.table = SBX_STORE_TOOLS, .from_row = tool_from_row};

#define TOOL_GET_SQL "SELECT " TOOL_COLS " FROM tools WHERE tenant_id = ? AND name = ?"

/* ?1 … ?7 of both the insert and the update. */
static void bind_tool(sqlite3_stmt *s, const struct sbx_tool_row *t, int64_t now)
{
  sqlite3_bind_int64(s, 1, t->tenant_id);
  sq_bind_text(s, 2, t->name);
  sq_bind_text(s, 3, t->profile);
  sq_bind_text(s, 4, t->image);
  sq_bind_text(s, 5, t->digest);
  sq_bind_text(s, 6, t->manifest_json);
  sqlite3_bind_int64(s, 7, now);
}

/* Inserts or updates one row (lock and transaction held); *action says which. */
static int put_one(struct sbx_store *st, struct sbx_tool_row *t, int64_t now,
                   enum sbx_tool_action *action, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *ins = NULL, *upd = NULL;
  if (sq_stmt(st, SQ_TOOL_INSERT,
              "INSERT INTO tools (" TOOL_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?7)"
              " ON CONFLICT (tenant_id, name) DO NOTHING",
              &ins, err) < 0)
    return -1;
  bind_tool(ins, t, now);
  if (sq_exec_stmt(st, ins, "insert tool", err) < 0)
    return -1;
  *action = SBX_TOOL_CREATED;
  if (sqlite3_changes(st->db) == 0) {
    if (sq_stmt(st, SQ_TOOL_UPDATE,
                "UPDATE tools SET profile = ?3, image = ?4, digest = ?5, manifest_json = ?6,"
                " generation = generation + 1, updated_at = ?7"
                " WHERE tenant_id = ?1 AND name = ?2 AND digest <> ?5",
                &upd, err) < 0)
      return -1;
    bind_tool(upd, t, now);
    if (sq_exec_stmt(st, upd, "update tool", err) < 0)
      return -1;
    *action = sqlite3_changes(st->db) ? SBX_TOOL_UPDATED : SBX_TOOL_UNCHANGED;
  }
  struct sbx_tool_row stored;
  if (sq_get_one(st, SQ_TOOL_GET, TOOL_GET_SQL, t->tenant_id, t->name, tool_from_row, &stored,
                 "tool", err) < 0)
    return -1;
  t->generation = stored.generation;
  t->created_at = stored.created_at;
  t->updated_at = stored.updated_at;
  sbx_tool_row_free(&stored);
  return 0;
}

int sq_tool_put(struct sbx_store *st, int64_t tenant_id, struct sbx_tool_row *rows, size_t n,
                enum sbx_tool_action *actions, struct sbx_error *err)
{
  int64_t now = sbx_wall_s();
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  if (sq_begin(st, err) < 0)
    return -1;
  int ret = 0;
  for (size_t i = 0; ret == 0 && i < n; i++) {
    rows[i].tenant_id = tenant_id;
    ret = put_one(st, &rows[i], now, &actions[i], err);
  }
  if (ret < 0) {
    sq_rollback(st);
    return -1;
  }
  return sq_commit(st, err);
}

int sq_tool_get(struct sbx_store *st, int64_t tenant_id, const char *name,
                struct sbx_tool_row *out, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  return sq_get_one(st, SQ_TOOL_GET, TOOL_GET_SQL, tenant_id, name, tool_from_row, out, "tool",
                    err);
}

int sq_tool_list(struct sbx_store *st, int64_t tenant_id, const char *after, int limit,
                 sbx_tool_cb cb, void *ctx, struct sbx_error *err)
{
  struct sq_rows rows = {.elem = sizeof(struct sbx_tool_row)};
  int ret;
  {
    _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
    _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
    ret = sq_stmt(st, SQ_TOOL_LIST,
                  "SELECT " TOOL_COLS " FROM tools WHERE tenant_id = ?1 AND name > ?2"
                  " ORDER BY name LIMIT ?3",
                  &s, err);
    if (ret == 0) {
      sqlite3_bind_int64(s, 1, tenant_id);
      sq_bind_text(s, 2, after ? after : "");
      sqlite3_bind_int(s, 3, limit > 0 ? limit : -1);
      ret = sq_rows_collect(st, &tools, s, &rows, err);
    }
  }
  return sq_rows_deliver(&tools, &rows, ret, (union sbx_store_cb){.tool = cb}, ctx, err);
}

int sq_tool_delete(struct sbx_store *st, int64_t tenant_id, const char *name,
                   struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_TOOL_DELETE, "DELETE FROM tools WHERE tenant_id = ? AND name = ?", &s,
              err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, name);
  if (sq_exec_stmt(st, s, "delete tool", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) == 0)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "tool not found");
  return 0;
}

int sq_tool_count(struct sbx_store *st, int64_t tenant_id, int64_t *count, struct sbx_error *err)
{
  /* ?2 IS NULL: the shared count statement's status filter, unused here. */
  return sq_count(st, SQ_TOOL_COUNT,
                  "SELECT COUNT(*) FROM tools WHERE tenant_id = ?1 AND ?2 IS NULL", tenant_id,
                  NULL, count, err);
}
