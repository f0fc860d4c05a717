/* http.c — see http.h.  Owns the curl handle, the request headers, the
 * bounded response buffer and the mapping of failures to messages. */
#include "cli/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/util.h"

struct sbx_http {
  CURL *curl;
  char *base; /* without a trailing '/' */
  char *auth; /* "Authorization: Bearer …" or NULL */
  bool french;
  long last_status;
  char last_code[64];
  char errbuf[CURL_ERROR_SIZE];
};

/* Where an answer's body goes: memory (JSON and error bodies), or a file /
 * stdout for a raw 2xx download. */
struct sink {
  CURL *curl;
  struct sbx_buf body; /* bounded by SBX_HTTP_MAX_BODY */
  bool too_big;
  bool to_file;
  const char *path; /* NULL = stdout */
  unsigned mode;
  int fd;
  int write_errno;
};

/* What a request sends: nothing, a memory buffer, or an fd of known size. */
struct body {
  const char *mem;
  size_t len;
  const char *ctype;
  int fd;
  off_t size;
};

bool sbx_http_wants_french(void)
{
  const char *vars[] = {"LC_ALL", "LC_MESSAGES", "LANG"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return strncmp(v, "fr", 2) == 0;
  }
  return false;
}

struct sbx_http *sbx_http_new(const char *base_url, const char *api_key, struct sbx_error *err)
{
  static bool global_done;
  if (!global_done && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    sbx_err_set(err, SBX_E_INTERNAL, 0, "cannot initialise libcurl");
    return NULL;
  }
  global_done = true;
  struct sbx_http *h = calloc(1, sizeof *h);
  if (!h || !(h->curl = curl_easy_init()) || !(h->base = strdup(base_url))) {
    sbx_http_free(h);
    sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "cannot initialise the HTTP client");
    return NULL;
  }
  size_t n = strlen(h->base);
  while (n > 0 && h->base[n - 1] == '/')
    h->base[--n] = '\0';
  if (api_key && *api_key && asprintf(&h->auth, "Authorization: Bearer %s", api_key) < 0)
    h->auth = NULL;
  h->french = sbx_http_wants_french();
  return h;
}

void sbx_http_free(struct sbx_http *h)
{
  if (!h)
    return;
  if (h->curl)
    curl_easy_cleanup(h->curl);
  free(h->base);
  free(h->auth);
  free(h);
}

long sbx_http_last_status(const struct sbx_http *h) { return h->last_status; }
const char *sbx_http_last_code(const struct sbx_http *h) { return h->last_code; }

char *sbx_http_escape(const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(s);
  char *out = malloc(3 * n + 1);
  if (!out)
    abort();
  char *o = out;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        strchr("-._~", *p)) {
      *o++ = (char)*p;
    } else {
      *o++ = '%';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
    }
  }
  *o = '\0';
  return out;
}

static bool status_ok(CURL *curl)
{
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  return code >= 200 && code < 300;
}

static int sink_open_file(struct sink *s)
{
  if (s->fd >= 0)
    return 0;
  if (!s->path) {
    s->fd = STDOUT_FILENO;
    return 0;
  }
  s->fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, s->mode);
  if (s->fd < 0) {
    s->write_errno = errno;
    return -1;
  }
  return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp)
{
  struct sink *s = userp;
  size_t n = size * nmemb;
  if (s->to_file && status_ok(s->curl)) {
    if (sink_open_file(s) < 0 || sbx_write_all(s->fd, data, n) < 0) {
      if (!s->write_errno)
        s->write_errno = errno;
      return 0;
    }
    return n;
  }
  if (sbx_buf_append(&s->body, data, n) < 0) {
    s->too_big = errno == E2BIG;
    return 0;
  }
  return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *userp)
{
  int fd = *(int *)userp;
  ssize_t n;
  do
    n = read(fd, buf, size * nmemb);
  while (n < 0 && errno == EINTR);
  return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

/* Called by curl about once a second even while a long poll idles, which
 * is what lets Ctrl-C end a 30-second wait at once. */
static int on_progress(void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  return sbx_cli_interrupted ? 1 : 0;
}

static struct curl_slist *build_headers(struct sbx_http *h, const struct body *b, bool raw)
{
  struct curl_slist *l = NULL;
  /* Raw file routes answer bytes on success and the JSON envelope on error. */
  l = curl_slist_append(l, raw ? "Accept: */*" : "Accept: application/json");
  l = curl_slist_append(l, "Expect:"); /* no 100-continue round trip */
  if (h->auth)
    l = curl_slist_append(l, h->auth);
  if (h->french)
    l = curl_slist_append(l, "Accept-Language: fr");
  if (b && b->ctype) {
    char ct[128];
    snprintf(ct, sizeof ct, "Content-Type: %s", b->ctype);
    l = curl_slist_append(l, ct);
  }
  return l;
}

static void set_body(CURL *c, const char *method, const struct body *b, int *fdp)
{
  if (b && b->fd >= 0) {
    *fdp = b->fd;
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, fdp);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)b->size);
  } else if (b || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
             strcmp(method, "PATCH") == 0) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(b ? b->len : 0));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, b ? b->mem : "");
  }
  if (strcmp(method, "GET") == 0)
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  else
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
}

