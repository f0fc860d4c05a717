/* forward.c — see forward.h.  The signature is HMAC-SHA256 (libsodium)
 * over one canonical text:
 *   sandboxd-node-v1 \n METHOD \n TARGET \n FROM-NODE \n UNIX-TIME \n
 *   NONCE \n PLACED \n PRINCIPAL \n SHA256-HEX-OF-BODY
 * sent as lowercase hex in X-Sandboxd-Signature, with the pieces in
 * X-Sandboxd-Node, -Time, -Nonce, -Placed, -Principal and -Body-Sha256.
 * Nonces seen in the last 2 × FORWARD_SKEW_S are remembered (a fixed
 * table: a flood of valid requests can only evict, never grow it), so a
 * captured request cannot be replayed while its time is still accepted. */
#include "api/forward.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/proxy.h"
#include "common/log.h"
#include "common/util.h"

#define FORWARD_SKEW_S 30
#define SECRET_MIN 32
#define SECRET_MAX 4096
#define NONCE_SLOTS 8192
#define CONNECT_TIMEOUT_MS 2000
#define HEAD_TIMEOUT_MS (15u * 60 * 1000) /* an exec answers when it ends */
#define MAX_FWD_HEADERS 100
#define H_SIG "X-Sandboxd-Signature"
#define H_NODE "X-Sandboxd-Node"
#define H_TIME "X-Sandboxd-Time"
#define H_NONCE "X-Sandboxd-Nonce"
#define H_PLACED "X-Sandboxd-Placed"
#define H_PRINCIPAL "X-Sandboxd-Principal"
#define H_BODY "X-Sandboxd-Body-Sha256"

static unsigned char *g_secret;
static size_t g_secret_len;

static struct {
  pthread_mutex_t lock;
  struct seen {
    char nonce[33];
    int64_t at;
  } slot[NONCE_SLOTS];
} g_nonces = {.lock = PTHREAD_MUTEX_INITIALIZER};

int sbx_forward_init(const char *path, bool cluster, struct sbx_error *err)
{
  if (!cluster)
    return 0;
  if (!path || !path[0])
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "--cluster needs --cluster-secret-file: the fleet's shared secret "
                       "(at least %d bytes) that signs node-to-node requests",
                       SECRET_MIN);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return sbx_err_sys(err, e, "cluster secret %s", path);
  }
  if (st.st_mode & 0077) {
    close(fd);
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "cluster secret %s is readable by others (mode %o): chmod 600 it", path,
                       (unsigned)(st.st_mode & 0777));
  }
  unsigned char buf[SECRET_MAX];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--;
  if (n < SECRET_MIN) {
    sodium_memzero(buf, sizeof buf);
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "cluster secret %s holds %zd bytes: at least %d are needed", path,
                       n < 0 ? 0 : n, SECRET_MIN);
  }
  g_secret = sodium_malloc((size_t)n);
  if (!g_secret)
    return sbx_err_sys(err, ENOMEM, "cluster secret");
  memcpy(g_secret, buf, (size_t)n);
  g_secret_len = (size_t)n;
  sodium_memzero(buf, sizeof buf);
  return 0;
}

void sbx_forward_shutdown(void)
{
  if (g_secret)
    sodium_free(g_secret);
  g_secret = NULL;
  g_secret_len = 0;
}

/* ---- the signature ---- */

static void hex(const unsigned char *in, size_t n, char *out)
{
  sodium_bin2hex(out, n * 2 + 1, in, n);
}

static void body_digest(const struct sbx_req *r, char out[65])
{
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(d, (const unsigned char *)(r->body ? r->body : ""), r->body_len);
  hex(d, sizeof d, out);
}

struct signed_fields {
  const char *method, *target, *node, *time, *nonce, *placed, *principal, *body;
};

static void mac(const struct signed_fields *f, char out[65])
{
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, g_secret, g_secret_len);
  const char *parts[] = {"sandboxd-node-v1", f->method, f->target,    f->node, f->time,
                         f->nonce,           f->placed, f->principal, f->body};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (i)
      crypto_auth_hmacsha256_update(&st, (const unsigned char *)"\n", 1);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)parts[i], strlen(parts[i]));
  }
  unsigned char m[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, m);
  hex(m, sizeof m, out);
}

/* "TENANT_ID ADMIN KEY_ID TENANT_NAME" (the name last: it may hold spaces). */
static void principal_text(const struct sbx_principal *who, char *buf, size_t len)
{
  snprintf(buf, len, "%" PRId64 " %d %s %s", who->tenant_id, who->admin ? 1 : 0,
           who->key_id[0] ? who->key_id : "-", who->tenant);
}

