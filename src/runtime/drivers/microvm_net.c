/* microvm_net.c — an egress allowlist for a microVM: the guest's NIC on
 * the same outside enforcement as a container's (nftables, DNS responder,
 * egress proxy; docs/network.md).
 *
 * The net module links a network namespace, not a VM: it makes a veth
 * pair whose inside end (eth0: the sandbox's addresses, default routes to
 * the host end) lives in the netns of a holder process (cg_spawn.h).  Here,
 * in a thread that entered that netns, eth0's addresses and gateways are
 * read, eth0 and a tap device go into a bridge, and eth0 gives its
 * addresses up: the guest takes them (sbx.ip4/sbx.ip6/sbx.gw4/sbx.gw6 on
 * its command line, vm/main.c).  So the guest's packets leave through the
 * veth with the sandbox's own source addresses, which is what the host's
 * rules match on; the holder's netns itself answers nothing.  QEMU gets
 * the tap's fd (`-netdev tap,fd=`); the tap, the bridge and the netns go
 * when QEMU and the holder do. */
#include "runtime/drivers/microvm_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"

#define INSIDE_IF "eth0" /* net/link.c's name for the inside end */
#define TAP_IF "sbxtap"
#define BRIDGE_IF "sbxbr"

struct in6_ifreq_compat { /* linux/ipv6.h's struct in6_ifreq */
  struct in6_addr addr;
  uint32_t prefixlen;
  int ifindex;
};

static unsigned prefix_of(const struct sockaddr *mask)
{
  unsigned n = 0;
  const uint8_t *b =
      mask->sa_family == AF_INET
          ? (const uint8_t *)&((const struct sockaddr_in *)(const void *)mask)->sin_addr
          : (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)mask)->sin6_addr;
  size_t len = mask->sa_family == AF_INET ? 4 : 16;
  for (size_t i = 0; i < len; i++)
    n += (unsigned)__builtin_popcount(b[i]);
  return n;
}

/* eth0's IPv4 address and its global IPv6 one, with prefixes. */
static int read_addrs(struct sbx_mv_net *n)
{
  struct ifaddrs *all, *a;
  if (getifaddrs(&all) < 0)
    return -errno;
  for (a = all; a; a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_netmask || strcmp(a->ifa_name, INSIDE_IF) != 0)
      continue;
    if (a->ifa_addr->sa_family == AF_INET) {
      n->addr4 = ((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr;
      n->prefix4 = prefix_of(a->ifa_netmask);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      struct in6_addr *x = &((struct sockaddr_in6 *)(void *)a->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(x))
        continue;
      n->addr6 = *x;
      n->prefix6 = prefix_of(a->ifa_netmask);
      n->have6 = true;
    }
  }
  freeifaddrs(all);
  return n->prefix4 ? 0 : -ENOENT;
}

/* The default routes' gateways, from this thread's netns's tables. */
static void read_gateways(struct sbx_mv_net *n)
{
  char line[512];
  FILE *f = fopen("/proc/thread-self/net/route", "re");
  while (f && fgets(line, sizeof line, f)) {
    char ifn[32];
    unsigned dst, gw;
    if (sscanf(line, "%31s %x %x", ifn, &dst, &gw) == 3 && dst == 0 && gw)
      n->gw4.s_addr = gw; /* the table's hex is the address in network order */
  }
  if (f)
    fclose(f);
  f = fopen("/proc/thread-self/net/ipv6_route", "re");
  while (f && fgets(line, sizeof line, f)) {
    char dst[33], plen[3], hop[33];
    if (sscanf(line, "%32s %2s %*s %*s %32s", dst, plen, hop) != 3 || strcmp(plen, "00") ||
        strspn(dst, "0") != 32 || strspn(hop, "0") == 32)
      continue;
    for (int i = 0; i < 16; i++) {
      unsigned v;
      sscanf(hop + 2 * i, "%2x", &v);
      n->gw6.s6_addr[i] = (uint8_t)v;
    }
  }
  if (f)
    fclose(f);
}

static int set_up(int s, const char *ifname)
{
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    return -errno;
  ifr.ifr_flags |= IFF_UP;
  return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static int enslave(int s, const char *ifname)
{
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", BRIDGE_IF);
  ifr.ifr_ifindex = (int)if_nametoindex(ifname);
  return ifr.ifr_ifindex && ioctl(s, SIOCBRADDIF, &ifr) == 0 ? 0 : -errno;
}

/* eth0 gives its addresses to the guest: with none left, this netns's
 * own stack answers nothing on the bridge. */
static void give_up_addrs(int s4, const struct sbx_mv_net *n)
{
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", INSIDE_IF);
  struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&ifr.ifr_addr;
  sin->sin_family = AF_INET; /* 0.0.0.0: deletes the address */
  ioctl(s4, SIOCSIFADDR, &ifr);
  if (!n->have6)
    return;
  int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct in6_ifreq_compat r6 = {.addr = n->addr6,
                                .prefixlen = n->prefix6,
                                .ifindex = (int)if_nametoindex(INSIDE_IF)};
  if (s6 >= 0) {
    ioctl(s6, SIOCDIFADDR, &r6);
    close(s6);
  }
}

static int open_tap(void)
{
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", TAP_IF);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return -e;
  }
  return fd;
}

struct job {
  pid_t pid;
  struct sbx_mv_net *n;
  const char *step;
  int err;
};

static int plumb(struct job *j)
{
  int r;
  j->step = "read eth0";
  if ((r = read_addrs(j->n)) < 0)
    return r;
  read_gateways(j->n);
  j->step = "tap";
  if ((j->n->tap_fd = open_tap()) < 0)
    return j->n->tap_fd;
  _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  j->step = "bridge";
  if (s < 0 || ioctl(s, SIOCBRADDBR, BRIDGE_IF) < 0)
    return -errno;
  if ((r = enslave(s, INSIDE_IF)) < 0 || (r = enslave(s, TAP_IF)) < 0)
    return r;
  give_up_addrs(s, j->n);
  j->step = "link up";
  if ((r = set_up(s, TAP_IF)) < 0 || (r = set_up(s, BRIDGE_IF)) < 0)
    return r;
  return 0;
}

/* In a thread of its own: setns() changes only the calling thread. */
static void *net_thread(void *arg)
{
  struct job *j = arg;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)j->pid);
  _cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
  j->step = "enter the netns";
  if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
    j->err = -errno;
    return NULL;
  }
  j->err = plumb(j);
  return NULL;
}

