/* proxy.c — see proxy.h.  Threads: the curl thread runs
 * curl_easy_perform() and fills the response head and the body buffer; the
 * HTTP connection's thread waits for the head in sbx_proxy_start() and then
 * drains the buffer in stream_read().  One mutex and one condition variable
 * guard everything they share. */
#include "api/proxy.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

#define RING_CAP (256u * 1024) /* body bytes in flight, per exchange */
#define MAX_HEADERS 200u       /* upstream response headers kept */
#define MAX_HEADER_BYTES (64u * 1024)
#define HANGUP_POLL_MS 1000 /* how often a waiting stream checks its client */

struct sbx_proxy {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* any change below */
  CURL *curl;
  struct curl_slist *hdrs;
  int fd;        /* until curl takes it */
  int client_fd; /* borrowed */
  char errbuf[CURL_ERROR_SIZE];
  long status;
  json_t *headers; /* [[name, value], …] */
  size_t header_bytes;
  bool head_done, done, gone, started;
  CURLcode result;
  char *ring;
  size_t rhead, rlen;
  pthread_t thread;
};

static void global_init(void) { curl_global_init(CURL_GLOBAL_NOTHING); }

static bool name_in(const char *name, const char *const *list)
{
  for (; *list; list++)
    if (strcasecmp(name, *list) == 0)
      return true;
  return false;
}

/* Hop-by-hop: about one connection, never forwarded either way (RFC 9110
 * 7.6.1, and the pre-standard Keep-Alive and Proxy-Connection). */
static const char *const hop_by_hop[] = {"Connection",
                                         "Keep-Alive",
                                         "Proxy-Authenticate",
                                         "Proxy-Authorization",
                                         "Proxy-Connection",
                                         "TE",
                                         "Trailer",
                                         "Transfer-Encoding",
                                         "Upgrade",
                                         NULL};

void sbx_proxy_line_add(struct sbx_proxy_lines *h, const char *name, const char *value)
{
  char *line = NULL;
  if (h->n >= SBX_PROXY_LINES_MAX || (value && *value ? asprintf(&line, "%s: %s", name, value)
                                                      : asprintf(&line, "%s;", name)) < 0)
    h->bad = true;
  else
    h->line[h->n++] = line;
}

void sbx_proxy_line_raw(struct sbx_proxy_lines *h, const char *line)
{
  char *dup = h->n < SBX_PROXY_LINES_MAX ? strdup(line) : NULL;
  if (!dup)
    h->bad = true;
  else
    h->line[h->n++] = dup;
}

void sbx_proxy_lines_end(struct sbx_proxy_lines *h, bool has_content_type, bool has_accept)
{
  if (!has_content_type)
    sbx_proxy_line_raw(h, "Content-Type:");
  if (!has_accept)
    sbx_proxy_line_raw(h, "Accept:");
  sbx_proxy_line_raw(h, "Expect:");
  h->line[h->n] = NULL;
}

void sbx_proxy_lines_free(struct sbx_proxy_lines *h)
{
  for (size_t i = 0; i < h->n; i++)
    free(h->line[i]);
  h->n = 0;
}

int sbx_proxy_start_for(struct sbx_req *r, int fd, const char *url, char *const *headers,
                        unsigned head_timeout_ms, struct sbx_proxy **out, struct sbx_error *err)
{
  struct sbx_proxy_req preq = {.fd = fd,
                               .method = r->method,
                               .url = url,
                               .headers = headers,
                               .body = r->body,
                               .body_len = r->body_len,
                               .head_timeout_ms = head_timeout_ms,
                               .client_fd = sbx_req_client_fd(r)};
  return sbx_proxy_start(&preq, out, err);
}

bool sbx_proxy_drop_request_header(const char *name)
{
  /* Framing is curl's, the API key stays here, and the proxy sets the
   * forwarding headers itself (proxy.h). */
  static const char *const drop[] = {"Host",          "Content-Length", "Expect",
                                     "Authorization", "Forwarded",      NULL};
  return name_in(name, hop_by_hop) || name_in(name, drop) ||
         strncasecmp(name, "X-Forwarded-", 12) == 0;
}

