/* egress.c — owns the egress proxy (sbx_net_egress_start/stop): the one
 * place where a sandbox's HTTP and TLS connections are checked against the
 * domain rules of its policy.
 *
 * One acceptor thread listens on 0.0.0.0:P and [::]:P (same ephemeral port);
 * each accepted connection gets a small detached worker thread (bounded:
 * MAX_CONNS in all, MAX_CONNS_PEER per sandbox, so one sandbox cannot
 * starve the others).  A worker:
 *   1. finds the sandbox by the source address (registry; unknown → RST);
 *   2. transparent mode — nft redirected the sandbox's dest:80/443 here and
 *      SO_ORIGINAL_DST says where it was going: the TLS SNI or HTTP Host
 *      must be allowed AND resolve to that very address (no fronting to an
 *      arbitrary IP), or a CIDR rule must admit the address itself;
 *      explicit mode — the sandbox connected to the proxy port itself
 *      (HTTP_PROXY): CONNECT host:port or GET http://host/…, checked, then
 *      the proxy resolves and connects itself;
 *   3. records the decision (sbx_net_decide), refuses at once (403 with
 *      X-Sandboxd-Reason, or a fatal TLS alert) or connects upstream and
 *      relays bytes both ways with half-close until either side ends.
 * Addresses in an always-closed range (loopback, private, metadata, the
 * host, …) are never reached unless a CIDR rule names them (admit_addr).
 * TLS is never terminated.  Every wait also polls g.stop_fd, so stop
 * ends every worker promptly. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "net/net_int.h"
#include "net/sni.h"

enum {
  MAX_CONNS = 4096,
  MAX_CONNS_PEER = 256,
  HEAD_TIMEOUT_MS = 10000,    /* whole request head / ClientHello (slowloris) */
  CONNECT_TIMEOUT_MS = 10000, /* upstream connect, all candidate addresses */
  IDLE_TIMEOUT_MS = 300000,   /* relay with no byte either way */
  REPLY_TIMEOUT_MS = 2000,    /* our own short replies */
  RELAY_BUF = 32768,
  MAX_ADDRS = 16,
  WORKER_STACK = 256 * 1024,
};

struct conn {
  struct conn *prev, *next;
  int cfd, ufd;
  bool counted; /* in its sandbox's MAX_CONNS_PEER count (peer is set) */
  struct sockaddr_storage src, local;
  struct sbx_net_peer peer;
  struct sbx_net_policy *policy;
  size_t len; /* bytes of buf read from the sandbox so far */
  uint8_t buf[SBX_NET_HEAD_MAX];
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool running;
  int lfd[2];
  int nlfd;
  int stop_fd; /* eventfd, written once at stop and never read: readable for all */
  uint16_t port;
  pthread_t acceptor;
  struct conn *conns;
  unsigned nconns;
} g = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {-1, -1}, 0, -1, 0, 0, NULL, 0};

/* ---- addresses ------------------------------------------------------ */

/* Family, address bytes and port of ss; a v4-mapped v6 address is v4. */
static void sa_parts(const struct sockaddr_storage *ss, int *fam, const void **addr,
                     uint16_t *port)
{
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
    *port = ntohs(s6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
      *fam = AF_INET;
      *addr = s6->sin6_addr.s6_addr + 12;
    } else {
      *fam = AF_INET6;
      *addr = s6->sin6_addr.s6_addr;
    }
  } else {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
    *fam = AF_INET;
    *addr = &s4->sin_addr;
    *port = ntohs(s4->sin_port);
  }
}

static bool same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
  int fa, fb;
  const void *xa, *xb;
  uint16_t pa, pb;
  sa_parts(a, &fa, &xa, &pa);
  sa_parts(b, &fb, &xb, &pb);
  return fa == fb && pa == pb && memcmp(xa, xb, fa == AF_INET ? 4 : 16) == 0;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
  if (ss->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
  else
    ((struct sockaddr_in *)ss)->sin_port = htons(port);
}

/* "name:port", "198.51.100.7:80", "[2001:db8::1]:443". */
static void fmt_dest(char *out, size_t outsz, const char *name, int fam, const void *addr,
                     uint16_t port)
{
  char ip[INET6_ADDRSTRLEN] = "?";
  if (!name || !*name) {
    inet_ntop(fam, addr, ip, sizeof ip);
    name = ip;
  }
  bool v6 = strchr(name, ':') != NULL;
  snprintf(out, outsz, "%s%s%s:%u", v6 ? "[" : "", name, v6 ? "]" : "", port);
}

