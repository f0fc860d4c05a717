/* registry.c — the OCI distribution API client (libcurl): manifests (OCI
 * and Docker v2 schema 2, indexes/manifest lists → linux/amd64), blobs
 * downloaded to a temp file while hashed and only then renamed into the
 * store, resumed with a Range request when a partial file is left, and the
 * auth dance: a 401 with `WWW-Authenticate: Bearer realm,service,scope`
 * gets a token from the realm (with basic credentials from auth.json when
 * there are any), `Basic` gets those credentials directly.
 *
 * What the registry sends is bounded: manifests and error bodies by size,
 * blobs by the size their descriptor announces.  HTTPS is required except
 * for loopback registries (Docker's rule); redirects stay on http(s). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "image/image_int.h"

#define ERR_BODY_MAX (64u << 10)
#define TOKEN_MAX 16384
#define ACCEPT_MANIFESTS                                                                        \
  "Accept: application/vnd.oci.image.index.v1+json, "                                           \
  "application/vnd.docker.distribution.manifest.list.v2+json, "                                 \
  "application/vnd.oci.image.manifest.v1+json, "                                                \
  "application/vnd.docker.distribution.manifest.v2+json"

struct resp {
  long status;
  char www_auth[2048];
  char content_type[128];
  /* body to memory (manifests, tokens, error bodies), bounded by max */
  union {
    struct sbx_buf body;
    struct {
      char *buf;
      size_t len, cap, max;
    };
  };
  bool overflow;
  /* or, for a 200/206, to a file while hashing */
  int fd;
  struct img_hash *hash;
  uint64_t done, total, reported;
  const char *what;
  sbx_image_progress_fn cb;
  void *ud;
};

struct client {
  const struct sbx_image_ref *ref;
  char base[600];  /* http(s)://registry */
  char creds[512]; /* user:pass or "" */
  char auth[TOKEN_MAX + 64];
  bool authed;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_header(char *b, size_t sz, size_t n, void *ud)
{
  struct resp *r = ud;
  size_t len = sz * n;
  if (len > 5 && !strncmp(b, "HTTP/", 5)) { /* a new response (after a redirect) */
    r->www_auth[0] = r->content_type[0] = '\0';
    /* the body callback needs the status before perform() returns */
    const char *sp = memchr(b, ' ', len);
    r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    return len;
  }
  static const struct {
    const char *name;
    size_t off, cap;
  } want[] = {
      {"www-authenticate:", offsetof(struct resp, www_auth),
       sizeof(((struct resp *)0)->www_auth)},
      {"content-type:", offsetof(struct resp, content_type),
       sizeof(((struct resp *)0)->content_type)},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    size_t nl = strlen(want[i].name);
    if (len > nl && !strncasecmp(b, want[i].name, nl)) {
      const char *v = b + nl;
      size_t vl = len - nl;
      while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
      while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
      char *dst = (char *)r + want[i].off;
      snprintf(dst, want[i].cap, "%.*s", (int)vl, v);
    }
  }
  return len;
}

static size_t on_body(char *b, size_t sz, size_t n, void *ud)
{
  struct resp *r = ud;
  size_t len = sz * n;
  if (r->fd >= 0 && (r->status == 200 || r->status == 206)) {
    if (r->done + len > r->total) {
      r->overflow = true;
      return 0;
    }
    if (sbx_write_all(r->fd, b, len) < 0)
      return 0;
    img_hash_update(r->hash, b, len);
    r->done += len;
    if (r->cb && (r->done - r->reported >= (1u << 20) || r->done == r->total)) {
      r->reported = r->done;
      r->cb(r->ud, r->what, r->done, r->total);
    }
    return len;
  }
  if (sbx_buf_append(&r->body, b, len) < 0) {
    r->overflow = errno == E2BIG;
    return 0;
  }
  return len;
}

static CURL *easy_new(struct resp *r, const char *url, bool https_only)
{
  CURL *c = curl_easy_init();
  if (!c)
    return NULL;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, https_only ? "https" : "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, https_only ? "https" : "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  /* a stalled transfer (< 1 byte/s for a minute) is a failure, not a hang */
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "sandboxd/0.1");
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  return c;
}

/* Performs one GET; r->status filled.  Transport failures are 502. */
static int perform(CURL *c, struct resp *r, struct curl_slist *hdrs, const char *url,
                   struct sbx_error *err)
{
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  char eb[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, eb);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  if (rc == CURLE_WRITE_ERROR && r->overflow)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "%s: response larger than expected", url);
  if (rc != CURLE_OK)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "registry %s: %s", url,
                       eb[0] ? eb : curl_easy_strerror(rc));
  return 0;
}