static bool drop_response_header(const char *name)
{
  /* Framing is ours (chunked), and so is the request id. */
  static const char *const drop[] = {"Content-Length", "X-Request-Id", NULL};
  return name_in(name, hop_by_hop) || name_in(name, drop);
}

static bool token_char(unsigned char c)
{
  return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

/* One "Name: value" line of the upstream's head (lock held). */
static void add_header(struct sbx_proxy *p, const char *line, size_t len)
{
  const char *colon = memchr(line, ':', len);
  if (!colon || colon == line || memchr(line, '\0', len))
    return; /* junk, or an obsolete folded line: dropped */
  size_t nlen = (size_t)(colon - line);
  for (size_t i = 0; i < nlen; i++)
    if (!token_char((unsigned char)line[i]))
      return;
  const char *v = colon + 1, *end = line + len;
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
    end--;
  if (json_array_size(p->headers) >= MAX_HEADERS || p->header_bytes + len > MAX_HEADER_BYTES)
    return;
  char name[256];
  if (nlen >= sizeof name)
    return;
  memcpy(name, line, nlen);
  name[nlen] = '\0';
  if (drop_response_header(name))
    return;
  /* Values may be Latin-1: stored as bytes, never parsed as JSON text. */
  json_array_append_new(p->headers,
                        json_pack("[s, o]", name, json_stringn_nocheck(v, (size_t)(end - v))));
  p->header_bytes += len;
}

static void head_complete_locked(struct sbx_proxy *p)
{
  long code = 0;
  curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &code);
  p->status = code;
  p->head_done = true;
  pthread_cond_broadcast(&p->cond);
}

static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
  struct sbx_proxy *p = ud;
  size_t len = size * n, l = len;
  while (l && (b[l - 1] == '\r' || b[l - 1] == '\n'))
    l--;
  pthread_mutex_lock(&p->lock);
  if (p->head_done) {
    /* trailers: ignored */
  } else if (l >= 5 && strncmp(b, "HTTP/", 5) == 0) {
    json_array_clear(p->headers); /* a new head (after a 1xx) */
    p->header_bytes = 0;
  } else if (l == 0) {
    long code = 0;
    curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code < 100 || code >= 200) /* 1xx heads are interim: wait for the final one */
      head_complete_locked(p);
  } else {
    add_header(p, b, l);
  }
  pthread_mutex_unlock(&p->lock);
  return len;
}

static size_t on_body(char *b, size_t size, size_t n, void *ud)
{
  struct sbx_proxy *p = ud;
  size_t len = size * n, off = 0;
  pthread_mutex_lock(&p->lock);
  if (!p->head_done)
    head_complete_locked(p);
  while (off < len) {
    while (!p->gone && p->rlen == RING_CAP)
      pthread_cond_wait(&p->cond, &p->lock);
    if (p->gone) {
      pthread_mutex_unlock(&p->lock);
      return 0; /* the client left: abort the transfer */
    }
    size_t tail = (p->rhead + p->rlen) % RING_CAP;
    size_t room = RING_CAP - p->rlen;
    size_t chunk = len - off < room ? len - off : room;
    if (chunk > RING_CAP - tail)
      chunk = RING_CAP - tail;
    memcpy(p->ring + tail, b + off, chunk);
    p->rlen += chunk;
    off += chunk;
    pthread_cond_broadcast(&p->cond);
  }
  pthread_mutex_unlock(&p->lock);
  return len;
}

/* Called by curl about once a second even when the upstream is silent. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  struct sbx_proxy *p = ud;
  pthread_mutex_lock(&p->lock);
  bool gone = p->gone;
  pthread_mutex_unlock(&p->lock);
  return gone ? 1 : 0;
}

static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *addr)
{
  struct sbx_proxy *p = ud;
  pthread_mutex_lock(&p->lock);
  int fd = p->fd; /* handed over once; curl closes it (close_socket) */
  p->fd = -1;
  pthread_mutex_unlock(&p->lock);
  return fd >= 0 ? fd : CURL_SOCKET_BAD;
}

static int sock_opt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
  return CURL_SOCKOPT_ALREADY_CONNECTED;
}

static int close_socket(void *ud, curl_socket_t fd) { return close(fd); }

