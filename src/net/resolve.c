/* resolve.c — names to addresses for the DNS responder and the egress
 * proxy: pins first (--resolve NAME=ADDR, like curl's), then one upstream
 * resolver (--dns-upstream ADDR[:PORT]), with a small cache.
 *
 * Why not res_nquery(): glibc's resolver state can only name an IPv6 or
 * non-53 upstream through private fields (_u._ext), and its timeouts and
 * retries are per-state knobs we would re-set on every call.  So the
 * transport (UDP, then TCP when the answer is truncated, one 2 s deadline)
 * is here, and the wire format goes through libc's dn_expand/dn_skipname,
 * which bound name lengths and refuse compression loops.  Replies must come
 * from the upstream (connected sockets), carry our random ID and echo our
 * question; anything else is ignored, so an off-path spoofer has to guess
 * 16 bits and a source port per query.
 *
 * The cache keeps A and AAAA together per name for the records' smallest
 * TTL, clamped to [5, 300] s; a name that does not exist is cached 5 s;
 * failures are not cached. */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net_int.h"

#define TIMEOUT_MS 2000
#define TTL_MIN 5
#define TTL_MAX 300
#define PIN_TTL 60
#define CACHE_MAX 512
#define NAME_ADDRS 32 /* addresses kept per name */
#define MAX_RRS 64    /* answer records looked at per reply */
#define MAX_CHAIN 8   /* CNAME hops followed */

struct pin {
  char name[254];
  struct sockaddr_storage addr;
};

struct cached {
  char name[254];
  time_t expires; /* monotonic seconds; 0: free slot */
  int n;
  struct sockaddr_storage addr[NAME_ADDRS];
};

static struct {
  pthread_mutex_t mu;
  struct pin *pins;
  size_t npins;
  bool have_upstream;
  struct sockaddr_storage upstream;
  unsigned generation; /* bumped by configure: late answers of the old setup are not cached */
  struct cached *cache;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static time_t now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static socklen_t ss_len(const struct sockaddr_storage *ss)
{
  return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

/* "1.2.3.4", "2001:db8::1" or "[2001:db8::1]" → ss with port. */
static int parse_ip(const char *s, uint16_t port, struct sockaddr_storage *ss)
{
  char buf[64];
  size_t n = strlen(s);
  if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
    s++;
    n -= 2;
  }
  if (n == 0 || n >= sizeof buf)
    return -1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, buf, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
  } else if (inet_pton(AF_INET6, buf, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
  } else {
    return -1;
  }
  return 0;
}

/* "ADDR", "ADDR:PORT", "[V6]:PORT" or a bare v6 address. */
static int parse_upstream(const char *s, struct sockaddr_storage *ss)
{
  char host[64];
  const char *port = NULL;
  const char *colon = strrchr(s, ':');
  const char *close = strchr(s, ']');
  if (s[0] == '[') {
    if (!close || (close[1] && close[1] != ':'))
      return -1;
    port = close[1] ? close + 2 : NULL;
    snprintf(host, sizeof host, "%.*s", (int)(close - s - 1), s + 1);
  } else if (colon && strchr(s, ':') == colon) { /* exactly one ':' */
    port = colon + 1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
  } else {
    snprintf(host, sizeof host, "%s", s);
  }
  unsigned long p = 53;
  if (port) {
    char *end;
    errno = 0;
    p = strtoul(port, &end, 10);
    if (!isdigit((unsigned char)*port) || *end || errno || p < 1 || p > 65535)
      return -1;
  }
  return parse_ip(host, (uint16_t)p, ss);
}

static int parse_pins(const char *const *pins, struct pin **out, size_t *nout,
                      struct sbx_error *err)
{
  size_t n = 0;
  while (pins && pins[n])
    n++;
  struct pin *v = calloc(n ? n : 1, sizeof *v);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "resolve pins");
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(pins[i], '=');
    char name[300];
    if (!eq || (size_t)(eq - pins[i]) >= sizeof name) {
      free(v);
      return sbx_err_set(err, SBX_E_INVALID, 0, "--resolve '%.100s' is not NAME=ADDR", pins[i]);
    }
    snprintf(name, sizeof name, "%.*s", (int)(eq - pins[i]), pins[i]);
    if (sbx_net_name_normalize(name, v[i].name, sizeof v[i].name) < 0 ||
        parse_ip(eq + 1, 0, &v[i].addr) < 0) {
      free(v);
      return sbx_err_set(err, SBX_E_INVALID, 0,
                         "--resolve '%.100s': want NAME=ADDR with a host name and an IP address",
                         pins[i]);
    }
  }
  *out = v;
  *nout = n;
  return 0;
}