/* ---- auth ---------------------------------------------------------------- */

/* Value of key="v" (or key=v) in a WWW-Authenticate parameter list. */
static void auth_param(const char *h, const char *key, char *out, size_t len)
{
  out[0] = '\0';
  size_t kl = strlen(key);
  for (const char *p = h; (p = strcasestr(p, key)); p += kl) {
    if ((p != h && p[-1] != ' ' && p[-1] != ',') || p[kl] != '=')
      continue;
    const char *v = p + kl + 1;
    size_t n;
    if (*v == '"') {
      v++;
      const char *e = strchr(v, '"');
      n = e ? (size_t)(e - v) : strlen(v);
    } else {
      n = strcspn(v, ", ");
    }
    snprintf(out, len, "%.*s", (int)n, v);
    return;
  }
}

static void basic_header(const char *creds, char *out, size_t len)
{
  char b64[1024];
  sodium_bin2base64(b64, sizeof b64, (const unsigned char *)creds, strlen(creds),
                    sodium_base64_VARIANT_ORIGINAL);
  snprintf(out, len, "Authorization: Basic %s", b64);
}

static int bearer_token(struct client *cl, const char *www, struct sbx_error *err)
{
  char realm[1024], service[256], scope[512];
  auth_param(www, "realm", realm, sizeof realm);
  auth_param(www, "service", service, sizeof service);
  auth_param(www, "scope", scope, sizeof scope);
  if (strncmp(realm, "https://", 8) != 0 && strncmp(realm, "http://", 7) != 0)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "registry token realm '%.100s' is not http(s)",
                       realm);
  if (!scope[0])
    snprintf(scope, sizeof scope, "repository:%s:pull", cl->ref->repository);
  CURL *esc = curl_easy_init();
  char *es = curl_easy_escape(esc, service, 0), *ec = curl_easy_escape(esc, scope, 0);
  char url[2048];
  snprintf(url, sizeof url, "%s%cservice=%s&scope=%s", realm, strchr(realm, '?') ? '&' : '?',
           es ? es : "", ec ? ec : "");
  curl_free(es);
  curl_free(ec);
  curl_easy_cleanup(esc);

  struct resp r = {.fd = -1, .max = TOKEN_MAX * 2};
  /* a token server over plain http is only acceptable on loopback */
  CURL *c = easy_new(&r, url, !cl->ref->plain_http);
  if (!c)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "curl init failed");
  struct curl_slist *h = NULL;
  char basic[1100];
  if (cl->creds[0]) {
    basic_header(cl->creds, basic, sizeof basic);
    h = curl_slist_append(h, basic);
  }
  int rc = perform(c, &r, h, url, err);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (rc == 0 && r.status != 200)
    rc = sbx_err_set(err,
                     r.status == 401 || r.status == 403 ? SBX_E_FORBIDDEN : SBX_E_BAD_GATEWAY, 0,
                     "token server %s answered %ld%s", realm, r.status,
                     cl->creds[0] ? "" : " (no credentials for this registry in auth.json)");
  if (rc == 0) {
    json_t *doc = r.buf ? json_loadb(r.buf, r.len, 0, NULL) : NULL;
    const char *tok = json_string_value(json_object_get(doc, "token"));
    if (!tok)
      tok = json_string_value(json_object_get(doc, "access_token"));
    if (!tok || !*tok || strlen(tok) > TOKEN_MAX || strpbrk(tok, "\r\n"))
      rc = sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "token server %s: no usable token", realm);
    else
      snprintf(cl->auth, sizeof cl->auth, "Authorization: Bearer %s", tok);
    json_decref(doc);
  }
  free(r.buf);
  return rc;
}

static int authenticate(struct client *cl, const char *www, struct sbx_error *err)
{
  if (!strncasecmp(www, "Bearer ", 7))
    return bearer_token(cl, www + 7, err);
  if (!strncasecmp(www, "Basic", 5)) {
    if (!cl->creds[0])
      return sbx_err_set(err, SBX_E_FORBIDDEN, 0,
                         "registry %s requires credentials (none in auth.json)",
                         cl->ref->registry);
    basic_header(cl->creds, cl->auth, sizeof cl->auth);
    return 0;
  }
  return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "registry %s: unsupported auth '%.40s'",
                     cl->ref->registry, www);
}