static void setup(struct sbx_http *h, const char *url, struct curl_slist *hdrs, struct sink *s)
{
  CURL *c = h->curl;
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "sbx/0.1");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  h->errbuf[0] = '\0';
}

static int transport_error(struct sbx_http *h, CURLcode rc, const struct sink *s,
                           struct sbx_error *err)
{
  long os_errno = 0;
  curl_easy_getinfo(h->curl, CURLINFO_OS_ERRNO, &os_errno);
  const char *why = h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc);
  if (s->write_errno)
    return sbx_err_set(err, SBX_E_INTERNAL, s->write_errno, "cannot write %s: %s",
                       s->path ? s->path : "stdout", strerror(s->write_errno));
  if (s->too_big)
    return sbx_err_set(err, SBX_E_INTERNAL, EFBIG,
                       "the answer from sandboxd at %s is larger than %u bytes", h->base,
                       SBX_HTTP_MAX_BODY);
  if (rc == CURLE_ABORTED_BY_CALLBACK && sbx_cli_interrupted)
    return sbx_err_set(err, SBX_E_INTERNAL, EINTR, "interrupted");
  if (rc == CURLE_COULDNT_CONNECT)
    return sbx_err_set(err, SBX_E_INTERNAL, (int)os_errno,
                       "cannot reach sandboxd at %s: %s — is `sandboxd serve` running?", h->base,
                       os_errno ? strerror((int)os_errno) : why);
  if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_URL_MALFORMAT ||
      rc == CURLE_UNSUPPORTED_PROTOCOL)
    return sbx_err_set(err, SBX_E_INTERNAL, 0,
                       "cannot reach sandboxd at %s: %s (check --url or SANDBOXD_URL)", h->base,
                       why);
  return sbx_err_set(err, SBX_E_INTERNAL, (int)os_errno, "request to sandboxd at %s failed: %s",
                     h->base, why);
}

static enum sbx_errcode code_from_name(const char *code, long status)
{
  static const struct {
    const char *name;
    enum sbx_errcode code;
  } map[] = {
      {"invalid_request", SBX_E_INVALID},
      {"unauthenticated", SBX_E_UNAUTHENTICATED},
      {"forbidden", SBX_E_FORBIDDEN},
      {"not_found", SBX_E_NOT_FOUND},
      {"method_not_allowed", SBX_E_METHOD},
      {"conflict", SBX_E_CONFLICT},
      {"payload_too_large", SBX_E_TOO_LARGE},
      {"quota_exceeded", SBX_E_QUOTA},
      {"rate_limited", SBX_E_RATE},
      {"internal", SBX_E_INTERNAL},
      {"runtime_unavailable", SBX_E_RUNTIME_UNAVAILABLE},
      {"not_ready", SBX_E_NOT_READY},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i].name, code) == 0)
      return map[i].code;
  return status >= 500 ? SBX_E_INTERNAL : SBX_E_INVALID;
}

/* Turns a non-2xx answer into an error: the envelope's code and message if
 * the body is one, else the status line and the start of the body. */
