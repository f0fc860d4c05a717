/* test_audit.c — unit tests of the audit chain: the canonical
 * encoding and hash against vectors computed independently (Python's json +
 * hashlib, docs/audit.md), details normalisation, the chain on a real SQLite
 * store appended from many threads at once, verify naming the first broken
 * sequence number after an edit, a deletion and an insertion made directly
 * in the database, the refusal limiter, usage time parsing, and the metrics
 * exposition. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "obs/audit.h"
#include "obs/metrics.h"
#include "obs/usage.h"
#include "store/store.h"

/* ---- canonical encoding and hash ---- */

static struct sbx_audit_row row1(void)
{
  struct sbx_audit_row r = {.seq = 1, .time_ms = 1767225600123, .tenant_id = 7};
  snprintf(r.actor, sizeof r.actor, "k0123456789abcdef");
  snprintf(r.action, sizeof r.action, "sandbox.session.create");
  snprintf(r.target, sizeof r.target, "ses_1");
  snprintf(r.outcome, sizeof r.outcome, "ok");
  snprintf(r.prev_hash, sizeof r.prev_hash, "%s", SBX_AUDIT_GENESIS);
  /* Keys out of order and spaces: the encoding must not depend on them. */
  r.details_json = "{\"route\": \"session_create\", \"b\": [1, true, null], "
                   "\"a\": {\"z\": 1, \"y\": \"x\"}}";
  return r;
}

static void test_canonical(void)
{
  struct sbx_audit_row r = row1();
  char *c = sbx_audit_canonical(&r);
  CHECK_STR(c, "{\"action\":\"sandbox.session.create\",\"actor\":\"k0123456789abcdef\","
               "\"details\":{\"a\":{\"y\":\"x\",\"z\":1},\"b\":[1,true,null],"
               "\"route\":\"session_create\"},\"outcome\":\"ok\",\"seq\":1,\"target\":\"ses_1\","
               "\"tenant\":7,\"time_ms\":1767225600123}");
  free(c);
  char h[65];
  CHECK(sbx_audit_hash(&r, h) == 0);
  /* python3: hashlib.sha256(("0"*64 + canonical).encode()).hexdigest() */
  CHECK_STR(h, "eb5aa36cbbafb20cedfc3ba0ee8c5ced22445d226ae2525341343188274bd141");

  /* UTF-8 kept as is, quotes, backslash, newline and a control byte escaped. */
  struct sbx_audit_row r2 = {.seq = 2, .time_ms = 1767225600999, .tenant_id = 0};
  snprintf(r2.actor, sizeof r2.actor, "anonymous");
  snprintf(r2.action, sizeof r2.action, "auth.denied");
  snprintf(r2.outcome, sizeof r2.outcome, "unauthenticated");
  snprintf(r2.prev_hash, sizeof r2.prev_hash, "%s", h);
  r2.details_json = "{\"msg\":\"caf\\u00e9 \\\"q\\\"\\n\\\\ \\u0001\",\"cpu\":\"0.5\"}";
  CHECK(sbx_audit_hash(&r2, h) == 0);
  CHECK_STR(h, "bb87dec8e2958c586c6f9d6c4a8bd149842b0d025062960496c665ee834885e7");

  /* Any change of content, seq or predecessor changes the hash. */
  char h1[65], h2[65];
  struct sbx_audit_row r3 = row1();
  sbx_audit_hash(&r3, h1);
  snprintf(r3.outcome, sizeof r3.outcome, "forbidden");
  sbx_audit_hash(&r3, h2);
  CHECK(strcmp(h1, h2) != 0);
  r3 = row1();
  r3.seq = 2;
  sbx_audit_hash(&r3, h2);
  CHECK(strcmp(h1, h2) != 0);
  r3 = row1();
  r3.prev_hash[0] = '1';
  sbx_audit_hash(&r3, h2);
  CHECK(strcmp(h1, h2) != 0);

  /* Details that are not an object cannot be encoded. */
  r3 = row1();
  r3.details_json = "[1]";
  CHECK(sbx_audit_canonical(&r3) == NULL);
  CHECK(sbx_audit_hash(&r3, h2) < 0);
}

static void test_details(void)
{
  json_t *in = json_pack("{s:f, s:[f, i], s:{s:f}, s:s}", "cpu", 0.25, "list", 1.5, 3, "o", "x",
                         2.0, "s", "t");
  json_t *d = sbx_audit_details(in);
  char *txt = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
  CHECK_STR(txt, "{\"cpu\":\"0.25\",\"list\":[\"1.5\",3],\"o\":{\"x\":\"2\"},\"s\":\"t\"}");
  free(txt);
  json_decref(d);
  json_decref(in);
  d = sbx_audit_details(NULL);
  CHECK(json_is_object(d) && json_object_size(d) == 0);
  json_decref(d);
}

