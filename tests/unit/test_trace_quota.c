/* test_trace_quota.c — W3C traceparent parsing, span parenting and the
 * TRACEPARENT entry, the park table, the OTLP JSON shape (obs/trace*), the
 * token bucket and the quota settings (core/quota*). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/util.h"
#include "core/quota.h"
#include "obs/trace.h"
#include "obs/trace_int.h"

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID "00f067aa0ba902b7"

static bool parses(const char *s)
{
  struct sbx_trace_ctx c;
  return sbx_traceparent_parse(s, &c) == 0;
}

static void test_traceparent(void)
{
  struct sbx_trace_ctx c;
  CHECK(sbx_traceparent_parse("00-" TID "-" PID "-01", &c) == 0);
  CHECK(c.trace_id[0] == 0x4b && c.trace_id[15] == 0x36);
  CHECK(c.span_id[0] == 0x00 && c.span_id[7] == 0xb7);
  CHECK(c.flags == 0x01);
  char out[SBX_TRACEPARENT_LEN + 1];
  sbx_traceparent_format(&c, out);
  CHECK_STR(out, "00-" TID "-" PID "-01");
  CHECK(parses("00-" TID "-" PID "-00")); /* not sampled: still valid */
  CHECK(!parses(NULL));
  CHECK(!parses(""));
  CHECK(!parses("01-" TID "-" PID "-01")); /* only version 00 */
  CHECK(!parses("ff-" TID "-" PID "-01"));
  CHECK(!parses("00-" TID "-" PID "-01-"));                         /* too long for 00 */
  CHECK(!parses("00-" TID "-" PID "-1"));                           /* too short */
  CHECK(!parses("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01")); /* uppercase */
  CHECK(!parses("00-00000000000000000000000000000000-" PID "-01")); /* zero trace id */
  CHECK(!parses("00-" TID "-0000000000000000-01"));                 /* zero parent id */
  CHECK(!parses("00_" TID "-" PID "-01"));
  CHECK(!parses("00-" TID "_" PID "-01"));
  CHECK(!parses("00-4bf92f3577b34da6a3ce929d0e0e473g-" PID "-01")); /* not hex */
  CHECK(!parses("00-" TID "-" PID "-0x"));
  CHECK(!parses(" 00-" TID "-" PID "-0"));
}

