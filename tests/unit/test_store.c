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

static int failures;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                            \
    }                                                                        \
  } while (0)
/* An op that must succeed; prints the store's error otherwise. */
#define CHECK_OK(call)                                                             \
  do {                                                                             \
    struct sbx_error e_ = {0};                                                     \
    struct sbx_error *err = &e_;                                                   \
    if ((call) != 0) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, e_.msg); \
      failures++;                                                                  \
    }                                                                              \
  } while (0)
/* An op that must fail with code. */
#define CHECK_ERR(call, want)                                                        \
  do {                                                                               \
    struct sbx_error e_ = {0};                                                       \
    struct sbx_error *err = &e_;                                                     \
    if ((call) == 0 || e_.code != (want)) {                                          \
      fprintf(stderr, "%s:%d: %s: wanted code %d, got %d (%s)\n", __FILE__, __LINE__, \
              #call, (int)(want), (int)e_.code, e_.msg);                             \
      failures++;                                                                    \
    }                                                                                \
  } while (0)

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
  if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW)
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

static void make_session(struct sbx_session_row *r, int64_t tenant, const char *id, int64_t t)
{
  memset(r, 0, sizeof *r);
  snprintf(r->id, sizeof r->id, "%s", id);
  r->tenant_id = tenant;
  strcpy(r->status, "ready");
  strcpy(r->profile, "default");
  strcpy(r->runtime, "process");
  strcpy(r->image, "python:3.12");
  r->limits_json = "{\"memory\":\"256Mi\"}";
  r->network_json = "{\"egress\":\"none\"}";
  r->metadata_json = "{\"k\":\"v\"}";
  r->env_json = "{}";
  r->ttl_s = 600;
  r->created_at = t;
  r->expires_at = t + 600;
}

static void make_execution(struct sbx_execution_row *r, int64_t tenant, const char *id, int64_t t)
{
  memset(r, 0, sizeof *r);
  snprintf(r->id, sizeof r->id, "%s", id);
  r->tenant_id = tenant;
  strcpy(r->status, "queued");
  strcpy(r->profile, "default");
  r->request_json = "{\"language\":\"python\",\"code\":\"print(1)\"}";
  r->metadata_json = "{}";
  r->exit_code = -1;
  r->created_at = t;
}

struct ids {
  char id[16][64];
  int n;
};

static int collect_session(void *ctx, const struct sbx_session_row *row)
{
  struct ids *ids = ctx;
  if (ids->n < 16)
    snprintf(ids->id[ids->n++], 64, "%s", row->id);
  return 0;
}

static int collect_execution(void *ctx, const struct sbx_execution_row *row)
{
  struct ids *ids = ctx;
  if (ids->n < 16)
    snprintf(ids->id[ids->n++], 64, "%s", row->id);
  return 0;
}

static int cmp_desc(const void *a, const void *b)
{
  /* expected order: created_at DESC, id DESC; ids encode created_at. */
  const char *x = a, *y = b;
  return strcmp(y, x);
}

/* ---- tests ------------------------------------------------------------ */