/* ---- the chain on a real store ---- */

#define THREADS 8
#define PER_THREAD 40

static void *appender(void *arg)
{
  struct sbx_store_handle *st = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    struct sbx_error err = {0};
    json_t *d = json_pack("{s:i}", "i", i);
    struct sbx_audit_event ev = {.tenant_id = 1 + i % 3,
                                 .actor = "kthread",
                                 .action = "sandbox.execute",
                                 .target = "ses_x",
                                 .details = d};
    if (sbx_audit_append(st, &ev, NULL, &err) < 0)
      fprintf(stderr, "append: %s\n", err.msg);
    json_decref(d);
  }
  return NULL;
}

static void sql(const char *dir, const char *stmt)
{
  char path[512];
  snprintf(path, sizeof path, "%s/sandboxd.db", dir);
  sqlite3 *db;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  char *msg = NULL;
  if (sqlite3_exec(db, stmt, NULL, NULL, &msg) != SQLITE_OK) {
    fprintf(stderr, "sql %s: %s\n", stmt, msg);
    check_failed_count++;
  }
  sqlite3_free(msg);
  sqlite3_close(db);
}

static int64_t verify_broken(struct sbx_store_handle *st)
{
  struct sbx_audit_verdict v;
  struct sbx_error err = {0};
  CHECK(sbx_audit_verify(st, &v, &err) == 0);
  return v.ok ? 0 : v.broken_seq;
}

struct count_ctx {
  int n;
  int64_t last;
  bool ordered;
};

static int count_cb(void *ctx, const struct sbx_audit_row *row)
{
  struct count_ctx *c = ctx;
  c->ordered &= row->seq == c->last + 1 || c->last == 0;
  c->last = row->seq;
  c->n++;
  return 0;
}

static void test_chain(void)
{
  char dir[] = "/tmp/sbx-audit-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  struct sbx_store_handle st;
  struct sbx_error err = {0};
  CHECK(sbx_store_open(NULL, dir, &st, &err) == 0);

  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, appender, &st);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);

  struct sbx_audit_verdict v;
  CHECK(sbx_audit_verify(&st, &v, &err) == 0);
  CHECK(v.ok);
  CHECK(v.events == THREADS * PER_THREAD);
  CHECK(v.last_seq == THREADS * PER_THREAD);

  /* list: tenant filter, action filter, cursor, limit */
  struct count_ctx c = {.ordered = true};
  CHECK(st.ops->audit_list(st.st, 2, NULL, 0, 0, count_cb, &c, &err) == 0);
  CHECK(c.n > 0 && c.n < THREADS * PER_THREAD);
  c = (struct count_ctx){.ordered = true};
  CHECK(st.ops->audit_list(st.st, -1, "sandbox.execute", 100, 10, count_cb, &c, &err) == 0);
  CHECK(c.n == 10 && c.last == 110 && c.ordered);
  c = (struct count_ctx){.ordered = true};
  CHECK(st.ops->audit_list(st.st, -1, "auth.denied", 0, 0, count_cb, &c, &err) == 0);
  CHECK(c.n == 0);

  /* Edit a row's content → that row is named. */
  sql(dir, "UPDATE audit_events SET outcome = 'forbidden' WHERE seq = 77");
  CHECK(verify_broken(&st) == 77);
  sql(dir, "UPDATE audit_events SET outcome = 'ok' WHERE seq = 77");
  CHECK(verify_broken(&st) == 0);
  /* Edit content and hash together: still named. */
  sql(dir, "UPDATE audit_events SET target = 'ses_y', hash = 'ab' || substr(hash, 3) "
           "WHERE seq = 90");
  CHECK(verify_broken(&st) == 90);
  sql(dir, "UPDATE audit_events SET target = 'ses_x', hash = (SELECT prev_hash FROM "
           "audit_events WHERE seq = 91) WHERE seq = 90");
  CHECK(verify_broken(&st) == 0);
  /* Delete a row → the missing sequence number is named. */
  sql(dir, "CREATE TABLE saved AS SELECT * FROM audit_events WHERE seq = 150; "
           "DELETE FROM audit_events WHERE seq = 150");
  CHECK(verify_broken(&st) == 150);
  sql(dir, "INSERT INTO audit_events SELECT * FROM saved; DROP TABLE saved");
  CHECK(verify_broken(&st) == 0);
  /* Insert a row at the end (forged hash) → named. */
  sql(dir, "INSERT INTO audit_events (seq, time_ms, tenant_id, actor, action, target, outcome,"
           " details_json, prev_hash, hash) SELECT seq + 1, time_ms, 0, 'x', 'auth.key.create',"
           " '', 'ok', '{}', hash, 'ff' FROM audit_events WHERE seq = 320");
  CHECK(verify_broken(&st) == 321);
  sql(dir, "DELETE FROM audit_events WHERE seq = 321");
  /* Insert a row in the middle (later rows renumbered) → named. */
  sql(dir, "UPDATE audit_events SET seq = -seq WHERE seq >= 200; "
           "UPDATE audit_events SET seq = 1 - seq WHERE seq < 0; "
           "INSERT INTO audit_events VALUES (200, 0, 0, 'x', 'a', '', 'ok', '{}', "
           "(SELECT hash FROM audit_events WHERE seq = 199), 'ee')");
  CHECK(verify_broken(&st) == 200);

  /* Appends after the chain was repaired continue it. */
  sql(dir, "DELETE FROM audit_events WHERE seq = 200; "
           "UPDATE audit_events SET seq = -seq WHERE seq > 200; "
           "UPDATE audit_events SET seq = -seq - 1 WHERE seq < 0");
  CHECK(verify_broken(&st) == 0);
  struct sbx_audit_row out;
  struct sbx_audit_event ev = {.action = "auth.denied", .outcome = "unauthenticated"};
  CHECK(sbx_audit_append(&st, &ev, &out, &err) == 0);
  CHECK(out.seq == THREADS * PER_THREAD + 1);
  CHECK(strcmp(out.actor, "anonymous") == 0 && out.tenant_id == 0);
  CHECK(verify_broken(&st) == 0);

  sbx_store_close(&st);
  sbx_rm_rf(dir);
}