static void *run(void *arg)
{
  struct sbx_proxy *p = arg;
  CURLcode rc = curl_easy_perform(p->curl);
  pthread_mutex_lock(&p->lock);
  p->result = rc;
  p->done = true;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* The request body and method.  POSTFIELDS makes curl send Content-Length
 * and the body; CUSTOMREQUEST sets the method's name. */
static CURLcode set_method(CURL *c, const struct sbx_proxy_req *req)
{
  CURLcode rc = CURLE_OK;
  bool has_body = req->body_len > 0 || !strcmp(req->method, "POST") ||
                  !strcmp(req->method, "PUT") || !strcmp(req->method, "PATCH");
  if (!strcmp(req->method, "HEAD"))
    return curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (has_body) {
    rc = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    if (!rc)
      rc = curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, req->body ? req->body : "");
  }
  if (!rc && strcmp(req->method, has_body ? "POST" : "GET") != 0)
    rc = curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
  return rc;
}

static CURLcode setup(struct sbx_proxy *p, const struct sbx_proxy_req *req)
{
  CURL *c = p->curl;
  for (char *const *h = req->headers; h && *h; h++) {
    struct curl_slist *n = curl_slist_append(p->hdrs, *h);
    if (!n)
      return CURLE_OUT_OF_MEMORY;
    p->hdrs = n;
  }
  CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                           \
  if (!rc)                                                                                      \
  rc = curl_easy_setopt(c, opt, val)
  SET(CURLOPT_URL, req->url);
  SET(CURLOPT_PROTOCOLS_STR, "http");
  SET(CURLOPT_PROXY, ""); /* never an environment proxy: the fd is the route */
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_FOLLOWLOCATION, 0L);
  SET(CURLOPT_PATH_AS_IS, 1L); /* the path is the client's, dot segments included */
  SET(CURLOPT_FORBID_REUSE, 1L);
  SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  SET(CURLOPT_HTTPHEADER, p->hdrs);
  SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
  SET(CURLOPT_OPENSOCKETDATA, p);
  SET(CURLOPT_SOCKOPTFUNCTION, sock_opt);
  SET(CURLOPT_CLOSESOCKETFUNCTION, close_socket);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, p);
  SET(CURLOPT_WRITEFUNCTION, on_body);
  SET(CURLOPT_WRITEDATA, p);
  SET(CURLOPT_XFERINFOFUNCTION, on_progress);
  SET(CURLOPT_XFERINFODATA, p);
  SET(CURLOPT_NOPROGRESS, 0L);
  SET(CURLOPT_ERRORBUFFER, p->errbuf);
#undef SET
  return rc ? rc : set_method(c, req);
}

static struct sbx_proxy *proxy_new(const struct sbx_proxy_req *req)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, global_init);
  struct sbx_proxy *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  pthread_mutex_init(&p->lock, NULL);
  sbx_cond_init_monotonic(&p->cond);
  p->fd = req->fd;
  p->client_fd = req->client_fd;
  p->headers = json_array();
  p->ring = malloc(RING_CAP);
  p->curl = curl_easy_init();
  if (!p->headers || !p->ring || !p->curl) {
    sbx_proxy_free(p);
    return NULL;
  }
  return p;
}