/* The nameservers of a resolv.conf's text, comma-separated. */
static void nameservers(const char *resolv, char *out, size_t len)
{
  out[0] = '\0';
  for (const char *p = resolv; p && (p = strstr(p, "nameserver")) != NULL; p++) {
    char ip[INET6_ADDRSTRLEN];
    struct in6_addr any;
    if (sscanf(p + 10, " %45[0-9a-fA-F:.]", ip) == 1 &&
        (inet_pton(AF_INET, ip, &any) == 1 || inet_pton(AF_INET6, ip, &any) == 1) &&
        strlen(out) + strlen(ip) + 2 < len)
      snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "", ip);
  }
}

int sbx_mv_net_plumb(pid_t netns_pid, const char *resolv, struct sbx_mv_net *n,
                     struct sbx_error *err)
{
  *n = (struct sbx_mv_net){.tap_fd = -1};
  struct job j = {.pid = netns_pid, .n = n};
  pthread_t t;
  int r = pthread_create(&t, NULL, net_thread, &j);
  if (r)
    return sbx_err_sys(err, r, "microvm: thread");
  pthread_join(t, NULL);
  if (j.err < 0) {
    if (n->tap_fd >= 0)
      close(n->tap_fd);
    n->tap_fd = -1;
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, -j.err, "microvm: network: %s: %s",
                       j.step, strerror(-j.err));
  }
  char a4[INET_ADDRSTRLEN], g4[INET_ADDRSTRLEN], a6[INET6_ADDRSTRLEN], g6[INET6_ADDRSTRLEN];
  char dns[128];
  inet_ntop(AF_INET, &n->addr4, a4, sizeof a4);
  inet_ntop(AF_INET, &n->gw4, g4, sizeof g4);
  inet_ntop(AF_INET6, &n->addr6, a6, sizeof a6);
  inet_ntop(AF_INET6, &n->gw6, g6, sizeof g6);
  nameservers(resolv, dns, sizeof dns);
  int w =
      snprintf(n->cmdline, sizeof n->cmdline, " sbx.ip4=%s/%u sbx.gw4=%s", a4, n->prefix4, g4);
  if (n->have6 && w > 0 && (size_t)w < sizeof n->cmdline)
    w += snprintf(n->cmdline + w, sizeof n->cmdline - (size_t)w, " sbx.ip6=%s/%u sbx.gw6=%s", a6,
                  n->prefix6, g6);
  if (dns[0] && w > 0 && (size_t)w < sizeof n->cmdline)
    snprintf(n->cmdline + w, sizeof n->cmdline - (size_t)w, " sbx.dns=%s", dns);
  return 0;
}
