/* e2b_api.c — the E2B control plane under /e2b/api (E2B_API_URL), mapped
 * onto our sessions: POST /v2/sandboxes creates a session (template →
 * profile and image, timeout → ttl_s, envVars → env, metadata kept),
 * GET /v2/sandboxes and /sandboxes list the caller's ready sessions,
 * GET|DELETE /sandboxes/{id}, POST /sandboxes/{id}/timeout and
 * /v2/sandboxes/{id}/connect act on one, GET /sandboxes/{id}/metrics
 * reads what it uses now; what sandboxd does not do
 * (pause, resume, snapshots, templates, volumes) is refused at once with
 * a message saying so.  Also GET /v1/compat/e2b, the discovery document. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b.h"
#include "api/handlers.h"
#include "common/quantity.h"
#include "common/util.h"
#include "core/core.h"

#define TEMPLATE_KEY "e2b_template" /* the template a session was made from, in its metadata */
#define LIST_MAX 100

int sbx_h_e2b_discovery(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)err;
  char origin[300], api[400], sbx[400];
  sbx_e2b_origin(r, origin, sizeof origin);
  snprintf(api, sizeof api, "%s%s", origin, SBX_E2B_API_PREFIX);
  snprintf(sbx, sizeof sbx, "%s%s", origin, SBX_E2B_ENVD_PREFIX);
  sbx_resp_json(out, 200,
                json_pack("{s:s, s:s, s:s, s:s, s:s}", "api_url", api, "sandbox_url", sbx,
                          "envd_version", SBX_E2B_ENVD_VERSION, "api_key_header", "X-API-Key",
                          "docs", "docs/compat/e2b.md"));
  return 0;
}

static int unsupported(struct sbx_error *err, const char *what, const char *why)
{
  sbx_err_set(err, SBX_E_METHOD, 0, "%s is not supported by sandboxd's E2B-compatible API: %s",
              what, why);
  return sbx_err_fr(err, "%s n'est pas pris en charge par l'API compatible E2B de sandboxd",
                    what);
}

/* ---- the sandbox object ---- */

static json_int_t cpu_count(json_t *limits)
{
  uint64_t m = 0;
  const char *c = json_string_value(json_object_get(limits, "cpu"));
  if (c && sbx_parse_cpu_millis(c, &m) == 0 && m > 0)
    return (json_int_t)((m + 999) / 1000);
  return 1;
}

static json_int_t memory_mb(json_t *limits)
{
  uint64_t b = 0;
  const char *m = json_string_value(json_object_get(limits, "memory"));
  if (m && sbx_parse_bytes(m, &b) == 0)
    return (json_int_t)(b >> 20);
  json_t *n = json_object_get(limits, "memory");
  return json_is_integer(n) ? json_integer_value(n) >> 20 : 0;
}

/* Our metadata without the template key, as E2B's map of strings. */
static json_t *user_metadata(json_t *md)
{
  json_t *o = json_object();
  const char *k;
  json_t *v;
  json_object_foreach(md, k, v) if (strcmp(k, TEMPLATE_KEY) != 0 && json_is_string(v))
      json_object_set(o, k, v);
  return o;
}

static json_t *sandbox_json(json_t *s)
{
  json_t *md = json_object_get(s, "metadata"), *lim = json_object_get(s, "limits");
  const char *tpl = json_string_value(json_object_get(md, TEMPLATE_KEY));
  const char *status = json_string_value(json_object_get(s, "status"));
  const char *profile = json_string_value(json_object_get(s, "profile"));
  const char *image = json_string_value(json_object_get(s, "image"));
  json_t *o =
      json_pack("{s:s, s:O?, s:s, s:O?, s:O?, s:I, s:I, s:I, s:o, s:s, s:s, s:n}", "templateID",
                tpl       ? tpl
                : profile ? profile
                          : "base",
                "sandboxID", json_object_get(s, "id"), "clientID", "sandboxd", "startedAt",
                json_object_get(s, "created_at"), "endAt", json_object_get(s, "expires_at"),
                "cpuCount", cpu_count(lim), "memoryMB", memory_mb(lim), "diskSizeMB",
                (json_int_t)0, "metadata", user_metadata(md), "state",
                status && !strcmp(status, "ready") ? "running" : "killed", "envdVersion",
                SBX_E2B_ENVD_VERSION, "domain");
  if (o && profile) /* ours, beside E2B's fields: what the sandbox really is */
    json_object_set_new(o, "profile", json_string(profile));
  if (o && image)
    json_object_set_new(o, "image", json_string(image));
  return o;
}

