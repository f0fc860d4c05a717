/* test_net_plumb.c — the net module's plumbing against the real kernel:
 * veth pairs over rtnetlink, the nft table, attach/update/detach,
 * recovery, and 50 attach/detach cycles that must leave nothing behind.
 *
 * Needs root (skipped otherwise: exit 77).  Every address it touches is
 * its own: a "sandbox" netns and a "world" netns made here (the world on
 * 198.51.100.0/30 and 2001:db8::/126, a range networld.py's slots never
 * use), private pools of its own, and a unique tag per run, so it never
 * meets a daemon's table or links.  Each probe runs in a forked child
 * that setns()'s into the sandbox netns. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "net/net.h"
#include "net/net_int.h"
#include "net/plumb.h"

#define POOL4 "10.253.240.0/24"
#define POOL6 "fd5b:d0c5:a1fe::/64"
#define WORLD4 "198.51.100.2"
#define WORLD6 "2001:db8::2"
#define HOSTW4 "198.51.100.1"

static char tag[16], prefix[16], table[32], worldif[16];

/* ---- netns children ------------------------------------------------------- */

static void lo_up(void)
{
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  strcpy(ifr.ifr_name, "lo");
  if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP;
    ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  if (s >= 0)
    close(s);
}

static int listen_on(int family, int type, uint16_t port)
{
  int s = socket(family, type | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6)
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  struct sockaddr_storage ss = {0};
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET, a->sin_port = htons(port), len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6, a->sin6_port = htons(port), len = sizeof *a;
  }
  if (bind(s, (struct sockaddr *)&ss, len) < 0 || (type == SOCK_STREAM && listen(s, 16) < 0))
    _exit(3);
  return s;
}

/* The world: echo on TCP and UDP ports 7 and 8, v4 and v6 (so a refusal
 * seen in the sandbox can only come from the rules). */
