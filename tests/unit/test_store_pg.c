/* test_store_pg.c — the store unit tests against a real, temporary
 * PostgreSQL (started by tests/integration/sbxpg.py, which exports
 * SBX_TEST_PG_APP_URL / _OWNER_URL / _SUPER_URL): the same cases as
 * test_store.c (tenants and keys, sessions with pagination and tenant
 * isolation, executions' state machine, binary-safe output and files,
 * concurrency, cancel/finish races), plus what only PostgreSQL has:
 * `db init` run twice at once, refusal of a newer schema and of roles that
 * row-level security would not confine, RLS seen from the application
 * role's own connection (wrong or no app.tenant_id → no rows), the RLS
 * safety net at open, the audit chain under concurrent appenders, usage
 * records and the outbox, transparent reconnection after the server
 * dropped every connection, and the fleet's ops (nodes, reservations,
 * reaping, the shared queue's claims and caps, fleet-wide counts). */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/migrations/migrations.h"
#include "store/postgres/pg.h"
#include "store/store.h"

#include "store_check.h"

static const char *app_url, *owner_url, *super_url;
static struct sbx_store_handle h;
#define OPS h.ops
#define ST h.st

/* ---- raw SQL as the superuser (checks behind the store's back) -------- */

static PGconn *super_conn;

static int64_t raw_int(const char *sql)
{
  PGresult *r = PQexec(super_conn, sql);
  int64_t v = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
    v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  else
    fprintf(stderr, "raw_int(%s): %s", sql, PQerrorMessage(super_conn));
  PQclear(r);
  return v;
}

static void raw_exec(const char *sql)
{
  PGresult *r = PQexec(super_conn, sql);
  ExecStatusType s = PQresultStatus(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    fprintf(stderr, "raw_exec(%s): %s", sql, PQerrorMessage(super_conn));
    failures++;
  }
  PQclear(r);
}

/* url with its database name (after the last '/', before any '?')
 * replaced by db. */
static void url_for_db(char *out, size_t size, const char *url, const char *db)
{
  const char *slash = strrchr(url, '/');
  const char *query = strchr(slash, '?');
  snprintf(out, size, "%.*s/%s%s", (int)(slash - url), url, db, query ? query : "");
}

static void create_db(const char *db)
{
  char sql[160];
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
  raw_exec(sql);
  snprintf(sql, sizeof sql, "CREATE DATABASE %s OWNER sbx_owner", db);
  raw_exec(sql);
}

/* ---- helpers shared with test_store.c --------------------------------- */

/* Hooks of store_cases.inc. */
static int open_own(struct sbx_store_handle *out, struct sbx_error *e)
{
  return sbx_store_open(app_url, NULL, out, e);
}

static int64_t raw_count(const char *sql) { return raw_int(sql); }

#include "store_cases.inc"

/* ---- PostgreSQL only: init, refusals ----------------------------------- */

struct init_arg {
  const char *app, *owner;
  int rc;
  char msg[512];
};

static void *init_thread(void *arg)
{
  struct init_arg *a = arg;
  struct sbx_error e = {0};
  a->rc = sbx_store_pg_init(a->app, a->owner, &e);
  snprintf(a->msg, sizeof a->msg, "%s", e.msg);
  return NULL;
}

