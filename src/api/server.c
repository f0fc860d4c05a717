/* server.c — libmicrohttpd glue: checks the framing and the request-target
 * (http_check.c), keeps the request-head deadline and the per-client
 * connection count (conn_guard.c), accumulates the bounded body, assigns the
 * request id and language, authenticates, routes, and sends the handler's
 * response.  The only file that calls MHD_* besides response streaming.
 *
 * libmicrohttpd runs a thread per connection (a handler may block on an
 * exec, a long-poll or a stream) and waits with poll(), never select():
 * select() cannot watch an fd numbered 1024 or more, and a daemon with a
 * few hundred background processes has fds past that, so every new
 * connection would be reset.  epoll would do as well but libmicrohttpd does
 * not combine it with a thread per connection (MHD_USE_EPOLL is refused
 * with MHD_USE_THREAD_PER_CONNECTION). */
#include "api/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "api/auth.h"
#include "api/conn_guard.h"
#include "api/e2b.h"
#include "api/envelope.h"
#include "api/forward.h"
#include "api/handlers.h"
#include "api/http_check.h"
#include "api/router.h"
#include "common/log.h"
#include "common/util.h"
#include "core/core.h"
#include "core/fleet.h"
#include "core/profile.h"

/* A connection thread's stack.  glibc's default is RLIMIT_STACK (8 MiB)
 * of address space per thread; handlers need far less (the deepest is
 * jansson's parser, bounded at 2048 levels), and a flood of a few thousand
 * connections should not reserve tens of GiB. */
#define CONN_STACK_BYTES ((size_t)1 << 20)
/* libmicrohttpd's idle timeout: what bounds a body or a response that
 * stops moving.  The request head has its own, much shorter, deadline. */
#define IDLE_TIMEOUT_S 120u

struct sbx_server {
  struct MHD_Daemon *mhd;
  struct sbx_core *core;
  struct sbx_conn_guard *guard;
  size_t max_body;
  unsigned port;
};

/* server.c's own part of a request; handlers see only r. */
struct api_req {
  struct sbx_req r; /* first, so a struct sbx_req * is a struct api_req * */
  char *target;     /* the request-target as the client sent it (still encoded) */
  bool started;     /* the first access-handler call happened */
  bool authed;      /* authenticated before the body was read */
};

