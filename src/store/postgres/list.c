/* list.c — the PostgreSQL list ops' one path, shared by sessions and
 * executions: a tenant's rows newest first in pages keyed by
 * (created_at, id), a cross-tenant read through a SECURITY DEFINER
 * function, and counts.  The callback runs after pg_end, with no
 * connection held, so it may call the store again. */
#include <errno.h>
#include <stdlib.h>

#include "common/cleanup.h"
#include "store/postgres/pg_int.h"

/* Runs the callback over the rows of r and frees r. */
static int deliver(const struct pg_kind *k, PGresult *r, union sbx_store_cb cb, void *ctx,
                   struct sbx_error *err)
{
  _cleanup_free_ void *row = malloc(sbx_store_row_size(k->table));
  int ret = row ? 0 : sbx_err_sys(err, ENOMEM, "store: list %s", sbx_store_table_name(k->table));
  for (int i = 0; ret == 0 && i < PQntuples(r); i++) {
    if (k->from_row(r, i, row, err) < 0) {
      ret = -1;
      break;
    }
    int c = sbx_store_row_call(k->table, cb, ctx, row);
    sbx_store_row_free(k->table, row);
    if (c < 0)
      ret = sbx_err_set(err, SBX_E_INTERNAL, 0, "store: %s listing stopped by caller",
                        sbx_store_table_name(k->table));
    else if (c > 0)
      break;
  }
  PQclear(r);
  return ret;
}

int pg_end_and_deliver(const struct pg_kind *k, struct pg_tx *tx, PGresult *r,
                       union sbx_store_cb cb, void *ctx, struct sbx_error *err)
{
  if (!(r = pg_end_keep(tx, r, err)))
    return -1;
  return deliver(k, r, cb, ctx, err);
}

static PGresult *page_query(struct pg_tx *tx, const struct pg_kind *k, int64_t tenant_id,
                            const char *status, const char *after, int limit,
                            struct sbx_error *err)
{
  const char *cursor = after && *after ? after : NULL;
  int64_t after_t = 0;
  if (cursor &&
      pg_cursor_time(tx, k->cursor_slot, k->cursor_sql, tenant_id, cursor, &after_t, err) < 0)
    return NULL;
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, status);
  pp_text(&p, cursor);
  pp_i64(&p, after_t);
  if (limit > 0)
    pp_i64(&p, limit);
  else
    pp_text(&p, NULL); /* LIMIT NULL = no limit */
  return pg_q(tx, k->page_slot, k->page_sql, &p, false, err);
}

int pg_list_page(struct sbx_store *st, const struct pg_kind *k, int64_t tenant_id,
                 const char *status, const char *after, int limit, union sbx_store_cb cb,
                 void *ctx, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  PGresult *r = page_query(&tx, k, tenant_id, status, after, limit, err);
  return pg_end_and_deliver(k, &tx, r, cb, ctx, err);
}

int pg_count(struct sbx_store *st, enum pg_slot slot, const char *sql, int64_t tenant_id,
             const char *status, int64_t *count, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, status);
  _cleanup_pg_res_ PGresult *r = pg_q1(&tx, slot, sql, &p, "no count", err);
  if (r)
    *count = pr_i64(r, 0, 0);
  return pg_end(&tx, r ? 0 : -1, err);
}

PGresult *pg_get_one(struct pg_tx *tx, enum pg_slot slot, const char *sql, int64_t tenant_id,
                     const char *id, const char *not_found, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  return pg_q1(tx, slot, sql, &p, not_found, err);
}