static void test_init_and_open(void)
{
  /* Before `db init`: a clear refusal, not a crash on missing tables. */
  struct sbx_store_handle x = {0};
  struct sbx_error e = {0};
  CHECK(sbx_store_open(app_url, NULL, &x, &e) < 0 && strstr(e.msg, "sandboxd db init"));

  /* Two inits at once (two daemons' operators racing): the advisory lock
   * serialises them; both succeed, each migration applied once. */
  struct init_arg a = {app_url, owner_url}, b = {app_url, owner_url};
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, NULL, init_thread, &a) == 0);
  CHECK(pthread_create(&tb, NULL, init_thread, &b) == 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  if (a.rc || b.rc)
    fprintf(stderr, "init: %s / %s\n", a.msg, b.msg);
  CHECK(a.rc == 0 && b.rc == 0);
  CHECK(raw_int("SELECT COUNT(*) FROM schema_migrations") == (int64_t)sbx_store_nmigrations);
  CHECK(raw_int("SELECT MAX(version) FROM schema_migrations") == sbx_store_schema_latest());
  CHECK_OK(sbx_store_pg_init(app_url, owner_url, err)); /* idempotent */
  CHECK(raw_int("SELECT COUNT(*) FROM schema_migrations") == (int64_t)sbx_store_nmigrations);
  /* The shared BLOB columns are bytea underneath. */
  CHECK(raw_int("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'executions'"
                " AND column_name = 'stdout' AND domain_name = 'blob'") == 1);

  CHECK_OK(sbx_store_open(app_url, NULL, &h, err));
  CHECK(h.ops == &sbx_store_postgres && h.st);
  CHECK_OK(OPS->ping(ST, err));

  /* Roles row-level security would not confine are refused. */
  memset(&e, 0, sizeof e);
  CHECK(sbx_store_open(owner_url, NULL, &x, &e) < 0 && strstr(e.msg, "owns the schema"));
  memset(&e, 0, sizeof e);
  CHECK(sbx_store_open(super_url, NULL, &x, &e) < 0 && strstr(e.msg, "superuser"));
  CHECK_ERR(sbx_store_pg_init(owner_url, owner_url, err), SBX_E_INVALID);
}

static void test_backend_choice(void)
{
  /* Nothing listens on port 1: NOT_READY, and the password is not in it. */
  struct sbx_store_handle x = {0};
  struct sbx_error e = {0};
  CHECK(sbx_store_open("postgres://u:s3cretpw@127.0.0.1:1/sbx", NULL, &x, &e) < 0);
  CHECK(e.code == SBX_E_NOT_READY && !strstr(e.msg, "s3cretpw"));
  memset(&e, 0, sizeof e);
  CHECK(sbx_store_pg_init("postgres://a:pw1@127.0.0.1:1/x", "postgresql://o:pw2@127.0.0.1:1/x",
                          &e) < 0);
  CHECK(e.code == SBX_E_NOT_READY && !strstr(e.msg, "pw1") && !strstr(e.msg, "pw2"));
  CHECK_ERR(sbx_store_pg_init("postgres://127.0.0.1:1/x", owner_url, err), SBX_E_INVALID);
}

static void test_future_schema_refused(void)
{
  create_db("sbx_future");
  char app[512], owner[512];
  url_for_db(app, sizeof app, app_url, "sbx_future");
  url_for_db(owner, sizeof owner, owner_url, "sbx_future");
  CHECK_OK(sbx_store_pg_init(app, owner, err));
  PGconn *c = PQconnectdb(owner);
  char sql[160];
  snprintf(sql, sizeof sql, "INSERT INTO schema_migrations VALUES (%d, 0)",
           sbx_store_schema_latest() + 1);
  PQclear(PQexec(c, sql));
  PQfinish(c);
  struct sbx_store_handle x = {0};
  struct sbx_error e = {0};
  CHECK(sbx_store_open(app, NULL, &x, &e) < 0 && strstr(e.msg, "newer than this sandboxd"));
  CHECK(x.st == NULL);
  memset(&e, 0, sizeof e);
  CHECK(sbx_store_pg_init(app, owner, &e) < 0 && strstr(e.msg, "newer than this sandboxd"));
}

/* A table holding tenant rows without forced RLS stops the daemon. */
static void test_rls_safety_net(void)
{
  PGconn *c = PQconnectdb(owner_url);
  PQclear(PQexec(c, "ALTER TABLE usage_records NO FORCE ROW LEVEL SECURITY"));
  struct sbx_store_handle x = {0};
  struct sbx_error e = {0};
  CHECK(sbx_store_open(app_url, NULL, &x, &e) < 0 && strstr(e.msg, "usage_records"));
  PQclear(PQexec(c, "ALTER TABLE usage_records FORCE ROW LEVEL SECURITY"));
  PQfinish(c);
  CHECK_OK(sbx_store_open(app_url, NULL, &x, err));
  sbx_store_close(&x);
}