static void test_spans(void)
{
  struct sbx_trace_ctx parent, cur;
  sbx_traceparent_parse("00-" TID "-" PID "-01", &parent);
  CHECK(!sbx_trace_current(&cur));
  char env[96];
  CHECK(!sbx_trace_env_entry(env, sizeof env) && env[0] == '\0');

  struct sbx_span *req = sbx_trace_request_begin("POST", "00-" TID "-" PID "-01");
  CHECK(req && memcmp(req->ctx.trace_id, parent.trace_id, 16) == 0);
  CHECK(req->has_parent && memcmp(req->parent_id, parent.span_id, 8) == 0);
  CHECK(memcmp(req->ctx.span_id, parent.span_id, 8) != 0);
  CHECK(!req->recording); /* export is off in this test */

  /* A bad header starts a new trace. */
  struct sbx_span *bad = sbx_trace_request_begin("GET", "00-" TID "-" PID "-01x");
  CHECK(bad && !bad->has_parent && memcmp(bad->ctx.trace_id, parent.trace_id, 16) != 0);
  CHECK(bad->ctx.flags == 0x01);
  sbx_trace_request_end(bad, 200);

  /* Children of the entered span; TRACEPARENT names the innermost. */
  sbx_span_enter(req);
  CHECK(sbx_trace_current(&cur) && memcmp(cur.span_id, req->ctx.span_id, 8) == 0);
  /* Parked here (the request's context), continued later with no current span. */
  sbx_trace_park("exe_test", "alice");
  struct sbx_span *op = sbx_trace_op_begin("sandbox.exec", "alice", "process", NULL, true);
  CHECK(op && op->has_parent && memcmp(op->parent_id, req->ctx.span_id, 8) == 0);
  CHECK(memcmp(op->ctx.trace_id, parent.trace_id, 16) == 0);
  char want[96], tp[SBX_TRACEPARENT_LEN + 1];
  sbx_traceparent_format(&op->ctx, tp);
  snprintf(want, sizeof want, "TRACEPARENT=%s", tp);
  CHECK(sbx_trace_env_entry(env, sizeof env));
  CHECK_STR(env, want);
  CHECK(strncmp(env, "TRACEPARENT=00-" TID "-", 48) == 0);

  sbx_trace_op_end(op, NULL, NULL, "ok", NULL);
  CHECK(sbx_trace_current(&cur) && memcmp(cur.span_id, req->ctx.span_id, 8) == 0);
  sbx_span_leave(req);
  CHECK(!sbx_trace_current(&cur));
  struct sbx_span *ex = sbx_trace_op_begin_parked("sandbox.execution", "exe_test", 7, "process",
                                                  "{\"agent\":\"a\"}");
  CHECK(ex && ex->has_parent && memcmp(ex->parent_id, req->ctx.span_id, 8) == 0);
  sbx_trace_op_end(ex, "sandbox.execution.id", "exe_test", "ok", NULL);
  CHECK(!sbx_trace_current(&cur));
  char tenant[16];
  CHECK(!sbx_trace_unpark("exe_test", &cur, tenant, sizeof tenant)); /* taken once */
  struct sbx_span *orphan =
      sbx_trace_op_begin_parked("sandbox.execution", "exe_none", 7, "p", NULL);
  CHECK(orphan && !orphan->has_parent);
  sbx_trace_op_end(orphan, NULL, NULL, NULL, NULL);
  sbx_trace_request_end(req, 201);

  /* An unsampled parent propagates its flag. */
  struct sbx_span *u = sbx_trace_request_begin("GET", "00-" TID "-" PID "-00");
  CHECK(u && u->ctx.flags == 0 && !u->recording);
  sbx_trace_request_end(u, 200);
}

static const char *attr_value(json_t *span, const char *key, const char *kind)
{
  size_t i;
  json_t *a;
  json_array_foreach(
      json_object_get(span, "attributes"), i,
      a) if (strcmp(json_string_value(json_object_get(a, "key")), key) ==
             0) return json_string_value(json_object_get(json_object_get(a, "value"), kind));
  return NULL;
}

static void test_otlp_json(void)
{
  struct sbx_span *s = sbx_span_begin("POST /v1/sandbox/sessions", SBX_SPAN_SERVER, NULL);
  s->recording = true; /* as if export were on */
  sbx_span_set_str(s, "http.route", "/v1/sandbox/sessions");
  sbx_span_set_int(s, "http.response.status_code", 201);
  sbx_span_set_str(s, "http.route", "/v1/x"); /* set twice: last wins, one entry */
  sbx_span_set_error(s, "boom");
  s->end_ns = s->start_ns + 5;
  json_t *doc = sbx_trace_otlp_json(&s, 1, "svc");
  json_t *rs = json_array_get(json_object_get(doc, "resourceSpans"), 0);
  json_t *rattr =
      json_array_get(json_object_get(json_object_get(rs, "resource"), "attributes"), 0);
  CHECK_STR(json_string_value(json_object_get(rattr, "key")), "service.name");
  CHECK_STR(json_string_value(json_object_get(json_object_get(rattr, "value"), "stringValue")),
            "svc");
  json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
  json_t *sp = json_array_get(json_object_get(ss, "spans"), 0);
  CHECK(json_string_length(json_object_get(sp, "traceId")) == 32);
  CHECK(json_string_length(json_object_get(sp, "spanId")) == 16);
  CHECK(!json_object_get(sp, "parentSpanId"));
  CHECK(json_integer_value(json_object_get(sp, "kind")) == 2);
  CHECK(json_is_string(json_object_get(sp, "startTimeUnixNano")));
  unsigned long long t0 =
      strtoull(json_string_value(json_object_get(sp, "startTimeUnixNano")), NULL, 10);
  unsigned long long t1 =
      strtoull(json_string_value(json_object_get(sp, "endTimeUnixNano")), NULL, 10);
  CHECK(t1 == t0 + 5 && t0 > 1600000000ull * 1000000000ull);
  CHECK_STR(attr_value(sp, "http.route", "stringValue"), "/v1/x");
  CHECK_STR(attr_value(sp, "http.response.status_code", "intValue"), "201");
  CHECK(json_array_size(json_object_get(sp, "attributes")) == 2);
  CHECK(json_integer_value(json_object_get(json_object_get(sp, "status"), "code")) == 2);
  json_decref(doc);
  sbx_span_free(s);
}

