/* test_store.c — unit tests of the storage module against a real SQLite
 * database in a temporary directory: migrations, tenants and keys,
 * sessions (pagination, tenant isolation), executions (state machine,
 * binary-safe output and files), concurrency, and schema-version refusal. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "store/migrations/migrations.h"
#include "store/store.h"

#include "store_check.h"

static char dir[64];
static struct sbx_store_handle h;
#define OPS h.ops
#define ST h.st

/* ---- helpers ---------------------------------------------------------- */

static int64_t raw_int(const char *dbdir, const char *sql)
{
  char path[256];
  snprintf(path, sizeof path, "%s/sandboxd.db", dbdir);
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;
  int64_t v = -1;
  if (sqlite3_open(path, &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    v = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

static void raw_exec(const char *dbdir, const char *sql)
{
  char path[256];
  snprintf(path, sizeof path, "%s/sandboxd.db", dbdir);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
}

/* Hooks of store_cases.inc. */
static int open_own(struct sbx_store_handle *out, struct sbx_error *e)
{
  return sbx_store_open(NULL, dir, out, e);
}

static int64_t raw_count(const char *sql) { return raw_int(dir, sql); }

#include "store_cases.inc"

/* ---- tests ------------------------------------------------------------ */

static void test_open_and_migrations(void)
{
  CHECK_OK(sbx_store_open(NULL, dir, &h, err));
  CHECK(h.ops == &sbx_store_sqlite && h.st);
  CHECK_OK(OPS->ping(ST, err));
  int latest = sbx_store_schema_latest();
  CHECK(latest >= 1);
  CHECK(raw_int(dir, "SELECT MAX(version) FROM schema_migrations") == latest);
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM schema_migrations") ==
        (int64_t)sbx_store_nmigrations);
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'executions'") == 1);
  char path[256];
  snprintf(path, sizeof path, "%s/sandboxd.db", dir);
  struct stat sb;
  CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
  snprintf(path, sizeof path, "%s/sandboxd.db-wal", dir);
  CHECK(stat(path, &sb) == 0); /* WAL mode is on */

  /* Reopening applies nothing twice. */
  sbx_store_close(&h);
  CHECK_OK(sbx_store_open("", dir, &h, err));
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM schema_migrations") ==
        (int64_t)sbx_store_nmigrations);
  CHECK(raw_int(dir, "PRAGMA journal_mode") == 0); /* "wal" is text: column_int64 → 0 */
}

static void test_backend_choice(void)
{
  struct sbx_store_handle x;
  struct sbx_error e = {0};
  /* postgres URLs go to the PostgreSQL backend (test_store_pg.c); nothing
   * listens on port 1: NOT_READY, and the password is never echoed. */
  CHECK(sbx_store_open("postgres://u:secret@127.0.0.1:1/sbx", dir, &x, &e) < 0);
  CHECK(e.code == SBX_E_NOT_READY && strstr(e.msg, "PostgreSQL"));
  CHECK(!strstr(e.msg, "secret"));
  CHECK_ERR(sbx_store_open("postgresql://127.0.0.1:1/sbx", dir, &x, err), SBX_E_NOT_READY);
  CHECK_ERR(sbx_store_open("mysql://db", dir, &x, err), SBX_E_INVALID);
  CHECK_ERR(sbx_store_open(NULL, "", &x, err), SBX_E_INVALID);
  char url[128];
  snprintf(url, sizeof url, "sqlite://%s/viaurl", dir);
  CHECK_OK(sbx_store_open(url, NULL, &x, err));
  sbx_store_close(&x);
  char sub[128];
  snprintf(sub, sizeof sub, "%s/viaurl", dir);
  CHECK(raw_int(sub, "SELECT COUNT(*) FROM schema_migrations") ==
        (int64_t)sbx_store_nmigrations);
}

static void test_future_schema_refused(void)
{
  char fut[128];
  snprintf(fut, sizeof fut, "%s/future", dir);
  struct sbx_store_handle x;
  CHECK_OK(sbx_store_open(NULL, fut, &x, err));
  sbx_store_close(&x);
  char sql[160];
  snprintf(sql, sizeof sql, "INSERT INTO schema_migrations VALUES (%d, 0)",
           sbx_store_schema_latest() + 1);
  raw_exec(fut, sql);
  struct sbx_error e = {0};
  CHECK(sbx_store_open(NULL, fut, &x, &e) < 0);
  CHECK(strstr(e.msg, "newer than this sandboxd") != NULL);
  CHECK(x.st == NULL);
}

int main(void)
{
  snprintf(dir, sizeof dir, "/tmp/sbx-test-store-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_open_and_migrations();
  if (!h.st) {
    fprintf(stderr, "cannot open the store; stopping\n");
    sbx_rm_rf(dir);
    return 1;
  }
  test_backend_choice();
  test_future_schema_refused();
  test_tenants_and_keys();
  test_session_pagination();
  test_session_get_and_isolation();
  test_session_updates();
  test_execution_lifecycle();
  test_execution_cancel_and_lists();
  test_concurrent_writers();
  test_cancel_finish_race();
  test_tools();
  CHECK_OK(OPS->ping(ST, err));
  sbx_store_close(&h);
  sbx_rm_rf(dir);
  if (failures)
    fprintf(stderr, "test_store: %d failure(s)\n", failures);
  else
    printf("test_store: all checks passed\n");
  return failures ? 1 : 0;
}