/* The registry's own reason from an error body {"errors":[{code,message}]}. */
static void registry_reason(const struct resp *r, char *out, size_t len)
{
  snprintf(out, len, "HTTP %ld", r->status);
  json_t *doc = r->buf ? json_loadb(r->buf, r->len, 0, NULL) : NULL;
  json_t *e0 = json_array_get(json_object_get(doc, "errors"), 0);
  const char *code = json_string_value(json_object_get(e0, "code"));
  const char *msg = json_string_value(json_object_get(e0, "message"));
  if (code)
    snprintf(out, len, "HTTP %ld %.64s: %.200s", r->status, code, msg ? msg : "");
  json_decref(doc);
}

/* GET base + path with auth; retried once after authenticating on a 401. */
static int get(struct client *cl, const char *path, const char *accept, uint64_t range_from,
               struct resp *r, struct sbx_error *err)
{
  char url[1200];
  snprintf(url, sizeof url, "%s%s", cl->base, path);
  for (int attempt = 0;; attempt++) {
    CURL *c = easy_new(r, url, !cl->ref->plain_http);
    if (!c)
      return sbx_err_set(err, SBX_E_INTERNAL, 0, "curl init failed");
    struct curl_slist *h = NULL;
    if (accept)
      h = curl_slist_append(h, accept);
    if (cl->auth[0])
      h = curl_slist_append(h, cl->auth);
    char range[64];
    if (range_from) {
      snprintf(range, sizeof range, "%llu-", (unsigned long long)range_from);
      curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    int rc = perform(c, r, h, url, err);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc < 0)
      return -1;
    if (r->status != 401 || attempt > 0 || cl->authed)
      return 0;
    if (!r->www_auth[0])
      return sbx_err_set(err, SBX_E_FORBIDDEN, 0, "registry %s: 401 without a challenge",
                         cl->ref->registry);
    if (authenticate(cl, r->www_auth, err) < 0)
      return -1;
    cl->authed = true;
    sbx_buf_free(&r->body);
    r->status = 0;
  }
}

static int status_error(struct client *cl, const struct resp *r, const char *what,
                        struct sbx_error *err)
{
  char why[300];
  registry_reason(r, why, sizeof why);
  enum sbx_errcode code = SBX_E_BAD_GATEWAY;
  if (r->status == 404)
    code = SBX_E_NOT_FOUND;
  else if (r->status == 401 || r->status == 403)
    code = SBX_E_FORBIDDEN;
  return sbx_err_set(err, code, 0, "%s %s from %s: %s", what, cl->ref->canonical,
                     cl->ref->registry, why);
}

/* ---- manifests ----------------------------------------------------------- */

static int fetch_manifest(struct client *cl, const char *reference, char **body, size_t *len,
                          char *ctype, size_t clen, char *digest, struct sbx_error *err)
{
  char path[900];
  snprintf(path, sizeof path, "/v2/%s/manifests/%s", cl->ref->repository, reference);
  struct resp r = {.fd = -1, .max = IMG_MAX_MANIFEST};
  if (get(cl, path, ACCEPT_MANIFESTS, 0, &r, err) < 0) {
    free(r.buf);
    return -1;
  }
  if (r.status != 200) {
    status_error(cl, &r, "manifest of", err);
    free(r.buf);
    return -1;
  }
  if (!r.buf) {
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "empty manifest for %s", cl->ref->canonical);
  }
  img_digest_buf(r.buf, r.len, digest);
  if (img_digest_valid(reference) && img_digest_check("manifest", reference, digest, err) < 0) {
    free(r.buf);
    return -1;
  }
  snprintf(ctype, clen, "%s", r.content_type);
  *body = r.buf;
  *len = r.len;
  return 0;
}

/* ---- blobs --------------------------------------------------------------- */

/* Opens (creating it) the partial download at part and takes its lock,
 * which keeps two pullers from writing it at once. */
static int open_partial(const char *part, struct sbx_error *err)
{
  int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "open %s", part);
  while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
    ;
  return fd;
}

/* Starts h over the bytes a previous download left in fd (emptied first
 * when it holds more than size) and says in *have how many there are. */