static void test_bucket(void)
{
  struct sbx_token_bucket b = {0};
  unsigned retry = 0;
  uint64_t t = 1000000000ull, sec = 1000000000ull;
  /* rate 2/s, burst 3: three at once, then refused for ~0.5 s. */
  CHECK(sbx_token_bucket_take(&b, 2, 3, t, &retry));
  CHECK(sbx_token_bucket_take(&b, 2, 3, t, &retry));
  CHECK(sbx_token_bucket_take(&b, 2, 3, t, &retry));
  CHECK(!sbx_token_bucket_take(&b, 2, 3, t, &retry));
  CHECK(retry == 1);
  CHECK(!sbx_token_bucket_take(&b, 2, 3, t + sec / 4, &retry));
  CHECK(sbx_token_bucket_take(&b, 2, 3, t + sec / 2, &retry));
  /* A long pause refills to the burst, never beyond. */
  t += 100 * sec;
  for (int i = 0; i < 3; i++)
    CHECK(sbx_token_bucket_take(&b, 2, 3, t, &retry));
  CHECK(!sbx_token_bucket_take(&b, 2, 3, t, &retry));
  /* Slow rate: the wait is rounded up to whole seconds. */
  struct sbx_token_bucket s = {0};
  CHECK(sbx_token_bucket_take(&s, 0.1, 1, t, &retry));
  CHECK(!sbx_token_bucket_take(&s, 0.1, 1, t + sec, &retry));
  CHECK(retry == 9);
  CHECK(sbx_token_bucket_take(&s, 0.1, 1, t + 10 * sec, &retry));
  /* Time going backwards never adds tokens. */
  CHECK(!sbx_token_bucket_take(&s, 0.1, 1, t, &retry));
}

