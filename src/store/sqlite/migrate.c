/* migrate.c — brings an SQLite database to the schema this binary knows,
 * applying the embedded migrations (store/migrations/) that are pending,
 * all in one transaction, and refuses a database that a newer sandboxd has
 * already migrated past us (running old code on a newer schema could
 * silently drop columns it does not know about). */
#include "store/migrations/migrations.h"
#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

static const char SCHEMA_TABLE[] = "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                   " version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";

static int current_version(struct sbx_store *st, int64_t *out, struct sbx_error *err)
{
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(st->db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                              -1, &s, NULL);
  if (rc == SQLITE_OK)
    rc = sq_step(s);
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "read schema version", err);
  return 0;
}

static int record_version(struct sbx_store *st, int version, struct sbx_error *err)
{
  sqlite3_stmt *s = NULL;
  int rc =
      sqlite3_prepare_v2(st->db,
                         "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", -1,
                         &s, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int(s, 1, version);
    sqlite3_bind_int64(s, 2, sbx_wall_s());
    rc = sq_step(s);
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE)
    return sq_fail(st, rc, "record schema version", err);
  return 0;
}

static int apply_pending(struct sbx_store *st, int64_t current, struct sbx_error *err)
{
  for (size_t i = 0; i < sbx_store_nmigrations; i++) {
    const struct sbx_store_migration *m = &sbx_store_migrations[i];
    if (m->version <= current)
      continue;
    if (sq_exec_sql(st, m->sql, "apply migration", err) < 0 ||
        record_version(st, m->version, err) < 0)
      return sbx_err_prefix(err, "migration %04d_%s", m->version, m->name);
  }
  return 0;
}

int sq_migrate(struct sbx_store *st, struct sbx_error *err)
{
  /* The version is read inside the write transaction so two processes
   * opening a fresh database at once do not both apply 0001. */
  if (sq_begin(st, err) < 0)
    return -1;
  int64_t current = 0;
  int latest = sbx_store_schema_latest();
  if (sq_exec_sql(st, SCHEMA_TABLE, "create schema_migrations", err) < 0 ||
      current_version(st, &current, err) < 0)
    goto fail;
  if (current > latest) {
    sbx_err_set(err, SBX_E_INTERNAL, 0,
                "store: database schema version %lld is newer than this sandboxd knows (%d); "
                "run a sandboxd at least as new as the one that last opened it",
                (long long)current, latest);
    goto fail;
  }
  if (apply_pending(st, current, err) < 0)
    goto fail;
  return sq_commit(st, err);
fail:
  sq_rollback(st);
  return -1;
}