/* The create/connect answer: the ids and this sandbox's access token. */
static json_t *access_json(struct sbx_req *r, json_t *s)
{
  const char *id = json_string_value(json_object_get(s, "id"));
  char tok[SBX_E2B_TOKEN_MAX];
  sbx_e2b_token(&r->who, id, tok);
  json_t *o = sandbox_json(s);
  json_object_set_new(o, "envdAccessToken", json_string(tok));
  json_object_set_new(o, "trafficAccessToken", json_string(tok));
  return o;
}

/* ---- create ---- */

/* Fields of E2B's NewSandbox that would change what the sandbox is and
 * that sandboxd cannot honour: refused, never silently ignored. */
static int refuse_unsupported(json_t *body, struct sbx_error *err)
{
  if (json_is_true(json_object_get(body, "autoPause")))
    return unsupported(err, "autoPause",
                       "sandboxes are never paused; they end at their timeout");
  if (json_array_size(json_object_get(body, "volumeMounts")))
    return unsupported(err, "volumeMounts", "volumes do not exist in sandboxd yet");
  json_t *mcp = json_object_get(body, "mcp");
  if (mcp && !json_is_null(mcp))
    return unsupported(err, "mcp", "use sandboxd's own MCP server instead (docs/mcp.md)");
  json_t *net = json_object_get(body, "network");
  if (json_is_true(json_object_get(body, "allow_internet_access")) ||
      (net && !json_is_null(net) && json_object_size(net)))
    return unsupported(err, "network settings",
                       "sandboxes have no network unless an allowlist is set through "
                       "sandboxd's own API (PATCH /v1/sandbox/sessions/{id} {network})");
  return 0;
}

static int str_map(json_t *v, const char *field, struct sbx_error *err)
{
  if (!v || json_is_null(v))
    return 0;
  const char *k;
  json_t *x;
  if (!json_is_object(v))
    return sbx_err_field(err, field, "%s must be an object of strings", field);
  json_object_foreach(v, k,
                      x) if (!json_is_string(x)) return sbx_err_field(err, field,
                                                                      "%s.%s must be a string",
                                                                      field, k);
  return 0;
}

/* E2B's NewSandbox → our session create body. */
static json_t *session_body(json_t *in, struct sbx_error *err)
{
  json_t *tv = json_object_get(in, "templateID"), *md = json_object_get(in, "metadata");
  json_t *env = json_object_get(in, "envVars"), *to = json_object_get(in, "timeout");
  const char *tpl = json_is_null(tv) || !tv ? "base" : json_string_value(tv);
  char profile[64], image[512];
  if (!tpl) {
    sbx_err_field(err, "templateID", "templateID must be a string");
    return NULL;
  }
  if (refuse_unsupported(in, err) < 0 || str_map(md, "metadata", err) < 0 ||
      str_map(env, "envVars", err) < 0 || sbx_e2b_template(tpl, profile, image, err) < 0)
    return NULL;
  if (to && !json_is_null(to) && (!json_is_integer(to) || json_integer_value(to) <= 0)) {
    sbx_err_field(err, "timeout", "timeout must be a whole number of seconds above 0");
    return NULL;
  }
  json_t *b = json_object(), *m = json_is_object(md) ? json_copy(md) : json_object();
  json_object_set_new(m, TEMPLATE_KEY, json_string(tpl));
  json_object_set_new(b, "metadata", m);
  if (strcmp(profile, "@default") != 0)
    json_object_set_new(b, "profile", json_string(profile));
  if (image[0])
    json_object_set_new(b, "image", json_string(image));
  if (json_is_object(env))
    json_object_set(b, "env", env);
  if (json_is_integer(to))
    json_object_set(b, "ttl_s", to);
  return b;
}