int sbx_net_resolve_configure(const char *const *pins, const char *upstream,
                              struct sbx_error *err)
{
  struct pin *v = NULL;
  size_t n = 0;
  struct sockaddr_storage up;
  if (upstream && *upstream && parse_upstream(upstream, &up) < 0)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "--dns-upstream '%.100s' is not ADDR[:PORT] (IPv6 as [ADDR]:PORT)",
                       upstream);
  if (parse_pins(pins, &v, &n, err) < 0)
    return -1;
  struct cached *cache = calloc(CACHE_MAX, sizeof *cache);
  if (!cache) {
    free(v);
    return sbx_err_sys(err, ENOMEM, "resolve cache");
  }
  pthread_mutex_lock(&S.mu);
  free(S.pins);
  free(S.cache);
  S.pins = v;
  S.npins = n;
  S.have_upstream = upstream && *upstream;
  if (S.have_upstream)
    S.upstream = up;
  S.cache = cache;
  S.generation++;
  pthread_mutex_unlock(&S.mu);
  return 0;
}

/* ---- the wire ------------------------------------------------------------ */

size_t sbx_net_dns_put_question(uint8_t *msg, const char *name, unsigned qtype, unsigned qclass)
{
  msg[4] = 0;
  msg[5] = 1; /* one question */
  size_t o = 12;
  for (const char *l = name; *l;) {
    const char *dot = strchr(l, '.');
    size_t len = dot ? (size_t)(dot - l) : strlen(l);
    msg[o++] = (uint8_t)len;
    memcpy(msg + o, l, len);
    o += len;
    l += len + (dot ? 1 : 0);
  }
  msg[o++] = 0;
  msg[o++] = (uint8_t)(qtype >> 8);
  msg[o++] = (uint8_t)qtype;
  msg[o++] = (uint8_t)(qclass >> 8);
  msg[o++] = (uint8_t)qclass;
  return o;
}

static size_t build_query(const char *name, uint16_t qtype, uint16_t id, uint8_t *q)
{
  memset(q, 0, 12);
  q[0] = (uint8_t)(id >> 8);
  q[1] = (uint8_t)id;
  q[2] = 0x01; /* RD */
  return sbx_net_dns_put_question(q, name, qtype, ns_c_in);
}

/* Our ID, a response, and our question echoed (case-insensitively: some
 * resolvers randomize case). */
static bool reply_matches(const uint8_t *q, size_t qlen, const uint8_t *r, size_t rlen)
{
  if (rlen < qlen || r[0] != q[0] || r[1] != q[1] || !(r[2] & 0x80) || (r[2] & 0x78) ||
      r[4] != 0 || r[5] != 1)
    return false;
  for (size_t i = 12; i < qlen; i++)
    if (tolower(r[i]) != tolower(q[i]))
      return false;
  return true;
}

static int wait_fd(int fd, short ev, uint64_t deadline)
{
  struct pollfd p = {.fd = fd, .events = ev};
  return sbx_poll_until(&p, 1, deadline) > 0 ? 0 : -1;
}

/* 0: a matching reply in r (*rlen); 1: it was truncated; -1: failure. */
static int exchange_udp(const struct sockaddr_storage *up, const uint8_t *q, size_t qlen,
                        uint8_t *r, size_t cap, size_t *rlen, uint64_t deadline)
{
  _cleanup_close_ int fd = socket(up->ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr *)up, ss_len(up)) < 0 ||
      send(fd, q, qlen, 0) != (ssize_t)qlen)
    return -1;
  while (wait_fd(fd, POLLIN, deadline) == 0) {
    ssize_t n = recv(fd, r, cap, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n < 0)
      return -1; /* ICMP port unreachable, for one */
    if (!reply_matches(q, qlen, r, (size_t)n))
      continue; /* not ours: keep waiting for the real one */
    *rlen = (size_t)n;
    return (r[2] & 0x02) ? 1 : 0;
  }
  return -1;
}

