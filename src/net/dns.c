/* dns.c — the DNS responder the sandboxes talk to.  nft redirects a
 * sandbox's port 53 (UDP and TCP) here; we answer only names its policy
 * allows, with addresses that are not in an always-closed range (unless a
 * CIDR rule names them), and tell nft about each address we hand out
 * before the answer leaves, so the connection that follows is admitted.
 * Everything else gets REFUSED, quickly, so programs fail at once instead
 * of waiting for a timeout.
 *
 * Threads: one poller owns the listening sockets; UDP queries go through a
 * bounded queue to WORKERS threads (a slow upstream stalls one worker, not
 * the responder); each TCP connection gets a short-lived thread, at most
 * TCP_MAX at once, serving up to TCP_QUERIES queries (glibc pipelines A and
 * AAAA on one connection).
 *
 * The sender is hostile: a query is at most QMAX bytes, names go through
 * libc's dn_expand (bounded, refuses compression loops), and only names
 * made of letters, digits, '-' and '.' are considered at all. */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "net/net_int.h"

#define WORKERS 4
#define QUEUE_MAX 64
#define TCP_MAX 16
#define TCP_QUERIES 16
#define TCP_IDLE_MS 3000
#define QMAX 512      /* longer queries are not ones we answer */
#define RMAX 512      /* replies fit the classic UDP limit: no truncation */
#define MAX_ANSWERS 8 /* 8 AAAA + the longest question fit RMAX */
#define ANSWER_TTL_MAX 60
#define LEARN_GRACE_S 30 /* nft keeps an address a little longer than the answer lives */

struct job {
  int fd; /* the UDP socket it came in on */
  struct sockaddr_storage from;
  socklen_t fromlen;
  bool have_pi;
  union {
    struct in_pktinfo v4;
    struct in6_pktinfo v6;
  } pi;
  uint8_t q[QMAX];
  size_t qlen;
};

static struct {
  bool running;
  int udp[2], tcp[2], wake;
  pthread_t poller, workers[WORKERS];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stopping;
  struct job *queue[QUEUE_MAX];
  size_t qhead, qn;
  int tcp_fds[TCP_MAX]; /* connections being served (-1: free) */
  int ntcp;
} D = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- answering one query ------------------------------------------------- */

static void put16(uint8_t *p, unsigned v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void decide(const struct sbx_net_peer *peer, const char *name, bool allowed,
                   const char *rule, const char *reason)
{
  struct sbx_net_decision d = {.sandbox_id = peer->sandbox_id,
                               .tenant = peer->tenant,
                               .proto = "dns",
                               .dest = name,
                               .rule = allowed ? rule : NULL,
                               .allowed = allowed,
                               .reason = allowed ? NULL : reason};
  sbx_net_decide(&d);
}

/* The ports nft should open for addresses of name: those of every rule
 * admitting it; any rule without a port makes it {0}. */
static size_t rule_ports(const struct sbx_net_policy *p, const char *name, uint16_t *ports,
                         size_t max)
{
  size_t n = 0;
  for (size_t i = 0; i < p->nrules; i++) {
    if (!sbx_net_rule_match_name(&p->rules[i], name, 0))
      continue;
    uint16_t port = p->rules[i].port;
    if (port == 0) {
      ports[0] = 0;
      return 1;
    }
    bool seen = false;
    for (size_t k = 0; k < n; k++)
      seen = seen || ports[k] == port;
    if (!seen && n < max)
      ports[n++] = port;
  }
  return n;
}

/* Addresses of the asked family that may be handed out, learned by nft.
 * Returns how many are in keep; *closed names a range when some were
 * dropped for pointing into it; *learn_failed when nft refused. */
static int filter_learn(const struct sbx_net_peer *peer, const struct sbx_net_policy *p,
                        const char *name, int family, const struct sockaddr_storage *addrs,
                        int n, unsigned ttl, uint8_t keep[][16], const char **closed,
                        bool *learn_failed)
{
  uint16_t ports[SBX_NET_MAX_RULES];
  size_t nports = rule_ports(p, name, ports, SBX_NET_MAX_RULES);
  int k = 0;
  for (int i = 0; i < n && k < MAX_ANSWERS; i++) {
    if (addrs[i].ss_family != family)
      continue;
    const void *a = family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)&addrs[i])->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)&addrs[i])->sin6_addr;
    const char *range = sbx_net_addr_closed(family, a);
    if (range && sbx_net_policy_match_closed(p, family, a, 0) < 0) {
      *closed = range; /* DNS rebinding, or a name that simply points inside */
      continue;
    }
    bool ok = true;
    for (size_t j = 0; j < nports && ok; j++)
      ok = sbx_net_nft_learn(peer, family, a, ports[j], ttl + LEARN_GRACE_S) == 0;
    if (!ok) {
      *learn_failed = true;
      continue;
    }
    memcpy(keep[k++], a, family == AF_INET ? 4 : 16);
  }
  return k;
}