int sbx_h_e2b_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, true, err);
  if (!in)
    return -1;
  json_t *body = session_body(in, err), *s = NULL;
  json_decref(in);
  if (!body)
    return -1;
  int rc = sbx_session_create(r->core, &r->who, body, &s, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  json_t *o = access_json(r, s);
  json_object_set(o, "id", json_object_get(s, "id")); /* the audit's target */
  json_decref(s);
  sbx_resp_json(out, 201, o);
  return 0;
}

/* ---- list ---- */

/* ?metadata=k%3Dv%26k2%3Dv2 (E2B: URL-encoded pairs): all must match. */
static bool metadata_matches(json_t *md, const char *q)
{
  if (!q || !*q)
    return true;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", q);
  char *save = NULL;
  for (char *p = strtok_r(buf, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(p, '=');
    if (!eq)
      return false;
    *eq = '\0';
    const char *v = json_string_value(json_object_get(md, p));
    if (!v || strcmp(v, eq + 1) != 0)
      return false;
  }
  return true;
}

static int list_sandboxes(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *state = sbx_req_query(r, "state");
  if (state && !strstr(state, "running")) { /* nothing is ever paused here */
    sbx_resp_json(out, 200, json_array());
    return 0;
  }
  const char *lim = sbx_req_query(r, "limit");
  long limit = lim ? strtol(lim, NULL, 10) : LIST_MAX;
  if (limit <= 0 || limit > LIST_MAX)
    limit = LIST_MAX;
  json_t *page = NULL;
  if (sbx_session_list(r->core, &r->who, "ready", sbx_req_query(r, "nextToken"), (int)limit,
                       &page, err) < 0)
    return -1;
  json_t *arr = json_array(), *s;
  size_t i;
  const char *md = sbx_req_query(r, "metadata"), *tpl = sbx_req_query(r, "template");
  json_array_foreach(json_object_get(page, "sessions"), i, s)
  {
    json_t *o = sandbox_json(s);
    if (metadata_matches(json_object_get(s, "metadata"), md) &&
        (!tpl || !strcmp(tpl, json_string_value(json_object_get(o, "templateID")))))
      json_array_append(arr, o);
    json_decref(o);
  }
  const char *next = json_string_value(json_object_get(page, "next_cursor"));
  if (next)
    out->headers = json_pack("[[s, s]]", "X-Next-Token", next);
  json_decref(page);
  sbx_resp_json(out, 200, arr);
  return 0;
}

int sbx_h_e2b_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return list_sandboxes(r, out, err);
}

/* ---- one sandbox ---- */

static int get_ready(struct sbx_req *r, json_t **s, struct sbx_error *err)
{
  if (sbx_session_get(r->core, &r->who, r->params[0], s, err) < 0)
    return -1;
  char st[32];
  snprintf(st, sizeof st, "%s", json_string_value(json_object_get(*s, "status")) ?: "unknown");
  if (!strcmp(st, "ready"))
    return 0;
  json_decref(*s);
  *s = NULL;
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "sandbox %s not found (it ended: %s)", r->params[0], st);
  return sbx_err_fr(err, "Bac à sable %s introuvable (terminé)", r->params[0]);
}

int sbx_h_e2b_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *s;
  if (get_ready(r, &s, err) < 0)
    return -1;
  sbx_resp_json(out, 200, sandbox_json(s));
  json_decref(s);
  return 0;
}