/* ---- limiter, times, usage, metrics ---- */

static void test_limiter(void)
{
  sbx_audit_limiter_reset();
  uint64_t supp = 99;
  for (int i = 0; i < SBX_AUDIT_DENIALS_PER_MIN; i++)
    CHECK(sbx_audit_admit("src:10.0.0.1", &supp) && supp == 0);
  CHECK(!sbx_audit_admit("src:10.0.0.1", &supp));
  CHECK(!sbx_audit_admit("src:10.0.0.1", &supp));
  CHECK(sbx_audit_admit("src:10.0.0.2", &supp) && supp == 0);
  /* Many sources cannot add up to a flood either. */
  int admitted = 0;
  for (int i = 0; i < 2 * SBX_AUDIT_DENIALS_GLOBAL_PER_MIN; i++) {
    char key[32];
    snprintf(key, sizeof key, "src:10.1.%d.%d", i / 250, i % 250);
    admitted += sbx_audit_admit(key, &supp);
  }
  CHECK(admitted <= SBX_AUDIT_DENIALS_GLOBAL_PER_MIN);
  sbx_audit_limiter_reset();
}

static void test_times(void)
{
  int64_t t = 0;
  CHECK(sbx_usage_parse_time("1767225600", &t) == 0 && t == 1767225600);
  CHECK(sbx_usage_parse_time("2026-01-01T00:00:00Z", &t) == 0 && t == 1767225600);
  CHECK(sbx_usage_parse_time("2026-01-01T02:00:00+02:00", &t) == 0 && t == 1767225600);
  CHECK(sbx_usage_parse_time("2025-12-31T23:30:00.250-00:30", &t) == 0 && t == 1767225600);
  CHECK(sbx_usage_parse_time("2026-01-01", &t) < 0);
  CHECK(sbx_usage_parse_time("2026-01-01T00:00:00", &t) < 0);
  CHECK(sbx_usage_parse_time("12abc", &t) < 0);
  CHECK(sbx_usage_parse_time("", &t) < 0);
}

static int group_cb(void *ctx, const struct sbx_usage_group *g)
{
  json_t *arr = ctx;
  json_array_append_new(arr, json_pack("{s:s, s:I, s:f}", "key", g->key, "n",
                                       (json_int_t)g->records, "cpu", g->cpu_seconds));
  return 0;
}

