/* h_obs.c — the observability routes: GET /v1/audit,
 * GET /v1/audit/verify (admin keys), GET /v1/sandbox/usage (own tenant),
 * GET /metrics (open, or admin with config metrics_auth); and the
 * dispatcher's audit hook, sbx_api_audit(), which turns every mutation
 * and every refusal the API answers into an audit event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/envelope.h"
#include "api/handlers.h"
#include "api/router.h"
#include "common/util.h"
#include "core/core.h"

#define AUDIT_PAGE_DEFAULT 100
#define AUDIT_PAGE_MAX 1000

/* ---- GET /v1/audit ---- */

/* A non-negative integer query argument; def when absent. */
static int query_int(struct sbx_req *r, const char *name, long long def, long long max,
                     long long *out, struct sbx_error *err)
{
  const char *v = sbx_req_query(r, name);
  *out = def;
  if (!v)
    return 0;
  char *end;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || n < 0 || n > max) {
    sbx_err_field(err, name, "%s must be a whole number from 0 to %lld", name, max);
    return sbx_err_fr(err, "%s doit être un entier de 0 à %lld", name, max);
  }
  *out = n;
  return 0;
}

int sbx_h_audit_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  long long tenant, after, limit;
  if (query_int(r, "tenant", -1, INT64_MAX, &tenant, err) < 0 ||
      query_int(r, "after", 0, INT64_MAX, &after, err) < 0 ||
      query_int(r, "limit", AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX, &limit, err) < 0)
    return -1;
  if (limit == 0)
    limit = AUDIT_PAGE_DEFAULT;
  json_t *events;
  int64_t last;
  int n = sbx_core_audit_list(r->core, tenant, sbx_req_query(r, "action"), after, (int)limit,
                              &events, &last, err);
  if (n < 0)
    return -1;
  sbx_resp_json(out, 200,
                json_pack("{s:o, s:o}", "events", events, "next_cursor",
                          n == limit ? json_integer((json_int_t)last) : json_null()));
  return 0;
}

/* ---- GET /v1/audit/verify ---- */

int sbx_h_audit_verify(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *verdict;
  if (sbx_core_audit_verify(r->core, &verdict, err) < 0)
    return -1;
  sbx_resp_json(out, 200, verdict);
  return 0;
}

/* ---- GET /v1/sandbox/usage ---- */

static int time_arg(struct sbx_req *r, const char *name, int64_t *out, struct sbx_error *err)
{
  const char *v = sbx_req_query(r, name);
  *out = 0;
  if (!v || !*v)
    return 0;
  if (sbx_core_usage_parse_time(v, out) < 0) {
    sbx_err_field(err, name, "%s must be an RFC 3339 time or seconds since the epoch", name);
    return sbx_err_fr(err, "%s doit être une date RFC 3339 ou des secondes depuis l'époque",
                      name);
  }
  return 0;
}

int sbx_h_usage(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *group_by = sbx_req_query(r, "group_by");
  int64_t from, to;
  if (time_arg(r, "from", &from, err) < 0 || time_arg(r, "to", &to, err) < 0)
    return -1;
  json_t *o;
  if (sbx_core_usage_report(r->core, &r->who, group_by ? group_by : "profile", from, to, &o,
                            err) < 0)
    return -1;
  sbx_resp_json(out, 200, o);
  return 0;
}

/* ---- GET /metrics ---- */

int sbx_h_metrics(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  if (sbx_core_metrics_auth(r->core) && sbx_api_authenticate(r, true, err) < 0)
    return -1;
  size_t len = 0;
  char *txt = sbx_core_metrics_render(&len);
  if (!txt)
    return sbx_err_sys(err, ENOMEM, "metrics");
  sbx_resp_bytes(out, 200, txt, len, "text/plain; version=0.0.4; charset=utf-8");
  return 0;
}

/* ---- the audit hook ---- */

/* Routes whose success changes something, and the action they record.
 * Reads (GET) are not audited; the ports proxy forwards traffic to the
 * sandbox's own server, which changes nothing of the daemon's. */