void sbx_proxy_free(struct sbx_proxy *p)
{
  if (!p)
    return;
  pthread_mutex_lock(&p->lock);
  p->gone = true;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  if (p->started)
    pthread_join(p->thread, NULL); /* at most ~1 s: on_progress sees gone */
  if (p->curl)
    curl_easy_cleanup(p->curl);
  curl_slist_free_all(p->hdrs);
  if (p->fd >= 0)
    close(p->fd);
  json_decref(p->headers);
  free(p->ring);
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

enum head_fail { HF_NONE, HF_TIMEOUT, HF_STATUS, HF_TRANSFER };

static int upstream_failed(struct sbx_proxy *p, enum head_fail why, unsigned timeout_ms,
                           struct sbx_error *err)
{
  if (why == HF_TIMEOUT) {
    sbx_err_set(err, SBX_E_BAD_GATEWAY, ETIMEDOUT,
                "the server inside the sandbox sent no "
                "response within %u ms",
                timeout_ms);
    return sbx_err_fr(err, "Le serveur dans le bac à sable n'a pas répondu en %u ms",
                      timeout_ms);
  }
  if (why == HF_STATUS) {
    sbx_err_set(err, SBX_E_BAD_GATEWAY, 0,
                "the server inside the sandbox answered with "
                "status %ld",
                p->status);
    return sbx_err_fr(err, "Le serveur dans le bac à sable a répondu avec le statut %ld",
                      p->status);
  }
  /* The transfer ended (the thread is done writing errbuf). */
  const char *what = p->errbuf[0] ? p->errbuf : curl_easy_strerror(p->result);
  sbx_err_set(err, SBX_E_BAD_GATEWAY, 0,
              "the server inside the sandbox did not answer "
              "properly: %s",
              what);
  return sbx_err_fr(err, "Le serveur dans le bac à sable n'a pas répondu correctement : %s",
                    what);
}

int sbx_proxy_start(const struct sbx_proxy_req *req, struct sbx_proxy **out,
                    struct sbx_error *err)
{
  struct sbx_proxy *p = proxy_new(req);
  if (!p) {
    close(req->fd);
    return sbx_err_sys(err, ENOMEM, "proxy");
  }
  if (setup(p, req) != CURLE_OK || pthread_create(&p->thread, NULL, run, p) != 0) {
    sbx_proxy_free(p);
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "cannot start the proxied request");
  }
  p->started = true;
  struct timespec until;
  sbx_timespec_in(CLOCK_MONOTONIC, req->head_timeout_ms, &until);
  pthread_mutex_lock(&p->lock);
  int w = 0;
  while (!p->head_done && !p->done && w != ETIMEDOUT)
    w = pthread_cond_timedwait(&p->cond, &p->lock, &until);
  enum head_fail why = !p->head_done ? (p->done ? HF_TRANSFER : HF_TIMEOUT)
                       : (p->status < 200 || p->status > 599) ? HF_STATUS
                                                              : HF_NONE;
  pthread_mutex_unlock(&p->lock);
  if (why != HF_NONE) {
    upstream_failed(p, why, req->head_timeout_ms, err);
    sbx_proxy_free(p);
    return -1;
  }
  *out = p;
  return 0;
}

/* Has the API client hung up?  Only polled, never read. */
static bool client_gone(const struct sbx_proxy *p)
{
  if (p->client_fd < 0)
    return false;
  struct pollfd pf = {.fd = p->client_fd, .events = POLLRDHUP};
  return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static long stream_read(void *ctx, uint64_t pos, char *buf, size_t max)
{
  struct sbx_proxy *p = ctx;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    if (p->rlen) {
      size_t n = p->rlen < max ? p->rlen : max;
      if (n > RING_CAP - p->rhead)
        n = RING_CAP - p->rhead;
      memcpy(buf, p->ring + p->rhead, n);
      p->rhead = (p->rhead + n) % RING_CAP;
      p->rlen -= n;
      pthread_cond_broadcast(&p->cond);
      pthread_mutex_unlock(&p->lock);
      return (long)n;
    }
    if (p->done) {
      /* A transfer cut short must not look complete to the client. */
      long end = p->result == CURLE_OK ? -1 : -2;
      pthread_mutex_unlock(&p->lock);
      return end;
    }
    struct timespec until;
    sbx_timespec_in(CLOCK_MONOTONIC, HANGUP_POLL_MS, &until);
    if (pthread_cond_timedwait(&p->cond, &p->lock, &until) == ETIMEDOUT && client_gone(p)) {
      p->gone = true;
      pthread_cond_broadcast(&p->cond);
      pthread_mutex_unlock(&p->lock);
      return -2;
    }
  }
}

static void stream_free(void *ctx) { sbx_proxy_free(ctx); }

void sbx_proxy_respond(struct sbx_proxy *p, struct sbx_resp *out)
{
  pthread_mutex_lock(&p->lock);
  out->status = (int)p->status;
  out->headers = p->headers; /* complete: on_header ignores what follows the head */
  p->headers = NULL;
  pthread_mutex_unlock(&p->lock);
  out->kind = SBX_RESP_STREAM;
  out->content_type = NULL; /* the upstream's Content-Type is among the headers */
  out->stream = stream_read;
  out->stream_ctx = p;
  out->stream_free = stream_free;
}
