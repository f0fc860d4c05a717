/* h_ports.c — ANY /v1/sandbox/sessions/{id}/ports/{port}/{rest*} (the
 * Upstream capability): proxies one HTTP exchange to a server listening on
 * 127.0.0.1:{port} (or [::1]) inside the sandbox's own network namespace.
 *
 * The daemon reaches in; nothing reaches out: sbx-init makes the socket in
 * the sandbox's namespace (runtime/sandbox_connect.c), so a port the host
 * listens on but the sandbox does not answers 502, and drivers that share
 * the host's namespace (process) lack SBX_CAP_UPSTREAM and answer 409.  The
 * request goes on with the client's method, path rest, query, headers and
 * body, minus hop-by-hop headers and the Authorization header (the sandbox
 * never sees an API key), plus X-Forwarded-*; the response streams back as
 * it arrives (api/proxy.c).  The request body is bounded by the server's
 * body limit like any other; WebSocket upgrades are not proxied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/handlers.h"
#include "api/proxy.h"
#include "common/cleanup.h"
#include "core/core.h"

#define CONNECT_TIMEOUT_MS 10000
#define HEAD_TIMEOUT_MS 120000 /* the upstream's response head */
#define MAX_FWD_HEADERS 200

static int parse_port(const char *s, unsigned *port, struct sbx_error *err)
{
  size_t n = strlen(s);
  unsigned long v = 0;
  bool digits = n > 0 && n <= 5 && strspn(s, "0123456789") == n;
  if (digits)
    v = strtoul(s, NULL, 10);
  if (!digits || v < 1 || v > 65535) {
    sbx_err_field(err, "port", "port must be an integer from 1 to 65535, not '%.16s'", s);
    return sbx_err_fr(err, "Requête invalide : le port doit être un entier de 1 à 65535");
  }
  *port = (unsigned)v;
  return 0;
}

/* Percent-encodes s; `keep` lists the bytes besides A-Za-z0-9-._~ kept. */
static void put_encoded(FILE *f, const char *s, const char *keep)
{
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        strchr("-._~", *p) || (*keep && strchr(keep, *p)))
      fputc(*p, f);
    else
      fprintf(f, "%%%02X", *p);
  }
}

struct url_ctx {
  FILE *f;
  int n;
};

static void put_query_arg(void *ctx, const char *name, const char *value)
{
  struct url_ctx *u = ctx;
  fputc(u->n++ ? '&' : '?', u->f);
  put_encoded(u->f, name, "");
  if (value) {
    fputc('=', u->f);
    put_encoded(u->f, value, "");
  }
}

/* http://127.0.0.1:PORT/rest?query — MHD decoded both, so both are
 * encoded again ("%2F" in a segment comes out as "/"). */
static char *build_url(struct sbx_req *r, unsigned port)
{
  char *url = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&url, &len);
  if (!f)
    return NULL;
  fprintf(f, "http://127.0.0.1:%u/", port);
  put_encoded(f, r->rest ? r->rest : "", "/!$&'()*+,;=:@");
  struct url_ctx u = {f, 0};
  sbx_req_each_query(r, put_query_arg, &u);
  if (fclose(f) != 0) {
    free(url);
    return NULL;
  }
  return url;
}

struct hdr_ctx {
  struct sbx_proxy_lines l;
  const char *connection; /* the client's Connection header: names it lists are hop-by-hop */
  bool content_type, accept;
};

static bool listed_in_connection(const char *list, const char *name)
{
  size_t nl = strlen(name);
  for (const char *p = list; p && *p;) {
    p += strspn(p, " \t,");
    size_t tl = strcspn(p, " \t,");
    if (tl == nl && strncasecmp(p, name, nl) == 0)
      return true;
    p += tl;
  }
  return false;
}

static void take_header(void *ctx, const char *name, const char *value)
{
  struct hdr_ctx *h = ctx;
  if (sbx_proxy_drop_request_header(name) || listed_in_connection(h->connection, name))
    return;
  if (h->l.n >= MAX_FWD_HEADERS) {
    h->l.bad = true;
    return;
  }
  h->content_type |= strcasecmp(name, "Content-Type") == 0;
  h->accept |= strcasecmp(name, "Accept") == 0;
  sbx_proxy_line_add(&h->l, name, value);
}

static int build_headers(struct sbx_req *r, unsigned port, struct hdr_ctx *h,
                         struct sbx_error *err)
{
  memset(h, 0, sizeof *h);
  h->connection = sbx_req_header(r, "Connection");
  sbx_req_each_header(r, take_header, h);
  char addr[64], prefix[400];
  sbx_req_client_addr(r, addr, sizeof addr);
  snprintf(prefix, sizeof prefix, "/v1/sandbox/sessions/%s/ports/%u", r->params[0], port);
  if (addr[0])
    sbx_proxy_line_add(&h->l, "X-Forwarded-For", addr);
  const char *host = sbx_req_header(r, "Host");
  if (host)
    sbx_proxy_line_add(&h->l, "X-Forwarded-Host", host);
  sbx_proxy_line_add(&h->l, "X-Forwarded-Proto", "http");
  sbx_proxy_line_add(&h->l, "X-Forwarded-Prefix", prefix);
  sbx_proxy_lines_end(&h->l, h->content_type, h->accept);
  if (h->l.bad) {
    sbx_err_field(err, "headers", "too many request headers to forward (at most %d)",
                  MAX_FWD_HEADERS);
    return sbx_err_fr(err, "Requête invalide : trop d'en-têtes à transmettre (au plus %d)",
                      MAX_FWD_HEADERS);
  }
  return 0;
}

/* Opens the connection into the sandbox.  The session is released at once:
 * the socket needs no reference, and deleting the session kills the server,
 * which ends the exchange. */
static int connect_in(struct sbx_req *r, unsigned port, int *fd, struct sbx_error *err)
{
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, r->params[0], SBX_CAP_UPSTREAM, err);
  if (!ls)
    return -1;
  int rc = sbx_ports_connect(ls, port, CONNECT_TIMEOUT_MS, fd, err);
  sbx_session_release(r->core, ls);
  return rc;
}

int sbx_h_port_proxy(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  unsigned port = 0;
  if (parse_port(r->params[1], &port, err) < 0)
    return -1;
  struct hdr_ctx h;
  _cleanup_free_ char *url = build_url(r, port);
  if (!url)
    return sbx_err_sys(err, ENOMEM, "proxy url");
  int rc = build_headers(r, port, &h, err);
  int fd = -1;
  if (rc == 0)
    rc = connect_in(r, port, &fd, err);
  struct sbx_proxy *p = NULL;
  if (rc == 0) {
    rc = sbx_proxy_start_for(r, fd, url, h.l.line, HEAD_TIMEOUT_MS, &p, err);
  }
  sbx_proxy_lines_free(&h.l);
  if (rc < 0)
    return -1;
  sbx_proxy_respond(p, out);
  return 0;
}