static void test_open_and_migrations(void)
{
  CHECK_OK(sbx_store_open(NULL, dir, &h, err));
  CHECK(h.ops == &sbx_store_sqlite && h.st);
  CHECK_OK(OPS->ping(ST, err));
  int latest = sbx_store_schema_latest();
  CHECK(latest >= 1);
  CHECK(raw_int(dir, "SELECT MAX(version) FROM schema_migrations") == latest);
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM schema_migrations") == (int64_t)sbx_store_nmigrations);
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
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM schema_migrations") == (int64_t)sbx_store_nmigrations);
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
  CHECK(raw_int(sub, "SELECT COUNT(*) FROM schema_migrations") == (int64_t)sbx_store_nmigrations);
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

static int64_t t_acme, t_other;

static void test_tenants_and_keys(void)
{
  int64_t again = 0;
  CHECK_OK(OPS->tenant_ensure(ST, "acme", &t_acme, err));
  CHECK_OK(OPS->tenant_ensure(ST, "acme", &again, err));
  CHECK(t_acme > 0 && again == t_acme);
  CHECK_OK(OPS->tenant_ensure(ST, "other", &t_other, err));
  CHECK(t_other > 0 && t_other != t_acme);
  CHECK_ERR(OPS->tenant_ensure(ST, "", &again, err), SBX_E_INVALID);

  struct sbx_key_row k = {.tenant_id = t_acme, .admin = true, .created_at = 42};
  strcpy(k.key_id, "k0123456789abcdef");
  for (int i = 0; i < 32; i++)
    k.hash[i] = (unsigned char)(i * 7); /* includes a 0 byte */
  CHECK_OK(OPS->key_insert(ST, &k, err));
  CHECK_ERR(OPS->key_insert(ST, &k, err), SBX_E_CONFLICT);

  struct sbx_key_row got;
  CHECK_OK(OPS->key_get(ST, "k0123456789abcdef", &got, err));
  CHECK(got.tenant_id == t_acme && strcmp(got.tenant_name, "acme") == 0);
  CHECK(memcmp(got.hash, k.hash, 32) == 0 && got.admin && got.created_at == 42);
  struct sbx_error e = {0};
  CHECK(OPS->key_get(ST, "knope", &got, &e) < 0 && e.code == SBX_E_NOT_FOUND &&
        strcmp(e.msg, "key not found") == 0);
  /* A key must belong to a real tenant. */
  k.tenant_id = 999;
  strcpy(k.key_id, "kffffffffffffffff");
  CHECK_ERR(OPS->key_insert(ST, &k, err), SBX_E_CONFLICT);
}

static void test_session_pagination(void)
{
  /* 5 sessions over 3 seconds, two pairs sharing a second, and one of
   * another tenant in the middle: pages of 2 must give 2, 2, 1 in order. */
  static const char *ids[] = {"ses_1000_a", "ses_1000_b", "ses_1001_a", "ses_1001_b",
                              "ses_1002_a"};
  struct sbx_session_row r;
  for (int i = 0; i < 5; i++) {
    make_session(&r, t_acme, ids[i], 1000 + i / 2);
    CHECK_OK(OPS->session_insert(ST, &r, err));
  }
  make_session(&r, t_other, "ses_1001_c", 1001);
  CHECK_OK(OPS->session_insert(ST, &r, err));
  CHECK_ERR(OPS->session_insert(ST, &r, err), SBX_E_CONFLICT);

  char expect[5][64];
  for (int i = 0; i < 5; i++)
    snprintf(expect[i], 64, "%s", ids[i]);
  qsort(expect, 5, 64, cmp_desc);

  struct ids all = {0};
  char after[64] = "";
  for (int page = 0; page < 4; page++) {
    struct ids p = {0};
    CHECK_OK(OPS->session_list(ST, t_acme, NULL, after, 2, collect_session, &p, err));
    CHECK(p.n == (page < 2 ? 2 : page == 2 ? 1 : 0));
    for (int i = 0; i < p.n; i++)
      snprintf(all.id[all.n++], 64, "%s", p.id[i]);
    if (p.n)
      snprintf(after, sizeof after, "%s", p.id[p.n - 1]);
  }
  CHECK(all.n == 5);
  for (int i = 0; i < 5 && i < all.n; i++)
    CHECK(strcmp(all.id[i], expect[i]) == 0);

  /* Unlimited, and a cursor from another tenant is unknown here. */
  struct ids p = {0};
  CHECK_OK(OPS->session_list(ST, t_acme, NULL, "", 0, collect_session, &p, err));
  CHECK(p.n == 5);
  CHECK_ERR(OPS->session_list(ST, t_acme, NULL, "ses_1001_c", 2, collect_session, &p, err),
            SBX_E_INVALID);
  p.n = 0;
  CHECK_OK(OPS->session_list(ST, t_other, NULL, NULL, 10, collect_session, &p, err));
  CHECK(p.n == 1 && strcmp(p.id[0], "ses_1001_c") == 0);
}

static void test_session_get_and_isolation(void)
{
  struct sbx_session_row got;
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1000_a", &got, err));
  CHECK(strcmp(got.status, "ready") == 0 && strcmp(got.image, "python:3.12") == 0);
  CHECK(strcmp(got.limits_json, "{\"memory\":\"256Mi\"}") == 0);
  CHECK(strcmp(got.network_json, "{\"egress\":\"none\"}") == 0);
  CHECK(got.created_at == 1000 && got.expires_at == 1600 && got.ttl_s == 600);
  CHECK(got.last_used_at == 1000 && got.updated_at == 1000 && got.tenant_id == t_acme);
  sbx_session_row_free(&got);

  /* Another tenant's session is indistinguishable from a missing one. */
  struct sbx_error e1 = {0}, e2 = {0};
  CHECK(OPS->session_get(ST, t_other, "ses_1000_a", &got, &e1) < 0);
  CHECK(OPS->session_get(ST, t_other, "ses_nope", &got, &e2) < 0);
  CHECK(e1.code == SBX_E_NOT_FOUND && e2.code == SBX_E_NOT_FOUND);
  CHECK(strcmp(e1.msg, "session not found") == 0 && strcmp(e1.msg, e2.msg) == 0);
  CHECK_ERR(OPS->session_set_status(ST, t_other, "ses_1000_a", "terminated", "x", err),
            SBX_E_NOT_FOUND);
  CHECK_ERR(OPS->session_update(ST, t_other, "ses_1000_a", "{}", NULL, -1, 0, err),
            SBX_E_NOT_FOUND);
  CHECK_ERR(OPS->session_touch(ST, t_other, "ses_1000_a", 5, err), SBX_E_NOT_FOUND);
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1000_a", &got, err));
  CHECK(strcmp(got.status, "ready") == 0 && got.last_used_at == 1000);
  sbx_session_row_free(&got);
}

static int count_ready(void *ctx, const struct sbx_session_row *row)
{
  CHECK(strcmp(row->status, "ready") == 0);
  (*(int *)ctx)++;
  return 0;
}

static int stop_after_one(void *ctx, const struct sbx_session_row *row)
{
  (*(int *)ctx)++;
  return 1;
}

/* A callback may call the store (no lock is held while it runs). */
static int reenter(void *ctx, const struct sbx_session_row *row)
{
  struct sbx_session_row again;
  struct sbx_error e = {0};
  int rc = OPS->session_get(ST, row->tenant_id, row->id, &again, &e);
  if (rc == 0)
    sbx_session_row_free(&again);
  (*(int *)ctx) += rc == 0;
  return 0;
}

static void test_session_updates(void)
{
  CHECK_OK(OPS->session_set_status(ST, t_acme, "ses_1000_a", "terminated", "deleted", err));
  CHECK_OK(OPS->session_update(ST, t_acme, "ses_1000_b", NULL, "{\"new\":1}", -1, 0, err));
  CHECK_OK(OPS->session_update(ST, t_acme, "ses_1001_a", "{\"egress\":\"all\"}", NULL, 60, 9999,
                               err));
  CHECK_OK(OPS->session_touch(ST, t_acme, "ses_1001_b", 5555, err));
  CHECK_ERR(OPS->session_set_status(ST, t_acme, "ses_nope", "terminated", "", err),
            SBX_E_NOT_FOUND);

  struct sbx_session_row g;
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1000_a", &g, err));
  CHECK(strcmp(g.status, "terminated") == 0 && strcmp(g.reason, "deleted") == 0);
  CHECK(g.updated_at > 1000);
  sbx_session_row_free(&g);
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1000_b", &g, err));
  CHECK(strcmp(g.metadata_json, "{\"new\":1}") == 0);
  CHECK(strcmp(g.network_json, "{\"egress\":\"none\"}") == 0 && g.ttl_s == 600 &&
        g.expires_at == 1600);
  sbx_session_row_free(&g);
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1001_a", &g, err));
  CHECK(strcmp(g.network_json, "{\"egress\":\"all\"}") == 0 &&
        strcmp(g.metadata_json, "{\"k\":\"v\"}") == 0 && g.ttl_s == 60 && g.expires_at == 9999);
  sbx_session_row_free(&g);
  CHECK_OK(OPS->session_get(ST, t_acme, "ses_1001_b", &g, err));
  CHECK(g.last_used_at == 5555);
  sbx_session_row_free(&g);

  struct ids p = {0};
  CHECK_OK(OPS->session_list(ST, t_acme, "ready", NULL, 10, collect_session, &p, err));
  CHECK(p.n == 4);
  p.n = 0;
  CHECK_OK(OPS->session_list(ST, t_acme, "terminated", NULL, 10, collect_session, &p, err));
  CHECK(p.n == 1 && strcmp(p.id[0], "ses_1000_a") == 0);

  int n = 0;
  CHECK_OK(OPS->session_list_ready(ST, count_ready, &n, err));
  CHECK(n == 5); /* 4 of acme + 1 of other */
  n = 0;
  CHECK_OK(OPS->session_list_ready(ST, stop_after_one, &n, err));
  CHECK(n == 1);
  n = 0;
  CHECK_OK(OPS->session_list(ST, t_acme, NULL, NULL, 0, reenter, &n, err));
  CHECK(n == 5);

  int64_t c = -1;
  CHECK_OK(OPS->session_count(ST, t_acme, "ready", &c, err));
  CHECK(c == 4);
  CHECK_OK(OPS->session_count(ST, t_acme, NULL, &c, err));
  CHECK(c == 5);
  CHECK_OK(OPS->session_count(ST, t_other, NULL, &c, err));
  CHECK(c == 1);
}

static const char OUT[] = "hello\0world\n\xff\x00tail";
static const char ERRS[] = "warn\0ing";
static const unsigned char BIN[] = {0x7f, 'E', 'L', 'F', 0, 0, 1, 0, 0xff, 0};

static void test_execution_lifecycle(void)
{
  struct sbx_execution_row r;
  make_execution(&r, t_acme, "exe_1", 2000);
  CHECK_OK(OPS->execution_insert(ST, &r, err));
  CHECK_ERR(OPS->execution_insert(ST, &r, err), SBX_E_CONFLICT);

  struct sbx_execution_row g;
  CHECK_OK(OPS->execution_get(ST, t_acme, "exe_1", &g, err));
  CHECK(strcmp(g.status, "queued") == 0 && g.exit_code == -1 && g.started_at == 0);
  CHECK(g.stdout_buf && g.stdout_len == 0 && g.nfiles == 0 && g.updated_at == 2000);
  CHECK(strcmp(g.request_json, r.request_json) == 0 && g.error_json == NULL);
  sbx_execution_row_free(&g);

  CHECK_ERR(OPS->execution_start(ST, t_other, "exe_1", 2001, err), SBX_E_NOT_FOUND);
  CHECK_OK(OPS->execution_start(ST, t_acme, "exe_1", 2001, err));
  CHECK_ERR(OPS->execution_start(ST, t_acme, "exe_1", 2002, err), SBX_E_CONFLICT);
  CHECK_ERR(OPS->execution_start(ST, t_acme, "exe_nope", 2002, err), SBX_E_NOT_FOUND);

  struct sbx_execution_row fin = r;
  strcpy(fin.status, "failed");
  strcpy(fin.reason, "exit");
  fin.exit_code = 3;
  fin.signal = 0;
  fin.stdout_buf = (char *)OUT;
  fin.stdout_len = sizeof OUT - 1;
  fin.stdout_truncated = true;
  fin.stdout_dropped = 5000000000ULL;
  fin.stderr_buf = (char *)ERRS;
  fin.stderr_len = sizeof ERRS - 1;
  fin.cpu_seconds = 0.25;
  fin.memory_mb_seconds = 12.5;
  fin.duration_seconds = 1.5;
  fin.memory_peak_bytes = 1ULL << 33;
  fin.error_json = "{\"limit\":\"none\"}";
  fin.finished_at = 2003;
  struct sbx_exec_file_blob files[2] = {
      {.path = "/work/out/b.bin", .data = BIN, .size = sizeof BIN},
      {.path = "/work/out/a.txt", .data = "", .size = 0},
  };
  strcpy(files[0].sha256, "aa");
  strcpy(files[1].sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

  /* A duplicate path rolls the whole finish back. */
  struct sbx_exec_file_blob dup[2] = {files[0], files[0]};
  CHECK_ERR(OPS->execution_finish(ST, &fin, dup, 2, err), SBX_E_CONFLICT);
  CHECK_OK(OPS->execution_get(ST, t_acme, "exe_1", &g, err));
  CHECK(strcmp(g.status, "running") == 0 && g.nfiles == 0 && g.started_at == 2001);
  sbx_execution_row_free(&g);

  CHECK_OK(OPS->execution_finish(ST, &fin, files, 2, err));
  /* A cancel arriving after the finish must not overwrite it. */
  struct sbx_execution_row late = fin;
  strcpy(late.status, "killed");
  strcpy(late.reason, "cancelled");
  late.stdout_len = 0;
  struct sbx_error ec = {0};
  CHECK(OPS->execution_finish(ST, &late, NULL, 0, &ec) < 0 && ec.code == SBX_E_CONFLICT);
  CHECK(strstr(ec.msg, "failed") != NULL);
  CHECK_ERR(OPS->execution_finish(ST, &fin, files, 2, err), SBX_E_CONFLICT);
  strcpy(fin.status, "running");
  CHECK_ERR(OPS->execution_finish(ST, &fin, NULL, 0, err), SBX_E_INTERNAL);

  CHECK_OK(OPS->execution_get(ST, t_acme, "exe_1", &g, err));
  CHECK(strcmp(g.status, "failed") == 0 && strcmp(g.reason, "exit") == 0 && g.exit_code == 3);
  CHECK(g.stdout_len == sizeof OUT - 1 && memcmp(g.stdout_buf, OUT, g.stdout_len) == 0);
  CHECK(g.stdout_buf[g.stdout_len] == '\0');
  CHECK(g.stderr_len == sizeof ERRS - 1 && memcmp(g.stderr_buf, ERRS, g.stderr_len) == 0);
  CHECK(g.stdout_truncated && g.stdout_dropped == 5000000000ULL && !g.stderr_truncated);
  CHECK(g.cpu_seconds == 0.25 && g.memory_mb_seconds == 12.5 && g.duration_seconds == 1.5);
  CHECK(g.memory_peak_bytes == 1ULL << 33 && strcmp(g.error_json, "{\"limit\":\"none\"}") == 0);
  CHECK(g.started_at == 2001 && g.finished_at == 2003 && g.created_at == 2000);
  CHECK(g.nfiles == 2);
  if (g.nfiles == 2) {
    CHECK(strcmp(g.files[0].path, "/work/out/a.txt") == 0 && g.files[0].size == 0);
    CHECK(strcmp(g.files[1].path, "/work/out/b.bin") == 0 && g.files[1].size == sizeof BIN);
    CHECK(strcmp(g.files[1].sha256, "aa") == 0);
  }
  sbx_execution_row_free(&g);
  CHECK_ERR(OPS->execution_get(ST, t_other, "exe_1", &g, err), SBX_E_NOT_FOUND);

  void *data = NULL;
  size_t size = 0;
  CHECK_OK(OPS->execution_file_get(ST, t_acme, "exe_1", "/work/out/b.bin", &data, &size, err));
  CHECK(size == sizeof BIN && data && memcmp(data, BIN, size) == 0);
  free(data);
  CHECK_OK(OPS->execution_file_get(ST, t_acme, "exe_1", "/work/out/a.txt", &data, &size, err));
  CHECK(size == 0 && data);
  free(data);
  struct sbx_error e1 = {0}, e2 = {0};
  CHECK(OPS->execution_file_get(ST, t_acme, "exe_1", "/nope", &data, &size, &e1) < 0);
  CHECK(e1.code == SBX_E_NOT_FOUND && strcmp(e1.msg, "file not found") == 0);
  CHECK(OPS->execution_file_get(ST, t_other, "exe_1", "/work/out/b.bin", &data, &size, &e2) < 0);
  CHECK(e2.code == SBX_E_NOT_FOUND && strcmp(e2.msg, "execution not found") == 0);
}

static int check_summary(void *ctx, const struct sbx_execution_row *row)
{
  CHECK(row->stdout_buf == NULL && row->nfiles == 0);
  return collect_execution(ctx, row);
}

static void test_execution_cancel_and_lists(void)
{
  /* Cancel of a queued execution = finish(killed); the worker's start then
   * loses the race. */
  struct sbx_execution_row r;
  make_execution(&r, t_acme, "exe_2", 2000);
  CHECK_OK(OPS->execution_insert(ST, &r, err));
  strcpy(r.status, "killed");
  strcpy(r.reason, "cancelled");
  CHECK_OK(OPS->execution_finish(ST, &r, NULL, 0, err));
  CHECK_ERR(OPS->execution_start(ST, t_acme, "exe_2", 2001, err), SBX_E_CONFLICT);

  make_execution(&r, t_acme, "exe_3", 2001);
  CHECK_OK(OPS->execution_insert(ST, &r, err));
  make_execution(&r, t_acme, "exe_4", 2001);
  CHECK_OK(OPS->execution_insert(ST, &r, err));
  CHECK_OK(OPS->execution_start(ST, t_acme, "exe_4", 2002, err));
  make_execution(&r, t_other, "exe_5", 2001);
  CHECK_OK(OPS->execution_insert(ST, &r, err));
  CHECK_OK(OPS->execution_start(ST, t_other, "exe_5", 2002, err));

  struct ids p = {0};
  CHECK_OK(OPS->execution_list(ST, t_acme, "queued", NULL, 10, check_summary, &p, err));
  CHECK(p.n == 1 && strcmp(p.id[0], "exe_3") == 0);
  p.n = 0;
  CHECK_OK(OPS->execution_list(ST, t_acme, NULL, NULL, 10, check_summary, &p, err));
  CHECK(p.n == 4 && strcmp(p.id[0], "exe_4") == 0 && strcmp(p.id[1], "exe_3") == 0 &&
        strcmp(p.id[2], "exe_2") == 0 && strcmp(p.id[3], "exe_1") == 0);
  /* Page of 3 then the rest. */
  p.n = 0;
  CHECK_OK(OPS->execution_list(ST, t_acme, NULL, NULL, 3, collect_execution, &p, err));
  CHECK(p.n == 3);
  struct ids q = {0};
  CHECK_OK(OPS->execution_list(ST, t_acme, NULL, p.id[2], 3, collect_execution, &q, err));
  CHECK(q.n == 1 && strcmp(q.id[0], "exe_1") == 0);

  p.n = 0;
  CHECK_OK(OPS->execution_list_status(ST, "running", check_summary, &p, err));
  CHECK(p.n == 2); /* exe_4 (acme) and exe_5 (other) */
  p.n = 0;
  CHECK_OK(OPS->execution_list_status(ST, "queued", collect_execution, &p, err));
  CHECK(p.n == 1);
  int64_t c = -1;
  CHECK_OK(OPS->execution_count(ST, t_acme, "running", &c, err));
  CHECK(c == 1);
  CHECK_OK(OPS->execution_count(ST, t_acme, NULL, &c, err));
  CHECK(c == 4);
}

/* ---- concurrency ------------------------------------------------------ */

#define THREADS 4
#define PER_THREAD 40

struct worker {
  int idx;
  bool own_handle; /* a second connection: real SQLite lock contention */
  int errors;
  char last_err[512];
};

static void *work(void *arg)
{
  struct worker *w = arg;
  struct sbx_store_handle own = {0}, *hh = &h;
  struct sbx_error e = {0};
  if (w->own_handle) {
    if (sbx_store_open(NULL, dir, &own, &e) < 0) {
      w->errors++;
      snprintf(w->last_err, sizeof w->last_err, "%s", e.msg);
      return NULL;
    }
    hh = &own;
  }
  for (int i = 0; i < PER_THREAD; i++) {
    char tname[32], id[64];
    int64_t tid = 0;
    snprintf(tname, sizeof tname, "t%d", i % 3);
    snprintf(id, sizeof id, "exe_w%d_%d", w->idx, i);
    struct sbx_execution_row r;
    make_execution(&r, 0, id, 3000 + i);
    int rc = hh->ops->tenant_ensure(hh->st, tname, &tid, &e);
    r.tenant_id = tid;
    if (rc == 0)
      rc = hh->ops->execution_insert(hh->st, &r, &e);
    if (rc == 0)
      rc = hh->ops->execution_start(hh->st, tid, id, 3001, &e);
    strcpy(r.status, "succeeded");
    r.stdout_buf = (char *)OUT;
    r.stdout_len = sizeof OUT - 1;
    struct sbx_exec_file_blob f = {.path = "/o", .data = BIN, .size = sizeof BIN};
    if (rc == 0)
      rc = hh->ops->execution_finish(hh->st, &r, &f, 1, &e);
    if (rc < 0) {
      w->errors++;
      snprintf(w->last_err, sizeof w->last_err, "%s", e.msg);
    }
  }
  if (w->own_handle)
    sbx_store_close(&own);
  return NULL;
}

static void test_concurrent_writers(void)
{
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct worker){.idx = i, .own_handle = i % 2 == 1};
    CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    if (w[i].errors)
      fprintf(stderr, "worker %d: %d errors, last: %s\n", i, w[i].errors, w[i].last_err);
    CHECK(w[i].errors == 0);
  }
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM executions WHERE id LIKE 'exe_w%' AND status = "
                     "'succeeded'") == THREADS * PER_THREAD);
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM tenants WHERE name IN ('t0', 't1', 't2')") == 3);
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM execution_files WHERE path = '/o'") ==
        THREADS * PER_THREAD);
}