static const struct {
  const char *route;
  const char *action;
} mutations[] = {
    {"session_create", "sandbox.session.create"},
    {"session_patch", "sandbox.session.patch"},
    {"session_delete", "sandbox.session.delete"},
    {"session_exec", "sandbox.execute"},
    {"files_put", "sandbox.files.write"},
    {"files_delete", "sandbox.files.delete"},
    {"files_mkdir", "sandbox.files.mkdir"},
    {"files_move", "sandbox.files.move"},
    {"archive_put", "sandbox.files.extract"},
    {"execution_create", "sandbox.execution.create"},
    {"execution_cancel", "sandbox.execution.cancel"},
    {"process_stdin", "sandbox.process.stdin"},
    {"process_signal", "sandbox.process.signal"},
    {"process_resize", "sandbox.process.resize"},
    {"context_create", "sandbox.context.create"},
    {"context_delete", "sandbox.context.delete"},
    {"context_run", "sandbox.context.run"},
    {"context_restart", "sandbox.context.restart"},
    {"image_pull", "image.pull"},
    {"image_gc", "image.gc"},
    {"image_delete", "image.delete"},
    {"tool_apply", "tool.apply"},
    {"tool_delete", "tool.delete"},
    {"tool_invoke", "tool.invoke"},
    /* The E2B-compatible surface (api/e2b*.c): the same actions as ours. */
    {"e2b_create", "sandbox.session.create"},
    {"e2b_kill", "sandbox.session.delete"},
    {"e2b_timeout", "sandbox.session.patch"},
    {"e2b_files_write", "sandbox.files.write"},
    {"e2b_proc_start", "sandbox.execute"},
    {"e2b_proc_input", "sandbox.process.stdin"},
    {"e2b_proc_signal", "sandbox.process.signal"},
    {"e2b_proc_update", "sandbox.process.resize"},
    {"e2b_fs_mkdir", "sandbox.files.mkdir"},
    {"e2b_fs_move", "sandbox.files.move"},
    {"e2b_fs_remove", "sandbox.files.delete"},
    {"e2b_execute", "sandbox.context.run"},
    {"e2b_ctx_create", "sandbox.context.create"},
    {"e2b_ctx_delete", "sandbox.context.delete"},
    {"e2b_ctx_restart", "sandbox.context.restart"},
};

static const char *mutation_action(const struct sbx_route *rt)
{
  if (!rt || !strcmp(rt->method, "GET") || !strcmp(rt->method, "HEAD"))
    return NULL;
  for (size_t i = 0; i < sizeof mutations / sizeof mutations[0]; i++)
    if (!strcmp(mutations[i].route, rt->name))
      return mutations[i].action;
  return NULL;
}

/* A refusal that is a policy decision rather than a plain error: limits
 * above the profile's ceiling, a network policy refused, quotas, rates,
 * missing rights. */
static bool is_policy_refusal(const struct sbx_error *err)
{
  switch (err->code) {
  case SBX_E_FORBIDDEN:
  case SBX_E_QUOTA:
  case SBX_E_RATE:
    return true;
  case SBX_E_INVALID:
    return !strncmp(err->field, "limits", 6) || !strncmp(err->field, "network", 7);
  default:
    return false;
  }
}

/* The object acted on: the new object's id for creates, the names an
 * apply wrote ("a,b"), else the route's parameters ("ses_…", "ses_…/42"). */
static void target_of(struct sbx_req *r, const struct sbx_resp *resp, char *buf, size_t len)
{
  json_t *body = resp && resp->kind == SBX_RESP_JSON ? resp->json : NULL;
  const char *id = json_string_value(json_object_get(body, "id"));
  json_t *results = json_object_get(body, "results"), *one;
  buf[0] = '\0';
  if (id && r->nparams == 0) {
    snprintf(buf, len, "%s", id);
    return;
  }
  size_t k, n = 0;
  json_array_foreach(results, k, one)
  {
    const char *name = json_string_value(json_object_get(one, "name"));
    if (name && n < len)
      n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? "," : "", name);
  }
  if (n)
    return;
  for (int i = 0; i < r->nparams && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "/" : "", r->params[i]);
}