static size_t rcode_only(uint8_t *r, size_t len, unsigned rcode)
{
  r[3] = (uint8_t)((r[3] & 0xf0) | rcode);
  return len;
}

/* Reads the one question of a standard query into name, qtype and qclass;
 * returns ns_r_noerror, or the rcode to answer when q is not one. */
static unsigned read_question(const uint8_t *q, size_t qlen, char name[NS_MAXDNAME],
                              unsigned *qtype, unsigned *qclass)
{
  if ((q[2] >> 3) & 0x0f)
    return ns_r_notimpl;
  if (q[4] != 0 || q[5] != 1 || q[6] || q[7] || q[8] || q[9])
    return ns_r_formerr;
  int l = dn_expand(q, q + qlen, q + 12, name, NS_MAXDNAME);
  if (l < 0 || 12 + (size_t)l + 4 > qlen)
    return ns_r_formerr;
  *qtype = (unsigned)q[12 + l] << 8 | q[13 + l];
  *qclass = (unsigned)q[14 + l] << 8 | q[15 + l];
  return ns_r_noerror;
}

/* The sandbox whose address from is, and its policy (the caller frees it). */
static int find_peer(const struct sockaddr_storage *from, struct sbx_net_peer *peer,
                     struct sbx_net_policy **p)
{
  int fam = from->ss_family;
  const void *src = fam == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)from)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)from)->sin6_addr;
  return sbx_net_registry_find(fam, src, peer, p);
}

/* The addresses an answer hands out, all of one family. */
struct answers {
  int family;
  int n;
  unsigned ttl;
  uint8_t addr[MAX_ANSWERS][16];
};

/* Resolves norm, which rule allows, for an A or AAAA question: keeps in a
 * the addresses that may be handed out, records the decision and returns
 * the rcode. */
static unsigned resolve_allowed(const struct sbx_net_peer *peer, const struct sbx_net_policy *p,
                                const char *norm, const char *rule, unsigned qtype,
                                struct answers *a)
{
  struct sockaddr_storage addrs[32];
  unsigned ttl = 0;
  int n = sbx_net_resolve_ttl(norm, addrs, 32, &ttl);
  const char *closed = NULL;
  bool learn_failed = false;
  a->family = qtype == ns_t_a ? AF_INET : AF_INET6;
  a->ttl = ttl > ANSWER_TTL_MAX ? ANSWER_TTL_MAX : ttl == 0 ? 1 : ttl;
  if (n > 0)
    a->n = filter_learn(peer, p, norm, a->family, addrs, n, a->ttl, a->addr, &closed,
                        &learn_failed);
  if (n < 0) {
    decide(peer, norm, true, rule, NULL);
    return ns_r_servfail;
  }
  if (n == 0) {
    decide(peer, norm, true, rule, NULL);
    return ns_r_nxdomain;
  }
  if (a->n == 0 && closed) {
    char why[64];
    snprintf(why, sizeof why, "resolves to %s", closed);
    decide(peer, norm, false, NULL, why);
    return ns_r_refused;
  }
  if (a->n == 0 && learn_failed) {
    decide(peer, norm, false, NULL, "egress rules could not be updated");
    return ns_r_servfail;
  }
  decide(peer, norm, true, rule, NULL);
  return ns_r_noerror;
}