static void test_quota_config(void)
{
  static struct sbx_quota_config c;
  struct sbx_error err = {0};
  sbx_quota_config_defaults(&c);
  struct sbx_quota_limits l = sbx_quota_config_resolve(&c, "alice", 1000);
  CHECK(l.sessions == 1000 && l.executions == 0 && l.cpu_seconds_per_day == 0 && l.rps == 0);
  CHECK(l.burst == 1);
  CHECK(sbx_quota_config_set(&c, NULL, "listen", "x", &err) == 0);   /* not ours */
  CHECK(sbx_quota_config_set(&c, NULL, "sessions", "3", &err) == 0); /* alias: tenants only */
  CHECK(sbx_quota_config_set(&c, NULL, "quota_sessions", "5", &err) == 1);
  CHECK(sbx_quota_config_set(&c, NULL, "rate_limit_rps", "2.5", &err) == 1);
  CHECK(sbx_quota_config_set(&c, NULL, "quota_executions", "1.5", &err) == -1);
  CHECK(err.code == SBX_E_INVALID && strstr(err.msg, "quota_executions"));
  CHECK(sbx_quota_config_set(&c, NULL, "quota_cpu_seconds_per_day", "-1", &err) == -1);
  CHECK(sbx_quota_config_set(&c, NULL, "rate_limit_burst", "nan", &err) == -1);
  CHECK(sbx_quota_config_set(&c, "bob", "sessions", "0", &err) == 1);
  CHECK(sbx_quota_config_set(&c, "bob", "quota_cpu_seconds_per_day", "0.5", &err) == 1);
  CHECK(sbx_quota_config_set(&c, "bob", "burst", "10", &err) == 1);
  CHECK(sbx_quota_config_set(&c, "bob", "nope", "1", &err) == 0);
  l = sbx_quota_config_resolve(&c, "alice", 1000);
  CHECK(l.sessions == 5 && l.rps == 2.5 && l.burst == 3 && l.cpu_seconds_per_day == 0);
  l = sbx_quota_config_resolve(&c, "bob", 1000);
  CHECK(l.sessions == 0 && l.rps == 2.5 && l.burst == 10 && l.cpu_seconds_per_day == 0.5);

  /* What the daemon holds for tenants: [server] only, sizes and counts. */
  CHECK(c.res.output_memory == 0 && c.res.fds_per_tenant == 0); /* 0: the defaults */
  CHECK(sbx_quota_config_set(&c, NULL, "output_memory", "512Mi", &err) == 1);
  CHECK(sbx_quota_config_set(&c, NULL, "output_memory_per_tenant", "8Mi", &err) == 1);
  CHECK(sbx_quota_config_set(&c, NULL, "fds_per_session", "100", &err) == 1);
  CHECK(sbx_quota_config_set(&c, NULL, "fds_per_tenant", "300", &err) == 1);
  CHECK(c.res.output_memory == 512ULL << 20 && c.res.output_memory_per_tenant == 8ULL << 20);
  CHECK(c.res.fds_per_session == 100 && c.res.fds_per_tenant == 300);
  CHECK(sbx_quota_config_set(&c, NULL, "fds_per_tenant", "1.5", &err) == -1);
  CHECK(err.code == SBX_E_INVALID && strstr(err.msg, "fds_per_tenant"));
  CHECK(sbx_quota_config_set(&c, NULL, "output_memory", "lots", &err) == -1);
  CHECK(sbx_quota_config_set(&c, "bob", "fds_per_tenant", "5", &err) == 0); /* not per tenant */

  /* The profiles a tenant may use: [server]'s list, a tenant's own over it. */
  CHECK(sbx_quota_config_resolve(&c, "alice", 1000).profiles[0] == '\0'); /* unset: all */
  CHECK(sbx_quota_config_set(&c, NULL, "profiles", "a", &err) == 0); /* alias: tenants only */
  CHECK(sbx_quota_config_set(&c, NULL, "allowed_profiles", " container , gvisor,", &err) == 1);
  CHECK(sbx_quota_config_set(&c, "bob", "profiles", "process", &err) == 1);
  CHECK(strcmp(sbx_quota_config_resolve(&c, "alice", 1000).profiles, "container,gvisor") == 0);
  CHECK(strcmp(sbx_quota_config_resolve(&c, "bob", 1000).profiles, "process") == 0);
  CHECK(sbx_quota_config_set(&c, "eve", "profiles", "a;rm -rf", &err) == -1);
  CHECK(err.code == SBX_E_INVALID && strstr(err.msg, "profiles"));
  CHECK(sbx_quota_config_set(&c, "eve", "profiles", ",a", &err) == -1);
  char long_list[600];
  memset(long_list, 'x', sizeof long_list - 1);
  long_list[sizeof long_list - 1] = '\0';
  CHECK(sbx_quota_config_set(&c, "eve", "profiles", long_list, &err) == -1);
}

int main(void)
{
  CHECK_CASE(test_traceparent);
  CHECK_CASE(test_spans);
  CHECK_CASE(test_otlp_json);
  CHECK_CASE(test_bucket);
  CHECK_CASE(test_quota_config);
  return check_finish("trace_quota");
}