static int io_all(int fd, uint8_t *buf, size_t len, bool out, uint64_t deadline)
{
  size_t done = 0;
  while (done < len) {
    if (wait_fd(fd, out ? POLLOUT : POLLIN, deadline) < 0)
      return -1;
    ssize_t n = out ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
                    : recv(fd, buf + done, len - done, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n <= 0)
      return -1;
    done += (size_t)n;
  }
  return 0;
}

static int exchange_tcp(const struct sockaddr_storage *up, const uint8_t *q, size_t qlen,
                        uint8_t *r, size_t cap, size_t *rlen, uint64_t deadline)
{
  _cleanup_close_ int fd = socket(up->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (const struct sockaddr *)up, ss_len(up)) < 0 && errno != EINPROGRESS)
    return -1;
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  if (wait_fd(fd, POLLOUT, deadline) < 0 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)
    return -1;
  uint8_t out[2 + 512];
  out[0] = (uint8_t)(qlen >> 8);
  out[1] = (uint8_t)qlen;
  memcpy(out + 2, q, qlen);
  uint8_t lenb[2];
  if (io_all(fd, out, qlen + 2, true, deadline) < 0 || io_all(fd, lenb, 2, false, deadline) < 0)
    return -1;
  size_t n = (size_t)lenb[0] << 8 | lenb[1];
  if (n > cap || io_all(fd, r, n, false, deadline) < 0 || !reply_matches(q, qlen, r, n))
    return -1;
  *rlen = n;
  return 0;
}

struct answer {
  int n;
  struct sockaddr_storage addr[NAME_ADDRS];
  uint32_t ttl;
};

static void add_addr(struct answer *a, int family, const uint8_t *rd)
{
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_family = (sa_family_t)family;
  if (family == AF_INET)
    memcpy(&((struct sockaddr_in *)&ss)->sin_addr, rd, 4);
  else
    memcpy(&((struct sockaddr_in6 *)&ss)->sin6_addr, rd, 16);
  for (int i = 0; i < a->n; i++)
    if (memcmp(&a->addr[i], &ss, sizeof ss) == 0)
      return;
  if (a->n < NAME_ADDRS)
    a->addr[a->n++] = ss;
}

struct rr {
  char owner[256];
  uint16_t type, class;
  uint32_t ttl;
  const uint8_t *rdata;
  uint16_t rdlen;
};

/* Reads the IN records of the answer section (an records from p on, at
 * most MAX_RRS kept) into rrs: how many, or -1 when one overruns the
 * reply. */
static int read_answers(const uint8_t *r, const uint8_t *end, const uint8_t *p, unsigned an,
                        struct rr *rrs)
{
  int nrr = 0;
  for (unsigned i = 0; i < an && nrr < MAX_RRS; i++) {
    struct rr *x = &rrs[nrr];
    int l = dn_expand(r, end, p, x->owner, sizeof x->owner);
    if (l < 0 || p + l + 10 > end)
      return -1;
    p += l;
    x->type = (uint16_t)(p[0] << 8 | p[1]);
    x->class = (uint16_t)(p[2] << 8 | p[3]);
    x->ttl = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
    x->rdlen = (uint16_t)(p[8] << 8 | p[9]);
    x->rdata = p + 10;
    if (x->rdata + x->rdlen > end)
      return -1;
    p = x->rdata + x->rdlen;
    if (x->class == ns_c_in)
      nrr++;
  }
  return nrr;
}

/* qname and the names its CNAME chain leads to (MAX_CHAIN hops at most)
 * into chain, lowering a->ttl to the chain's: how many names, or -1. */
static int follow_cnames(const uint8_t *r, const uint8_t *end, const struct rr *rrs, size_t nrr,
                         const char *qname, char (*chain)[256], struct answer *a)
{
  size_t nchain = 1;
  snprintf(chain[0], sizeof chain[0], "%s", qname);
  for (bool grew = true; grew && nchain <= MAX_CHAIN;) {
    grew = false;
    for (size_t i = 0; i < nrr && nchain <= MAX_CHAIN; i++) {
      if (rrs[i].type != ns_t_cname || strcasecmp(rrs[i].owner, chain[nchain - 1]) != 0)
        continue;
      if (dn_expand(r, end, rrs[i].rdata, chain[nchain], sizeof chain[0]) < 0)
        return -1;
      a->ttl = rrs[i].ttl < a->ttl ? rrs[i].ttl : a->ttl;
      nchain++;
      grew = true;
      break;
    }
  }
  return (int)nchain;
}

