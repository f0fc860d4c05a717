/* addr.c — which destination addresses stay closed whatever a policy's
 * domain rules say: special-purpose ranges (a fixed table), the sandbox
 * pools and every address of the host itself.  Also the CIDR parser the
 * policy and the pools share.
 *
 * The host's addresses come from getifaddrs(), refreshed at most every
 * HOST_REFRESH_S seconds under a mutex: an address added to the host
 * (DHCP, a new bridge) is closed within that delay, and a flood of DNS
 * answers does not turn into a flood of netlink dumps. */
#include "common/buf.h"
#include "net/net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/net_int.h"

#define HOST_REFRESH_S 3
#define HOST_MAX 65536 /* a host with thousands of veths still fits */

bool sbx_net_prefix_match(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
  unsigned whole = prefix / 8, rest = prefix % 8;
  if (memcmp(a, b, whole) != 0)
    return false;
  if (rest == 0)
    return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

int sbx_net_cidr_parse(const char *s, int *family, uint8_t addr[16], uint8_t *prefix,
                       bool *hostbits)
{
  char buf[64];
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof buf)
    return -1;
  memcpy(buf, s, n + 1);
  char *slash = strchr(buf, '/');
  long plen = -1;
  if (slash) {
    *slash = '\0';
    const char *d = slash + 1;
    size_t dl = strlen(d);
    if (dl == 0 || dl > 3)
      return -1;
    plen = 0;
    for (size_t i = 0; i < dl; i++) {
      if (!isdigit((unsigned char)d[i]))
        return -1;
      plen = plen * 10 + (d[i] - '0');
    }
  }
  memset(addr, 0, 16);
  if (inet_pton(AF_INET, buf, addr) == 1)
    *family = AF_INET;
  else if (inet_pton(AF_INET6, buf, addr) == 1)
    *family = AF_INET6;
  else
    return -1;
  unsigned max = *family == AF_INET ? 32 : 128;
  if (plen < 0)
    plen = max;
  if ((unsigned long)plen > max)
    return -1;
  *prefix = (uint8_t)plen;
  /* Mask, remembering whether anything was set below the prefix. */
  bool set = false;
  for (unsigned bit = (unsigned)plen; bit < max; bit++) {
    uint8_t m = (uint8_t)(0x80 >> (bit % 8));
    if (addr[bit / 8] & m) {
      set = true;
      addr[bit / 8] &= (uint8_t)~m;
    }
  }
  if (hostbits)
    *hostbits = set;
  return 0;
}

/* ---- the fixed table ---------------------------------------------------- */

struct range {
  const char *cidr;
  const char *name;
  int family;
  uint8_t addr[16];
  uint8_t prefix;
};

/* Most specific first where names overlap (metadata inside link-local). */
static struct range table[] = {
    {"169.254.169.254/32", "metadata"},
    {"255.255.255.255/32", "broadcast"},
    {"0.0.0.0/8", "unspecified"},
    {"127.0.0.0/8", "loopback"},
    {"169.254.0.0/16", "link-local"},
    {"10.0.0.0/8", "private"},
    {"172.16.0.0/12", "private"},
    {"192.168.0.0/16", "private"},
    {"100.64.0.0/10", "cgnat"},
    {"192.0.0.0/24", "reserved"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved"},
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"fd00:ec2::254/128", "metadata"},
    {"fe80::/10", "link-local"},
    {"fc00::/7", "private"},
    {"fec0::/10", "private"},
    {"ff00::/8", "multicast"},
    {"100::/64", "reserved"},
    {"64:ff9b::/96", "nat64"}, /* what a NAT64 gateway would reach is judged by nft as closed */
    {"64:ff9b:1::/48", "nat64"},
    {"::/96", "reserved"}, /* IPv4-compatible, deprecated: never routed */
};
#define NTABLE (sizeof table / sizeof table[0])