/* Where the sandbox was going before nft redirected it; -1 if not
 * redirected (no conntrack entry) — the caller also treats "here" as
 * explicit mode. */
static int original_dst(int fd, const struct sockaddr_storage *local,
                        struct sockaddr_storage *out)
{
  memset(out, 0, sizeof *out);
  int fam;
  const void *addr;
  uint16_t port;
  sa_parts(local, &fam, &addr, &port);
  socklen_t len = sizeof *out;
  if (fam == AF_INET) {
    len = sizeof(struct sockaddr_in);
    return getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, out, &len);
  }
  len = sizeof(struct sockaddr_in6);
  return getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, out, &len);
}

/* ---- policy --------------------------------------------------------- */

/* Index of a CIDR rule admitting addr:port, or -1; an address in an
 * always-closed range only by a rule that names it (no wider than the
 * closed range: policy.c's rule, the same one the nft rules follow).
 * *closed gets the range's name (NULL when public). */
static int admit_addr(const struct sbx_net_policy *p, int fam, const void *addr, uint16_t port,
                      const char **closed)
{
  *closed = sbx_net_addr_closed(fam, addr);
  return *closed ? sbx_net_policy_match_closed(p, fam, addr, port)
                 : sbx_net_policy_match_addr(p, fam, addr, port);
}

struct verdict {
  bool allowed;
  int status;       /* when refused: 403, or 502 when the name does not resolve */
  const char *rule; /* the admitting rule's text */
  char reason[320];
  struct sockaddr_storage addrs[MAX_ADDRS]; /* where to connect, ports set */
  int naddrs;
};

static void add_addr(struct verdict *v, int fam, const void *addr, uint16_t port)
{
  struct sockaddr_storage *ss = &v->addrs[v->naddrs++];
  memset(ss, 0, sizeof *ss);
  if (fam == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    memcpy(&s4->sin_addr, addr, 4);
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    memcpy(&s6->sin6_addr, addr, 16);
  }
  set_port(ss, port);
}

__attribute__((format(printf, 3, 4))) static void refuse(struct verdict *v, int status,
                                                         const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->reason, sizeof v->reason, fmt, ap);
  va_end(ap);
  v->allowed = false;
  v->status = status;
}

static void refuse_name(const struct sbx_net_policy *p, struct verdict *v, const char *name,
                        uint16_t port)
{
  if (p->egress == SBX_NET_EGRESS_ALLOWLIST && sbx_net_policy_match_name(p, name, 0) >= 0)
    refuse(v, 403, "port %u of %s not in allowlist", port, name);
  else
    refuse(v, 403, "%s not in allowlist", name);
}

/* An address the sandbox names itself (IP literal, or the original
 * destination): only CIDR rules can admit it. */
static void admit_literal(const struct sbx_net_policy *p, int fam, const void *addr,
                          uint16_t port, struct verdict *v)
{
  const char *closed;
  char dest[80];
  int i = admit_addr(p, fam, addr, port, &closed);
  if (i >= 0) {
    v->allowed = true;
    v->rule = p->rules[i].text;
    add_addr(v, fam, addr, port);
    return;
  }
  fmt_dest(dest, sizeof dest, NULL, fam, addr, port);
  if (closed)
    refuse(v, 403, "%s is in the %s range", dest, closed);
  else
    refuse(v, 403, "%s not in allowlist", dest);
}