static void world_serve(void)
{
  struct pollfd p[8];
  for (int i = 0; i < 8; i++) {
    p[i].fd =
        listen_on(i & 1 ? AF_INET6 : AF_INET, i & 2 ? SOCK_DGRAM : SOCK_STREAM, i & 4 ? 8 : 7);
    p[i].events = POLLIN;
  }
  for (;;) {
    if (poll(p, 8, -1) < 0)
      continue;
    for (int i = 0; i < 8; i++) {
      if (!(p[i].revents & POLLIN))
        continue;
      char buf[256];
      if (!(i & 2)) {
        int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
          continue;
        struct pollfd q = {c, POLLIN, 0};
        if (poll(&q, 1, 2000) > 0) {
          ssize_t n = read(c, buf, sizeof buf);
          if (n > 0)
            (void)!write(c, buf, (size_t)n);
        }
        close(c);
      } else {
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(p[i].fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (n > 0)
          sendto(p[i].fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
      }
    }
  }
}

/* A child in a new netns with lo up; the world child also serves. */
static pid_t netns_child(bool world)
{
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (unshare(CLONE_NEWNET) < 0)
      _exit(2);
    lo_up();
    if (write(fds[1], "x", 1) != 1)
      _exit(2);
    if (world)
      world_serve();
    for (;;)
      pause();
  }
  close(fds[1]);
  char c;
  ssize_t n = read(fds[0], &c, 1);
  close(fds[0]);
  return n == 1 ? pid : -1;
}

static void kill_child(pid_t pid)
{
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
}

/* ---- probes, run inside the sandbox netns ---------------------------------- */

enum op { P_ADDRS, P_NO_ETH0, P_TCP, P_CONNECT, P_UDP, P_PING4, P_DNS };

struct probe {
  enum op op;
  int family;
  char addr[64];
  uint16_t port;
  const struct sbx_net_peer *peer;
};

static socklen_t sockaddr_of(const struct probe *p, struct sockaddr_storage *ss)
{
  memset(ss, 0, sizeof *ss);
  if (p->family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons(p->port);
    inet_pton(AF_INET, p->addr, &a->sin_addr);
    return sizeof *a;
  }
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(p->port);
  inet_pton(AF_INET6, p->addr, &a->sin6_addr);
  return sizeof *a;
}

/* 0 when connected and the echo came back; else the errno. */
static int do_tcp(const struct probe *p)
{
  struct sockaddr_storage ss;
  socklen_t len = sockaddr_of(p, &ss);
  int s = socket(p->family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (connect(s, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
    return errno;
  struct pollfd q = {s, POLLOUT, 0};
  if (poll(&q, 1, 3000) <= 0)
    return ETIMEDOUT;
  int e = 0;
  socklen_t el = sizeof e;
  getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
  if (e || p->op == P_CONNECT)
    return e;
  if (write(s, "hello", 5) != 5)
    return errno;
  q.events = POLLIN;
  if (poll(&q, 1, 3000) <= 0)
    return ETIMEDOUT;
  char buf[16];
  ssize_t n = read(s, buf, sizeof buf);
  if (n < 0)
    return errno;
  /* Redirected to the proxy, which answered something: still "connected". */
  return n > 0 ? 0 : EPIPE;
}

static int do_udp(const struct probe *p)
{
  struct sockaddr_storage ss;
  socklen_t len = sockaddr_of(p, &ss);
  int s = socket(p->family, SOCK_DGRAM, 0);
  if (connect(s, (struct sockaddr *)&ss, len) < 0)
    return errno;
  if (send(s, "hello", 5, 0) != 5)
    return errno;
  struct pollfd q = {s, POLLIN, 0};
  if (poll(&q, 1, 3000) <= 0)
    return ETIMEDOUT;
  char buf[16];
  return recv(s, buf, sizeof buf, 0) == 5 ? 0 : errno;
}

static int do_ping4(const struct probe *p)
{
  int s = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
  struct sockaddr_storage ss;
  socklen_t len = sockaddr_of(p, &ss);
  struct icmphdr h = {.type = ICMP_ECHO};
  h.un.echo.id = htons(0x5b);
  h.un.echo.sequence = htons(1);
  /* checksum over the 8-byte header */
  uint32_t sum = 0;
  const uint16_t *w = (const uint16_t *)&h;
  for (int i = 0; i < 4; i++)
    sum += w[i];
  sum = (sum >> 16) + (sum & 0xffff);
  h.checksum = (uint16_t) ~(sum + (sum >> 16));
  if (sendto(s, &h, sizeof h, 0, (struct sockaddr *)&ss, len) < 0)
    return errno;
  for (int tries = 0; tries < 10; tries++) {
    struct pollfd q = {s, POLLIN, 0};
    if (poll(&q, 1, 2000) <= 0)
      return ETIMEDOUT;
    unsigned char buf[128];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    if (n >= 28 && buf[20] == ICMP_ECHOREPLY)
      return 0;
  }
  return EPROTO;
}

static int do_dns(const struct probe *p)
{
  static const unsigned char q[] = {0x5b, 0x17, 0x01, 0x00, 0,   1,   0,   0,   0,   0,
                                    0,    0,    7,    'a',  'l', 'l', 'o', 'w', 'e', 'd',
                                    4,    't',  'e',  's',  't', 0,   0,   1,   0,   1};
  struct sockaddr_storage ss;
  socklen_t len = sockaddr_of(p, &ss);
  int s = socket(p->family, SOCK_DGRAM, 0);
  if (connect(s, (struct sockaddr *)&ss, len) < 0 || send(s, q, sizeof q, 0) < 0)
    return errno;
  struct pollfd pq = {s, POLLIN, 0};
  if (poll(&pq, 1, 3000) <= 0)
    return ETIMEDOUT;
  unsigned char buf[512];
  ssize_t n = recv(s, buf, sizeof buf, 0);
  if (n < 0)
    return errno;
  return n >= 12 && buf[0] == 0x5b && buf[1] == 0x17 && (buf[2] & 0x80) ? 0 : EPROTO;
}

static int do_addrs(const struct probe *p)
{
  struct ifaddrs *ifa;
  if (getifaddrs(&ifa) < 0)
    return errno;
  bool v4 = false, v6 = false;
  for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
    if (!i->ifa_addr || strcmp(i->ifa_name, "eth0") != 0)
      continue;
    if (i->ifa_addr->sa_family == AF_INET &&
        !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, &p->peer->addr4, 4))
      v4 = true;
    if (i->ifa_addr->sa_family == AF_INET6 &&
        !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, &p->peer->addr6, 16))
      v6 = true;
  }
  freeifaddrs(ifa);
  /* A default route: a connected UDP socket to the world picks eth0's address. */
  struct probe w = {.family = AF_INET, .port = 7};
  strcpy(w.addr, WORLD4);
  struct sockaddr_storage ss;
  socklen_t len = sockaddr_of(&w, &ss);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (connect(s, (struct sockaddr *)&ss, len) < 0)
    return 10;
  struct sockaddr_in me;
  socklen_t ml = sizeof me;
  getsockname(s, (struct sockaddr *)&me, &ml);
  bool route4 = !memcmp(&me.sin_addr, &p->peer->addr4, 4);
  w.family = AF_INET6;
  strcpy(w.addr, WORLD6);
  len = sockaddr_of(&w, &ss);
  int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
  bool route6 = connect(s6, (struct sockaddr *)&ss, len) == 0;
  return v4 && v6 && route4 && route6 ? 0 : 11;
}

static pid_t sandbox_pid;

/* Runs the probe in a child inside the sandbox's netns; its result, and
 * how long it took in *ms. */
static int probe(const struct probe *p, unsigned *ms)
{
  uint64_t t0 = sbx_now_ms();
  pid_t pid = fork();
  if (pid == 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sandbox_pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
      _exit(250);
    int r;
    switch (p->op) {
    case P_ADDRS:
      r = do_addrs(p);
      break;
    case P_NO_ETH0:
      r = if_nametoindex("eth0") == 0 ? 0 : 1;
      break;
    case P_TCP:
    case P_CONNECT:
      r = do_tcp(p);
      break;
    case P_UDP:
      r = do_udp(p);
      break;
    case P_PING4:
      r = do_ping4(p);
      break;
    case P_DNS:
      r = do_dns(p);
      break;
    default:
      r = 251;
    }
    _exit(r & 0xff);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (ms)
    *ms = (unsigned)(sbx_now_ms() - t0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 252;
}

static int tcp_to(const char *addr, uint16_t port, unsigned *ms)
{
  struct probe p = {.op = P_TCP, .family = strchr(addr, ':') ? AF_INET6 : AF_INET, .port = port};
  snprintf(p.addr, sizeof p.addr, "%s", addr);
  return probe(&p, ms);
}

static int udp_to(const char *addr, uint16_t port, unsigned *ms)
{
  struct probe p = {.op = P_UDP, .family = strchr(addr, ':') ? AF_INET6 : AF_INET, .port = port};
  snprintf(p.addr, sizeof p.addr, "%s", addr);
  return probe(&p, ms);
}

/* ---- policies by hand ------------------------------------------------------- */

static struct sbx_net_policy *policy(const char *const *entries)
{
  size_t n = 0;
  while (entries && entries[n])
    n++;
  struct sbx_net_policy *p = calloc(1, sizeof *p + n * sizeof p->rules[0]);
  p->egress = SBX_NET_EGRESS_ALLOWLIST;
  p->nrules = n;
  for (size_t i = 0; i < n; i++) {
    struct sbx_net_rule *r = &p->rules[i];
    snprintf(r->text, sizeof r->text, "%s", entries[i]);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", entries[i]);
    char *port = strrchr(buf, '@'); /* test syntax: ADDR/PREFIX@PORT */
    if (port) {
      *port = '\0';
      r->port = (uint16_t)atoi(port + 1);
    }
    char *slash = strchr(buf, '/');
    if (!slash) {
      r->kind = SBX_NET_RULE_DOMAIN;
      snprintf(r->name, sizeof r->name, "%s", buf);
      continue;
    }
    *slash = '\0';
    r->kind = SBX_NET_RULE_CIDR;
    r->family = strchr(buf, ':') ? AF_INET6 : AF_INET;
    r->prefix = (uint8_t)atoi(slash + 1);
    inet_pton(r->family, buf, r->addr);
  }
  return p;
}

/* ---- decisions --------------------------------------------------------------- */

static pthread_mutex_t dlock = PTHREAD_MUTEX_INITIALIZER;
static char last_dest[128], last_reason[64], last_proto[16], last_id[96];
static unsigned ndecisions;

static void on_decision(const struct sbx_net_decision *d, void *ud)
{
  (void)ud;
  if (d->allowed)
    return;
  pthread_mutex_lock(&dlock);
  snprintf(last_dest, sizeof last_dest, "%s", d->dest ? d->dest : "");
  snprintf(last_reason, sizeof last_reason, "%s", d->reason ? d->reason : "");
  snprintf(last_proto, sizeof last_proto, "%s", d->proto ? d->proto : "");
  snprintf(last_id, sizeof last_id, "%s", d->sandbox_id ? d->sandbox_id : "");
  ndecisions++;
  pthread_mutex_unlock(&dlock);
}

/* Waits up to 2 s for a deny decision about dest. */
static bool saw_decision(const char *dest, const char *reason, const char *proto)
{
  for (int i = 0; i < 40; i++) {
    pthread_mutex_lock(&dlock);
    bool ok = !strcmp(last_dest, dest) && !strcmp(last_reason, reason) &&
              !strcmp(last_proto, proto) && !strcmp(last_id, "sbx_plumb");
    pthread_mutex_unlock(&dlock);
    if (ok)
      return true;
    usleep(50000);
  }
  fprintf(stderr, "last decision: %s %s %s %s\n", last_id, last_proto, last_dest, last_reason);
  return false;
}

/* ---- what is left on the host ------------------------------------------------ */

static int links_with_prefix(void)
{
  struct if_nameindex *v = if_nameindex(), *i;
  int n = 0;
  for (i = v; i && i->if_index; i++)
    if (!strncmp(i->if_name, prefix, strlen(prefix)))
      n++;
  if_freenameindex(v);
  return n;
}

static char *table_text(void)
{
  char script[64], *out = NULL;
  snprintf(script, sizeof script, "list table inet %s", table);
  if (sbx_net_nft_run(script, &out, NULL) < 0)
    return NULL;
  return out;
}

static bool table_has(const char *needle)
{
  char *t = table_text();
  bool r = t && strstr(t, needle);
  free(t);
  return r;
}

static bool table_exists(void)
{
  char *out = NULL;
  if (sbx_net_nft_run("list tables inet", &out, NULL) < 0)
    return false;
  char want[64];
  snprintf(want, sizeof want, "table inet %s\n", table);
  bool r = strstr(out, want) != NULL;
  free(out);
  return r;
}

/* ---- the tests ------------------------------------------------------------------ */

static void ntop(int family, const void *a, char *out, size_t len)
{
  inet_ntop(family, a, out, len);
}

static void gw_of(const struct sbx_net_peer *peer, char *g4, char *g6)
{
  struct in_addr a = {htonl(ntohl(peer->addr4.s_addr) - 1)};
  ntop(AF_INET, &a, g4, INET_ADDRSTRLEN);
  struct in6_addr b = peer->addr6;
  b.s6_addr[15]--;
  ntop(AF_INET6, &b, g6, INET6_ADDRSTRLEN);
}

static void test_attach(void)
{
  static const char *const allow[] = {WORLD4 "/32@7", "allowed.test", NULL};
  struct sbx_net_policy *pol = policy(allow);
  struct sbx_net_attachment *a = NULL;
  struct sbx_error err = {0};
  int r = sbx_net_attach("sbx_plumb", "t1", sandbox_pid, pol, &a, &err);
  CHECK(r == 0);
  if (r < 0) {
    fprintf(stderr, "attach: %s\n", err.msg);
    free(pol);
    return;
  }
  const struct sbx_net_peer *peer = sbx_net_attachment_peer(a);
  char g4[INET_ADDRSTRLEN], g6[INET6_ADDRSTRLEN], a4[INET_ADDRSTRLEN], chain[32];
  gw_of(peer, g4, g6);
  ntop(AF_INET, &peer->addr4, a4, sizeof a4);
  snprintf(chain, sizeof chain, "chain f_%u", peer->nft_id);

  /* Both ends exist with their addresses; the env points at the gateway. */
  CHECK(sbx_net_link_exists(peer->ifname));
  CHECK(!strncmp(peer->ifname, prefix, strlen(prefix)) && strlen(peer->ifname) <= 15);
  struct probe p = {.op = P_ADDRS, .peer = peer};
  CHECK(probe(&p, NULL) == 0);
  const char *const *env = sbx_net_env(a);
  char want[96];
  snprintf(want, sizeof want, "HTTP_PROXY=http://%s:%u", g4, sbx_net_proxy_port());
  CHECK(env && env[0] && !strcmp(env[0], want));
  CHECK(table_has(chain));
  /* The input chain's anti-spoof knows the link's address. */
  char own[64];
  snprintf(own, sizeof own, "\"%s\" . %s", peer->ifname, a4);
  CHECK(table_has(own));

  /* The gateway answers a ping. */
  struct probe ping = {.op = P_PING4, .family = AF_INET};
  snprintf(ping.addr, sizeof ping.addr, "%s", g4);
  CHECK(probe(&ping, NULL) == 0);

  /* The host is closed but for DNS and the proxy: refused at once, on the
   * gateway and on another host address (the world link's host end). */
  unsigned ms = 0;
  CHECK(tcp_to(g4, 22, &ms) == ECONNREFUSED);
  CHECK(ms < 1000);
  CHECK(saw_decision(strcat(strcpy(want, g4), ":22"), "host address", "tcp"));
  CHECK(tcp_to(HOSTW4, 8080, &ms) == ECONNREFUSED && ms < 1000);
  CHECK(tcp_to(g6, 22, &ms) == ECONNREFUSED && ms < 1000);
  int u = udp_to(g4, 9999, &ms);
  CHECK(u == EHOSTUNREACH || u == ECONNREFUSED);
  CHECK(ms < 1000);
  CHECK(saw_decision(strcat(strcpy(want, g4), ":9999"), "host address", "udp"));

  /* The CIDR rule admits world:7 over TCP and UDP, nothing else. */
  CHECK(tcp_to(WORLD4, 7, NULL) == 0);
  CHECK(udp_to(WORLD4, 7, NULL) == 0);
  CHECK(tcp_to(WORLD4, 8, &ms) == ECONNREFUSED && ms < 1000);
  CHECK(saw_decision(WORLD4 ":8", "not in allowlist", "tcp"));
  u = udp_to(WORLD4, 8, &ms);
  CHECK((u == EHOSTUNREACH || u == ECONNREFUSED) && ms < 1000);
  CHECK(tcp_to(WORLD6, 7, &ms) == ECONNREFUSED && ms < 1000);
  CHECK(saw_decision("[" WORLD6 "]:7", "not in allowlist", "tcp"));

  /* Port 80 of any address is redirected to the egress proxy (the world
   * has no port 80: a connection that opens went to the proxy). */
  struct probe t80 = {.op = P_TCP, .family = AF_INET, .port = 80};
  strcpy(t80.addr, WORLD4);
  r = probe(&t80, &ms);
  /* connected, then an answer, a close or a reset to our non-HTTP bytes */
  CHECK(r == 0 || r == EPIPE ||
        r == ECONNRESET); /* the proxy answered, or closed after its 403 */

  /* DNS to the fixed address reaches the responder. */
  struct in_addr d4;
  struct in6_addr d6;
  sbx_net_pool_dns(&d4, &d6);
  struct probe dns = {.op = P_DNS, .family = AF_INET, .port = 53};
  ntop(AF_INET, &d4, dns.addr, sizeof dns.addr);
  CHECK(probe(&dns, NULL) == 0);
  dns.family = AF_INET6;
  ntop(AF_INET6, &d6, dns.addr, sizeof dns.addr);
  CHECK(probe(&dns, NULL) == 0);

  /* A learned address opens for its port. */
  struct in_addr w4;
  inet_pton(AF_INET, WORLD4, &w4);
  CHECK(sbx_net_nft_learn(peer, AF_INET, &w4, 8, 60) == 0);
  CHECK(tcp_to(WORLD4, 8, NULL) == 0);
  struct in6_addr w6;
  inet_pton(AF_INET6, WORLD6, &w6);
  CHECK(sbx_net_nft_learn(peer, AF_INET6, &w6, 0, 60) == 0);
  CHECK(tcp_to(WORLD6, 7, NULL) == 0);

  /* A runtime update: world over v6 only; learned addresses are forgotten. */
  static const char *const allow6[] = {"2001:db8::/126", NULL};
  struct sbx_net_policy *pol6 = policy(allow6);
  CHECK(sbx_net_update(a, pol6, &err) == 0);
  CHECK(tcp_to(WORLD4, 7, &ms) == ECONNREFUSED && ms < 1000);
  CHECK(tcp_to(WORLD4, 8, &ms) == ECONNREFUSED);
  CHECK(tcp_to(WORLD6, 7, NULL) == 0);
  CHECK(udp_to(WORLD6, 7, NULL) == 0);

  /* 0.0.0.0/0 opens the public world but not the closed ranges: another
   * sandbox's address (the pool) stays refused. */
  static const char *const any[] = {"0.0.0.0/0", NULL};
  struct sbx_net_policy *pany = policy(any);
  CHECK(sbx_net_update(a, pany, &err) == 0);
  CHECK(tcp_to(WORLD4, 8, NULL) == 0);
  pid_t other = netns_child(false);
  struct sbx_net_attachment *b = NULL;
  CHECK(sbx_net_attach("sbx_other", "t1", other, pol, &b, &err) == 0);
  if (b) {
    char b4[INET_ADDRSTRLEN];
    ntop(AF_INET, &sbx_net_attachment_peer(b)->addr4, b4, sizeof b4);
    CHECK(tcp_to(b4, 7, &ms) == ECONNREFUSED && ms < 1000);
    CHECK(saw_decision(strcat(strcpy(want, b4), ":7"), "closed range", "tcp"));
    sbx_net_detach(b);
  }
  kill_child(other);

  /* A host address opens only for an entry naming it exactly. */
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in la = {.sin_family = AF_INET};
  inet_pton(AF_INET, HOSTW4, &la.sin_addr);
  socklen_t ll = sizeof la;
  CHECK(bind(ls, (struct sockaddr *)&la, sizeof la) == 0 && listen(ls, 4) == 0 &&
        getsockname(ls, (struct sockaddr *)&la, &ll) == 0);
  struct probe hc = {.op = P_CONNECT, .family = AF_INET, .port = ntohs(la.sin_port)};
  strcpy(hc.addr, HOSTW4);
  CHECK(probe(&hc, &ms) == ECONNREFUSED); /* 0.0.0.0/0 does not name it */
  char exact[64];
  snprintf(exact, sizeof exact, HOSTW4 "/32@%u", ntohs(la.sin_port));
  const char *const host_entry[] = {exact, NULL};
  struct sbx_net_policy *phost = policy(host_entry);
  CHECK(sbx_net_update(a, phost, &err) == 0);
  CHECK(probe(&hc, NULL) == 0);
  hc.port = 1; /* another port of it stays closed */
  CHECK(probe(&hc, NULL) == ECONNREFUSED);
  close(ls);
  free(phost);

  /* Update to none: the link stays, nothing is admitted. */
  CHECK(sbx_net_update(a, NULL, &err) == 0);
  CHECK(tcp_to(WORLD4, 7, &ms) == ECONNREFUSED);
  CHECK(sbx_net_link_exists(peer->ifname));

  char ifname[16];
  snprintf(ifname, sizeof ifname, "%s", peer->ifname);
  sbx_net_detach(a);
  CHECK(!sbx_net_link_exists(ifname));
  CHECK(links_with_prefix() == 0);
  CHECK(!table_has(chain));
  char quoted[24];
  snprintf(quoted, sizeof quoted, "\"%s\"", ifname);
  CHECK(!table_has(quoted)); /* no map element left */
  struct probe gone = {.op = P_NO_ETH0};
  CHECK(probe(&gone, NULL) == 0);
  CHECK(sbx_net_pool_used() == 0);
  free(pol);
  free(pol6);
  free(pany);
}

static void test_cycles(void)
{
  static const char *const allow[] = {WORLD4 "/32@7", "198.51.100.0/30", "allowed.test", NULL};
  struct sbx_net_policy *pol = policy(allow);
  uint64_t t0 = sbx_now_ms();
  int ok = 0;
  for (int i = 0; i < 50; i++) {
    struct sbx_net_attachment *a = NULL;
    struct sbx_error err = {0};
    if (sbx_net_attach("sbx_cycle", "t1", sandbox_pid, pol, &a, &err) < 0) {
      fprintf(stderr, "cycle %d: %s\n", i, err.msg);
      break;
    }
    if (i % 10 == 0)
      CHECK(sbx_net_update(a, pol, &err) == 0);
    sbx_net_detach(a);
    ok++;
  }
  CHECK(ok == 50);
  printf("50 attach/detach cycles: %llu ms\n", (unsigned long long)(sbx_now_ms() - t0));
  CHECK(links_with_prefix() == 0);
  CHECK(!table_has("chain f_"));
  CHECK(!table_has("chain n_"));
  CHECK(!table_has("set l4"));
  CHECK(sbx_net_pool_used() == 0);
  CHECK(sbx_net_registry_count() == 0);
  free(pol);
}

static void test_attach_fails_closed(void)
{
  /* A pid that does not exist: nothing may be left. */
  static const char *const allow[] = {WORLD4 "/32", NULL};
  struct sbx_net_policy *pol = policy(allow);
  struct sbx_net_attachment *a = NULL;
  struct sbx_error err = {0};
  CHECK(sbx_net_attach("sbx_bad", "t1", 0x3ffffff0, pol, &a, &err) < 0);
  CHECK(a == NULL);
  /* A pid in the host's own netns: refused before anything is made. */
  CHECK(sbx_net_attach("sbx_bad", "t1", getpid(), pol, &a, &err) < 0);
  CHECK(strstr(err.msg, "host's network namespace") != NULL);
  CHECK(links_with_prefix() == 0);
  CHECK(sbx_net_pool_used() == 0);
  CHECK(!table_has("chain f_"));
  free(pol);
}

static void test_stop_and_recover(void)
{
  /* stop with a sandbox still attached removes it all. */
  static const char *const allow[] = {WORLD4 "/32", NULL};
  struct sbx_net_policy *pol = policy(allow);
  struct sbx_net_attachment *a = NULL;
  struct sbx_error err = {0};
  CHECK(sbx_net_attach("sbx_stop", "t1", sandbox_pid, pol, &a, &err) == 0);
  sbx_net_stop();
  CHECK(links_with_prefix() == 0);
  CHECK(!table_exists());
  CHECK(!sbx_net_available(NULL, 0));
  sbx_net_detach(a); /* only frees now */
  CHECK(sbx_net_attach("sbx_stop", "t1", sandbox_pid, pol, &a, &err) < 0);
  CHECK(err.code == SBX_E_RUNTIME_UNAVAILABLE);

  /* Leftovers of a crashed daemon: a table and a veth with the tag. */
  pid_t other = netns_child(false);
  struct sbx_net_slot s = {.idx = 1};
  inet_pton(AF_INET, "10.253.240.9", &s.gw4);
  inet_pton(AF_INET, "10.253.240.10", &s.addr4);
  inet_pton(AF_INET6, "fd5b:d0c5:a1fe::9", &s.gw6);
  inet_pton(AF_INET6, "fd5b:d0c5:a1fe::a", &s.addr6);
  char name[16], script[128];
  snprintf(name, sizeof name, "%s77", prefix);
  CHECK(sbx_net_link_create(name, other, &s, &err) == 0);
  snprintf(script, sizeof script, "add table inet %s\nadd chain inet %s f_77\n", table, table);
  CHECK(sbx_net_nft_run(script, NULL, NULL) == 0);
  CHECK(links_with_prefix() == 1 && table_exists());
  CHECK(sbx_net_recover(tag) == 0);
  CHECK(links_with_prefix() == 0);
  CHECK(!table_exists());
  CHECK(sbx_net_recover(tag) == 0); /* idempotent */
  CHECK(sbx_net_recover("Bad-Tag!") < 0);
  kill_child(other);
  free(pol);
}

static void test_pool(void)
{
  struct sbx_error err;
  CHECK(sbx_net_pool_configure("10.0.0.0/30", NULL, 0, &err) < 0); /* too small */
  CHECK(sbx_net_pool_configure("nonsense", NULL, 0, &err) < 0);
  CHECK(sbx_net_pool_configure("192.0.2.0/28", "2001:db8::/120", 0, &err) == 0);
  struct sbx_net_slot s[4];
  for (int i = 0; i < 3; i++)
    CHECK(sbx_net_pool_alloc(&s[i], &err) == 0);
  CHECK(sbx_net_pool_alloc(&s[3], &err) < 0); /* 4 blocks, block 0 is DNS */
  char a[INET6_ADDRSTRLEN];
  ntop(AF_INET, &s[0].gw4, a, sizeof a);
  CHECK_STR(a, "192.0.2.5");
  ntop(AF_INET, &s[0].addr4, a, sizeof a);
  CHECK_STR(a, "192.0.2.6");
  ntop(AF_INET6, &s[2].addr6, a, sizeof a);
  CHECK_STR(a, "2001:db8::e");
  sbx_net_pool_release(s[1].idx);
  CHECK(sbx_net_pool_alloc(&s[3], &err) == 0 && s[3].idx == s[1].idx);
  struct in_addr d4;
  sbx_net_pool_dns(&d4, NULL);
  ntop(AF_INET, &d4, a, sizeof a);
  CHECK_STR(a, "192.0.2.1");
}

/* What a crashed earlier run left (its tag is "t<pid in hex>"; that pid
 * is gone): its table, sandbox links and world link. */
static void sweep_crashed_runs(void)
{
  char *out = NULL;
  if (sbx_net_nft_run("list tables inet", &out, NULL) == 0) {
    for (char *p = out; (p = strstr(p, "sandboxd_t")); p++) {
      unsigned pid;
      char t[16];
      if (sscanf(p, "sandboxd_t%6x", &pid) == 1 && p[16] == '\n' && kill((pid_t)pid, 0) < 0 &&
          errno == ESRCH) {
        snprintf(t, sizeof t, "t%06x", pid);
        sbx_net_recover(t);
      }
    }
    free(out);
  }
  struct if_nameindex *v = if_nameindex(), *i;
  for (i = v; i && i->if_index; i++) {
    unsigned pid;
    char t[16];
    if (sscanf(i->if_name, "sxt%6x-", &pid) == 1 && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
      snprintf(t, sizeof t, "t%06x", pid);
      sbx_net_recover(t);
    } else if (sscanf(i->if_name, "tpwt%6x", &pid) == 1 && strlen(i->if_name) == 10 &&
               kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
      sbx_net_link_delete(i->if_name);
    }
  }
  if_freenameindex(v);
}

int main(void)
{
  if (geteuid() != 0) {
    return check_skip("net_plumb: needs root");
  }
  signal(SIGPIPE, SIG_IGN);
  test_pool();

  sweep_crashed_runs();
  snprintf(tag, sizeof tag, "t%06x", (unsigned)getpid());
  snprintf(prefix, sizeof prefix, "sx%s-", tag);
  snprintf(table, sizeof table, "sandboxd_%s", tag);
  snprintf(worldif, sizeof worldif, "tpw%s", tag);

  static const char *const pins[] = {"allowed.test=" WORLD4, NULL};
  struct sbx_net_config cfg = {.tag = tag, .pool4 = POOL4, .pool6 = POOL6, .resolve = pins};
  struct sbx_error err = {0};
  sbx_net_set_decision_hook(on_decision, NULL);
  CHECK(sbx_net_start(&cfg, &err) == 0);
  if (!sbx_net_available(NULL, 0)) {
    fprintf(stderr, "start: %s\n", err.msg);
    return check_finish("net_plumb");
  }
  CHECK(strstr(sbx_net_resolv_conf(), "nameserver 10.253.240.1\n") != NULL);
  CHECK(table_exists());

  /* The world, on the host through its own veth (never a sandbox link). */
  pid_t world = netns_child(true);
  struct sbx_net_slot ws = {.idx = 0};
  inet_pton(AF_INET, HOSTW4, &ws.gw4);
  inet_pton(AF_INET, WORLD4, &ws.addr4);
  inet_pton(AF_INET6, "2001:db8::1", &ws.gw6);
  inet_pton(AF_INET6, WORLD6, &ws.addr6);
  CHECK(world > 0 && sbx_net_link_create(worldif, world, &ws, &err) == 0);
  sandbox_pid = netns_child(false);
  CHECK(sandbox_pid > 0);

  test_attach();
  test_attach_fails_closed();
  test_cycles();
  test_stop_and_recover();

  sbx_net_link_delete(worldif);
  kill_child(sandbox_pid);
  kill_child(world);
  CHECK(!sbx_net_link_exists(worldif));
  return check_finish("net_plumb");
}