static struct {
  pthread_mutex_t mu;
  struct range pool[2]; /* [0] v4, [1] v6 */
  struct host_addr {
    int family;
    uint8_t addr[16];
  } * host;
  size_t nhost, host_cap;
  struct timespec host_at;
  bool host_valid;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t once = PTHREAD_ONCE_INIT;

static int fill_range(struct range *r, const char *cidr)
{
  return sbx_net_cidr_parse(cidr, &r->family, r->addr, &r->prefix, NULL);
}

static void init_once(void)
{
  for (size_t i = 0; i < NTABLE; i++)
    if (fill_range(&table[i], table[i].cidr) < 0)
      abort(); /* a typo in the table above */
  fill_range(&A.pool[0], "10.231.0.0/16");
  fill_range(&A.pool[1], "fd5b:d0c5:a11d::/48");
  A.pool[0].name = A.pool[1].name = "pool";
}

int sbx_net_addr_set_pools(const char *pool4, const char *pool6, struct sbx_error *err)
{
  pthread_once(&once, init_once);
  struct range r[2];
  const char *in[2] = {pool4, pool6};
  int want[2] = {AF_INET, AF_INET6};
  for (int i = 0; i < 2; i++) {
    if (!in[i])
      continue;
    if (fill_range(&r[i], in[i]) < 0 || r[i].family != want[i])
      return sbx_err_set(err, SBX_E_INVALID, 0, "network pool '%s' is not an IPv%d CIDR", in[i],
                         i == 0 ? 4 : 6);
    r[i].name = "pool";
  }
  pthread_mutex_lock(&A.mu);
  for (int i = 0; i < 2; i++)
    if (in[i])
      A.pool[i] = r[i];
  pthread_mutex_unlock(&A.mu);
  return 0;
}

/* Caller holds A.mu. */
static void host_refresh(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (A.host_valid && now.tv_sec - A.host_at.tv_sec < HOST_REFRESH_S)
    return;
  struct ifaddrs *ifa;
  if (getifaddrs(&ifa) < 0)
    return; /* keep the previous list: better stale than empty */
  size_t n = 0;
  for (struct ifaddrs *i = ifa; i && n < HOST_MAX; i = i->ifa_next) {
    if (!i->ifa_addr ||
        (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    if (sbx_array_grow(&A.host, &A.host_cap, n + 1, sizeof *A.host, HOST_MAX) < 0)
      break; /* keep what fits; the rest are refreshed next time */
    struct host_addr *h = &A.host[n++];
    memset(h, 0, sizeof *h);
    h->family = i->ifa_addr->sa_family;
    if (h->family == AF_INET)
      memcpy(h->addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
    else
      memcpy(h->addr, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
  }
  A.nhost = n;
  freeifaddrs(ifa);
  A.host_at = now;
  A.host_valid = true;
}

/* The v4 address a v6 one carries, for the forms a resolver may hand out
 * to smuggle a closed v4 target (mapped, NAT64 well-known, 6to4). */
static bool embedded_v4(const uint8_t *a, uint8_t v4[4], unsigned *at_bit)
{
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0) {
    memcpy(v4, a + 12, 4);
    *at_bit = 96;
    return true;
  }
  if (a[0] == 0x20 && a[1] == 0x02) {
    memcpy(v4, a + 2, 4);
    *at_bit = 16;
    return true;
  }
  return false;
}

static const char *closed_locked(int family, const uint8_t *a, unsigned *prefix)
{
  const char *name = NULL;
  unsigned best = 0;
  for (size_t i = 0; i < NTABLE; i++) {
    if (table[i].family == family && sbx_net_prefix_match(table[i].addr, a, table[i].prefix)) {
      name = name ? name : table[i].name;
      best = table[i].prefix > best ? table[i].prefix : best;
    }
  }
  struct range *pool = &A.pool[family == AF_INET ? 0 : 1];
  if (pool->family == family && sbx_net_prefix_match(pool->addr, a, pool->prefix)) {
    name = name ? name : "pool";
    best = pool->prefix > best ? pool->prefix : best;
  }
  host_refresh();
  for (size_t i = 0; i < A.nhost; i++) {
    if (A.host[i].family == family &&
        memcmp(A.host[i].addr, a, family == AF_INET ? 4 : 16) == 0) {
      name = name ? name : "host";
      best = family == AF_INET ? 32 : 128;
      break;
    }
  }
  *prefix = best;
  return name;
}

const char *sbx_net_addr_closed_prefix(int family, const void *addr, unsigned *prefix)
{
  unsigned dummy;
  if (!prefix)
    prefix = &dummy;
  *prefix = 0;
  if (family != AF_INET && family != AF_INET6)
    return "unspecified";
  pthread_once(&once, init_once);
  uint8_t a[16] = {0};
  memcpy(a, addr, family == AF_INET ? 4 : 16);
  pthread_mutex_lock(&A.mu);
  const char *name = NULL;
  uint8_t v4[16] = {0};
  unsigned at, p4;
  /* A v6 form carrying a closed v4 address is named after that address. */
  if (family == AF_INET6 && embedded_v4(a, v4, &at) && (name = closed_locked(AF_INET, v4, &p4)))
    *prefix = at + p4;
  if (!name)
    name = closed_locked(family, a, prefix);
  /* A mapped address is never a destination on the wire. */
  if (!name && family == AF_INET6 && embedded_v4(a, v4, &at) && at == 96 && a[10] == 0xff) {
    name = "v4-mapped";
    *prefix = 96;
  }
  pthread_mutex_unlock(&A.mu);
  return name;
}

const char *sbx_net_addr_closed(int family, const void *addr)
{
  return sbx_net_addr_closed_prefix(family, addr, NULL);
}
