/* migrate.c — the PostgreSQL schema: applying the shared migrations as the
 * schema owner (under an advisory lock, all in one transaction, refusing a
 * schema newer than this binary), granting the application role what the
 * daemon needs and nothing more, and the checks the daemon runs at open
 * (schema version, a role that RLS really applies to, RLS forced on every
 * tenant table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/migrations/migrations.h"
#include "store/postgres/pg.h"
#include "store/postgres/pg_int.h"

static int run(PGconn *c, const char *sql, const char *what, struct sbx_error *err)
{
  PGresult *r = PQexec(c, sql);
  ExecStatusType s = PQresultStatus(r);
  int ret = 0;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
    ret = pg_fail(c, r, what, err);
  PQclear(r);
  return ret;
}

/* One scalar of a parameterless query, or -1. */
static int scalar(PGconn *c, const char *sql, const char *what, char *out, size_t size,
                  struct sbx_error *err)
{
  PGresult *r = PQexec(c, sql);
  int ret = 0;
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
    ret = pg_fail(c, r, what, err);
  else
    pr_copy(r, 0, 0, out, size);
  PQclear(r);
  return ret;
}

static int record_version(PGconn *c, int version, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, version);
  pp_i64(&p, sbx_wall_s());
  PGresult *r =
      PQexecParams(c, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", p.n,
                   NULL, p.v, p.len, p.fmt, 0);
  int ret =
      PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : pg_fail(c, r, "record schema version", err);
  PQclear(r);
  return ret;
}

static int too_new(long long current, struct sbx_error *err)
{
  return sbx_err_set(
      err, SBX_E_INTERNAL, 0,
      "store: database schema version %lld is newer than this sandboxd knows (%d); "
      "run a sandboxd at least as new as the one that last migrated it",
      current, sbx_store_schema_latest());
}

static int apply_pending(PGconn *c, long long current, struct sbx_error *err)
{
  for (size_t i = 0; i < sbx_store_nmigrations; i++) {
    const struct sbx_store_migration *m = &sbx_store_migrations[i];
    if (m->version <= current)
      continue;
    if ((*m->sql_postgres && run(c, m->sql_postgres, "apply migration", err) < 0) ||
        record_version(c, m->version, err) < 0)
      return sbx_err_prefix(err, "migration %04d_%s", m->version, m->name);
  }
  return 0;
}

/* The shared SQL says BLOB; PostgreSQL's binary type is BYTEA.  A domain
 * named blob makes the shared files valid as they are. */
static const char PRELUDE[] =
    "DO $$ BEGIN IF to_regtype('blob') IS NULL THEN CREATE DOMAIN blob AS bytea; END IF; END $$;"
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";

int pg_migrate(PGconn *c, struct sbx_error *err)
{
  char lock[96], ver[32];
  /* The lock first: two owners migrating a fresh database at once would
   * otherwise race on CREATE TABLE even with IF NOT EXISTS. */
  snprintf(lock, sizeof lock, "BEGIN; SELECT pg_advisory_xact_lock(%d)", PG_LOCK_MIGRATE);
  if (run(c, lock, "lock for migration", err) < 0)
    return -1;
  int ret = -1;
  if (run(c, PRELUDE, "create schema_migrations", err) < 0 ||
      scalar(c, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", "read schema version",
             ver, sizeof ver, err) < 0)
    goto out;
  long long current = strtoll(ver, NULL, 10);
  if (current > sbx_store_schema_latest()) {
    too_new(current, err);
    goto out;
  }
  ret = apply_pending(c, current, err);
out:
  if (run(c, ret == 0 ? "COMMIT" : "ROLLBACK", "commit migration", ret == 0 ? err : NULL) < 0)
    ret = -1;
  return ret;
}

/* ---- grants ---- */

/* Role name of a connection URL (its "user"), or "" if it names none. */
static int url_user(const char *url, char *out, size_t size, struct sbx_error *err)
{
  char *msg = NULL;
  PQconninfoOption *opts = PQconninfoParse(url, &msg);
  if (!opts) {
    PQfreemem(msg); /* may quote the URL: not echoed */
    return sbx_err_field(err, "database", "not a valid PostgreSQL URL");
  }
  out[0] = '\0';
  for (PQconninfoOption *o = opts; o->keyword; o++)
    if (!strcmp(o->keyword, "user") && o->val)
      snprintf(out, size, "%s", o->val);
  PQconninfoFree(opts);
  if (!out[0])
    return sbx_err_field(err, "database",
                         "the database URL must name its role (postgres://ROLE@…)");
  return 0;
}

/* DML (DELETE only on tools, which DELETE /v1/tools/{name} removes, and
 * on session_holds, which a finished session create releases;
 * audit_events is append-only for it), read-only schema_migrations,
 * EXECUTE on the sbx_ functions.  role is already quoted
 * (PQescapeIdentifier). */
static int grant_app(PGconn *c, const char *role, struct sbx_error *err)
{
  char schema[256], sql[6][768];
  if (scalar(c, "SELECT quote_ident(current_schema())", "read schema", schema, sizeof schema,
             err) < 0)
    return -1;
  snprintf(sql[0], sizeof sql[0], "GRANT USAGE ON SCHEMA %s TO %s", schema, role);
  snprintf(sql[1], sizeof sql[1],
           "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %s TO %s", schema, role);
  snprintf(sql[2], sizeof sql[2],
           "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON schema_migrations FROM %s", role);
  snprintf(sql[3], sizeof sql[3], "REVOKE UPDATE, DELETE, TRUNCATE ON audit_events FROM %s",
           role);
  snprintf(sql[4], sizeof sql[4], "GRANT DELETE ON tools TO %s", role);
  snprintf(sql[5], sizeof sql[5], "GRANT DELETE ON session_holds TO %s", role);
  for (int i = 0; i < 6; i++)
    if (run(c, sql[i], "grant", err) < 0)
      return -1;
  PGresult *r = PQexec(c, "SELECT p.oid::regprocedure::text FROM pg_proc p"
                          " WHERE p.pronamespace = current_schema()::regnamespace"
                          " AND p.proname LIKE 'sbx\\_%'");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    pg_fail(c, r, "list functions", err);
    PQclear(r);
    return -1;
  }
  int ret = 0;
  for (int i = 0; ret == 0 && i < PQntuples(r); i++) {
    snprintf(sql[0], sizeof sql[0], "GRANT EXECUTE ON FUNCTION %s TO %s", PQgetvalue(r, i, 0),
             role);
    ret = run(c, sql[0], "grant", err);
  }
  PQclear(r);
  return ret;
}