/* ---- RLS from the application role's own connection ------------------- */

/* Rows of sql seen by the app role with app.tenant_id = tenant ("" = not
 * set); -1 if the query failed. */
static int64_t app_count(PGconn *c, const char *tenant, const char *sql)
{
  PQclear(PQexec(c, "BEGIN"));
  if (*tenant) {
    const char *v[1] = {tenant};
    PQclear(PQexecParams(c, "SELECT set_config('app.tenant_id', $1, true)", 1, NULL, v, NULL,
                         NULL, 0));
  }
  PGresult *r = PQexec(c, sql);
  int64_t n = PQresultStatus(r) == PGRES_TUPLES_OK ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
  PQclear(r);
  PQclear(PQexec(c, "ROLLBACK"));
  return n;
}

/* Whether sql (a write) fails for the app role with app.tenant_id = tenant. */
static bool app_write_fails(PGconn *c, const char *tenant, const char *sql)
{
  PQclear(PQexec(c, "BEGIN"));
  const char *v[1] = {tenant};
  PQclear(PQexecParams(c, "SELECT set_config('app.tenant_id', $1, true)", 1, NULL, v, NULL, NULL,
                       0));
  PGresult *r = PQexec(c, sql);
  bool failed = PQresultStatus(r) != PGRES_COMMAND_OK;
  PQclear(r);
  PQclear(PQexec(c, "ROLLBACK"));
  return failed;
}

static void test_rls_direct(void)
{
  /* Run after the shared cases: acme and other both have sessions,
   * executions with files, keys. */
  char acme[24], other[24], sql[256];
  snprintf(acme, sizeof acme, "%lld", (long long)t_acme);
  snprintf(other, sizeof other, "%lld", (long long)t_other);
  PGconn *c = PQconnectdb(app_url);
  CHECK(PQstatus(c) == CONNECTION_OK);

  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM sessions WHERE tenant_id = %s", acme);
  int64_t acme_sessions = raw_int(sql);
  CHECK(acme_sessions > 0);
  CHECK(app_count(c, acme, sql) == acme_sessions);
  /* The wrong tenant: acme's rows are invisible even when asked by id. */
  CHECK(app_count(c, other, sql) == 0);
  CHECK(app_count(c, other, "SELECT COUNT(*) FROM sessions WHERE id = 'ses_1000_a'") == 0);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM executions WHERE tenant_id = %s", acme);
  CHECK(app_count(c, acme, sql) > 0 && app_count(c, other, sql) == 0);
  CHECK(app_count(c, other,
                  "SELECT COUNT(*) FROM execution_files WHERE execution_id = 'exe_1'") == 0);
  CHECK(app_count(c, acme,
                  "SELECT COUNT(*) FROM execution_files WHERE execution_id = 'exe_1'") == 2);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM api_keys WHERE tenant_id = %s", acme);
  CHECK(app_count(c, other, sql) == 0);
  /* No app.tenant_id at all: nothing in any tenant table. */
  static const char *tables[] = {"tenants",         "api_keys",     "sessions",     "executions",
                                 "execution_files", "audit_events", "usage_records"};
  for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", tables[i]);
    int64_t n = app_count(c, "", sql);
    if (n != 0)
      fprintf(stderr, "%s: %lld rows visible without app.tenant_id\n", tables[i], (long long)n);
    CHECK(n == 0);
  }
  CHECK(raw_int("SELECT COUNT(*) FROM sessions") > 0);
  /* Writes into another tenant are refused by WITH CHECK / invisible. */
  snprintf(sql, sizeof sql,
           "INSERT INTO sessions (id, tenant_id, status, created_at, updated_at)"
           " VALUES ('ses_evil', %s, 'ready', 1, 1)",
           acme);
  CHECK(app_write_fails(c, other, sql));
  PQclear(PQexec(c, "BEGIN"));
  const char *v[1] = {other};
  PQclear(PQexecParams(c, "SELECT set_config('app.tenant_id', $1, true)", 1, NULL, v, NULL, NULL,
                       0));
  PGresult *r = PQexec(c, "UPDATE sessions SET status = 'lost' WHERE id = 'ses_1000_b'");
  CHECK(PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdTuples(r), "0"));
  PQclear(r);
  PQclear(PQexec(c, "ROLLBACK"));
  /* The app role may not delete, nor rewrite the audit chain. */
  CHECK(app_write_fails(c, acme, "DELETE FROM sessions"));
  CHECK(app_write_fails(c, acme, "UPDATE audit_events SET outcome = 'x'"));
  CHECK(app_write_fails(c, acme, "DELETE FROM schema_migrations"));
  CHECK(app_write_fails(c, acme, "ALTER TABLE sessions DISABLE ROW LEVEL SECURITY"));
  PQfinish(c);
}