const char *sbx_req_header(struct sbx_req *r, const char *name)
{
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *sbx_req_query(struct sbx_req *r, const char *name)
{
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool sbx_req_flag(struct sbx_req *r, const char *name)
{
  const char *v = sbx_req_query(r, name);
  return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

struct kv_iter {
  sbx_kv_fn fn;
  void *ctx;
};

static enum MHD_Result kv_each(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
  struct kv_iter *it = cls;
  it->fn(it->ctx, key, value);
  return MHD_YES;
}

void sbx_req_each_header(struct sbx_req *r, sbx_kv_fn fn, void *ctx)
{
  struct kv_iter it = {fn, ctx};
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, kv_each, &it);
}

void sbx_req_each_query(struct sbx_req *r, sbx_kv_fn fn, void *ctx)
{
  struct kv_iter it = {fn, ctx};
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, kv_each, &it);
}

void sbx_req_client_addr(struct sbx_req *r, char *buf, size_t len)
{
  buf[0] = '\0';
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  if (sa && sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
              (socklen_t)len);
  else if (sa && sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
              (socklen_t)len);
}

int sbx_req_client_fd(struct sbx_req *r)
{
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? (int)ci->connect_fd : -1;
}

json_t *sbx_req_json(struct sbx_req *r, bool allow_empty, struct sbx_error *err)
{
  if (r->body_len == 0) {
    if (allow_empty)
      return json_object();
    sbx_err_field(err, "body", "a JSON object body is required");
    sbx_err_fr(err, "Requête invalide : un corps JSON (objet) est requis");
    return NULL;
  }
  json_error_t je;
  json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
  if (!j) {
    sbx_err_field(err, "body", "malformed JSON at line %d column %d: %s", je.line, je.column,
                  je.text);
    sbx_err_fr(err, "Requête invalide : JSON mal formé (ligne %d, colonne %d)", je.line,
               je.column);
    return NULL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    sbx_err_field(err, "body", "the body must be a JSON object");
    sbx_err_fr(err, "Requête invalide : le corps doit être un objet JSON");
    return NULL;
  }
  return j;
}

void sbx_resp_json(struct sbx_resp *out, int status, json_t *body)
{
  out->status = status;
  out->kind = SBX_RESP_JSON;
  out->json = body;
}

/* What every response with a body of len bytes sets. */
static void resp_body(struct sbx_resp *out, int status, enum sbx_resp_kind kind, size_t len,
                      const char *content_type)
{
  out->status = status;
  out->kind = kind;
  out->len = len;
  out->content_type = content_type;
}

void sbx_resp_bytes(struct sbx_resp *out, int status, char *bytes, size_t len,
                    const char *content_type)
{
  resp_body(out, status, SBX_RESP_BYTES, len, content_type);
  out->bytes = bytes;
}

void sbx_resp_empty(struct sbx_resp *out, int status)
{
  out->status = status;
  out->kind = SBX_RESP_EMPTY;
}

void sbx_resp_fd(struct sbx_resp *out, int status, int fd, uint64_t len,
                 const char *content_type)
{
  resp_body(out, status, SBX_RESP_FD, (size_t)len, content_type);
  out->fd = fd;
}

void sbx_resp_error(struct sbx_req *r, struct sbx_resp *out, const struct sbx_error *err)
{
  if (sbx_e2b_owns(r)) { /* E2B's SDKs parse E2B's shapes */
    sbx_e2b_error(r, out, err);
    return;
  }
  json_t *env = sbx_envelope_build(err, r->lang, r->request_id);
  if (r->error_details)
    json_object_update(json_object_get(json_object_get(env, "error"), "details"),
                       r->error_details);
  sbx_resp_json(out, sbx_envelope_status(err->code), env);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
  struct sbx_resp *resp = cls;
  long n = resp->stream(resp->stream_ctx, pos, buf, max);
  if (n == -2) /* the source broke: close without the final chunk */
    return MHD_CONTENT_READER_END_WITH_ERROR;
  return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void stream_free(void *cls)
{
  struct sbx_resp *resp = cls;
  if (resp->stream_free)
    resp->stream_free(resp->stream_ctx);
  free(resp);
}

static struct MHD_Response *build_response(struct sbx_resp *resp)
{
  struct MHD_Response *m = NULL;
  const char *ctype = resp->content_type;
  switch (resp->kind) {
  case SBX_RESP_JSON: {
    char *txt = json_dumps(resp->json, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(resp->json);
    resp->json = NULL;
    if (!txt)
      return NULL;
    size_t n = strlen(txt);
    txt[n] = '\n'; /* a newline is friendlier to curl users; dumps NUL-terminated */
    m = MHD_create_response_from_buffer(n + 1, txt, MHD_RESPMEM_MUST_FREE);
    ctype = "application/json";
    break;
  }
  case SBX_RESP_BYTES:
    m = MHD_create_response_from_buffer(resp->len, resp->bytes ? resp->bytes : (char *)"",
                                        resp->bytes ? MHD_RESPMEM_MUST_FREE
                                                    : MHD_RESPMEM_PERSISTENT);
    resp->bytes = NULL;
    break;
  case SBX_RESP_FD:
    m = MHD_create_response_from_fd((uint64_t)resp->len, resp->fd);
    resp->fd = -1;
    break;
  case SBX_RESP_EMPTY:
    m = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    break;
  case SBX_RESP_STREAM: {
    struct sbx_resp *copy = malloc(sizeof *copy);
    if (!copy)
      return NULL;
    *copy = *resp;
    m = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, copy,
                                          stream_free);
    resp->stream_free = NULL;
    break;
  }
  }
  if (m && ctype)
    MHD_add_response_header(m, "Content-Type", ctype);
  size_t i;
  json_t *h;
  json_array_foreach(m ? resp->headers : NULL, i, h)
  { /* e.g. proxied upstream headers */
    const char *k = json_string_value(json_array_get(h, 0));
    const char *v = json_string_value(json_array_get(h, 1));
    if (k && v)
      MHD_add_response_header(m, k, v);
  }
  if (m && resp->kind == SBX_RESP_STREAM && !resp->headers) { /* no proxy may buffer it */
    MHD_add_response_header(m, "Cache-Control", "no-cache");
    MHD_add_response_header(m, "X-Accel-Buffering", "no");
  }
  return m;
}

static enum MHD_Result send_resp(struct sbx_req *r, struct sbx_resp *resp)
{
  struct MHD_Response *m = build_response(resp);
  if (!m) {
    json_decref(resp->headers);
    return MHD_NO;
  }
  MHD_add_response_header(m, "X-Request-Id", r->request_id);
  if (resp->location[0])
    MHD_add_response_header(m, "Location", resp->location);
  r->status_sent = resp->status;
  enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)resp->status, m);
  MHD_destroy_response(m);
  json_decref(resp->headers);
  resp->headers = NULL;
  return ret;
}