/* What p says to norm asked as qtype/qclass: the rcode, with the addresses
 * to hand out in a (none when the type is not A or AAAA). */
static unsigned answer_name(const struct sbx_net_peer *peer, const struct sbx_net_policy *p,
                            const char *norm, unsigned qtype, unsigned qclass, struct answers *a)
{
  int idx = qclass == ns_c_in ? sbx_net_policy_match_name(p, norm, 0) : -1;
  if (idx < 0) {
    decide(peer, norm, false, NULL, "not in allowlist");
    return ns_r_refused;
  }
  const char *rule = p->rules[idx].text;
  if (qtype != ns_t_a && qtype != ns_t_aaaa) { /* allowed name, nothing to say */
    decide(peer, norm, true, rule, NULL);
    return ns_r_noerror;
  }
  return resolve_allowed(peer, p, norm, rule, qtype, a);
}

/* Appends a's addresses as answer records (while they fit RMAX). */
static size_t put_answers(uint8_t *r, size_t len, unsigned qtype, const struct answers *a)
{
  size_t alen = a->family == AF_INET ? 4 : 16;
  for (int i = 0; i < a->n && len + 12 + alen <= RMAX; i++) {
    put16(r + len, 0xc00c); /* the question's name */
    put16(r + len + 2, qtype);
    put16(r + len + 4, ns_c_in);
    put16(r + len + 6, 0);
    put16(r + len + 8, a->ttl);
    put16(r + len + 10, (unsigned)alen);
    memcpy(r + len + 12, a->addr[i], alen);
    len += 12 + alen;
    r[7]++;
  }
  return len;
}

size_t sbx_net_dns_answer(const uint8_t *q, size_t qlen, const struct sockaddr_storage *from,
                          uint8_t *r)
{
  if (qlen < 12 || (q[2] & 0x80)) /* too short to answer, or a response: never reply */
    return 0;
  memset(r, 0, 12);
  memcpy(r, q, 2);
  r[2] = (uint8_t)(0x80 | (q[2] & 0x79)); /* QR, opcode, RD */
  r[3] = 0x80;                            /* RA */
  char name[NS_MAXDNAME];
  unsigned qtype = 0, qclass = 0;
  unsigned rcode = read_question(q, qlen, name, &qtype, &qclass);
  if (rcode != ns_r_noerror)
    return rcode_only(r, 12, rcode);

  /* Who asks decides everything else; strangers learn nothing. */
  struct sbx_net_peer peer;
  struct sbx_net_policy *p = NULL;
  if (find_peer(from, &peer, &p) < 0)
    return rcode_only(r, 12, ns_r_refused);
  char norm[254];
  if (sbx_net_name_normalize(name, norm, sizeof norm) < 0) {
    decide(&peer, "(not a host name)", false, NULL, "not a host name");
    sbx_net_policy_free(p);
    return rcode_only(r, 12, ns_r_refused);
  }
  /* the question echoed (the asker's case: some check it) */
  size_t len = sbx_net_dns_put_question(r, name, qtype, qclass);
  struct answers a = {.n = 0};
  rcode = answer_name(&peer, p, norm, qtype, qclass, &a);
  sbx_net_policy_free(p);
  if (rcode != ns_r_noerror)
    return rcode_only(r, len, rcode);
  return put_answers(r, len, qtype, &a);
}

/* ---- UDP: queue and workers ------------------------------------------------ */