/* Explicit mode: the proxy resolves the name and picks the addresses. */
static void admit_explicit(const struct sbx_net_policy *p, const char *host, uint16_t port,
                           struct verdict *v)
{
  unsigned char bin[16];
  int fam = strchr(host, ':') ? AF_INET6 : AF_INET;
  if (inet_pton(fam, host, bin) == 1) {
    admit_literal(p, fam, bin, port, v);
    return;
  }
  int i = sbx_net_policy_match_name(p, host, port);
  if (i < 0) {
    refuse_name(p, v, host, port);
    return;
  }
  struct sockaddr_storage res[MAX_ADDRS];
  int n = sbx_net_resolve(host, res, MAX_ADDRS);
  if (n <= 0) {
    refuse(v, 502, n < 0 ? "cannot resolve %s" : "%s does not resolve", host);
    return;
  }
  const char *first_closed = NULL;
  for (int k = 0; k < n && k < MAX_ADDRS; k++) {
    int afam;
    const void *addr;
    uint16_t ignored;
    const char *closed;
    sa_parts(&res[k], &afam, &addr, &ignored);
    if (admit_addr(p, afam, addr, port, &closed) >= 0 || !closed)
      add_addr(v, afam, addr, port);
    else if (!first_closed)
      first_closed = closed;
  }
  if (v->naddrs == 0) {
    refuse(v, 403, "%s resolves to the %s range", host, first_closed);
    return;
  }
  v->allowed = true;
  v->rule = p->rules[i].text;
}

/* Transparent mode: the sandbox chose the address; the name it claims
 * (SNI/Host) must be allowed and must resolve to that address. */
static void admit_transparent(const struct sbx_net_policy *p, const char *name, int fam,
                              const void *addr, uint16_t port, struct verdict *v)
{
  admit_literal(p, fam, addr, port, v);
  if (v->allowed || !name || !*name)
    return;
  const char *closed = sbx_net_addr_closed(fam, addr);
  int i = sbx_net_policy_match_name(p, name, port);
  if (i < 0) {
    refuse_name(p, v, name, port);
    return;
  }
  if (closed) {
    refuse(v, 403, "%s resolves to the %s range", name, closed);
    return;
  }
  struct sockaddr_storage res[MAX_ADDRS];
  int n = sbx_net_resolve(name, res, MAX_ADDRS);
  if (n < 0) {
    refuse(v, 502, "cannot resolve %s", name);
    return;
  }
  for (int k = 0; k < n && k < MAX_ADDRS; k++) {
    int afam;
    const void *raddr;
    uint16_t ignored;
    sa_parts(&res[k], &afam, &raddr, &ignored);
    if (afam == fam && memcmp(raddr, addr, fam == AF_INET ? 4 : 16) == 0) {
      v->allowed = true;
      v->rule = p->rules[i].text;
      v->naddrs = 0;
      add_addr(v, fam, addr, port);
      return;
    }
  }
  refuse(v, 403, "sni/host does not match destination (%s)", name);
}

static void decide(const struct conn *c, const char *proto, const char *dest,
                   const struct verdict *v)
{
  struct sbx_net_decision d = {
      .sandbox_id = c->peer.sandbox_id,
      .tenant = c->peer.tenant,
      .proto = proto,
      .dest = dest,
      .rule = v->allowed ? v->rule : NULL,
      .allowed = v->allowed,
      .reason = v->allowed ? NULL : v->reason,
  };
  sbx_debug("net", "egress %s %s %s %s: %s", c->peer.sandbox_id, proto, dest,
            v->allowed ? "allowed" : "refused", v->allowed ? v->rule : v->reason);
  sbx_net_decide(&d);
}

/* ---- socket I/O ----------------------------------------------------- */

/* Waits for ev on fd until deadline (sbx_now_ms clock): 1 ready, 0 timed
 * out or stopping, -1 error. */
static int wait_fd(int fd, short ev, uint64_t deadline)
{
  struct pollfd p[2] = {{fd, ev, 0}, {g.stop_fd, POLLIN, 0}};
  int r = sbx_poll_until(p, 2, deadline);
  if (r <= 0)
    return r;
  return p[1].revents ? 0 : 1;
}

static int send_all(int fd, const void *buf, size_t n, uint64_t deadline)
{
  const char *p = buf;
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) {
      if (wait_fd(fd, POLLOUT, deadline) != 1)
        return -1;
    } else {
      return -1;
    }
  }
  return 0;
}

/* Reads more of the sandbox's first bytes into c->buf: >0 bytes, 0 EOF,
 * -1 error, timeout, stopping or buffer full. */
static ssize_t read_more(struct conn *c, uint64_t deadline)
{
  for (;;) {
    if (c->len >= sizeof c->buf)
      return -1;
    ssize_t n = recv(c->cfd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n >= 0) {
      c->len += (size_t)n;
      return n;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN || wait_fd(c->cfd, POLLIN, deadline) != 1)
      return -1;
  }
}