static bool principal_parse(const char *s, struct sbx_principal *who)
{
  memset(who, 0, sizeof *who);
  int admin = 0, off = 0;
  long long tid = 0;
  char key[40];
  if (sscanf(s, "%lld %d %39s %n", &tid, &admin, key, &off) != 3 || off <= 0 || tid <= 0 ||
      (admin != 0 && admin != 1) || !s[off] || strlen(s + off) >= sizeof who->tenant)
    return false;
  who->tenant_id = tid;
  who->admin = admin == 1;
  snprintf(who->key_id, sizeof who->key_id, "%s", strcmp(key, "-") ? key : "");
  snprintf(who->tenant, sizeof who->tenant, "%s", s + off);
  return true;
}

bool sbx_forward_claimed(struct sbx_req *r) { return sbx_req_header(r, H_SIG) != NULL; }

static int refuse(struct sbx_error *err, const char *why)
{
  sbx_fleet_count_forward("refused", -1);
  sbx_err_set(err, SBX_E_UNAUTHENTICATED, 0, "node-to-node request refused: %s", why);
  return sbx_err_fr(err, "Requête entre nœuds refusée : %s", why);
}

/* true when the nonce is new (and now remembered). */
static bool nonce_fresh(const char *nonce, int64_t now)
{
  uint64_t h = 1469598103934665603ULL; /* FNV-1a: only spreads the slots */
  for (const char *p = nonce; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  pthread_mutex_lock(&g_nonces.lock);
  bool fresh = true;
  size_t victim = h % NONCE_SLOTS;
  for (size_t i = 0; i < 8; i++) { /* a short probe: the oldest of 8 is evicted */
    struct seen *s = &g_nonces.slot[(h + i) % NONCE_SLOTS];
    if (strcmp(s->nonce, nonce) == 0 && now - s->at <= 2 * FORWARD_SKEW_S)
      fresh = false;
    if (s->at < g_nonces.slot[victim].at)
      victim = (h + i) % NONCE_SLOTS;
  }
  if (fresh) {
    snprintf(g_nonces.slot[victim].nonce, sizeof g_nonces.slot[victim].nonce, "%s", nonce);
    g_nonces.slot[victim].at = now;
  }
  pthread_mutex_unlock(&g_nonces.lock);
  return fresh;
}

int sbx_forward_authenticate(struct sbx_req *r, struct sbx_error *err)
{
  if (!g_secret)
    return refuse(err, "this daemon is not in a fleet");
  struct signed_fields f = {
      .method = r->method,
      .target = r->target ? r->target : "",
      .node = sbx_req_header(r, H_NODE),
      .time = sbx_req_header(r, H_TIME),
      .nonce = sbx_req_header(r, H_NONCE),
      .placed = sbx_req_header(r, H_PLACED),
      .principal = sbx_req_header(r, H_PRINCIPAL),
      .body = sbx_req_header(r, H_BODY),
  };
  const char *sig = sbx_req_header(r, H_SIG);
  if (!f.node || !f.time || !f.nonce || !f.placed || !f.principal || !f.body || !sig)
    return refuse(err, "signature headers missing");
  if (strlen(f.nonce) != 32 || strlen(f.body) != 64 || strlen(sig) != 64)
    return refuse(err, "malformed signature headers");
  char want[65];
  mac(&f, want);
  if (sodium_memcmp(want, sig, 64) != 0)
    return refuse(err, "bad signature");
  int64_t now = sbx_wall_s(), t = strtoll(f.time, NULL, 10);
  if (t < now - FORWARD_SKEW_S || t > now + FORWARD_SKEW_S)
    return refuse(err, "signed too long ago (or clocks apart by more than 30 s)");
  if (!nonce_fresh(f.nonce, now))
    return refuse(err, "replayed");
  if (!principal_parse(f.principal, &r->who))
    return refuse(err, "malformed principal");
  r->from_node = true;
  r->placed_here = strcmp(f.placed, "1") == 0;
  snprintf(r->signed_body, sizeof r->signed_body, "%s", f.body);
  return 0;
}

int sbx_forward_body_ok(struct sbx_req *r, struct sbx_error *err)
{
  char got[65];
  body_digest(r, got);
  return sodium_memcmp(got, r->signed_body, 64) == 0 ? 0 : refuse(err, "body altered");
}

/* ---- sending ---- */

static void take_header(void *ctx, const char *name, const char *value)
{
  struct sbx_proxy_lines *h = ctx;
  /* A client's own X-Sandboxd-* headers never reach the owner. */
  if (sbx_proxy_drop_request_header(name) || strncasecmp(name, "X-Sandboxd-", 11) == 0 ||
      strcasecmp(name, "X-Request-Id") == 0 || strcasecmp(name, "traceparent") == 0)
    return;
  if (h->n >= MAX_FWD_HEADERS)
    h->bad = true;
  else
    sbx_proxy_line_add(h, name, value);
}

/* "http://HOST:PORT" → a connected TCP socket, or -1 with err. */
static int connect_node(const char *url, int *fd, struct sbx_error *err)
{
  char host[256], port[16] = "80";
  const char *hp = url + 7; /* after "http://" (fleet.c checked it) */
  size_t hl = strcspn(hp, "/");
  if (hl >= sizeof host)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "node address too long");
  memcpy(host, hp, hl);
  host[hl] = '\0';
  char *colon = strrchr(host, ':');
  if (host[0] == '[') { /* [v6]:port */
    char *close = strchr(host, ']');
    if (close && close[1] == ':')
      snprintf(port, sizeof port, "%s", close + 2);
    if (close)
      *close = '\0';
    memmove(host, host + 1, strlen(host));
  } else if (colon) {
    snprintf(port, sizeof port, "%s", colon + 1);
    *colon = '\0';
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
  int gai = getaddrinfo(host, port, &hints, &ai);
  if (gai != 0)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "node %s: %s", url, gai_strerror(gai));
  int rc = -1;
  for (struct addrinfo *a = ai; a && rc < 0; a = a->ai_next) {
    int s = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
      continue;
    if (connect(s, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
      close(s);
      continue;
    }
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (poll(&p, 1, CONNECT_TIMEOUT_MS) != 1 ||
        getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
      close(s);
      continue;
    }
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
    *fd = s;
    rc = 0;
  }
  freeaddrinfo(ai);
  if (rc < 0)
    sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "node at %s cannot be reached", url);
  return rc;
}