/* A cancel and a finish racing on the same executions, from two
 * connections: each execution ends with exactly one winner. */
#define RACES 30

struct racer {
  const char *status;
  bool own_handle;
  int wins, conflicts, other;
};

static void *race(void *arg)
{
  struct racer *rc = arg;
  struct sbx_store_handle own = {0}, *hh = &h;
  struct sbx_error e = {0};
  if (rc->own_handle) {
    if (sbx_store_open(NULL, dir, &own, &e) < 0) {
      rc->other = RACES;
      return NULL;
    }
    hh = &own;
  }
  for (int i = 0; i < RACES; i++) {
    struct sbx_execution_row r;
    char id[64];
    snprintf(id, sizeof id, "exe_race_%d", i);
    make_execution(&r, t_acme, id, 4000);
    strcpy(r.status, rc->status);
    int ret = hh->ops->execution_finish(hh->st, &r, NULL, 0, &e);
    if (ret == 0)
      rc->wins++;
    else if (e.code == SBX_E_CONFLICT)
      rc->conflicts++;
    else
      rc->other++;
  }
  if (rc->own_handle)
    sbx_store_close(&own);
  return NULL;
}

static void test_cancel_finish_race(void)
{
  for (int i = 0; i < RACES; i++) {
    struct sbx_execution_row r;
    char id[64];
    snprintf(id, sizeof id, "exe_race_%d", i);
    make_execution(&r, t_acme, id, 4000);
    CHECK_OK(OPS->execution_insert(ST, &r, err));
  }
  struct racer a = {.status = "succeeded"}, b = {.status = "killed", .own_handle = true};
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, NULL, race, &a) == 0);
  CHECK(pthread_create(&tb, NULL, race, &b) == 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK(a.other == 0 && b.other == 0);
  CHECK(a.wins + b.wins == RACES && a.conflicts + b.conflicts == RACES);
  CHECK(raw_int(dir, "SELECT COUNT(*) FROM executions WHERE id LIKE 'exe_race_%'"
                     " AND status IN ('succeeded', 'killed')") == RACES);
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
  CHECK_OK(OPS->ping(ST, err));
  sbx_store_close(&h);
  sbx_rm_rf(dir);
  if (failures)
    fprintf(stderr, "test_store: %d failure(s)\n", failures);
  else
    printf("test_store: all checks passed\n");
  return failures ? 1 : 0;
}