/* Make close() send RST: for refusals where no reply fits (TCP, caps). */
static void set_reset(int fd)
{
  struct linger l = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

/* After our last reply: FIN, then swallow what the sandbox still sends for
 * a moment, so close() does not turn into an RST that could destroy the
 * reply before the sandbox reads it.  Bounded in time and bytes. */
static void finish(struct conn *c)
{
  char sink[4096];
  uint64_t deadline = sbx_now_ms() + 1000;
  shutdown(c->cfd, SHUT_WR);
  for (size_t total = 0; total < 65536;) {
    ssize_t n = recv(c->cfd, sink, sizeof sink, 0);
    if (n > 0)
      total += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EINTR))
      return;
    else if (wait_fd(c->cfd, POLLIN, deadline) != 1)
      return;
  }
}

static void http_reply(struct conn *c, int status, const char *reason)
{
  const char *text = status == 400   ? "Bad Request"
                     : status == 403 ? "Forbidden"
                     : status == 431 ? "Request Header Fields Too Large"
                     : status == 502 ? "Bad Gateway"
                                     : "Service Unavailable";
  char clean[320], body[400], msg[1024];
  size_t k = 0;
  for (const char *s = reason; *s && k + 1 < sizeof clean; s++)
    clean[k++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?'; /* never split our own header */
  clean[k] = 0;
  int blen = snprintf(body, sizeof body, "sandboxd egress proxy: %s\n", clean);
  int n = snprintf(msg, sizeof msg,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                   "Content-Length: %d\r\nConnection: close\r\nX-Sandboxd-Reason: %s\r\n\r\n%s",
                   status, text, blen, clean, body);
  send_all(c->cfd, msg, (size_t)n, sbx_now_ms() + REPLY_TIMEOUT_MS);
  finish(c);
}

/* A fatal alert record (RFC 8446 §6): the client fails at once with a
 * clear error instead of waiting for a ServerHello. */
static void tls_alert(struct conn *c, uint8_t desc)
{
  uint8_t rec[7] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, desc};
  send_all(c->cfd, rec, sizeof rec, sbx_now_ms() + REPLY_TIMEOUT_MS);
  finish(c);
}

enum { ALERT_ACCESS_DENIED = 49, ALERT_DECODE_ERROR = 50, ALERT_UNRECOGNIZED_NAME = 112 };

/* Connects to the first reachable candidate; 0 and c->ufd set, or -1. */
static int connect_upstream(struct conn *c, const struct verdict *v)
{
  uint64_t deadline = sbx_now_ms() + CONNECT_TIMEOUT_MS;
  for (int i = 0; i < v->naddrs; i++) {
    const struct sockaddr_storage *ss = &v->addrs[i];
    _cleanup_close_ int fd =
        socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    socklen_t sl =
        ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (connect(fd, (const struct sockaddr *)ss, sl) < 0) {
      if (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) != 1)
        continue;
      int soerr = 0;
      socklen_t el = sizeof soerr;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0 || soerr != 0)
        continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->ufd = steal_fd(&fd);
    return 0;
  }
  return -1;
}

/* ---- relay ---------------------------------------------------------- */

struct dir {
  int from, to;
  char *buf;
  size_t len, off;
  bool eof, shut;
};