static int sign_into(struct sbx_req *r, struct sbx_core *core, bool placed,
                     struct sbx_proxy_lines *h)
{
  char principal[256], when[24], nonce[33], body[65], sig[65];
  unsigned char raw[16];
  randombytes_buf(raw, sizeof raw);
  hex(raw, sizeof raw, nonce);
  snprintf(when, sizeof when, "%" PRId64, sbx_wall_s());
  principal_text(&r->who, principal, sizeof principal);
  body_digest(r, body);
  struct signed_fields f = {.method = r->method,
                            .target = r->target ? r->target : "",
                            .node = sbx_fleet_node_id(core),
                            .time = when,
                            .nonce = nonce,
                            .placed = placed ? "1" : "0",
                            .principal = principal,
                            .body = body};
  mac(&f, sig);
  sbx_proxy_line_add(h, H_NODE, f.node);
  sbx_proxy_line_add(h, H_TIME, when);
  sbx_proxy_line_add(h, H_NONCE, nonce);
  sbx_proxy_line_add(h, H_PLACED, f.placed);
  sbx_proxy_line_add(h, H_PRINCIPAL, principal);
  sbx_proxy_line_add(h, H_BODY, body);
  sbx_proxy_line_add(h, H_SIG, sig);
  sbx_proxy_line_add(h, "X-Request-Id", r->request_id);
  char tp[64];
  if (sbx_fleet_traceparent(tp)) /* the owner's spans continue this request's trace */
    sbx_proxy_line_add(h, "traceparent", tp);
  return h->bad ? -1 : 0;
}

int sbx_forward(struct sbx_req *r, const struct sbx_fleet_target *to, bool placed,
                struct sbx_resp *out, struct sbx_error *err)
{
  uint64_t t0 = sbx_now_ns();
  struct sbx_proxy_lines h = {0};
  sbx_req_each_header(r, take_header, &h);
  int rc = sign_into(r, r->core, placed, &h);
  sbx_proxy_lines_end(&h, sbx_req_header(r, "Content-Type") != NULL,
                      sbx_req_header(r, "Accept") != NULL);
  if (rc < 0 || h.bad) {
    sbx_proxy_lines_free(&h);
    return sbx_err_field(err, "headers", "too many request headers to forward (at most %d)",
                         MAX_FWD_HEADERS);
  }
  char *url = NULL;
  int fd = -1;
  if (asprintf(&url, "%s%s", to->url, r->target ? r->target : r->path) < 0) {
    sbx_proxy_lines_free(&h);
    return sbx_err_sys(err, ENOMEM, "forward");
  }
  rc = connect_node(to->url, &fd, err);
  struct sbx_proxy *p = NULL;
  if (rc == 0) {
    rc = sbx_proxy_start_for(r, fd, url, h.line, HEAD_TIMEOUT_MS, &p, err);
  }
  free(url);
  sbx_proxy_lines_free(&h);
  double secs = (double)(sbx_now_ns() - t0) / 1e9;
  if (rc < 0) {
    sbx_fleet_count_forward("unreachable", secs);
    sbx_warn("fleet", "forwarding %s %s to node %s: %s", r->method, r->path, to->node, err->msg);
    sbx_err_set(err, SBX_E_BAD_GATEWAY, 0,
                "the node %s that owns this object cannot be reached; if it is down, the "
                "fleet declares it dead within seconds and its sessions become lost",
                to->node);
    return sbx_err_fr(err,
                      "Le nœud %s qui détient cet objet est injoignable ; s'il est arrêté, la "
                      "flotte le déclare mort en quelques secondes et ses sessions sont perdues",
                      to->node);
  }
  sbx_fleet_count_forward("ok", secs);
  sbx_proxy_respond(p, out);
  return 0;
}
