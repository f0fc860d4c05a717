/* tenants.c — SQLite queries for tenants and API keys. */
#include <string.h>

#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

static int tenant_lookup(struct sbx_store *st, const char *name, int64_t *id, int *found,
                         struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_TENANT_BY_NAME, "SELECT id FROM tenants WHERE name = ?", &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, name);
  int rc = sq_step(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return sq_fail(st, rc, "look up tenant", err);
  *found = rc == SQLITE_ROW;
  if (*found)
    *id = sqlite3_column_int64(s, 0);
  return 0;
}

/* Ids are allocated as MAX+1 inside the write transaction rather than by
 * an AUTOINCREMENT/SERIAL column, keeping the schema portable. */
static int tenant_create(struct sbx_store *st, const char *name, int64_t *id,
                         struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *next = NULL;
  if (sq_stmt(st, SQ_TENANT_NEXT_ID, "SELECT COALESCE(MAX(id), 0) + 1 FROM tenants", &next,
              err) < 0)
    return -1;
  int rc = sq_step(next);
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "allocate tenant id", err);
  *id = sqlite3_column_int64(next, 0);

  _cleanup_sq_reset_ sqlite3_stmt *ins = NULL;
  if (sq_stmt(st, SQ_TENANT_INSERT,
              "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)", &ins, err) < 0)
    return -1;
  sqlite3_bind_int64(ins, 1, *id);
  sq_bind_text(ins, 2, name);
  sqlite3_bind_int64(ins, 3, sbx_wall_s());
  return sq_exec_stmt(st, ins, "create tenant", err);
}

int sq_tenant_ensure(struct sbx_store *st, const char *name, int64_t *id_out,
                     struct sbx_error *err)
{
  if (!name || !*name || strlen(name) >= sizeof((struct sbx_tenant_row *)0)->name)
    return sbx_err_field(err, "tenant", "tenant name must be 1 to 127 bytes");
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  int found = 0;
  if (sq_begin(st, err) < 0)
    return -1;
  if (tenant_lookup(st, name, id_out, &found, err) < 0 ||
      (!found && tenant_create(st, name, id_out, err) < 0)) {
    sq_rollback(st);
    return -1;
  }
  return sq_commit(st, err);
}

int sq_key_insert(struct sbx_store *st, const struct sbx_key_row *key, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_KEY_INSERT,
              "INSERT INTO api_keys (key_id, tenant_id, hash, admin, created_at)"
              " VALUES (?, ?, ?, ?, ?)",
              &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, key->key_id);
  sqlite3_bind_int64(s, 2, key->tenant_id);
  sqlite3_bind_blob(s, 3, key->hash, sizeof key->hash, SQLITE_STATIC);
  sqlite3_bind_int(s, 4, key->admin ? 1 : 0);
  sqlite3_bind_int64(s, 5, key->created_at ? key->created_at : sbx_wall_s());
  return sq_exec_stmt(st, s, "insert key", err);
}

static void key_from_row(sqlite3_stmt *s, struct sbx_key_row *out)
{
  memset(out, 0, sizeof *out);
  sq_col_copy(s, 0, out->key_id, sizeof out->key_id);
  out->tenant_id = sqlite3_column_int64(s, 1);
  sq_col_copy(s, 2, out->tenant_name, sizeof out->tenant_name);
  const void *hash = sqlite3_column_blob(s, 3);
  if (hash && sqlite3_column_bytes(s, 3) == (int)sizeof out->hash)
    memcpy(out->hash, hash, sizeof out->hash);
  out->admin = sqlite3_column_int(s, 4) != 0;
  out->created_at = sqlite3_column_int64(s, 5);
}

int sq_key_get(struct sbx_store *st, const char *key_id, struct sbx_key_row *out,
               struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_KEY_GET,
              "SELECT k.key_id, k.tenant_id, t.name, k.hash, k.admin, k.created_at"
              " FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.key_id = ?",
              &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, key_id);
  int rc = sq_step(s);
  if (rc == SQLITE_DONE)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "key not found");
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "get key", err);
  key_from_row(s, out);
  return 0;
}