/* One non-blocking step of one direction; -1 when the connection is done. */
static int step(struct dir *d)
{
  if (d->off == d->len && !d->eof) {
    ssize_t n = recv(d->from, d->buf, RELAY_BUF, 0);
    if (n > 0) {
      d->len = (size_t)n;
      d->off = 0;
    } else if (n == 0) {
      d->eof = true;
    } else if (errno != EAGAIN && errno != EINTR) {
      return -1;
    }
  }
  if (d->off < d->len) {
    ssize_t w = send(d->to, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
    if (w > 0)
      d->off += (size_t)w;
    else if (w < 0 && errno != EAGAIN && errno != EINTR)
      return -1;
    if (d->off == d->len)
      d->off = d->len = 0;
  }
  if (d->eof && d->off == d->len && !d->shut) {
    shutdown(d->to, SHUT_WR); /* pass the half-close on */
    d->shut = true;
  }
  return 0;
}

/* Both ways until both are shut, either side errors, IDLE_TIMEOUT_MS of
 * silence, or stop. */
static void relay(struct conn *c)
{
  _cleanup_free_ char *mem = malloc(2 * RELAY_BUF);
  if (!mem)
    return;
  struct dir d[2] = {{c->cfd, c->ufd, mem, 0, 0, false, false},
                     {c->ufd, c->cfd, mem + RELAY_BUF, 0, 0, false, false}};
  while (!(d[0].shut && d[1].shut)) {
    short ev[2] = {0, 0}; /* [0]: c->cfd, [1]: c->ufd; d[k].from is fd k */
    for (int k = 0; k < 2; k++) {
      if (d[k].off < d[k].len)
        ev[1 - k] |= POLLOUT;
      else if (!d[k].eof)
        ev[k] |= POLLIN;
    }
    /* An fd we wait for nothing on stays out: a hung-up socket would
     * otherwise report POLLHUP forever and spin this loop. */
    struct pollfd p[3] = {{ev[0] ? c->cfd : -1, ev[0], 0},
                          {ev[1] ? c->ufd : -1, ev[1], 0},
                          {g.stop_fd, POLLIN, 0}};
    int r = poll(p, 3, IDLE_TIMEOUT_MS);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0 || p[2].revents)
      return;
    if (step(&d[0]) < 0 || step(&d[1]) < 0)
      return;
  }
}

/* Sends the bytes the proxy consumed while deciding, then relays. */
static void forward(struct conn *c, const void *first, size_t nfirst, size_t rest_off)
{
  uint64_t deadline = sbx_now_ms() + CONNECT_TIMEOUT_MS;
  if (nfirst && send_all(c->ufd, first, nfirst, deadline) < 0)
    return;
  if (rest_off < c->len && send_all(c->ufd, c->buf + rest_off, c->len - rest_off, deadline) < 0)
    return;
  relay(c);
}

/* Forwards an absolute-form request in origin form (one request per
 * connection: docs/network.md, "Limits"). */
static void forward_rewritten(struct conn *c, const struct sbx_net_http_req *r)
{
  char head[SBX_NET_HEAD_MAX + 512];
  long n = sbx_net_http_rewrite((const char *)c->buf, r, head, sizeof head);
  if (n < 0) {
    http_reply(c, 431, "request head over 16 KiB");
    return;
  }
  forward(c, head, (size_t)n, r->head_len);
}

/* ---- the two modes -------------------------------------------------- */

/* Reads until the request head is complete or refused. */
static enum sbx_net_parse read_http_head(struct conn *c, struct sbx_net_http_req *r,
                                         uint64_t deadline, bool *gone)
{
  for (;;) {
    enum sbx_net_parse pr = sbx_net_http_parse((const char *)c->buf, c->len, r);
    if (pr != SBX_NET_PARSE_MORE)
      return pr;
    if (read_more(c, deadline) <= 0) {
      *gone = true;
      return pr;
    }
  }
}

static bool http_head_refused(struct conn *c, enum sbx_net_parse pr, bool gone)
{
  if (gone)
    return true; /* EOF, timeout or stop before a whole head: nothing to answer */
  if (pr == SBX_NET_PARSE_TOO_BIG) {
    http_reply(c, 431, "request head over 16 KiB");
    return true;
  }
  if (pr != SBX_NET_PARSE_OK) {
    http_reply(c, 400, "malformed request");
    return true;
  }
  return false;
}

static void serve_explicit(struct conn *c)
{
  struct sbx_net_http_req r;
  bool gone = false;
  enum sbx_net_parse pr = read_http_head(c, &r, sbx_now_ms() + HEAD_TIMEOUT_MS, &gone);
  if (http_head_refused(c, pr, gone))
    return;
  if (r.form == SBX_NET_HTTP_ORIGIN) {
    http_reply(c, 400, "not a proxy request: use CONNECT or an absolute http:// URI");
    return;
  }
  uint16_t port = r.port ? r.port : 80;
  char dest[300];
  fmt_dest(dest, sizeof dest, r.host, AF_UNSPEC, NULL, port);
  struct verdict v = {0};
  admit_explicit(c->policy, r.host, port, &v);
  decide(c, "http", dest, &v);
  if (!v.allowed) {
    http_reply(c, v.status, v.reason);
    return;
  }
  if (connect_upstream(c, &v) < 0) {
    snprintf(v.reason, sizeof v.reason, "cannot connect to %s", dest);
    http_reply(c, 502, v.reason);
    return;
  }
  if (r.form == SBX_NET_HTTP_AUTHORITY) {
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (send_all(c->cfd, ok, sizeof ok - 1, sbx_now_ms() + REPLY_TIMEOUT_MS) < 0)
      return;
    forward(c, NULL, 0, r.head_len);
    return;
  }
  forward_rewritten(c, &r);
}

