/* pool.c — the addresses of the veth links: an index per attached
 * sandbox, and from it a /30 of pool4 and a /126 of pool6 (block i:
 * .1 host end = the sandbox's gateway, .2 the sandbox).  Block 0 is never
 * handed out: its first address is the fixed DNS address, the same for
 * every sandbox, so resolv.conf can be written once for all of them.
 * Thread-safe (one mutex); the bitmap is sized once per configure. */
#include "net/plumb.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct in_addr base4;
static struct in6_addr base6;
static unsigned plen4, plen6;
static unsigned max_index;  /* highest usable index */
static unsigned char *used; /* bitmap, max_index + 1 bits */
static unsigned next_hint = 1;
static unsigned nused;

static int parse_cidr(const char *text, int family, void *addr, unsigned *plen)
{
  char buf[64];
  snprintf(buf, sizeof buf, "%s", text);
  char *slash = strchr(buf, '/');
  if (!slash)
    return -1;
  *slash = '\0';
  char *end;
  unsigned long p = strtoul(slash + 1, &end, 10);
  if (*end || slash[1] == '\0' || p > (family == AF_INET ? 32u : 128u))
    return -1;
  if (inet_pton(family, buf, addr) != 1)
    return -1;
  *plen = (unsigned)p;
  /* Clear host bits so "10.231.5.7/16" means 10.231.0.0/16. */
  unsigned char *b = addr;
  unsigned n = family == AF_INET ? 4 : 16;
  for (unsigned i = 0; i < n; i++) {
    unsigned keep = p >= 8 * (i + 1) ? 8 : (p > 8 * i ? p - 8 * i : 0);
    b[i] &= (unsigned char)(0xff00u >> keep);
  }
  return 0;
}

/* Number of 4-address blocks in a pool of host-bit width `bits`, capped. */
static unsigned blocks(unsigned bits)
{
  if (bits < 2)
    return 0;
  return bits - 2 >= 24 ? 1u << 24 : 1u << (bits - 2);
}

int sbx_net_pool_configure(const char *pool4, const char *pool6, unsigned max_idx,
                           struct sbx_error *err)
{
  const char *p4 = pool4 && *pool4 ? pool4 : SBX_NET_DEFAULT_POOL4;
  const char *p6 = pool6 && *pool6 ? pool6 : SBX_NET_DEFAULT_POOL6;
  struct in_addr a4;
  struct in6_addr a6;
  unsigned l4, l6;
  if (parse_cidr(p4, AF_INET, &a4, &l4) < 0 || l4 > 29)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "net pool4 \"%s\": want an IPv4 CIDR of /29 or wider", p4);
  if (parse_cidr(p6, AF_INET6, &a6, &l6) < 0 || l6 > 125)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "net pool6 \"%s\": want an IPv6 CIDR of /125 or wider", p6);
  unsigned n = blocks(32 - l4);
  unsigned n6 = blocks(128 - l6);
  if (n6 < n)
    n = n6;
  unsigned top = n - 1; /* block 0 is the DNS block */
  if (max_idx && top > max_idx)
    top = max_idx;
  unsigned char *bm = calloc(top / 8 + 1, 1);
  if (!bm)
    return sbx_err_sys(err, ENOMEM, "net pool");
  pthread_mutex_lock(&lock);
  free(used);
  used = bm;
  base4 = a4;
  base6 = a6;
  plen4 = l4;
  plen6 = l6;
  max_index = top;
  next_hint = 1;
  nused = 0;
  pthread_mutex_unlock(&lock);
  return 0;
}

static void addr4_at(unsigned off, struct in_addr *out)
{
  out->s_addr = htonl(ntohl(base4.s_addr) + off);
}

/* The pool is at least 3 address bits wide and offsets stay below 2^26,
 * so adding to the low 32 bits never carries past them. */
static void addr6_at(unsigned off, struct in6_addr *out)
{
  *out = base6;
  uint32_t low;
  memcpy(&low, &out->s6_addr[12], 4);
  low = htonl(ntohl(low) + off);
  memcpy(&out->s6_addr[12], &low, 4);
}

static bool bit(unsigned i) { return used[i / 8] & (1u << (i % 8)); }

int sbx_net_pool_alloc(struct sbx_net_slot *out, struct sbx_error *err)
{
  pthread_mutex_lock(&lock);
  unsigned idx = 0;
  for (unsigned k = 0; used && k < max_index; k++) {
    unsigned i = (next_hint - 1 + k) % max_index + 1;
    if (!bit(i)) {
      idx = i;
      break;
    }
  }
  if (idx) {
    used[idx / 8] |= (unsigned char)(1u << (idx % 8));
    nused++;
    next_hint = idx % max_index + 1;
    memset(out, 0, sizeof *out);
    out->idx = idx;
    addr4_at(4 * idx + 1, &out->gw4);
    addr4_at(4 * idx + 2, &out->addr4);
    addr6_at(4 * idx + 1, &out->gw6);
    addr6_at(4 * idx + 2, &out->addr6);
  }
  pthread_mutex_unlock(&lock);
  if (!idx)
    return sbx_err_set(err, SBX_E_QUOTA, 0, "net pool exhausted (%u sandboxes attached)",
                       max_index);
  return 0;
}

void sbx_net_pool_release(unsigned idx)
{
  pthread_mutex_lock(&lock);
  if (used && idx >= 1 && idx <= max_index && bit(idx)) {
    used[idx / 8] &= (unsigned char)~(1u << (idx % 8));
    nused--;
  }
  pthread_mutex_unlock(&lock);
}

void sbx_net_pool_dns(struct in_addr *dns4, struct in6_addr *dns6)
{
  pthread_mutex_lock(&lock);
  if (dns4)
    addr4_at(1, dns4);
  if (dns6)
    addr6_at(1, dns6);
  pthread_mutex_unlock(&lock);
}

void sbx_net_pool_text(char *p4, size_t l4, char *p6, size_t l6)
{
  char a[INET6_ADDRSTRLEN];
  pthread_mutex_lock(&lock);
  inet_ntop(AF_INET, &base4, a, sizeof a);
  snprintf(p4, l4, "%s/%u", a, plen4);
  inet_ntop(AF_INET6, &base6, a, sizeof a);
  snprintf(p6, l6, "%s/%u", a, plen6);
  pthread_mutex_unlock(&lock);
}

unsigned sbx_net_pool_used(void)
{
  pthread_mutex_lock(&lock);
  unsigned n = nused;
  pthread_mutex_unlock(&lock);
  return n;
}