static void test_usage_store(void)
{
  char dir[] = "/tmp/sbx-usage-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  struct sbx_store_handle st;
  struct sbx_error err = {0};
  CHECK(sbx_store_open(NULL, dir, &st, &err) == 0);
  const char *md[] = {"{\"project\":\"p1\",\"agent\":\"a\"}", "{\"project\":\"p1\"}",
                      "{\"project\":\"p2\",\"run\":7}", NULL};
  struct sbx_usage_row rows[4];
  for (int i = 0; i < 4; i++) {
    struct sbx_usage_input in = {.tenant_id = 5,
                                 .tenant = "t5",
                                 .kind = "exec",
                                 .source_id = "ses_1",
                                 .profile = i == 3 ? "container" : "process",
                                 .status = "succeeded",
                                 .metadata_json = md[i],
                                 .cpu_seconds = 1.0 + i,
                                 .duration_seconds = 2};
    CHECK(sbx_usage_record(&st, &in, &rows[i], &err) == 0);
    CHECK(strcmp(rows[i].delivery, "none") == 0); /* no outbox in this process */
  }
  CHECK(strcmp(rows[2].run, "7") == 0 && strcmp(rows[0].agent, "a") == 0);
  json_t *arr = json_array();
  CHECK(st.ops->usage_query(st.st, 5, "project", 0, 0, group_cb, arr, &err) == 0);
  char *txt = json_dumps(arr, JSON_COMPACT);
  CHECK_STR(txt, "[{\"key\":\"\",\"n\":1,\"cpu\":4.0},{\"key\":\"p1\",\"n\":2,\"cpu\":3.0},"
                 "{\"key\":\"p2\",\"n\":1,\"cpu\":3.0}]");
  free(txt);
  json_array_clear(arr);
  CHECK(st.ops->usage_query(st.st, 6, "profile", 0, 0, group_cb, arr, &err) == 0);
  CHECK(json_array_size(arr) == 0); /* another tenant sees nothing */
  CHECK(st.ops->usage_query(st.st, 5, "profile", 0, 1, group_cb, arr, &err) == 0);
  CHECK(json_array_size(arr) == 0); /* before the records */
  json_decref(arr);
  /* Outbox bookkeeping on "pending" rows. */
  struct sbx_usage_row p = rows[0];
  snprintf(p.id, sizeof p.id, "use_pending");
  snprintf(p.delivery, sizeof p.delivery, "pending");
  CHECK(st.ops->usage_insert(st.st, &p, &err) == 0);
  CHECK(st.ops->usage_insert(st.st, &p, &err) < 0 && err.code == SBX_E_CONFLICT);
  CHECK(st.ops->outbox_mark(st.st, "use_pending", false, sbx_wall_s() + 100, "HTTP 503", &err) ==
        0);
  CHECK(st.ops->outbox_mark(st.st, "use_nope", true, 0, NULL, &err) < 0 &&
        err.code == SBX_E_NOT_FOUND);
  sbx_store_close(&st);
  sbx_rm_rf(dir);
}

static void test_metrics(void)
{
  sbx_metrics_execution("p\"x", "succeeded", 0.5, 0.2);
  sbx_metrics_execution("p\"x", "succeeded", 0.25, 7);
  sbx_metrics_http("session_create", 201, 0.003);
  size_t len = 0;
  char *txt = sbx_metrics_render(&len);
  CHECK(txt && strlen(txt) == len);
  CHECK(strstr(txt, "sandbox_executions_total{profile=\"p\\\"x\",status=\"succeeded\"} 2\n"));
  CHECK(strstr(txt, "sandbox_cpu_seconds_total{profile=\"p\\\"x\"} 0.75\n"));
  CHECK(strstr(txt, "sandbox_duration_seconds_bucket{profile=\"p\\\"x\",le=\"0.25\"} 1\n"));
  CHECK(strstr(txt, "sandbox_duration_seconds_bucket{profile=\"p\\\"x\",le=\"5\"} 1\n"));
  CHECK(strstr(txt, "sandbox_duration_seconds_bucket{profile=\"p\\\"x\",le=\"10\"} 2\n"));
  CHECK(strstr(txt, "sandbox_duration_seconds_bucket{profile=\"p\\\"x\",le=\"+Inf\"} 2\n"));
  CHECK(strstr(txt, "sandbox_duration_seconds_count{profile=\"p\\\"x\"} 2\n"));
  CHECK(strstr(txt, "sandboxd_http_requests_total{route=\"session_create\",code=\"201\"} 1\n"));
  CHECK(strstr(txt, "# TYPE sandbox_sessions_active gauge\n"));
  CHECK(strstr(txt, "sandbox_network_decisions_total{decision=\"deny\",proto=\"tcp\"} 0\n"));
  free(txt);
}

int main(void)
{
  CHECK_CASE(test_canonical);
  CHECK_CASE(test_details);
  CHECK_CASE(test_chain);
  CHECK_CASE(test_limiter);
  CHECK_CASE(test_times);
  CHECK_CASE(test_usage_store);
  CHECK_CASE(test_metrics);
  return check_finish("audit");
}