static void udp_reply(const struct job *j, const uint8_t *r, size_t rlen)
{
  struct iovec iov = {.iov_base = (void *)r, .iov_len = rlen};
  union {
    char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
    struct cmsghdr align;
  } c;
  memset(&c, 0, sizeof c);
  struct msghdr m = {.msg_name = (void *)&j->from,
                     .msg_namelen = j->fromlen,
                     .msg_iov = &iov,
                     .msg_iovlen = 1};
  /* Answer from the address the query was sent to, so conntrack can undo
   * the redirect whatever the routing table would pick. */
  if (j->have_pi) {
    m.msg_control = c.buf;
    struct cmsghdr *cm = (struct cmsghdr *)c.buf;
    if (j->from.ss_family == AF_INET) {
      struct in_pktinfo pi = {.ipi_spec_dst = j->pi.v4.ipi_addr};
      m.msg_controllen = CMSG_SPACE(sizeof pi);
      cm->cmsg_level = IPPROTO_IP;
      cm->cmsg_type = IP_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof pi);
      memcpy(CMSG_DATA(cm), &pi, sizeof pi);
    } else {
      m.msg_controllen = CMSG_SPACE(sizeof j->pi.v6);
      cm->cmsg_level = IPPROTO_IPV6;
      cm->cmsg_type = IPV6_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof j->pi.v6);
      memcpy(CMSG_DATA(cm), &j->pi.v6, sizeof j->pi.v6);
    }
  }
  if (sendmsg(j->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
    sbx_log(SBX_LOG_DEBUG, "dns", "reply: %s", strerror(errno));
}

static void *worker_main(void *arg)
{
  (void)arg;
  uint8_t r[RMAX];
  for (;;) {
    pthread_mutex_lock(&D.mu);
    while (!D.stopping && D.qn == 0)
      pthread_cond_wait(&D.cv, &D.mu);
    if (D.stopping) {
      pthread_mutex_unlock(&D.mu);
      return NULL;
    }
    struct job *j = D.queue[D.qhead];
    D.qhead = (D.qhead + 1) % QUEUE_MAX;
    D.qn--;
    pthread_mutex_unlock(&D.mu);
    size_t rlen = sbx_net_dns_answer(j->q, j->qlen, &j->from, r);
    if (rlen)
      udp_reply(j, r, rlen);
    free(j);
  }
}

static void read_udp(int fd)
{
  for (int burst = 0; burst < 64; burst++) {
    struct job *j = calloc(1, sizeof *j);
    if (!j)
      return;
    union {
      char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
      struct cmsghdr align;
    } c;
    struct iovec iov = {.iov_base = j->q, .iov_len = sizeof j->q};
    struct msghdr m = {.msg_name = &j->from,
                       .msg_namelen = sizeof j->from,
                       .msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = c.buf,
                       .msg_controllen = sizeof c.buf};
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    if (n < 0 || (m.msg_flags & MSG_TRUNC)) {
      free(j);
      if (n < 0)
        return;
      continue; /* oversized: not a query we answer */
    }
    j->fd = fd;
    j->qlen = (size_t)n;
    j->fromlen = m.msg_namelen;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
      if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
        memcpy(&j->pi.v4, CMSG_DATA(cm), sizeof j->pi.v4);
        j->have_pi = true;
      } else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
        memcpy(&j->pi.v6, CMSG_DATA(cm), sizeof j->pi.v6);
        j->have_pi = true;
      }
    }
    pthread_mutex_lock(&D.mu);
    bool queued = D.qn < QUEUE_MAX;
    if (queued) {
      D.queue[(D.qhead + D.qn) % QUEUE_MAX] = j;
      D.qn++;
      pthread_cond_signal(&D.cv);
    }
    pthread_mutex_unlock(&D.mu);
    if (!queued) { /* overloaded: say so at once rather than time out */
      if (j->qlen >= 12 && !(j->q[2] & 0x80)) {
        uint8_t r[12] = {j->q[0], j->q[1], (uint8_t)(0x80 | (j->q[2] & 0x79)),
                         0x80 | ns_r_servfail};
        udp_reply(j, r, sizeof r);
      }
      free(j);
    }
  }
}

/* ---- TCP: one thread per connection, bounded ------------------------------- */

static int read_full(int fd, uint8_t *buf, size_t len)
{
  size_t got = 0;
  while (got < len) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, TCP_IDLE_MS);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc <= 0)
      return -1;
    ssize_t n = recv(fd, buf + got, len - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  return 0;
}

struct tcp_arg {
  int fd;
  int slot;
  struct sockaddr_storage from;
};