static int hash_partial(int fd, const char *part, uint64_t size, struct img_hash *h,
                        uint64_t *have, struct sbx_error *err)
{
  struct stat st;
  if (fstat(fd, &st) < 0)
    return sbx_err_sys(err, errno, "stat %s", part);
  *have = (uint64_t)st.st_size;
  if (*have > size) {
    if (ftruncate(fd, 0) < 0)
      return sbx_err_sys(err, errno, "truncate %s", part);
    *have = 0;
  }
  img_hash_init(h);
  char buf[1 << 16];
  for (uint64_t off = 0; off < *have;) {
    ssize_t n = pread(fd, buf, sizeof buf, (off_t)off);
    if (n <= 0)
      return sbx_err_sys(err, n < 0 ? errno : EIO, "read %s", part);
    img_hash_update(h, buf, (size_t)n);
    off += (uint64_t)n;
  }
  return 0;
}

/* GETs the rest of blob d, from r->done on, into r's file and hash; starts
 * over when the registry ignores the range.  A download that sent more
 * than d announced is removed (not worth resuming). */
static int download_rest(struct client *cl, const struct img_desc *d, const char *part,
                         struct resp *r, struct sbx_error *err)
{
  char path[900];
  snprintf(path, sizeof path, "/v2/%s/blobs/%s", cl->ref->repository, d->digest);
  uint64_t have = r->done;
  int rc = get(cl, path, NULL, have, r, err);
  if (rc == 0 && r->status == 200 && have) {
    /* the registry ignored the Range: start over */
    sbx_info(IMG_SUB, "registry ignored the range request for %.19s", d->digest);
    sbx_buf_free(&r->body);
    if (ftruncate(r->fd, 0) < 0 || lseek(r->fd, 0, SEEK_SET) < 0)
      return sbx_err_sys(err, errno, "truncate %s", part);
    img_hash_init(r->hash);
    r->done = have = 0;
    rc = get(cl, path, NULL, 0, r, err);
  }
  if (rc == 0 && r->status != 200 && r->status != 206 && !(r->status == 416 && have))
    rc = status_error(cl, r, "blob of", err);
  free(r->buf);
  if (rc < 0) {
    if (r->overflow)
      unlink(part);
    return sbx_err_prefix(err, "blob %.19s", d->digest);
  }
  return 0;
}

/* Moves the downloaded part into the store once its size (done bytes) and
 * hash h match d; a corrupt one is removed, resuming it would only fail
 * again. */
static int commit_part(int fd, const char *part, const struct img_desc *d, uint64_t done,
                       struct img_hash *h, struct sbx_error *err)
{
  char got[IMG_DIGEST_LEN];
  img_hash_final(h, got);
  if (done != (uint64_t)d->size || img_digest_check(d->digest, d->digest, got, err) < 0) {
    unlink(part);
    if (done != (uint64_t)d->size)
      return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "blob %s: got %llu of %lld bytes", d->digest,
                         (unsigned long long)done, (long long)d->size);
    return -1;
  }
  if (fsync(fd) < 0)
    return sbx_err_sys(err, errno, "fsync %s", part);
  return img_blob_commit_file(part, d->digest, err);
}

/* Downloads one blob into the store unless it is there.  A partial file
 * under tmp/dl-<hex> is resumed (its bytes hashed again first). */
static int fetch_blob(struct client *cl, const struct img_desc *d, sbx_image_progress_fn cb,
                      void *ud, struct sbx_error *err)
{
  if (img_blob_exists(d->digest))
    return 0;
  char part[PATH_MAX];
  snprintf(part, sizeof part, "%s/tmp/dl-%s", img_root(), d->digest + 7);
  _cleanup_close_ int fd = open_partial(part, err);
  if (fd < 0)
    return -1;
  if (img_blob_exists(d->digest)) /* another puller finished it meanwhile */
    return 0;
  struct img_hash h;
  uint64_t have = 0;
  if (hash_partial(fd, part, (uint64_t)d->size, &h, &have, err) < 0)
    return -1;
  if (have)
    sbx_info(IMG_SUB, "resuming %.19s at %llu of %lld bytes", d->digest,
             (unsigned long long)have, (long long)d->size);
  struct resp r = {.fd = fd,
                   .max = ERR_BODY_MAX,
                   .hash = &h,
                   .done = have,
                   .total = (uint64_t)d->size,
                   .what = d->digest,
                   .cb = cb,
                   .ud = ud};
  lseek(fd, (off_t)have, SEEK_SET);
  if ((have < (uint64_t)d->size || d->size == 0) && download_rest(cl, d, part, &r, err) < 0)
    return -1;
  return commit_part(fd, part, d, r.done, &h, err);
}