static enum MHD_Result send_error(struct sbx_req *r, const struct sbx_error *err)
{
  struct sbx_resp resp = {.fd = -1};
  sbx_api_audit(r, NULL, err); /* refusals and failed mutations */
  sbx_resp_error(r, &resp, err);
  if (err->code == SBX_E_UNAUTHENTICATED) /* RFC 6750 §3; MCP clients read it */
    resp.headers = json_pack("[[s, s]]", "WWW-Authenticate", "Bearer realm=\"sandboxd\"");
  return send_resp(r, &resp);
}

/* Once authenticated, the span learns the tenant and the tenant's
 * request rate is checked (core/quota.h). */
static int after_auth(struct sbx_req *r, unsigned *retry_s, struct sbx_error *err)
{
  sbx_core_request_tenant(r->span, r->who.tenant);
  if (r->from_node) /* counted by the node the caller called */
    return sbx_forward_body_ok(r, err);
  return sbx_quota_request(r->core, &r->who, retry_s, err);
}

/* ---- the fleet: requests for objects another node owns ---- */

static bool session_route(const struct sbx_route *rt)
{
  return strncmp(rt->pattern, "/v1/sandbox/sessions/{", 22) == 0;
}

/* The profile a session create asks for (the default when it names none). */
static void create_profile(struct sbx_req *r, char *buf, size_t len)
{
  json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
  const char *p = json_string_value(json_object_get(body, "profile"));
  snprintf(buf, len, "%s", p ? p : sbx_core_profiles(r->core)->default_name);
  json_decref(body);
}

/* A session create: placed on a node of the fleet, forwarded there unless
 * it is this one.  1: *resp is the answer (forwarded), 0: run the handler
 * here (r->placed_here), -1: err. */
static int place_create(struct sbx_req *r, struct sbx_resp *resp, struct sbx_error *err)
{
  char profile[64];
  create_profile(r, profile, sizeof profile);
  if (!sbx_profile_find(sbx_core_profiles(r->core), profile, NULL))
    return 0; /* the handler here says what is wrong with it */
  struct sbx_fleet_placement pl;
  if (sbx_fleet_place(r->core, profile, &pl, err) < 0)
    return -1;
  sbx_core_audit_record(r->core, &r->who, "sandbox.session.place", pl.to.node, "ok",
                        json_incref(pl.decision));
  int rc = 0;
  if (pl.here)
    r->placed_here = true;
  else if (sbx_forward(r, &pl.to, true, resp, err) == 0)
    rc = 1;
  else {
    sbx_fleet_unplace(r->core, pl.to.node);
    rc = -1;
  }
  sbx_fleet_placement_free(&pl);
  return rc;
}

