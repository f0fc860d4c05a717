/* net.c — the guest's NIC for an egress allowlist: the sandbox's
 * addresses and default routes on eth0, and its nameservers in
 * /etc/resolv.conf, from the kernel command line (sbx.ip4, sbx.gw4,
 * sbx.ip6, sbx.gw6, sbx.dns; runtime/drivers/microvm_net.c hands them
 * over).  Without sbx.ip4 the guest has no NIC and nothing is done.
 * ioctls only (the guest's PID 1 is static, libc only). */
#include "vm/net.h"
#include "vm/text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define NIC "eth0"

struct in6_ifreq_compat { /* linux/ipv6.h's struct in6_ifreq */
  struct in6_addr addr;
  uint32_t prefixlen;
  int ifindex;
};

static int up(int s)
{
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, NIC);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    return -1;
  ifr.ifr_flags |= IFF_UP;
  return ioctl(s, SIOCSIFFLAGS, &ifr);
}

static int config4(const char *cidr, const char *gw)
{
  char ip[INET_ADDRSTRLEN];
  unsigned plen;
  struct in_addr a, g;
  if (sscanf(cidr, "%15[0-9.]/%u", ip, &plen) != 2 || plen > 32 ||
      inet_pton(AF_INET, ip, &a) != 1 || inet_pton(AF_INET, gw, &g) != 1)
    return -1;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, NIC);
  struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&ifr.ifr_addr;
  sin->sin_family = AF_INET;
  sin->sin_addr = a;
  int rc = s >= 0 && ioctl(s, SIOCSIFADDR, &ifr) == 0 ? 0 : -1;
  sin->sin_addr.s_addr = plen ? htonl(~0u << (32 - plen)) : 0;
  if (rc == 0 && (ioctl(s, SIOCSIFNETMASK, &ifr) < 0 || up(s) < 0))
    rc = -1;
  struct rtentry rt = {0};
  ((struct sockaddr_in *)(void *)&rt.rt_dst)->sin_family = AF_INET;
  ((struct sockaddr_in *)(void *)&rt.rt_genmask)->sin_family = AF_INET;
  struct sockaddr_in *rgw = (struct sockaddr_in *)(void *)&rt.rt_gateway;
  rgw->sin_family = AF_INET;
  rgw->sin_addr = g;
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  if (rc == 0 && ioctl(s, SIOCADDRT, &rt) < 0)
    rc = -1;
  if (s >= 0)
    close(s);
  return rc;
}

static void write_text(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)!write(fd, text, strlen(text));
    close(fd);
  }
}

static int config6(const char *cidr, const char *gw)
{
  char ip[INET6_ADDRSTRLEN];
  unsigned plen;
  struct in6_ifreq_compat r = {0};
  struct in6_rtmsg rt = {0};
  if (sscanf(cidr, "%45[0-9a-fA-F:]/%u", ip, &plen) != 2 || plen > 128 ||
      inet_pton(AF_INET6, ip, &r.addr) != 1 || inet_pton(AF_INET6, gw, &rt.rtmsg_gateway) != 1)
    return -1;
  /* no duplicate address detection: the link is ours alone, and DAD would
   * hold the address back for a second */
  write_text("/proc/sys/net/ipv6/conf/" NIC "/accept_dad", "0");
  r.prefixlen = plen;
  r.ifindex = (int)if_nametoindex(NIC);
  rt.rtmsg_flags = RTF_UP | RTF_GATEWAY;
  rt.rtmsg_metric = 1;
  rt.rtmsg_ifindex = r.ifindex;
  int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int rc = s >= 0 && r.ifindex && ioctl(s, SIOCSIFADDR, &r) == 0 && ioctl(s, SIOCADDRT, &rt) == 0
               ? 0
               : -1;
  if (s >= 0)
    close(s);
  return rc;
}

/* /etc/resolv.conf with the comma-separated nameservers. */
static void resolv(const char *dns)
{
  char text[512] = "", one[64];
  for (const char *p = dns; *p;) {
    size_t n = strcspn(p, ",");
    snprintf(one, sizeof one, "nameserver %.*s\n", (int)(n < 46 ? n : 46), p);
    if (strlen(text) + strlen(one) < sizeof text)
      strcat(text, one);
    p += n + (p[n] == ',');
  }
  if (text[0])
    write_text("/etc/resolv.conf", text);
}

int sbx_vm_net_config(void)
{
  char cmdline[4096], ip4[64], gw4[64], ip6[96], gw6[64], dns[160];
  if (sbx_vm_read_text("/proc/cmdline", cmdline, sizeof cmdline) < 0)
    return 0;
  sbx_vm_cmdline_value(cmdline, "sbx.ip4", ip4, sizeof ip4);
  if (!ip4[0])
    return 0; /* network none: no NIC */
  sbx_vm_cmdline_value(cmdline, "sbx.gw4", gw4, sizeof gw4);
  sbx_vm_cmdline_value(cmdline, "sbx.ip6", ip6, sizeof ip6);
  sbx_vm_cmdline_value(cmdline, "sbx.gw6", gw6, sizeof gw6);
  sbx_vm_cmdline_value(cmdline, "sbx.dns", dns, sizeof dns);
  if (config4(ip4, gw4) < 0) {
    fprintf(stderr, "sbx-vm: %s: IPv4 %s via %s: %s\n", NIC, ip4, gw4, strerror(errno));
    return -1;
  }
  if (ip6[0] && config6(ip6, gw6) < 0)
    fprintf(stderr, "sbx-vm: %s: IPv6 %s via %s: %s\n", NIC, ip6, gw6, strerror(errno));
  resolv(dns);
  return 0;
}