/* ---- the pull ------------------------------------------------------------ */

static int store_config(struct client *cl, const struct img_manifest *m,
                        sbx_image_progress_fn cb, void *ud, struct sbx_error *err)
{
  if (m->config.size > (int64_t)IMG_MAX_CONFIG)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "image config of %lld bytes (limit %u)",
                       (long long)m->config.size, IMG_MAX_CONFIG);
  if (fetch_blob(cl, &m->config, NULL, NULL, err) < 0)
    return -1;
  char *body;
  size_t len;
  if (img_blob_read(m->config.digest, IMG_MAX_CONFIG, &body, &len, err) < 0)
    return -1;
  struct sbx_image tmp = {0};
  int rc = img_config_parse(body, len, m->nlayers, &tmp, err);
  img_config_free(&tmp);
  free(body);
  return rc;
}

static int pull_manifest(struct client *cl, char *manifest_digest, char *index_digest,
                         struct img_manifest *m, struct sbx_error *err)
{
  const char *reference = cl->ref->digest[0] ? cl->ref->digest : cl->ref->tag;
  char *body = NULL;
  size_t len;
  char ctype[128], digest[IMG_DIGEST_LEN];
  if (fetch_manifest(cl, reference, &body, &len, ctype, sizeof ctype, digest, err) < 0)
    return -1;
  int kind = img_manifest_kind(body, len, ctype);
  if (kind == 1) {
    snprintf(index_digest, IMG_DIGEST_LEN, "%s", digest);
    char pick[IMG_DIGEST_LEN];
    int rc =
        img_blob_put(body, len, digest, err) < 0 ? -1 : img_index_pick(body, len, pick, err);
    free(body);
    body = NULL;
    if (rc < 0 || fetch_manifest(cl, pick, &body, &len, ctype, sizeof ctype, digest, err) < 0)
      return sbx_err_prefix(err, "%s", cl->ref->canonical);
    kind = img_manifest_kind(body, len, ctype);
  }
  int rc = -1;
  if (kind != 0)
    sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "%s: not an image manifest (media type '%s')",
                cl->ref->canonical, ctype);
  else if (img_manifest_parse(body, len, m, err) == 0 &&
           img_blob_put(body, len, digest, err) == 0)
    rc = 0;
  free(body);
  snprintf(manifest_digest, IMG_DIGEST_LEN, "%s", digest);
  return rc;
}

int img_pull(const struct sbx_image_ref *ref, sbx_image_progress_fn cb, void *ud,
             char *manifest_digest, struct sbx_error *err)
{
  pthread_once(&curl_once, curl_init);
  struct client cl = {.ref = ref};
  snprintf(cl.base, sizeof cl.base, "%s://%s", ref->plain_http ? "http" : "https",
           ref->registry);
  img_auth_lookup(ref->registry, cl.creds, sizeof cl.creds);
  uint64_t t0 = sbx_now_ms();
  char index_digest[IMG_DIGEST_LEN] = "";
  _cleanup_free_ struct img_manifest *m = calloc(1, sizeof *m);
  if (!m)
    return sbx_err_sys(err, ENOMEM, "pull");
  if (pull_manifest(&cl, manifest_digest, index_digest, m, err) < 0 ||
      store_config(&cl, m, cb, ud, err) < 0)
    return -1;
  for (size_t i = 0; i < m->nlayers; i++) {
    const struct img_desc *d = &m->layers[i];
    if (img_layer_exists(d->digest))
      continue;
    if (fetch_blob(&cl, d, cb, ud, err) < 0 || img_layer_ensure(d->digest, err) < 0)
      return sbx_err_prefix(err, "%s", ref->canonical);
    sbx_info(IMG_SUB, "%s: layer %zu/%zu %.19s ready (%lld bytes)", ref->canonical, i + 1,
             m->nlayers, d->digest, (long long)d->size);
  }
  json_t *rec = img_record_new(manifest_digest, index_digest, m);
  int rc = rec ? img_refs_put(ref->canonical, rec, err) : sbx_err_sys(err, ENOMEM, "record");
  json_decref(rec);
  if (rc == 0)
    sbx_info(IMG_SUB, "pulled %s (%s, %zu layers) in %llu ms", ref->canonical, manifest_digest,
             m->nlayers, (unsigned long long)(sbx_now_ms() - t0));
  return rc;
}