/* 1: forwarded (*resp filled), 0: served here, -1: err. */
static int fleet_route(struct sbx_req *r, const struct sbx_route *rt, struct sbx_resp *resp,
                       struct sbx_error *err)
{
  if (!sbx_fleet_on(r->core) || r->from_node)
    return 0;
  if (strcmp(rt->name, "session_create") == 0)
    return place_create(r, resp, err);
  struct sbx_fleet_target to;
  int where = 0;
  if (session_route(rt) && r->nparams > 0)
    where = sbx_fleet_session_elsewhere(r->core, &r->who, r->params[0], &to, err);
  else if (strcmp(rt->name, "execution_cancel") == 0)
    where = sbx_fleet_execution_elsewhere(r->core, &r->who, r->params[0], &to, err);
  if (where <= 0)
    return where;
  if (sbx_forward(r, &to, false, resp, err) == 0)
    return 1;
  /* Its node does not answer (dead, not declared yet): a read of the
   * session is answered from the store here; anything else gets the 502
   * at once, never a hang. */
  return strcmp(rt->name, "session_get") == 0 ? 0 : -1;
}

static enum MHD_Result send_rate_limited(struct sbx_req *r, const struct sbx_error *err,
                                         unsigned retry_s)
{
  struct sbx_resp resp = {.fd = -1};
  sbx_api_audit(r, NULL, err); /* a rate refusal is a policy decision */
  sbx_resp_error(r, &resp, err);
  char secs[16];
  snprintf(secs, sizeof secs, "%u", retry_s);
  resp.headers = json_pack("[[s, s]]", "Retry-After", secs);
  return send_resp(r, &resp);
}

static int authenticate(struct sbx_req *r, enum sbx_auth how, struct sbx_error *err)
{
  /* A node of the fleet vouches for the caller (api/forward.h); a request
   * that claims to and cannot prove it is refused, never tried as a key. */
  if (sbx_forward_claimed(r)) {
    if (sbx_forward_authenticate(r, err) < 0)
      return -1;
    if (how == SBX_AUTH_ADMIN && !r->who.admin)
      return sbx_err_set(err, SBX_E_FORBIDDEN, 0, "this route needs an admin key");
    return 0;
  }
  if (how == SBX_AUTH_E2B_KEY || how == SBX_AUTH_E2B_SANDBOX)
    return sbx_e2b_authenticate(r, how == SBX_AUTH_E2B_SANDBOX, err);
  return sbx_api_authenticate(r, how == SBX_AUTH_ADMIN, err);
}

static bool valid_request_id(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n >= 40)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '-' || s[i] == '_' || (s[i] >= '0' && s[i] <= '9') ||
          (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
      return false;
  return true;
}

/* Called as soon as the request line is parsed, before libmicrohttpd
 * decodes it: the one place the raw target can be kept.  What it returns
 * is the request's con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
  (void)cls, (void)c;
  struct api_req *a = calloc(1, sizeof *a);
  if (a && !(a->target = strdup(uri))) {
    free(a);
    return NULL;
  }
  return a;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
  struct sbx_server *srv = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ca =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    *socket_ctx =
        ci ? sbx_conn_guard_add(srv->guard, (int)ci->connect_fd, ca ? ca->client_addr : NULL)
           : NULL;
  } else {
    sbx_conn_guard_remove(srv->guard, *socket_ctx); /* before MHD closes the fd */
    *socket_ctx = NULL;
  }
}