/* ---- reconnection ------------------------------------------------------ */

static void test_reconnect(void)
{
  /* Warm several pooled connections, then have the server drop every
   * connection of the app role (what a restart does to them). */
  for (int i = 0; i < 8; i++)
    CHECK_OK(OPS->ping(ST, err));
  int64_t killed = raw_int("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity"
                           " WHERE usename = 'sbx_app'");
  CHECK(killed >= 1);
  /* The next ops succeed: the dead connection fails on first use and is
   * replaced before anything was sent. */
  for (int i = 0; i < 8; i++)
    CHECK_OK(OPS->ping(ST, err));
  struct sbx_session_row g;
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1000_b", &g, err));
  sbx_session_row_free(&g);
}

/* ---- audit chain, usage, outbox ---------------------------------------- */

static int chain_hash(void *ctx, struct sbx_audit_row *row)
{
  /* Not SHA-256 (obs/audit.c owns that): any function of prev + seq shows
   * whether the chain links up. */
  snprintf(row->hash, sizeof row->hash, "%016llx%.48s",
           (unsigned long long)row->seq * 2654435761ULL, row->prev_hash);
  return 0;
}

#define APPENDERS 6
#define APPENDS 25

static void *appender(void *arg)
{
  int *errors = arg;
  struct sbx_store_handle own = {0};
  struct sbx_error e = {0};
  if (sbx_store_open(app_url, NULL, &own, &e) < 0) {
    (*errors)++;
    return NULL;
  }
  for (int i = 0; i < APPENDS; i++) {
    struct sbx_audit_row row = {.tenant_id = i % 3 == 0 ? 0 : t_acme};
    snprintf(row.actor, sizeof row.actor, "k%d", i);
    snprintf(row.action, sizeof row.action, "sandbox.execute");
    snprintf(row.outcome, sizeof row.outcome, "ok");
    row.details_json = "{\"n\":1}";
    if (own.ops->audit_append(own.st, &row, chain_hash, NULL, &e) < 0) {
      fprintf(stderr, "append: %s\n", e.msg);
      (*errors)++;
    }
  }
  sbx_store_close(&own);
  return NULL;
}

struct chain_check {
  int64_t n, last_seq, acme_rows;
  char last_hash[65];
  int broken;
};

static int check_link(void *ctx, const struct sbx_audit_row *row)
{
  struct chain_check *cc = ctx;
  if (row->seq != cc->last_seq + 1 || strcmp(row->prev_hash, cc->last_hash) != 0)
    cc->broken++;
  cc->n++;
  cc->last_seq = row->seq;
  snprintf(cc->last_hash, sizeof cc->last_hash, "%s", row->hash);
  return 0;
}

static void test_audit_chain(void)
{
  pthread_t th[APPENDERS];
  int errors[APPENDERS] = {0};
  for (int i = 0; i < APPENDERS; i++)
    CHECK(pthread_create(&th[i], NULL, appender, &errors[i]) == 0);
  for (int i = 0; i < APPENDERS; i++) {
    pthread_join(th[i], NULL);
    CHECK(errors[i] == 0);
  }
  struct chain_check cc = {0};
  snprintf(cc.last_hash, sizeof cc.last_hash, "%s", SBX_AUDIT_GENESIS);
  CHECK_OK(OPS->audit_scan(ST, 0, check_link, &cc, err));
  CHECK(cc.n == APPENDERS * APPENDS && cc.broken == 0);
  /* A tenant's listing holds only its events; the admin listing all. */
  struct chain_check t = {0};
  CHECK_OK(OPS->audit_list(ST, t_acme, NULL, 0, 0, check_link, &t, err));
  CHECK(t.n == raw_int("SELECT COUNT(*) FROM audit_events WHERE tenant_id <> 0"));
  struct chain_check all = {0};
  snprintf(all.last_hash, sizeof all.last_hash, "%s", SBX_AUDIT_GENESIS);
  CHECK_OK(OPS->audit_list(ST, -1, "sandbox.execute", 0, 10, check_link, &all, err));
  CHECK(all.n == 10 && all.broken == 0);
}