static void serve_tls(struct conn *c, int fam, const void *addr, uint16_t port,
                      uint64_t deadline)
{
  char name[256];
  char dest[300];
  struct verdict v = {0};
  enum sbx_net_parse pr;
  while ((pr = sbx_net_sni_parse(c->buf, c->len, name, sizeof name)) == SBX_NET_PARSE_MORE)
    if (read_more(c, deadline) <= 0)
      return;
  if (pr != SBX_NET_PARSE_OK) {
    fmt_dest(dest, sizeof dest, NULL, fam, addr, port);
    admit_literal(c->policy, fam, addr, port, &v); /* a CIDR rule needs no name */
    if (!v.allowed)
      snprintf(v.reason, sizeof v.reason, "%s",
               pr == SBX_NET_PARSE_NONE      ? "no SNI in ClientHello"
               : pr == SBX_NET_PARSE_TOO_BIG ? "ClientHello over 16 KiB"
                                             : "malformed ClientHello");
  } else {
    fmt_dest(dest, sizeof dest, name, fam, addr, port);
    admit_transparent(c->policy, name, fam, addr, port, &v);
  }
  decide(c, "tls", dest, &v);
  if (!v.allowed) {
    tls_alert(c, pr == SBX_NET_PARSE_NONE ? ALERT_UNRECOGNIZED_NAME
                 : pr != SBX_NET_PARSE_OK ? ALERT_DECODE_ERROR
                                          : ALERT_ACCESS_DENIED);
    return;
  }
  if (connect_upstream(c, &v) < 0) {
    set_reset(c->cfd);
    return;
  }
  forward(c, NULL, 0, 0);
}

static void serve_http_transparent(struct conn *c, int fam, const void *addr, uint16_t port,
                                   uint64_t deadline)
{
  struct sbx_net_http_req r;
  bool gone = false;
  enum sbx_net_parse pr = read_http_head(c, &r, deadline, &gone);
  if (http_head_refused(c, pr, gone))
    return;
  if (r.form == SBX_NET_HTTP_AUTHORITY) {
    http_reply(c, 400, "CONNECT is served on the proxy port only");
    return;
  }
  char dest[300];
  fmt_dest(dest, sizeof dest, r.host, fam, addr, port);
  struct verdict v = {0};
  admit_transparent(c->policy, r.host, fam, addr, port, &v);
  decide(c, "http", dest, &v);
  if (!v.allowed) {
    http_reply(c, v.status, v.reason);
    return;
  }
  if (connect_upstream(c, &v) < 0) {
    http_reply(c, 502, "cannot connect to destination");
    return;
  }
  forward_rewritten(c, &r);
}

static void serve_transparent(struct conn *c, const struct sockaddr_storage *orig)
{
  int fam;
  const void *addr;
  uint16_t port;
  sa_parts(orig, &fam, &addr, &port);
  uint64_t deadline = sbx_now_ms() + HEAD_TIMEOUT_MS;
  if (read_more(c, deadline) <= 0)
    return;
  if (sbx_net_looks_tls(c->buf, c->len)) {
    serve_tls(c, fam, addr, port, deadline);
    return;
  }
  if (c->buf[0] >= 'A' && c->buf[0] <= 'Z') {
    serve_http_transparent(c, fam, addr, port, deadline);
    return;
  }
  /* Neither: only a CIDR rule could admit it, and then nft would not have
   * sent it here for ports other than 80/443; refuse like nft does. */
  char dest[80];
  struct verdict v = {0};
  fmt_dest(dest, sizeof dest, NULL, fam, addr, port);
  admit_literal(c->policy, fam, addr, port, &v);
  if (v.allowed && connect_upstream(c, &v) == 0) {
    decide(c, "tcp", dest, &v);
    forward(c, NULL, 0, 0);
    return;
  }
  if (!v.allowed)
    snprintf(v.reason, sizeof v.reason, "neither HTTP nor TLS and %s not in allowlist", dest);
  decide(c, "tcp", dest, &v);
  set_reset(c->cfd);
}