static struct sbx_conn_slot *slot_of(struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

static void req_init(struct api_req *a, struct sbx_server *srv, struct MHD_Connection *c,
                     const char *url, const char *method)
{
  struct sbx_req *r = &a->r;
  a->started = true;
  r->conn = c;
  r->core = srv->core;
  r->target = a->target;
  r->start_ns = sbx_now_ns();
  snprintf(r->method, sizeof r->method, "%s", method);
  snprintf(r->path, sizeof r->path, "%s", url);
  const char *rid = sbx_req_header(r, "X-Request-Id");
  if (rid && valid_request_id(rid))
    snprintf(r->request_id, sizeof r->request_id, "%s", rid);
  else
    sbx_random_id("req", r->request_id, sizeof r->request_id);
  sbx_envelope_lang(sbx_req_header(r, "Accept-Language"), r->lang);
  r->span = sbx_core_request_begin(method, sbx_req_header(r, "traceparent"));
}

static int append_body(struct sbx_server *srv, struct sbx_req *r, const char *data, size_t n)
{
  if (r->body_too_large)
    return 0;
  if (r->body_len + n > srv->max_body) {
    r->body_too_large = true;
    free(r->body);
    r->body = NULL;
    r->body_len = r->body_cap = 0;
    return 0;
  }
  if (r->body_len + n + 1 > r->body_cap) {
    size_t cap = r->body_cap ? r->body_cap : 4096;
    while (cap < r->body_len + n + 1)
      cap *= 2;
    if (cap > srv->max_body + 1)
      cap = srv->max_body + 1;
    char *nb = realloc(r->body, cap);
    if (!nb)
      return -1;
    r->body = nb;
    r->body_cap = cap;
  }
  memcpy(r->body + r->body_len, data, n);
  r->body_len += n;
  r->body[r->body_len] = '\0';
  return 0;
}

static int too_large(struct sbx_server *srv, struct sbx_error *err)
{
  sbx_err_set(err, SBX_E_TOO_LARGE, 0, "request body exceeds the limit of %zu bytes",
              srv->max_body);
  return sbx_err_fr(err, "Contenu trop volumineux : le corps dépasse la limite de %zu octets",
                    srv->max_body);
}

static enum MHD_Result dispatch(struct sbx_server *srv, struct api_req *a)
{
  struct sbx_req *r = &a->r;
  struct sbx_error err = {0};
  bool wrong_method;
  const struct sbx_route *rt = sbx_route_match(r->method, r->path, r, &wrong_method);
  if (!rt) {
    if (wrong_method) {
      sbx_err_set(&err, SBX_E_METHOD, 0, "method %s is not allowed on %s", r->method, r->path);
      sbx_err_fr(&err, "Méthode %s non autorisée sur %s", r->method, r->path);
    } else {
      sbx_err_set(&err, SBX_E_NOT_FOUND, 0, "no such route: %s %s", r->method, r->path);
      sbx_err_fr(&err, "Route inconnue : %s %s", r->method, r->path);
    }
    return send_error(r, &err);
  }
  r->route = rt;
  sbx_core_request_route(r->span, r->method, rt->pattern);
  if (rt->auth != SBX_AUTH_NONE && !a->authed && authenticate(r, rt->auth, &err) < 0)
    return send_error(r, &err);
  unsigned retry_s = 0;
  if (rt->auth != SBX_AUTH_NONE && after_auth(r, &retry_s, &err) < 0)
    return err.code == SBX_E_RATE ? send_rate_limited(r, &err, retry_s) : send_error(r, &err);
  if (r->body_too_large) {
    too_large(srv, &err);
    return send_error(r, &err);
  }
  if (rt->auth != SBX_AUTH_NONE && sbx_core_is_stopping(srv->core)) {
    sbx_err_set(&err, SBX_E_NOT_READY, 0, "sandboxd is shutting down; retry on the next start");
    sbx_err_fr(&err, "sandboxd s'arrête ; réessayez au prochain démarrage");
    return send_error(r, &err);
  }
  struct sbx_resp resp = {.fd = -1};
  int fwd = rt->auth != SBX_AUTH_NONE ? fleet_route(r, rt, &resp, &err) : 0;
  if (fwd < 0)
    return send_error(r, &err);
  if (fwd > 0)
    return send_resp(r, &resp); /* the owner audited it */
  if (rt->handler(r, &resp, &err) < 0) {
    if (err.code == SBX_E_NONE)
      sbx_err_set(&err, SBX_E_INTERNAL, 0, "internal error");
    if (err.code == SBX_E_INTERNAL)
      sbx_error("api", "%s %s [%s]: %s", r->method, r->path, r->request_id, err.msg);
    return send_error(r, &err);
  }
  if (resp.kind == SBX_RESP_JSON && !resp.json) { /* e.g. a json_pack that failed */
    sbx_error("api", "%s %s [%s]: the handler built no JSON body", r->method, r->path,
              r->request_id);
    sbx_err_set(&err, SBX_E_INTERNAL, 0, "internal error: the response could not be encoded");
    json_decref(resp.headers);
    return send_error(r, &err);
  }
  sbx_api_audit(r, &resp, NULL); /* a mutation that succeeded */
  return send_resp(r, &resp);
}

static enum MHD_Result framing_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
  (void)kind;
  sbx_http_framing_add(cls, key, value);
  return MHD_YES;
}