static int sum_group(void *ctx, const struct sbx_usage_group *g)
{
  char *out = ctx;
  size_t n = strlen(out);
  snprintf(out + n, 256 - n, "%s:%lld:%.2f;", g->key, (long long)g->records, g->cpu_seconds);
  return 0;
}

static int collect_usage(void *ctx, const struct sbx_usage_row *row)
{
  struct ids *ids = ctx;
  if (ids->n < 16)
    snprintf(ids->id[ids->n++], 64, "%s", row->id);
  return 0;
}

static void test_usage_outbox(void)
{
  static const char *profiles[] = {"default", "gpu", "default"};
  for (int i = 0; i < 3; i++) {
    struct sbx_usage_row u = {.tenant_id = t_acme, .cpu_seconds = 1.5, .created_at = 5000 + i};
    snprintf(u.id, sizeof u.id, "use_%d", i);
    snprintf(u.kind, sizeof u.kind, "exec");
    snprintf(u.profile, sizeof u.profile, "%s", profiles[i]);
    snprintf(u.project, sizeof u.project, "%s", i ? "p1" : "");
    snprintf(u.delivery, sizeof u.delivery, "pending");
    CHECK_OK(OPS->usage_insert(ST, &u, err));
    if (i == 0)
      CHECK_ERR(OPS->usage_insert(ST, &u, err), SBX_E_CONFLICT);
  }
  struct sbx_usage_row u = {.tenant_id = t_other, .created_at = 5001};
  snprintf(u.id, sizeof u.id, "use_other");
  snprintf(u.profile, sizeof u.profile, "default");
  snprintf(u.delivery, sizeof u.delivery, "pending");
  CHECK_OK(OPS->usage_insert(ST, &u, err));

  char out[256] = "";
  /* from 5000: the records above, not an execution's (store_cases.inc) */
  CHECK_OK(OPS->usage_query(ST, t_acme, "profile", 5000, 0, sum_group, out, err));
  CHECK(strcmp(out, "default:2:3.00;gpu:1:1.50;") == 0);
  out[0] = '\0';
  CHECK_OK(OPS->usage_query(ST, t_acme, "project", 5001, 5002, sum_group, out, err));
  CHECK(strcmp(out, "p1:1:1.50;") == 0);
  CHECK_ERR(OPS->usage_query(ST, t_acme, "id; DROP TABLE x", 0, 0, sum_group, out, err),
            SBX_E_INVALID);

  /* The outbox spans tenants. */
  struct ids due = {0};
  CHECK_OK(OPS->outbox_due(ST, 10, 0, collect_usage, &due, err));
  CHECK(due.n == 4 && strcmp(due.id[0], "use_0") == 0);
  CHECK_OK(OPS->outbox_mark(ST, "use_0", true, 0, NULL, err));
  CHECK_OK(OPS->outbox_mark(ST, "use_other", false, 100, "HTTP 503 \xc3\xa9", err));
  CHECK_ERR(OPS->outbox_mark(ST, "use_nope", true, 0, NULL, err), SBX_E_NOT_FOUND);
  struct ids due2 = {0};
  CHECK_OK(OPS->outbox_due(ST, 10, 0, collect_usage, &due2, err));
  CHECK(due2.n == 2);
  CHECK(raw_int("SELECT attempts FROM usage_records WHERE id = 'use_other'") == 1);
  CHECK(raw_int("SELECT COUNT(*) FROM usage_records WHERE delivery = 'delivered'") == 1);
}