/* ---- connections ---------------------------------------------------- */

/* Whether to log a cap hit now: at most once a second, so a sandbox
 * hammering the proxy cannot flood the log. */
static bool cap_log_due(void)
{
  static uint64_t last;
  uint64_t now = sbx_now_ms(), prev = __atomic_load_n(&last, __ATOMIC_RELAXED);
  return now - prev >= 1000 && __atomic_compare_exchange_n(&last, &prev, now, false,
                                                           __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static bool over_peer_cap(struct conn *c)
{
  unsigned n = 0;
  pthread_mutex_lock(&g.mu);
  for (struct conn *o = g.conns; o; o = o->next)
    if (o->counted && strcmp(o->peer.sandbox_id, c->peer.sandbox_id) == 0)
      n++;
  bool over = n >= MAX_CONNS_PEER;
  if (!over)
    c->counted = true;
  pthread_mutex_unlock(&g.mu);
  return over;
}

static void serve(struct conn *c)
{
  int fam;
  const void *addr;
  uint16_t sport;
  sa_parts(&c->src, &fam, &addr, &sport);
  if (sbx_net_registry_find(fam, addr, &c->peer, &c->policy) < 0 || !c->policy) {
    char ip[INET6_ADDRSTRLEN] = "?";
    inet_ntop(fam, addr, ip, sizeof ip);
    sbx_debug("net", "egress: connection from %s, not a sandbox: reset", ip);
    set_reset(c->cfd);
    return;
  }
  if (over_peer_cap(c)) {
    if (cap_log_due())
      sbx_warn("net", "egress: %s has %d proxy connections open: reset", c->peer.sandbox_id,
               MAX_CONNS_PEER);
    set_reset(c->cfd);
    return;
  }
  int one = 1;
  setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  socklen_t ll = sizeof c->local;
  struct sockaddr_storage orig;
  if (getsockname(c->cfd, (struct sockaddr *)&c->local, &ll) < 0) {
    set_reset(c->cfd);
    return;
  }
  if (original_dst(c->cfd, &c->local, &orig) == 0 && !same_endpoint(&orig, &c->local))
    serve_transparent(c, &orig);
  else
    serve_explicit(c);
}

static void conn_free(struct conn *c)
{
  pthread_mutex_lock(&g.mu);
  if (c->prev)
    c->prev->next = c->next;
  else
    g.conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  g.nconns--;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  if (c->ufd >= 0)
    close(c->ufd);
  close(c->cfd);
  sbx_net_policy_free(c->policy);
  free(c);
}

static void *conn_main(void *arg)
{
  struct conn *c = arg;
  serve(c);
  conn_free(c);
  return NULL;
}

static void accept_one(int lfd)
{
  struct sockaddr_storage src;
  socklen_t sl = sizeof src;
  int fd = accept4(lfd, (struct sockaddr *)&src, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      sbx_warn("net", "egress: accept: %s", strerror(errno));
      poll(NULL, 0, 100); /* the listen socket stays readable: do not spin */
    }
    return;
  }
  struct conn *c = calloc(1, sizeof *c);
  pthread_mutex_lock(&g.mu);
  if (!c || g.nconns >= MAX_CONNS) {
    pthread_mutex_unlock(&g.mu);
    if (cap_log_due())
      sbx_warn("net", "egress: %d proxy connections open: reset", MAX_CONNS);
    set_reset(fd);
    close(fd);
    free(c);
    return;
  }
  c->cfd = fd;
  c->ufd = -1;
  c->src = src;
  c->next = g.conns;
  if (g.conns)
    g.conns->prev = c;
  g.conns = c;
  g.nconns++;
  pthread_mutex_unlock(&g.mu);
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, WORKER_STACK);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, conn_main, c) != 0) {
    set_reset(c->cfd);
    conn_free(c);
  }
  pthread_attr_destroy(&attr);
}

