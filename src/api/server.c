/* server.c — libmicrohttpd glue: accumulates the bounded body, assigns the
 * request id and language, authenticates, routes, and sends the handler's
 * response.  The only file that calls MHD_* besides response streaming. */
#include "api/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/envelope.h"
#include "api/handlers.h"
#include "api/router.h"
#include "common/log.h"
#include "common/util.h"
#include "core/core.h"
#include "obs/trace.h"

struct sbx_server {
  struct MHD_Daemon *mhd;
  struct sbx_core *core;
  size_t max_body;
  unsigned port;
};

const char *sbx_req_header(struct sbx_req *r, const char *name)
{
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *sbx_req_query(struct sbx_req *r, const char *name)
{
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
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

void sbx_resp_bytes(struct sbx_resp *out, int status, char *bytes, size_t len,
                    const char *content_type)
{
  out->status = status;
  out->kind = SBX_RESP_BYTES;
  out->bytes = bytes;
  out->len = len;
  out->content_type = content_type;
}

void sbx_resp_empty(struct sbx_resp *out, int status)
{
  out->status = status;
  out->kind = SBX_RESP_EMPTY;
}

void sbx_resp_error(struct sbx_req *r, struct sbx_resp *out, const struct sbx_error *err)
{
  sbx_resp_json(out, sbx_envelope_status(err->code),
                sbx_envelope_build(err, r->lang, r->request_id));
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
  json_array_foreach(m ? resp->headers : NULL, i, h) { /* e.g. proxied upstream headers */
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
  sbx_api_audit(r, NULL, err); /* issue 8: refusals and failed mutations */
  sbx_resp_error(r, &resp, err);
  if (err->code == SBX_E_UNAUTHENTICATED) /* RFC 6750 §3; MCP clients read it */
    resp.headers = json_pack("[[s, s]]", "WWW-Authenticate", "Bearer realm=\"sandboxd\"");
  return send_resp(r, &resp);
}

/* Issue 8: once authenticated, the span learns the tenant and the tenant's
 * request rate is checked (core/quota.h). */
static int after_auth(struct sbx_req *r, unsigned *retry_s, struct sbx_error *err)
{
  sbx_span_set_str(r->span, "sandbox.tenant", r->who.tenant);
  return sbx_quota_request(r->core, &r->who, retry_s, err);
}

static enum MHD_Result send_rate_limited(struct sbx_req *r, const struct sbx_error *err,
                                         unsigned retry_s)
{
  struct sbx_resp resp = {.fd = -1};
  sbx_api_audit(r, NULL, err); /* issue 8: a rate refusal is a policy decision */
  sbx_resp_error(r, &resp, err);
  char secs[16];
  snprintf(secs, sizeof secs, "%u", retry_s);
  resp.headers = json_pack("[[s, s]]", "Retry-After", secs);
  return send_resp(r, &resp);
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

static struct sbx_req *req_new(struct sbx_server *srv, struct MHD_Connection *c, const char *url,
                               const char *method)
{
  struct sbx_req *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->conn = c;
  r->core = srv->core;
  r->start_ns = sbx_now_ns();
  snprintf(r->method, sizeof r->method, "%s", method);
  snprintf(r->path, sizeof r->path, "%s", url);
  const char *rid = sbx_req_header(r, "X-Request-Id");
  if (rid && valid_request_id(rid))
    snprintf(r->request_id, sizeof r->request_id, "%s", rid);
  else
    sbx_random_id("req", r->request_id, sizeof r->request_id);
  sbx_envelope_lang(sbx_req_header(r, "Accept-Language"), r->lang);
  r->span = sbx_trace_request_begin(method, sbx_req_header(r, "traceparent"));
  return r;
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

static enum MHD_Result dispatch(struct sbx_server *srv, struct sbx_req *r)
{
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
  sbx_trace_request_route(r->span, r->method, rt->pattern);
  if (rt->auth != SBX_AUTH_NONE &&
      sbx_api_authenticate(r, rt->auth == SBX_AUTH_ADMIN, &err) < 0)
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
  if (rt->handler(r, &resp, &err) < 0) {
    if (err.code == SBX_E_NONE)
      sbx_err_set(&err, SBX_E_INTERNAL, 0, "internal error");
    if (err.code == SBX_E_INTERNAL)
      sbx_error("api", "%s %s [%s]: %s", r->method, r->path, r->request_id, err.msg);
    return send_error(r, &err);
  }
  sbx_api_audit(r, &resp, NULL); /* issue 8: a mutation that succeeded */
  return send_resp(r, &resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
  struct sbx_server *srv = cls;
  struct sbx_req *r = *con_cls;
  if (!r) {
    r = req_new(srv, c, url, method);
    if (!r)
      return MHD_NO;
    *con_cls = r;
    const char *cl = sbx_req_header(r, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > srv->max_body) {
      /* Answer before reading a byte of an oversized body. */
      r->body_too_large = true;
      struct sbx_error err = {0};
      too_large(srv, &err);
      return send_error(r, &err);
    }
    return MHD_YES;
  }
  if (*upload_size) {
    if (r->status_sent == 0 && append_body(srv, r, upload_data, *upload_size) < 0)
      return MHD_NO;
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->status_sent)
    return MHD_YES;
  sbx_span_enter(r->span); /* core's spans are children of the request's */
  enum MHD_Result ret = dispatch(srv, r);
  sbx_span_leave(r->span);
  return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
  struct sbx_server *srv = cls;
  struct sbx_req *r = *con_cls;
  if (!r)
    return;
  uint64_t us = (sbx_now_ns() - r->start_ns) / 1000;
  sbx_core_observe_http(srv->core, r->route ? r->route->name : "unmatched", r->status_sent, us);
  sbx_trace_request_end(r->span, r->status_sent);
  sbx_debug("http", "%s %s -> %d (%llu us) [%s]", r->method, r->path, r->status_sent,
            (unsigned long long)us, r->request_id);
  free(r->body);
  free(r);
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
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
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

int sbx_server_start(const struct sbx_server_config *cfg, struct sbx_core *core,
                     struct sbx_server **out, struct sbx_error *err)
{
  struct sockaddr_storage ss;
  socklen_t slen;
  if (resolve_listen(cfg->listen, &ss, &slen, err) < 0)
    return -1;
  struct sbx_server *srv = calloc(1, sizeof *srv);
  if (!srv)
    return sbx_err_sys(err, ENOMEM, "server");
  srv->core = core;
  srv->max_body = cfg->max_body_bytes;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (ss.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  srv->mhd = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_LIMIT,
      cfg->max_connections ? cfg->max_connections : 1024u, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)120, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
  if (!srv->mhd) {
    free(srv);
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "cannot listen on %s (address in use?)",
                       cfg->listen);
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = info ? info->port : 0;
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
  free(s);
}
