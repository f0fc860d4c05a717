/* sessions.c — SQLite queries for sessions.  Every tenant-facing query
 * filters by tenant_id, so another tenant's session is "not found". */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

static int session_from_row(sqlite3_stmt *s, void *row, struct sbx_error *err)
{
  struct sbx_session_row *out = row;
  memset(out, 0, sizeof *out);
  sq_col_copy(s, 0, out->id, sizeof out->id);
  out->tenant_id = sqlite3_column_int64(s, 1);
  sq_col_copy(s, 2, out->status, sizeof out->status);
  sq_col_copy(s, 3, out->reason, sizeof out->reason);
  sq_col_copy(s, 4, out->profile, sizeof out->profile);
  sq_col_copy(s, 5, out->runtime, sizeof out->runtime);
  sq_col_copy(s, 6, out->image, sizeof out->image);
  out->ttl_s = sqlite3_column_int64(s, 11);
  out->created_at = sqlite3_column_int64(s, 12);
  out->updated_at = sqlite3_column_int64(s, 13);
  out->expires_at = sqlite3_column_int64(s, 14);
  out->last_used_at = sqlite3_column_int64(s, 15);
  sq_col_copy(s, 16, out->node_id, sizeof out->node_id);
  if (sq_col_strdup(s, 7, &out->limits_json, err) < 0 ||
      sq_col_strdup(s, 8, &out->network_json, err) < 0 ||
      sq_col_strdup(s, 9, &out->metadata_json, err) < 0 ||
      sq_col_strdup(s, 10, &out->env_json, err) < 0) {
    sbx_session_row_free(out);
    return -1;
  }
  return 0;
}

int sq_session_insert(struct sbx_store *st, const struct sbx_session_row *row,
                      struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_SES_INSERT,
              "INSERT INTO sessions (" SES_COLS
              ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              &s, err) < 0)
    return -1;
  int64_t created = row->created_at ? row->created_at : sbx_wall_s();
  sq_bind_head(s, row->id, row->tenant_id, row->status, row->reason, row->profile);
  sq_bind_text(s, 6, row->runtime);
  sq_bind_text(s, 7, row->image);
  sq_bind_text(s, 8, row->limits_json);
  sq_bind_text(s, 9, row->network_json);
  sq_bind_text(s, 10, row->metadata_json);
  sq_bind_text(s, 11, row->env_json);
  sqlite3_bind_int64(s, 12, row->ttl_s);
  sqlite3_bind_int64(s, 13, created);
  sqlite3_bind_int64(s, 14, row->updated_at ? row->updated_at : created);
  sqlite3_bind_int64(s, 15, row->expires_at);
  sqlite3_bind_int64(s, 16, row->last_used_at ? row->last_used_at : created);
  sq_bind_text(s, 17, row->node_id);
  return sq_exec_stmt(st, s, "insert session", err);
}

int sq_session_get(struct sbx_store *st, int64_t tenant_id, const char *id,
                   struct sbx_session_row *out, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  return sq_get_one(st, SQ_SES_GET,
                    "SELECT " SES_COLS " FROM sessions WHERE tenant_id = ? AND id = ?",
                    tenant_id, id, session_from_row, out, "session", err);
}

static const struct sq_kind sessions =
    SBX_STORE_KIND(SQ, SESSIONS, session_from_row, SQ_SES, SES_COLS, "sessions");

int sq_session_list(struct sbx_store *st, int64_t tenant_id, const char *status,
                    const char *after, int limit, sbx_session_cb cb, void *ctx,
                    struct sbx_error *err)
{
  return sq_list_page(st, &sessions, tenant_id, status, after, limit,
                      (union sbx_store_cb){.session = cb}, ctx, err);
}

int sq_session_list_ready(struct sbx_store *st, sbx_session_cb cb, void *ctx,
                          struct sbx_error *err)
{
  return sq_list_all(st, &sessions, SQ_SES_LIST_READY,
                     "SELECT " SES_COLS " FROM sessions WHERE status = 'ready'"
                     " ORDER BY created_at, id",
                     NULL, (union sbx_store_cb){.session = cb}, ctx, err);
}

/* Steps an UPDATE that names one session; NOT_FOUND when no row matched. */
static int update_one(struct sbx_store *st, sqlite3_stmt *s, const char *what,
                      struct sbx_error *err)
{
  if (sq_exec_stmt(st, s, what, err) < 0)
    return -1;
  if (sqlite3_changes(st->db) == 0)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "session not found");
  return 0;
}

int sq_session_set_status(struct sbx_store *st, int64_t tenant_id, const char *id,
                          const char *status, const char *reason, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_SES_SET_STATUS,
              "UPDATE sessions SET status = ?, reason = ?, updated_at = ?"
              " WHERE tenant_id = ? AND id = ?",
              &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, status);
  sq_bind_text(s, 2, reason ? reason : "");
  sqlite3_bind_int64(s, 3, sbx_wall_s());
  sqlite3_bind_int64(s, 4, tenant_id);
  sq_bind_text(s, 5, id);
  return update_one(st, s, "set session status", err);
}

int sq_session_update(struct sbx_store *st, int64_t tenant_id, const char *id,
                      const char *network_json, const char *metadata_json, int64_t ttl_s,
                      int64_t expires_at, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_SES_UPDATE,
              "UPDATE sessions SET network_json = COALESCE(?1, network_json),"
              " metadata_json = COALESCE(?2, metadata_json),"
              " ttl_s = CASE WHEN ?3 < 0 THEN ttl_s ELSE ?3 END,"
              " expires_at = CASE WHEN ?3 < 0 THEN expires_at ELSE ?4 END,"
              " updated_at = ?5 WHERE tenant_id = ?6 AND id = ?7",
              &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, network_json);
  sq_bind_text(s, 2, metadata_json);
  sqlite3_bind_int64(s, 3, ttl_s);
  sqlite3_bind_int64(s, 4, expires_at);
  sqlite3_bind_int64(s, 5, sbx_wall_s());
  sqlite3_bind_int64(s, 6, tenant_id);
  sq_bind_text(s, 7, id);
  return update_one(st, s, "update session", err);
}

int sq_session_touch(struct sbx_store *st, int64_t tenant_id, const char *id, int64_t now,
                     struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_SES_TOUCH,
              "UPDATE sessions SET last_used_at = ? WHERE tenant_id = ? AND id = ?", &s,
              err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, now);
  sqlite3_bind_int64(s, 2, tenant_id);
  sq_bind_text(s, 3, id);
  return update_one(st, s, "touch session", err);
}

int sq_session_count(struct sbx_store *st, int64_t tenant_id, const char *status, int64_t *count,
                     struct sbx_error *err)
{
  return sq_count(st, SQ_SES_COUNT, SQ_COUNT_SQL("sessions"), tenant_id, status, count, err);
}