static void *tcp_main(void *arg)
{
  struct tcp_arg *t = arg;
  uint8_t q[QMAX], r[2 + RMAX], lenb[2];
  for (int i = 0; i < TCP_QUERIES; i++) {
    if (read_full(t->fd, lenb, 2) < 0)
      break;
    size_t qlen = (size_t)lenb[0] << 8 | lenb[1];
    if (qlen > QMAX || read_full(t->fd, q, qlen) < 0)
      break;
    size_t rlen = sbx_net_dns_answer(q, qlen, &t->from, r + 2);
    if (!rlen)
      break;
    put16(r, (unsigned)rlen);
    if (send(t->fd, r, rlen + 2, MSG_NOSIGNAL) != (ssize_t)(rlen + 2))
      break;
  }
  pthread_mutex_lock(&D.mu);
  D.tcp_fds[t->slot] = -1;
  D.ntcp--;
  close(t->fd);
  pthread_cond_broadcast(&D.cv);
  pthread_mutex_unlock(&D.mu);
  free(t);
  return NULL;
}

static void accept_tcp(int lfd)
{
  struct tcp_arg *t = calloc(1, sizeof *t);
  if (!t)
    return;
  socklen_t sl = sizeof t->from;
  t->fd = accept4(lfd, (struct sockaddr *)&t->from, &sl, SOCK_CLOEXEC);
  if (t->fd < 0) {
    free(t);
    return;
  }
  struct timeval tv = {.tv_sec = TCP_IDLE_MS / 1000};
  setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  pthread_mutex_lock(&D.mu);
  t->slot = -1;
  for (int i = 0; i < TCP_MAX && t->slot < 0; i++)
    if (D.tcp_fds[i] < 0)
      t->slot = i;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&at, 256 * 1024);
  pthread_t th;
  bool ok = t->slot >= 0 && !D.stopping && pthread_create(&th, &at, tcp_main, t) == 0;
  pthread_attr_destroy(&at);
  if (ok) {
    D.tcp_fds[t->slot] = t->fd;
    D.ntcp++;
  }
  pthread_mutex_unlock(&D.mu);
  if (!ok) { /* full: close at once (RST-like), the client falls back or retries */
    close(t->fd);
    free(t);
  }
}

/* ---- the poller -------------------------------------------------------------- */

static void *poller_main(void *arg)
{
  (void)arg;
  for (;;) {
    struct pollfd p[5];
    int n = 0;
    p[n++] = (struct pollfd){.fd = D.wake, .events = POLLIN};
    for (int i = 0; i < 2; i++) {
      if (D.udp[i] >= 0)
        p[n++] = (struct pollfd){.fd = D.udp[i], .events = POLLIN};
      if (D.tcp[i] >= 0)
        p[n++] = (struct pollfd){.fd = D.tcp[i], .events = POLLIN};
    }
    if (poll(p, (nfds_t)n, -1) < 0) {
      if (errno == EINTR)
        continue;
      sbx_log(SBX_LOG_ERROR, "dns", "poll: %s", strerror(errno));
      return NULL;
    }
    if (p[0].revents)
      return NULL; /* stop */
    for (int i = 1; i < n; i++) {
      if (!(p[i].revents & POLLIN))
        continue;
      if (p[i].fd == D.udp[0] || p[i].fd == D.udp[1])
        read_udp(p[i].fd);
      else
        accept_tcp(p[i].fd);
    }
  }
}

/* ---- start / stop -------------------------------------------------------- */

static void close_all(void)
{
  for (int i = 0; i < 2; i++) {
    if (D.udp[i] >= 0)
      close(D.udp[i]);
    if (D.tcp[i] >= 0)
      close(D.tcp[i]);
    D.udp[i] = D.tcp[i] = -1;
  }
}