/* Adds to a the qtype records owned by a name of the chain. */
static void collect_addrs(const struct rr *rrs, size_t nrr, uint16_t qtype, char (*chain)[256],
                          size_t nchain, struct answer *a)
{
  size_t want = qtype == ns_t_a ? 4 : 16;
  for (size_t i = 0; i < nrr; i++) {
    if (rrs[i].type != qtype || rrs[i].rdlen != want)
      continue;
    for (size_t c = 0; c < nchain; c++) {
      if (strcasecmp(rrs[i].owner, chain[c]) == 0) {
        add_addr(a, qtype == ns_t_a ? AF_INET : AF_INET6, rrs[i].rdata);
        a->ttl = rrs[i].ttl < a->ttl ? rrs[i].ttl : a->ttl;
        break;
      }
    }
  }
}

/* Reads the answer section: A/AAAA of qname or of the CNAME chain from it.
 * 0 (possibly no address: NXDOMAIN / NODATA) or -1 (SERVFAIL, garbage). */
static int parse_reply(const uint8_t *r, size_t len, const char *qname, uint16_t qtype,
                       struct answer *a)
{
  unsigned rcode = r[3] & 0x0f;
  a->ttl = TTL_MAX;
  if (rcode == ns_r_nxdomain)
    return 0;
  if (rcode != ns_r_noerror)
    return -1;
  const uint8_t *end = r + len, *p = r + 12;
  int skip = dn_skipname(p, end); /* reply_matches checked qdcount == 1 */
  if (skip < 0 || p + skip + 4 > end)
    return -1;
  unsigned an = (unsigned)r[6] << 8 | r[7];
  _cleanup_free_ struct rr *rrs = malloc(MAX_RRS * sizeof *rrs);
  if (!rrs)
    return -1;
  int nrr = read_answers(r, end, p + skip + 4, an, rrs);
  if (nrr < 0)
    return -1;
  char chain[MAX_CHAIN + 1][256];
  int nchain = follow_cnames(r, end, rrs, (size_t)nrr, qname, chain, a);
  if (nchain < 0)
    return -1;
  collect_addrs(rrs, (size_t)nrr, qtype, chain, (size_t)nchain, a);
  return 0;
}

static int query_upstream(const struct sockaddr_storage *up, const char *name, uint16_t qtype,
                          struct answer *a)
{
  uint8_t q[12 + 256 + 4];
  uint16_t id;
  if (getrandom(&id, sizeof id, 0) != sizeof id)
    id = (uint16_t)(now_s() ^ (uintptr_t)&id);
  size_t qlen = build_query(name, qtype, id, q);
  uint64_t deadline = sbx_now_ms() + TIMEOUT_MS;
  _cleanup_free_ uint8_t *r = malloc(65536);
  size_t rlen = 0;
  if (!r)
    return -1;
  int rc = exchange_udp(up, q, qlen, r, 65536, &rlen, deadline);
  if (rc == 1)
    rc = exchange_tcp(up, q, qlen, r, 65536, &rlen, deadline);
  if (rc < 0)
    return -1;
  return parse_reply(r, rlen, name, qtype, a);
}

/* ---- cache and lookup ---------------------------------------------------- */

static struct cached *cache_find_locked(const char *name, time_t now)
{
  for (size_t i = 0; S.cache && i < CACHE_MAX; i++)
    if (S.cache[i].expires > now && strcmp(S.cache[i].name, name) == 0)
      return &S.cache[i];
  return NULL;
}

static void cache_put_locked(const char *name, const struct answer *a, time_t now)
{
  if (!S.cache)
    return;
  struct cached *slot = &S.cache[0];
  for (size_t i = 0; i < CACHE_MAX; i++) {
    struct cached *c = &S.cache[i];
    if (c->expires <= now || strcmp(c->name, name) == 0) {
      slot = c;
      break;
    }
    if (c->expires < slot->expires)
      slot = c;
  }
  uint32_t ttl = a->ttl < TTL_MIN ? TTL_MIN : a->ttl > TTL_MAX ? TTL_MAX : a->ttl;
  snprintf(slot->name, sizeof slot->name, "%s", name);
  slot->expires = now + (time_t)ttl;
  slot->n = a->n;
  memcpy(slot->addr, a->addr, (size_t)a->n * sizeof a->addr[0]);
}