/* RFC 9112 §6.1: a request whose body length two parties could read
 * differently is refused, and its connection closed (an answer queued in
 * the first handler call makes libmicrohttpd discard the rest and close). */
static int check_framing(struct sbx_req *r, struct sbx_error *err)
{
  struct sbx_framing fr = {0};
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, framing_cb, &fr);
  const char *field;
  const char *why = sbx_http_framing_verdict(&fr, &field);
  if (!why)
    return 0;
  sbx_err_field(err, field, "malformed request framing: %s", why);
  return sbx_err_fr(err,
                    "Requête invalide : en-têtes de longueur du corps ambigus ou invalides (%s)",
                    field);
}

/* Printable ASCII of s, for a message that must stay valid UTF-8. */
static void printable(const char *s, size_t n, char *out, size_t len)
{
  size_t o = 0;
  for (size_t i = 0; i < n && s[i] && o + 1 < len; i++)
    out[o++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  out[o] = '\0';
}

/* Undecodable path segments and query parameters are 400 naming them,
 * before any handler sees a value libmicrohttpd decoded leniently.  The
 * ports proxy forwards its path and query to the sandbox's server, so
 * there any byte may be meant; elsewhere values are UTF-8 text. */
static int check_target(struct api_req *a, struct sbx_error *err)
{
  struct sbx_req *r = &a->r;
  if (strlen(r->path) >= sizeof r->path - 1) {
    sbx_err_field(err, "url", "the request path is longer than %zu bytes", sizeof r->path - 2);
    return sbx_err_fr(err, "Requête invalide : chemin de plus de %zu octets",
                      sizeof r->path - 2);
  }
  bool wrong;
  const struct sbx_route *rt = sbx_route_match(r->method, r->path, r, &wrong);
  struct sbx_target_fault f;
  if (!a->target ||
      sbx_http_check_target(a->target, !(rt && rt->handler == sbx_h_port_proxy), &f) == 0)
    return 0;
  char name[64] = "query", shown[64];
  bool named = false;
  if (f.in_query && f.name[0]) {
    snprintf(name, sizeof name, "%s", f.name);
  } else if (!f.in_query) {
    size_t pl = strcspn(a->target, "?");
    char *raw = strndup(a->target, pl);
    named = raw && sbx_route_segment_name(raw, f.segment, name, sizeof name);
    if (!named)
      snprintf(name, sizeof name, "url");
    free(raw);
  }
  printable(name, sizeof name, shown, sizeof shown);
  if (f.in_query && !f.name[0])
    sbx_err_field(err, "query", "a query parameter's name holds %s", f.kind);
  else if (f.in_query)
    sbx_err_field(err, shown, "query parameter '%s' holds %s", shown, f.kind);
  else if (named)
    sbx_err_field(err, shown, "path parameter '%s' holds %s", shown, f.kind);
  else
    sbx_err_field(err, shown, "path segment %zu holds %s", f.segment + 1, f.kind);
  return sbx_err_fr(err,
                    "Requête invalide : « %s » ne se décode pas (encodage %% ou UTF-8 invalide)",
                    shown);
}

static bool has_body(struct sbx_req *r)
{
  const char *cl = sbx_req_header(r, "Content-Length");
  return sbx_req_header(r, "Transfer-Encoding") || (cl && strtoull(cl, NULL, 10) > 0);
}

/* A body is read only from a client that holds a key (or before the
 * request deadline): authenticating on the head keeps a stranger from
 * holding a connection by trickling a 32 MiB body.  A failure here answers
 * nothing yet; dispatch authenticates again and answers as always. */
static bool auth_before_body(struct api_req *a)
{
  struct sbx_req *r = &a->r;
  bool wrong;
  const struct sbx_route *rt = sbx_route_match(r->method, r->path, r, &wrong);
  if (!rt || rt->auth == SBX_AUTH_NONE)
    return false;
  struct sbx_error err = {0};
  sbx_core_request_enter(r->span);
  a->authed = authenticate(r, rt->auth, &err) == 0;
  sbx_core_request_leave(r->span);
  if (!a->authed)
    memset(&r->who, 0, sizeof r->who);
  return a->authed;
}

static enum MHD_Result first_call(struct sbx_server *srv, struct api_req *a,
                                  struct MHD_Connection *c, const char *url, const char *method)
{
  struct sbx_req *r = &a->r;
  req_init(a, srv, c, url, method);
  struct sbx_error err = {0};
  if (check_framing(r, &err) < 0 || check_target(a, &err) < 0)
    return send_error(r, &err);
  const char *cl = sbx_req_header(r, "Content-Length");
  if (cl && strtoull(cl, NULL, 10) > srv->max_body) {
    /* Answer before reading a byte of an oversized body. */
    r->body_too_large = true;
    too_large(srv, &err);
    return send_error(r, &err);
  }
  if (!has_body(r) || auth_before_body(a))
    sbx_conn_guard_disarm(srv->guard, slot_of(c));
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
  (void)version;
  struct sbx_server *srv = cls;
  struct api_req *a = *con_cls;
  if (!a)
    return MHD_NO; /* on_uri ran out of memory */
  struct sbx_req *r = &a->r;
  if (!a->started)
    return first_call(srv, a, c, url, method);
  if (*upload_size) {
    if (r->status_sent == 0 && append_body(srv, r, upload_data, *upload_size) < 0)
      return MHD_NO;
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->status_sent)
    return MHD_YES;
  sbx_conn_guard_disarm(srv->guard, slot_of(c)); /* the whole request is in */
  sbx_core_request_enter(r->span);               /* core's spans are children of the request's */
  enum MHD_Result ret = dispatch(srv, a);
  sbx_core_request_leave(r->span);
  return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
  (void)toe;
  struct sbx_server *srv = cls;
  struct api_req *a = *con_cls;
  /* A keep-alive connection's next request is due within the deadline too:
   * an idle connection costs a thread as much as a half-sent head. */
  sbx_conn_guard_arm(srv->guard, slot_of(c));
  if (!a)
    return;
  struct sbx_req *r = &a->r;
  if (a->started) {
    uint64_t us = (sbx_now_ns() - r->start_ns) / 1000;
    sbx_core_observe_http(srv->core, r->route ? r->route->name : "unmatched", r->status_sent,
                          us);
    sbx_core_request_end(r->span, r->status_sent);
    sbx_debug("http", "%s %s -> %d (%llu us) [%s]", r->method, r->path, r->status_sent,
              (unsigned long long)us, r->request_id);
  }
  free(r->body);
  json_decref(r->error_details);
  free(a->target);
  free(a);
  *con_cls = NULL;
}

static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len,
                          struct sbx_error *err)
{
  char host[256], port[16];
  const char *colon = strrchr(listen, ':');
  if (!colon || colon[1] == '\0')
    return sbx_err_set(err, SBX_E_INVALID, 0, "listen address %s: expected HOST:PORT", listen);
  snprintf(port, sizeof port, "%s", colon + 1);
  size_t hl = (size_t)(colon - listen);
  if (hl >= sizeof host)
    return sbx_err_set(err, SBX_E_INVALID, 0, "listen address %s: host too long", listen);
  memcpy(host, listen, hl);
  host[hl] = '\0';
  if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res;
  int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
  if (rc != 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "listen address %s: %s", listen, gai_strerror(rc));
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

/* libmicrohttpd's own messages ("Server reached connection limit" for each
 * refused connection during a flood) go to our log, at most a few a
 * second so that a flood cannot fill the disk through it. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
  (void)cls;
  static uint64_t window_ns;
  static unsigned in_window, dropped;
  uint64_t now = sbx_now_ns();
  if (now - __atomic_load_n(&window_ns, __ATOMIC_RELAXED) > 1000000000ULL) {
    __atomic_store_n(&window_ns, now, __ATOMIC_RELAXED);
    unsigned d = __atomic_exchange_n(&dropped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&in_window, 0, __ATOMIC_RELAXED);
    if (d)
      sbx_warn("http", "%u more libmicrohttpd messages were not logged", d);
  }
  if (__atomic_fetch_add(&in_window, 1, __ATOMIC_RELAXED) >= 5) {
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  sbx_warn("http", "libmicrohttpd: %s", msg);
}

/* Every connection holds an fd (and sessions hold many more): say so when
 * the fd limit cannot hold the connection limit. */
static void log_limits(const struct sbx_server_config *cfg, unsigned max_conn)
{
  struct rlimit rl = {0};
  getrlimit(RLIMIT_NOFILE, &rl);
  sbx_info("http",
           "up to %u connections (%u per client address (/64 for IPv6), 0 = no limit), "
           "request head due within %u s, fd limit %llu",
           max_conn, cfg->max_connections_per_client, cfg->head_timeout_s,
           (unsigned long long)rl.rlim_cur);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)max_conn + 1024)
    sbx_warn("http",
             "the fd limit (%llu) leaves little room beyond max_connections (%u): "
             "raise LimitNOFILE / ulimit -n",
             (unsigned long long)rl.rlim_cur, max_conn);
}