int sbx_h_e2b_kill(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *s;
  if (get_ready(r, &s, err) < 0) /* an ended sandbox is gone for E2B: 404, "not killed" */
    return -1;
  json_decref(s);
  if (sbx_session_delete(r->core, &r->who, r->params[0], err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

/* {timeout: seconds} → the session's ttl from now. */
static int set_timeout(struct sbx_req *r, json_t *in, json_t **s, struct sbx_error *err)
{
  json_t *to = json_object_get(in, "timeout");
  if (!to || json_is_null(to))
    return 0;
  if (!json_is_integer(to) || json_integer_value(to) <= 0)
    return sbx_err_field(err, "timeout", "timeout must be a whole number of seconds above 0");
  json_t *patch = json_pack("{s:O}", "ttl_s", to), *res = NULL;
  int rc = sbx_session_patch(r->core, &r->who, r->params[0], patch, &res, err);
  json_decref(patch);
  if (rc == 0 && s) {
    json_decref(*s);
    *s = res;
  } else {
    json_decref(res);
  }
  return rc;
}

int sbx_h_e2b_timeout(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, false, err);
  if (!in)
    return -1;
  if (!json_object_get(in, "timeout")) {
    json_decref(in);
    return sbx_err_field(err, "timeout", "timeout (seconds) is required");
  }
  int rc = set_timeout(r, in, NULL, err);
  json_decref(in);
  if (rc < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_e2b_connect(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, true, err), *s = NULL;
  if (!in)
    return -1;
  int rc = get_ready(r, &s, err);
  if (rc == 0)
    rc = set_timeout(r, in, &s, err);
  json_decref(in);
  if (rc < 0) {
    json_decref(s);
    return -1;
  }
  sbx_resp_json(out, 200, access_json(r, s));
  json_decref(s);
  return 0;
}

/* ---- metrics ---- */

/* ?start= / ?end= (unix seconds); -1 when absent. */
static int query_time(struct sbx_req *r, const char *name, int64_t *t, struct sbx_error *err)
{
  const char *v = sbx_req_query(r, name);
  char *end = NULL;
  *t = -1;
  if (!v)
    return 0;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || errno || n < 0)
    return sbx_err_field(err, name, "%s must be a unix time in seconds", name);
  *t = n;
  return 0;
}

/* One sample of what the sandbox uses now (core/session_metrics.c): no
 * history is kept, so a [start, end] that does not hold now answers []. */
int sbx_h_e2b_metrics(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  int64_t start, end;
  json_t *s, *m = NULL;
  if (query_time(r, "start", &start, err) < 0 || query_time(r, "end", &end, err) < 0)
    return -1;
  if (start >= 0 && end >= 0 && start > end)
    return sbx_err_field(err, "start", "start must not be after end");
  if (get_ready(r, &s, err) < 0) /* ended or another tenant's: 404 */
    return -1;
  json_decref(s);
  if (sbx_session_metrics(r->core, &r->who, r->params[0], &m, err) < 0)
    return -1;
  json_int_t t = json_integer_value(json_object_get(m, "timestamp"));
  char when[40];
  sbx_format_time((int64_t)t, when, sizeof when);
  json_t *arr = json_array();
  if ((start < 0 || start <= t) && (end < 0 || t <= end))
    json_array_append_new(arr, json_pack("{s:s, s:I, s:O, s:O, s:O, s:O, s:O, s:O?, s:O?}",
                                         "timestamp", when, "timestampUnix", t, "cpuCount",
                                         json_object_get(m, "cpu_count"), "cpuUsedPct",
                                         json_object_get(m, "cpu_used_pct"), "memUsed",
                                         json_object_get(m, "memory_used_bytes"), "memTotal",
                                         json_object_get(m, "memory_limit_bytes"), "memCache",
                                         json_object_get(m, "memory_cache_bytes"), "diskUsed",
                                         json_object_get(m, "disk_used_bytes"), "diskTotal",
                                         json_object_get(m, "disk_total_bytes")));
  json_decref(m);
  sbx_resp_json(out, 200, arr);
  return 0;
}

/* ---- what sandboxd does not do ---- */

int sbx_h_e2b_pause(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out;
  json_t *s;
  if (get_ready(r, &s, err) < 0) /* another tenant's sandbox is still 404 */
    return -1;
  json_decref(s);
  return unsupported(err, "pausing a sandbox",
                     "a sandbox runs until it is killed or its timeout passes");
}

int sbx_h_e2b_resume(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out;
  json_t *s;
  if (get_ready(r, &s, err) < 0)
    return -1;
  json_decref(s);
  return unsupported(err, "resuming a sandbox", "sandboxes are never paused");
}

int sbx_h_e2b_snapshot(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out;
  json_t *s;
  if (get_ready(r, &s, err) < 0)
    return -1;
  json_decref(s);
  return unsupported(err, "snapshots", "a sandbox's memory is never saved");
}

int sbx_h_e2b_templates(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out, (void)r;
  return unsupported(err, "template builds",
                     "templates are names the operator maps to profiles and images "
                     "(e2b_templates); build images with `sandboxd image build`");
}

int sbx_h_e2b_volumes(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out, (void)r;
  return unsupported(err, "volumes", "volumes do not exist in sandboxd yet");
}