/* ---- the fleet (store.h sbx_store_fleet_ops) ---- */

static int count_reaped(void *ctx, const struct sbx_node_reaped *r)
{
  struct sbx_node_reaped *out = ctx;
  *out = *r;
  return 0;
}

static void queued_exec(const char *id, int64_t tenant, int64_t created)
{
  struct sbx_execution_row e = {.tenant_id = tenant, .exit_code = -1, .created_at = created};
  snprintf(e.id, sizeof e.id, "%s", id);
  snprintf(e.status, sizeof e.status, "queued");
  snprintf(e.profile, sizeof e.profile, "container");
  e.request_json = "{}";
  e.metadata_json = "{}";
  CHECK_OK(OPS->execution_insert(ST, &e, err));
}

static void test_fleet(void)
{
  const struct sbx_store_fleet_ops *f = OPS->fleet;
  CHECK(f != NULL);
  if (!f)
    return;
  struct sbx_node_row n = {.slots = 2, .ncpu = 2, .mem_total = 1 << 30, .started_at = 77};
  snprintf(n.id, sizeof n.id, "n1");
  snprintf(n.advertise, sizeof n.advertise, "http://198.51.100.11:8080");
  n.info_json = "{\"profiles\":{}}";
  CHECK_OK(f->node_join(ST, &n, err));
  bool ok = false, alive = false;
  /* reservations never pass the slots, and give back */
  CHECK_OK(f->node_reserve(ST, "n1", 1, &ok, err));
  CHECK(ok);
  CHECK_OK(f->node_reserve(ST, "n1", 1, &ok, err));
  CHECK(ok);
  CHECK_OK(f->node_reserve(ST, "n1", 1, &ok, err));
  CHECK(!ok);
  CHECK_OK(f->node_reserve(ST, "n1", -1, &ok, err));
  CHECK(raw_int("SELECT used FROM nodes WHERE id = 'n1'") == 1);
  CHECK_OK(f->node_beat(ST, &n, &alive, err));
  CHECK(alive);

  /* the shared queue: fair between tenants, capped per tenant, once each
   * (two tenants of their own: the earlier cases left work queued) */
  int64_t t_fa = 0, t_fb = 0;
  CHECK_OK(OPS->tenant_ensure(ST, "fleet-a", &t_fa, err));
  CHECK_OK(OPS->tenant_ensure(ST, "fleet-b", &t_fb, err));
  raw_exec("UPDATE executions SET status = 'failed' WHERE status IN ('queued', 'running')");
  queued_exec("exe_q1", t_fa, 10);
  queued_exec("exe_q2", t_fa, 11);
  queued_exec("exe_q3", t_fb, 12);
  char id[64];
  int64_t tenant = 0;
  bool expired = true;
  struct sbx_error ce = {0};
  CHECK(f->exec_claim(ST, "n1", 1, 10000, id, &tenant, &expired, &ce) == 1);
  CHECK(strcmp(id, "exe_q1") == 0 && tenant == t_fa && !expired);
  /* fleet-a has one taken: the other tenant goes first, then nothing (cap 1) */
  CHECK(f->exec_claim(ST, "n1", 1, 10000, id, &tenant, &expired, &ce) == 1);
  CHECK(strcmp(id, "exe_q3") == 0);
  CHECK(f->exec_claim(ST, "n1", 1, 10000, id, &tenant, &expired, &ce) == 0);
  /* a holder's start is conditional on holding it */
  CHECK_ERR(OPS->execution_start(ST, t_fa, "exe_q1", "n2", 100, err), SBX_E_CONFLICT);
  CHECK_OK(OPS->execution_start(ST, t_fa, "exe_q1", "n1", 100, err));
  int64_t depth = -1, age = -1;
  CHECK_OK(f->queue_stats(ST, &depth, &age, err));
  CHECK(depth == 2); /* q2 (nobody's) and q3 (taken, not started) */

  /* the fleet-wide executions count */
  int64_t count = 0;
  struct sbx_execution_row e = {.tenant_id = t_fa, .exit_code = -1};
  snprintf(e.id, sizeof e.id, "exe_q4");
  snprintf(e.status, sizeof e.status, "queued");
  e.request_json = e.metadata_json = "{}";
  CHECK_ERR(f->exec_insert_capped(ST, &e, 2, &count, err), SBX_E_QUOTA);
  CHECK(count == 2);
  CHECK_OK(f->exec_insert_capped(ST, &e, 3, &count, err));

  /* session holds count with ready sessions */
  CHECK_OK(f->session_hold(ST, t_fb, "hold_1", "n1", 1, 600, &count, err));
  CHECK_ERR(f->session_hold(ST, t_fb, "hold_2", "n1", 1, 600, &count, err), SBX_E_QUOTA);
  CHECK_OK(f->session_unhold(ST, t_fb, "hold_1", err));
  CHECK_OK(f->session_hold(ST, t_fb, "hold_2", "n1", 1, 600, &count, err));

  /* n1 goes silent: declared dead, its running execution ends node_lost,
   * what it took but had not started goes back, its holds go */
  raw_exec("UPDATE nodes SET heartbeat_at = clock_timestamp() - interval '1 hour'");
  struct sbx_node_reaped r = {0};
  CHECK_OK(f->node_reap(ST, 5000, count_reaped, &r, err));
  CHECK(strcmp(r.id, "n1") == 0 && r.failed == 1 && r.requeued == 1);
  CHECK(raw_int("SELECT COUNT(*) FROM executions WHERE id = 'exe_q1' AND status = 'error'"
                " AND reason = 'node_lost'") == 1);
  CHECK(raw_int("SELECT COUNT(*) FROM executions WHERE id = 'exe_q3' AND node_id = ''") == 1);
  CHECK(raw_int("SELECT COUNT(*) FROM session_holds") == 0);
  CHECK_OK(f->node_beat(ST, &n, &alive, err));
  CHECK(!alive); /* it learns it was declared dead */
  /* back: joins again; a reap finds nothing more */
  CHECK_OK(f->node_join(ST, &n, err));
  memset(&r, 0, sizeof r);
  CHECK_OK(f->node_reap(ST, 5000, count_reaped, &r, err));
  CHECK(r.id[0] == '\0');
  CHECK(raw_int("SELECT joins FROM nodes WHERE id = 'n1'") == 2);
  CHECK_OK(f->node_leave(ST, "n1", err));
  CHECK(raw_int("SELECT COUNT(*) FROM nodes WHERE state = 'left'") == 1);
}