static int copy_out(const struct sockaddr_storage *src, int n, struct sockaddr_storage *out,
                    int max)
{
  int k = n < max ? n : max;
  if (k > 0)
    memcpy(out, src, (size_t)k * sizeof *out);
  return k < 0 ? 0 : k;
}

enum { ASK_UPSTREAM = -1 };

/* What the daemon knows of norm without asking: its pins, else a cached
 * answer; with no upstream, nothing more.  Returns how many addresses it
 * put in out (with *ttl), or ASK_UPSTREAM with the upstream and the
 * configuration's generation to ask it with. */
static int answer_known(const char *norm, struct sockaddr_storage *out, int max, unsigned *ttl,
                        struct sockaddr_storage *up, unsigned *gen)
{
  time_t now = now_s();
  pthread_mutex_lock(&S.mu);
  int n = 0;
  for (size_t i = 0; i < S.npins; i++)
    if (strcmp(S.pins[i].name, norm) == 0 && n < max)
      out[n++] = S.pins[i].addr;
  bool pinned = n > 0;
  struct cached *c = pinned ? NULL : cache_find_locked(norm, now);
  if (c) {
    n = copy_out(c->addr, c->n, out, max);
    *ttl = (unsigned)(c->expires - now);
  } else if (pinned) {
    *ttl = PIN_TTL;
  } else if (S.have_upstream) {
    *up = S.upstream;
    *gen = S.generation;
    n = ASK_UPSTREAM;
  }
  pthread_mutex_unlock(&S.mu);
  return n;
}

/* Adds a6's addresses to a4's and gives a4 the smallest TTL of the records
 * kept; no record at all (NXDOMAIN, NODATA) is remembered for the floor
 * only. */
static void merge_answers(struct answer *a4, const struct answer *a6)
{
  uint32_t t = TTL_MAX;
  if (a4->n > 0 && a4->ttl < t)
    t = a4->ttl;
  if (a6->n > 0 && a6->ttl < t)
    t = a6->ttl;
  for (int i = 0; i < a6->n; i++)
    if (a4->n < NAME_ADDRS)
      a4->addr[a4->n++] = a6->addr[i];
  a4->ttl = a4->n > 0 ? t : TTL_MIN;
}

/* Asks up for norm's A and AAAA records; a complete answer is cached
 * unless the configuration changed meanwhile (gen). */
static int ask_upstream(const struct sockaddr_storage *up, unsigned gen, const char *norm,
                        struct sockaddr_storage *out, int max, unsigned *ttl)
{
  _cleanup_free_ struct answer *a4 = calloc(1, sizeof *a4);
  _cleanup_free_ struct answer *a6 = calloc(1, sizeof *a6);
  if (!a4 || !a6)
    return -1;
  int r4 = query_upstream(up, norm, ns_t_a, a4);
  int r6 = query_upstream(up, norm, ns_t_aaaa, a6);
  if ((r4 < 0 && r6 < 0) || (r4 < 0 && a6->n == 0) || (r6 < 0 && a4->n == 0))
    return -1;
  merge_answers(a4, a6);
  if (r4 == 0 && r6 == 0) {
    pthread_mutex_lock(&S.mu);
    if (gen == S.generation)
      cache_put_locked(norm, a4, now_s());
    pthread_mutex_unlock(&S.mu);
  } else {
    a4->ttl = TTL_MIN; /* a partial answer is not cached */
  }
  *ttl = a4->ttl < TTL_MIN ? TTL_MIN : a4->ttl > TTL_MAX ? TTL_MAX : a4->ttl;
  return copy_out(a4->addr, a4->n, out, max);
}

int sbx_net_resolve_ttl(const char *name, struct sockaddr_storage *out, int max, unsigned *ttl)
{
  char norm[254];
  unsigned dummy;
  if (!ttl)
    ttl = &dummy;
  *ttl = 0;
  if (!name || sbx_net_name_normalize(name, norm, sizeof norm) < 0)
    return 0;
  struct sockaddr_storage up;
  unsigned gen = 0;
  int n = answer_known(norm, out, max, ttl, &up, &gen);
  if (n != ASK_UPSTREAM)
    return n;
  /* Outside the lock: a slow upstream must not stall the other lookups. */
  return ask_upstream(&up, gen, norm, out, max, ttl);
}

int sbx_net_resolve(const char *name, struct sockaddr_storage *out, int max)
{
  return sbx_net_resolve_ttl(name, out, max, NULL);
}