static json_t *request_details(struct sbx_req *r, const struct sbx_resp *resp)
{
  json_t *d = json_pack("{s:s, s:s, s:s}", "route", r->route ? r->route->name : "unmatched",
                        "method", r->method, "request_id", r->request_id);
  const char *path = sbx_req_query(r, "path");
  if (path)
    json_object_set_new(d, "path", json_string(path));
  if (resp && resp->kind == SBX_RESP_JSON) {
    json_t *j = resp->json, *v;
    if ((v = json_object_get(j, "status")) && json_is_string(v))
      json_object_set(d, "status", v);
    if ((v = json_object_get(j, "exit_code")) && json_is_integer(v))
      json_object_set(d, "exit_code", v);
    if ((v = json_object_get(j, "profile")) && json_is_string(v))
      json_object_set(d, "profile", v);
    /* What a route named by its parameters made (a tool's execution). */
    if ((v = json_object_get(j, "id")) && json_is_string(v) && r->nparams > 0)
      json_object_set(d, "id", v);
    if ((v = json_object_get(j, "dry_run")) && json_is_true(v))
      json_object_set(d, "dry_run", v);
  } else if (resp && resp->kind == SBX_RESP_STREAM) {
    json_object_set_new(d, "stream", json_true());
  }
  /* PATCH: which settings changed ("network" is a policy change). */
  json_t *body = r->body_len && r->route && !strcmp(r->route->name, "session_patch")
                     ? json_loadb(r->body, r->body_len, 0, NULL)
                     : NULL;
  if (json_is_object(body)) {
    json_t *fields = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) json_array_append_new(fields, json_string(k));
    json_object_set_new(d, "fields", fields);
    if (json_object_get(body, "network"))
      json_object_set(d, "network", json_object_get(body, "network"));
  }
  json_decref(body);
  return d;
}

static void record(struct sbx_req *r, const char *action, const char *outcome,
                   const struct sbx_resp *resp, const struct sbx_error *err,
                   const char *limiter_key)
{
  uint64_t suppressed = 0;
  if (limiter_key && !sbx_core_audit_admit(limiter_key, &suppressed))
    return;
  char target[256];
  target_of(r, resp, target, sizeof target);
  json_t *d = request_details(r, resp);
  if (err) {
    json_object_set_new(d, "message", json_string(err->msg));
    if (err->field[0])
      json_object_set_new(d, "field", json_string(err->field));
  }
  if (suppressed)
    json_object_set_new(d, "suppressed_before", json_integer((json_int_t)suppressed));
  char addr[64];
  sbx_req_client_addr(r, addr, sizeof addr);
  json_object_set_new(d, "source", json_string(addr));
  sbx_core_audit_record(r->core, &r->who, action, target, outcome, d);
}

void sbx_api_audit(struct sbx_req *r, const struct sbx_resp *resp, const struct sbx_error *err)
{
  sbx_core_usage_tenant(&r->who);
  char key[96];
  bool admin_only = r->route && r->route->auth == SBX_AUTH_ADMIN && !r->who.admin;
  if (err &&
      (err->code == SBX_E_UNAUTHENTICATED || (err->code == SBX_E_FORBIDDEN && admin_only))) {
    char addr[64];
    sbx_req_client_addr(r, addr, sizeof addr);
    snprintf(key, sizeof key, "src:%s", addr); /* per client address, tenant or not */
    record(r, "auth.denied", sbx_envelope_code_name(err->code), NULL, err, key);
    return;
  }
  if (err && is_policy_refusal(err)) {
    snprintf(key, sizeof key, "tenant:%lld", (long long)r->who.tenant_id);
    record(r, "policy.denied", sbx_envelope_code_name(err->code), NULL, err, key);
    return;
  }
  const char *action = mutation_action(r->route);
  if (!action)
    return;
  if (!err) {
    record(r, action, "ok", resp, NULL, NULL);
    return;
  }
  /* A failed mutation attempt: recorded, but a tenant looping on errors
   * is rate-limited like refusals. */
  snprintf(key, sizeof key, "failed:%lld", (long long)r->who.tenant_id);
  record(r, action, sbx_envelope_code_name(err->code), NULL, err, key);
}