static int bind_one(int family, int type, uint16_t port)
{
  int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  if (family == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    if (type == SOCK_DGRAM)
      setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (type == SOCK_DGRAM)
      setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
  }
  if (type == SOCK_STREAM)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || (type == SOCK_STREAM && listen(fd, 64) < 0)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* UDP and TCP, v4 and v6, all on one port (v6 is optional: hosts with
 * IPv6 disabled still get v4). */
static int bind_all(uint16_t *port, struct sbx_error *err)
{
  for (int attempt = 0; attempt < 32; attempt++) {
    close_all();
    if ((D.udp[0] = bind_one(AF_INET, SOCK_DGRAM, 0)) < 0)
      return sbx_err_sys(err, errno, "dns: bind udp");
    struct sockaddr_in s4;
    socklen_t sl = sizeof s4;
    getsockname(D.udp[0], (struct sockaddr *)&s4, &sl);
    uint16_t p = ntohs(s4.sin_port);
    if ((D.tcp[0] = bind_one(AF_INET, SOCK_STREAM, p)) < 0)
      continue;
    D.udp[1] = bind_one(AF_INET6, SOCK_DGRAM, p);
    if (D.udp[1] < 0 && errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL)
      continue;
    if (D.udp[1] >= 0 && (D.tcp[1] = bind_one(AF_INET6, SOCK_STREAM, p)) < 0)
      continue;
    *port = p;
    return 0;
  }
  close_all();
  return sbx_err_set(err, SBX_E_INTERNAL, EADDRINUSE, "dns: no free port for UDP and TCP");
}

int sbx_net_dns_start(uint16_t *port_out, struct sbx_error *err)
{
  if (D.running)
    return sbx_err_set(err, SBX_E_INTERNAL, EBUSY, "dns: already running");
  D.udp[0] = D.udp[1] = D.tcp[0] = D.tcp[1] = -1;
  D.stopping = false;
  D.qhead = D.qn = 0;
  D.ntcp = 0;
  for (int i = 0; i < TCP_MAX; i++)
    D.tcp_fds[i] = -1;
  uint16_t port = 0;
  if (bind_all(&port, err) < 0)
    return -1;
  if ((D.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
    close_all();
    return sbx_err_sys(err, errno, "dns: eventfd");
  }
  int nw = 0, rc = 0;
  for (; nw < WORKERS && rc == 0; nw++)
    rc = pthread_create(&D.workers[nw], NULL, worker_main, NULL);
  if (rc == 0)
    rc = pthread_create(&D.poller, NULL, poller_main, NULL);
  else
    nw--;
  if (rc != 0) {
    pthread_mutex_lock(&D.mu);
    D.stopping = true;
    pthread_cond_broadcast(&D.cv);
    pthread_mutex_unlock(&D.mu);
    for (int i = 0; i < nw; i++)
      pthread_join(D.workers[i], NULL);
    close(D.wake);
    close_all();
    return sbx_err_sys(err, rc, "dns: thread");
  }
  D.running = true;
  *port_out = port;
  sbx_log(SBX_LOG_INFO, "dns", "responder on port %u (udp+tcp, %s)", port,
          D.udp[1] >= 0 ? "v4+v6" : "v4 only");
  return 0;
}

void sbx_net_dns_stop(void)
{
  if (!D.running)
    return;
  uint64_t one = 1;
  if (write(D.wake, &one, sizeof one) < 0)
    sbx_log(SBX_LOG_WARN, "dns", "wake: %s", strerror(errno));
  pthread_join(D.poller, NULL);
  pthread_mutex_lock(&D.mu);
  D.stopping = true;
  pthread_cond_broadcast(&D.cv);
  /* Wake the connection threads out of their reads, and wait for them. */
  for (int i = 0; i < TCP_MAX; i++)
    if (D.tcp_fds[i] >= 0)
      shutdown(D.tcp_fds[i], SHUT_RDWR);
  while (D.ntcp > 0)
    pthread_cond_wait(&D.cv, &D.mu);
  pthread_mutex_unlock(&D.mu);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(D.workers[i], NULL);
  for (; D.qn > 0; D.qn--, D.qhead = (D.qhead + 1) % QUEUE_MAX)
    free(D.queue[D.qhead]);
  close(D.wake);
  close_all();
  D.running = false;
}