int main(void)
{
  app_url = getenv("SBX_TEST_PG_APP_URL");
  owner_url = getenv("SBX_TEST_PG_OWNER_URL");
  super_url = getenv("SBX_TEST_PG_SUPER_URL");
  if (!app_url || !owner_url || !super_url) {
    fprintf(stderr, "test_store_pg: run me through tests/integration/sbxpg.py run -- %s\n",
            "test_store_pg");
    return 1;
  }
  super_conn = PQconnectdb(super_url);
  if (PQstatus(super_conn) != CONNECTION_OK) {
    fprintf(stderr, "superuser connection: %s", PQerrorMessage(super_conn));
    return 1;
  }
  test_init_and_open();
  if (!h.st) {
    fprintf(stderr, "cannot open the store; stopping\n");
    return 1;
  }
  test_backend_choice();
  test_future_schema_refused();
  test_rls_safety_net();
  test_tenants_and_keys();
  test_session_pagination();
  test_session_get_and_isolation();
  test_session_updates();
  test_execution_lifecycle();
  test_execution_cancel_and_lists();
  test_concurrent_writers();
  test_cancel_finish_race();
  test_tools();
  test_rls_direct();
  test_reconnect();
  test_audit_chain();
  test_usage_outbox();
  test_fleet();
  CHECK_OK(OPS->ping(ST, err));
  sbx_store_close(&h);
  PQfinish(super_conn);
  if (failures)
    fprintf(stderr, "test_store_pg: %d failure(s)\n", failures);
  else
    printf("test_store_pg: all checks passed\n");
  return failures ? 1 : 0;
}