int sbx_server_start(const struct sbx_server_config *cfg, struct sbx_core *core,
                     struct sbx_server **out, struct sbx_error *err)
{
  struct sockaddr_storage ss;
  socklen_t slen;
  if (resolve_listen(cfg->listen, &ss, &slen, err) < 0 ||
      sbx_e2b_configure(cfg->e2b_templates, err) < 0 ||
      sbx_forward_init(cfg->cluster_secret_file, sbx_fleet_on(core), err) < 0)
    return -1;
  struct sbx_server *srv = calloc(1, sizeof *srv);
  if (!srv)
    return sbx_err_sys(err, ENOMEM, "server");
  srv->core = core;
  srv->max_body = cfg->max_body_bytes;
  if (sbx_conn_guard_new(cfg->head_timeout_s, cfg->max_connections_per_client, &srv->guard,
                         err) < 0) {
    free(srv);
    return -1;
  }
  unsigned max_conn = cfg->max_connections ? cfg->max_connections : SBX_SERVER_MAX_CONNECTIONS;
  /* MHD_USE_POLL: see the header comment (no select(), no epoll). */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (ss.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  srv->mhd =
      MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
                       mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                       MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv, MHD_OPTION_NOTIFY_CONNECTION,
                       on_connection, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                       MHD_OPTION_CONNECTION_LIMIT, max_conn, MHD_OPTION_THREAD_STACK_SIZE,
                       CONN_STACK_BYTES, MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
                       MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
  if (!srv->mhd) {
    sbx_conn_guard_free(srv->guard);
    free(srv);
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "cannot listen on %s (address in use?)",
                       cfg->listen);
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = info ? info->port : 0;
  log_limits(cfg, max_conn);
  *out = srv;
  return 0;
}

unsigned sbx_server_port(struct sbx_server *s) { return s->port; }

void sbx_server_quiesce(struct sbx_server *s)
{
  MHD_socket fd = MHD_quiesce_daemon(s->mhd);
  if (fd != MHD_INVALID_SOCKET)
    close(fd);
}

void sbx_server_stop(struct sbx_server *s)
{
  if (!s)
    return;
  MHD_stop_daemon(s->mhd);
  sbx_conn_guard_free(s->guard); /* after MHD: every connection's slot is gone */
  sbx_forward_shutdown();        /* no request signs or checks any more */
  free(s);
}