static void *acceptor_main(void *arg)
{
  for (;;) {
    struct pollfd p[3];
    int n = 0;
    for (; n < g.nlfd; n++)
      p[n] = (struct pollfd){g.lfd[n], POLLIN, 0};
    p[n] = (struct pollfd){g.stop_fd, POLLIN, 0};
    if (poll(p, (nfds_t)n + 1, -1) < 0) {
      if (errno == EINTR)
        continue;
      sbx_error("net", "egress: poll: %s", strerror(errno));
      return NULL;
    }
    if (p[n].revents)
      return NULL;
    for (int i = 0; i < n; i++)
      if (p[i].revents & POLLIN)
        accept_one(g.lfd[i]);
  }
}

/* ---- start/stop ----------------------------------------------------- */

static int listen_on(int fam, uint16_t port, uint16_t *bound)
{
  _cleanup_close_ int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage ss = {0};
  socklen_t sl;
  if (fam == AF_INET6) {
    /* Separate v4 and v6 sockets: SO_ORIGINAL_DST is simplest per family. */
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_any;
    s6->sin6_port = htons(port);
    sl = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_ANY);
    s4->sin_port = htons(port);
    sl = sizeof *s4;
  }
  if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0)
    return -1;
  sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
    return -1;
  int fam2;
  const void *addr;
  sa_parts(&ss, &fam2, &addr, bound);
  return steal_fd(&fd);
}

/* 0.0.0.0:P then [::]:P on the same P (retried if P is taken in v6). */
static int open_listeners(struct sbx_error *err)
{
  for (int attempt = 0; attempt < 16; attempt++) {
    uint16_t port = 0, port6 = 0;
    int fd4 = listen_on(AF_INET, 0, &port);
    if (fd4 < 0)
      return sbx_err_sys(err, errno, "egress proxy: listen on 0.0.0.0");
    int fd6 = listen_on(AF_INET6, port, &port6);
    if (fd6 < 0 && errno == EADDRINUSE) {
      close(fd4);
      continue;
    }
    g.lfd[0] = fd4;
    g.nlfd = 1;
    if (fd6 >= 0)
      g.lfd[g.nlfd++] = fd6;
    else
      sbx_warn("net", "egress proxy: no IPv6 listener (%s): IPv4 only", strerror(errno));
    g.port = port;
    return 0;
  }
  return sbx_err_set(err, SBX_E_INTERNAL, EADDRINUSE, "egress proxy: no port free in v4 and v6");
}

static void close_listeners(void)
{
  for (int i = 0; i < g.nlfd; i++)
    close(g.lfd[i]);
  g.nlfd = 0;
  if (g.stop_fd >= 0)
    close(g.stop_fd);
  g.stop_fd = -1;
}

int sbx_net_egress_start(uint16_t *port_out, struct sbx_error *err)
{
  pthread_mutex_lock(&g.mu);
  bool running = g.running;
  pthread_mutex_unlock(&g.mu);
  if (running)
    return sbx_err_set(err, SBX_E_CONFLICT, 0, "egress proxy already running");
  g.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g.stop_fd < 0)
    return sbx_err_sys(err, errno, "egress proxy: eventfd");
  if (open_listeners(err) < 0) {
    close_listeners();
    return -1;
  }
  int rc = pthread_create(&g.acceptor, NULL, acceptor_main, NULL);
  if (rc != 0) {
    close_listeners();
    return sbx_err_sys(err, rc, "egress proxy: thread");
  }
  pthread_mutex_lock(&g.mu);
  g.running = true;
  pthread_mutex_unlock(&g.mu);
  *port_out = g.port;
  sbx_info("net", "egress proxy listening on port %u", g.port);
  return 0;
}

void sbx_net_egress_stop(void)
{
  pthread_mutex_lock(&g.mu);
  bool running = g.running;
  g.running = false;
  pthread_mutex_unlock(&g.mu);
  if (!running)
    return;
  uint64_t one = 1;
  if (write(g.stop_fd, &one, sizeof one) < 0)
    sbx_error("net", "egress proxy: stop: %s", strerror(errno));
  pthread_join(g.acceptor, NULL);
  pthread_mutex_lock(&g.mu);
  while (g.nconns > 0) /* every worker polls stop_fd: this ends promptly */
    pthread_cond_wait(&g.cv, &g.mu);
  pthread_mutex_unlock(&g.mu);
  close_listeners();
}
