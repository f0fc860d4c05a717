/* list.c — the SQLite list ops' one path, shared by sessions and
 * executions (and tools' rows): a tenant's rows newest first in pages keyed by
 * (created_at, id), every tenant's rows in one status, and counts.  Rows
 * are collected under the store lock and handed to the caller's callback
 * after it is released, so a callback may call the store again.  And the
 * one-row get by (tenant, id) both tables share. */
#include <stdlib.h>

#include "store/sqlite/sqlite_int.h"

int sq_rows_collect(struct sbx_store *st, const struct sq_kind *k, sqlite3_stmt *s,
                    struct sq_rows *rows, struct sbx_error *err)
{
  int rc = sq_step(s);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
    void *r = sq_rows_push(rows, err);
    if (!r || k->from_row(s, r, err) < 0) {
      if (r)
        rows->n--;
      return -1;
    }
  }
  if (rc != SQLITE_DONE)
    return sq_fail(st, rc, sbx_store_table_name(k->table), err);
  return 0;
}

/* The callback returns 0 to go on, > 0 to stop, < 0 to stop with an error. */
int sq_rows_deliver(const struct sq_kind *k, struct sq_rows *rows, int ret,
                    union sbx_store_cb cb, void *ctx, struct sbx_error *err)
{
  for (size_t i = 0; i < rows->n; i++) {
    void *r = (char *)rows->v + i * rows->elem;
    if (ret == 0) {
      int c = sbx_store_row_call(k->table, cb, ctx, r);
      if (c < 0)
        ret = sbx_err_set(err, SBX_E_INTERNAL, 0, "store: %s listing stopped by caller",
                          sbx_store_table_name(k->table));
      else if (c > 0)
        ret = 1;
    }
    sbx_store_row_free(k->table, r);
  }
  free(rows->v);
  return ret < 0 ? -1 : 0;
}

static int page_locked(struct sbx_store *st, const struct sq_kind *k, int64_t tenant_id,
                       const char *status, const char *after, int limit, struct sq_rows *rows,
                       struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  int64_t after_t = 0;
  if (after && *after &&
      sq_cursor_time(st, k->cursor_slot, k->cursor_sql, tenant_id, after, &after_t, err) < 0)
    return -1;
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, k->page_slot, k->page_sql, &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, status);
  sq_bind_text(s, 3, after && *after ? after : NULL);
  sqlite3_bind_int64(s, 4, after_t);
  sqlite3_bind_int(s, 5, limit > 0 ? limit : -1);
  return sq_rows_collect(st, k, s, rows, err);
}

int sq_list_page(struct sbx_store *st, const struct sq_kind *k, int64_t tenant_id,
                 const char *status, const char *after, int limit, union sbx_store_cb cb,
                 void *ctx, struct sbx_error *err)
{
  struct sq_rows rows = {.elem = sbx_store_row_size(k->table)};
  int ret = page_locked(st, k, tenant_id, status, after, limit, &rows, err);
  return sq_rows_deliver(k, &rows, ret, cb, ctx, err);
}

int sq_list_all(struct sbx_store *st, const struct sq_kind *k, enum sq_slot slot,
                const char *sql, const char *status, union sbx_store_cb cb, void *ctx,
                struct sbx_error *err)
{
  struct sq_rows rows = {.elem = sbx_store_row_size(k->table)};
  int ret;
  {
    _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
    _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
    ret = sq_stmt(st, slot, sql, &s, err);
    if (ret == 0) {
      if (status)
        sq_bind_text(s, 1, status);
      ret = sq_rows_collect(st, k, s, &rows, err);
    }
  }
  return sq_rows_deliver(k, &rows, ret, cb, ctx, err);
}

int sq_count(struct sbx_store *st, enum sq_slot slot, const char *sql, int64_t tenant_id,
             const char *status, int64_t *count, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, slot, sql, &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, status);
  int rc = sq_step(s);
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "count", err);
  *count = sqlite3_column_int64(s, 0);
  return 0;
}

int sq_get_one(struct sbx_store *st, enum sq_slot slot, const char *sql, int64_t tenant_id,
               const char *id,
               int (*from_row)(sqlite3_stmt *s, void *out, struct sbx_error *err), void *out,
               const char *what, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, slot, sql, &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, id);
  int rc = sq_step(s);
  if (rc == SQLITE_DONE)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "%s not found", what);
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, what, err);
  return from_row(s, out, err);
}