static int api_error(struct sbx_http *h, const struct sink *s, struct sbx_error *err)
{
  json_t *root = s->body.data ? json_loadb(s->body.data, s->body.len, 0, NULL) : NULL;
  json_t *e = json_object_get(root, "error");
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  const char *field = json_string_value(json_object_get(json_object_get(e, "details"), "field"));
  if (code) {
    snprintf(h->last_code, sizeof h->last_code, "%s", code);
    sbx_err_set(err, code_from_name(code, h->last_status), 0, "%s: %s", code,
                msg ? msg : "(no message)");
    if (field && err)
      snprintf(err->field, sizeof err->field, "%s", field);
  } else {
    snprintf(h->last_code, sizeof h->last_code, "http_%ld", h->last_status);
    sbx_err_set(err, h->last_status >= 500 ? SBX_E_INTERNAL : SBX_E_INVALID, 0,
                "HTTP %ld from sandboxd: %.200s", h->last_status,
                s->body.len ? s->body.data : "(empty body)");
  }
  json_decref(root);
  return -1;
}

static int perform(struct sbx_http *h, const char *method, const char *path,
                   const struct body *b, struct sink *s, struct sbx_error *err)
{
  _cleanup_free_ char *url = NULL;
  if (asprintf(&url, "%s%s", h->base, path) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  struct curl_slist *hdrs = build_headers(h, b, s->to_file || (b && b->fd >= 0));
  int upload_fd = -1;
  s->curl = h->curl;
  h->last_status = 0;
  h->last_code[0] = '\0';
  setup(h, url, hdrs, s);
  set_body(h->curl, method, b, &upload_fd);
  CURLcode rc = curl_easy_perform(h->curl);
  curl_slist_free_all(hdrs);
  if (rc != CURLE_OK)
    return transport_error(h, rc, s, err);
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &h->last_status);
  if (h->last_status < 200 || h->last_status >= 300)
    return api_error(h, s, err);
  return 0;
}

int sbx_http_json(struct sbx_http *h, const char *method, const char *path, json_t *body,
                  json_t **out, struct sbx_error *err)
{
  _cleanup_free_ char *text = NULL;
  struct body b = {.fd = -1, .ctype = "application/json"};
  if (body) {
    text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
      return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "cannot encode the request");
    b.mem = text;
    b.len = strlen(text);
  }
  struct sink s = {.body = SBX_BUF_INIT(SBX_HTTP_MAX_BODY), .fd = -1};
  int r = perform(h, method, path, body ? &b : NULL, &s, err);
  if (r == 0 && out) {
    *out = NULL;
    json_error_t jerr;
    if (s.body.len > 0 && !(*out = json_loadb(s.body.data, s.body.len, JSON_ALLOW_NUL, &jerr)))
      r = sbx_err_set(err, SBX_E_INTERNAL, 0, "sandboxd sent invalid JSON: %s", jerr.text);
  }
  sbx_buf_free(&s.body);
  return r;
}

int sbx_http_put_fd(struct sbx_http *h, const char *path, int fd, off_t size,
                    struct sbx_error *err)
{
  struct body b = {.fd = fd, .size = size, .ctype = "application/octet-stream"};
  struct sink s = {.body = SBX_BUF_INIT(SBX_HTTP_MAX_BODY), .fd = -1};
  int r = perform(h, "PUT", path, &b, &s, err);
  sbx_buf_free(&s.body);
  return r;
}

int sbx_http_get_to_file(struct sbx_http *h, const char *path, const char *local_path,
                         unsigned mode, struct sbx_error *err)
{
  struct sink s = {.body = SBX_BUF_INIT(SBX_HTTP_MAX_BODY),
                   .fd = -1,
                   .to_file = true,
                   .path = local_path,
                   .mode = mode};
  int r = perform(h, "GET", path, NULL, &s, err);
  /* An empty 2xx body never reaches on_write: create the file here. */
  if (r == 0 && sink_open_file(&s) < 0)
    r = sbx_err_set(err, SBX_E_INTERNAL, s.write_errno, "cannot write %s: %s", local_path,
                    strerror(s.write_errno));
  if (s.fd > STDOUT_FILENO && close(s.fd) < 0 && r == 0)
    r = sbx_err_sys(err, errno, "cannot write %s", local_path);
  sbx_buf_free(&s.body);
  return r;
}