int sbx_store_pg_init(const char *app_url, const char *owner_url, struct sbx_error *err)
{
  char app_role[128], owner_role[128];
  if (url_user(app_url, app_role, sizeof app_role, err) < 0)
    return -1;
  PGconn *c = pg_connect(owner_url, err);
  if (!c)
    return sbx_err_prefix(err, "owner connection");
  int ret = scalar(c, "SELECT current_user", "read role", owner_role, sizeof owner_role, err);
  if (ret == 0 && !strcmp(owner_role, app_role))
    ret = sbx_err_set(err, SBX_E_INVALID, 0,
                      "store: the daemon's role (%s) must not be the schema owner: row-level "
                      "security would not hold it; create a separate role (docs/postgres.md)",
                      app_role);
  if (ret == 0)
    ret = pg_migrate(c, err);
  char *ident = ret == 0 ? PQescapeIdentifier(c, app_role, strlen(app_role)) : NULL;
  if (ret == 0 && !ident)
    ret = pg_fail(c, NULL, "quote role name", err);
  /* The grants take the migration lock too: two inits granting at once
   * fail with "tuple concurrently updated" on the same catalog rows. */
  char lock[96];
  snprintf(lock, sizeof lock, "BEGIN; SELECT pg_advisory_xact_lock(%d)", PG_LOCK_MIGRATE);
  if (ret == 0 && run(c, lock, "begin", err) == 0) {
    ret = grant_app(c, ident, err);
    if (run(c, ret == 0 ? "COMMIT" : "ROLLBACK", "commit grants", ret == 0 ? err : NULL) < 0)
      ret = -1;
  }
  PQfreemem(ident);
  PQfinish(c);
  return ret;
}

/* ---- checks at open (application role) ---- */

int pg_check_schema(PGconn *c, struct sbx_error *err)
{
  char ver[32];
  PGresult *r = PQexec(c, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (state && !strcmp(state, "42P01")) {
    PQclear(r);
    return sbx_err_set(
        err, SBX_E_INTERNAL, 0,
        "store: the PostgreSQL database has no sandboxd schema yet: run "
        "`sandboxd db init --database URL --owner-url OWNER_URL` (docs/postgres.md)");
  }
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    pg_fail(c, r, "read schema version", err);
    PQclear(r);
    return -1;
  }
  pr_copy(r, 0, 0, ver, sizeof ver);
  PQclear(r);
  long long current = strtoll(ver, NULL, 10);
  if (current > sbx_store_schema_latest())
    return too_new(current, err);
  if (current < sbx_store_schema_latest())
    return sbx_err_set(err, SBX_E_INTERNAL, 0,
                       "store: database schema version %lld is older than this sandboxd needs "
                       "(%d): run `sandboxd db init --database URL --owner-url OWNER_URL` to "
                       "migrate it",
                       current, sbx_store_schema_latest());
  /* Every table holding tenant rows must have forced RLS; a migration that
   * forgot the policy stops the daemon here rather than leaking rows. */
  char bad[256] = "";
  if (scalar(c,
             "SELECT COALESCE(string_agg(DISTINCT c.relname, ', '), '') FROM pg_class c"
             " LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'"
             "  AND NOT a.attisdropped"
             " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
             " AND (a.attname IS NOT NULL OR c.relname IN ('tenants', 'execution_files'))"
             " AND NOT (c.relrowsecurity AND c.relforcerowsecurity)",
             "check row-level security", bad, sizeof bad, err) < 0)
    return -1;
  if (bad[0])
    return sbx_err_set(err, SBX_E_INTERNAL, 0,
                       "store: tenant table(s) without forced row-level security: %s "
                       "(a migration must add the policies: docs/postgres.md)",
                       bad);
  return 0;
}

int pg_check_role(PGconn *c, struct sbx_error *err)
{
  char v[16];
  if (scalar(c,
             "SELECT CASE WHEN r.rolsuper THEN 'super' WHEN r.rolbypassrls THEN 'bypass'"
             " WHEN EXISTS (SELECT 1 FROM pg_class c WHERE c.relname = 'schema_migrations'"
             "  AND c.relnamespace = current_schema()::regnamespace"
             "  AND pg_has_role(current_user, c.relowner, 'MEMBER')) THEN 'owner'"
             " ELSE 'ok' END FROM pg_roles r WHERE r.rolname = current_user",
             "check role", v, sizeof v, err) < 0)
    return -1;
  if (!strcmp(v, "ok"))
    return 0;
  return sbx_err_set(err, SBX_E_INTERNAL, 0,
                     "store: refusing to run as a PostgreSQL role that %s: row-level security "
                     "would not confine it; connect as the application role "
                     "(docs/postgres.md)",
                     !strcmp(v, "super")    ? "is a superuser"
                     : !strcmp(v, "bypass") ? "has BYPASSRLS"
                                            : "owns the schema (or is a member of its owner)");
}
