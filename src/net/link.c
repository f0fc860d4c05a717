/* link.c — the veth pair that joins an attached sandbox to the host,
 * over rtnetlink with libmnl (no shelling out to ip(8)).
 *
 * The peer is created directly inside the sandbox's netns (IFLA_NET_NS_FD)
 * as "eth0", so it never exists in the host namespace where another
 * process could grab it.  Configuring it needs a netlink socket *in* that
 * netns: a short-lived thread setns()'s itself there and opens one (a
 * netlink socket stays bound to the netns it was created in).  setns on a
 * thread changes only that thread, so the daemon's own threads never
 * leave the host namespace.
 *
 * IPv6 addresses are added with IFA_F_NODAD on both ends: they are usable
 * at once, no 1-2 s of "tentative" after attach. */
#include "net/plumb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"

/* Links with one prefix a dump collects: every sandbox's veth, and then some. */
#define LINK_DUMP_MAX 65536

/* These come from <net/if.h> too, which clashes with <linux/if.h>. */
extern unsigned int if_nametoindex(const char *ifname);

#define NLBUF 8192

static void nl_closep(struct mnl_socket **nl)
{
  if (*nl)
    mnl_socket_close(*nl);
}
#define _cleanup_nl_ __attribute__((cleanup(nl_closep)))

static struct mnl_socket *nl_open(void)
{
  struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (!nl)
    return NULL;
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    int e = errno;
    mnl_socket_close(nl);
    errno = e;
    return NULL;
  }
  return nl;
}

static unsigned next_seq(void)
{
  static unsigned seq;
  return __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
}

/* Sends one request with NLM_F_ACK and waits for its answer; cb (may be
 * NULL) sees the data messages of a dump.  Returns 0 or -errno. */
static int nl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
  nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = next_seq();
  unsigned seq = nlh->nlmsg_seq;
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
    return -errno;
  char buf[32768]; /* a dump's datagrams may exceed a page */
  unsigned portid = mnl_socket_get_portid(nl);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
    if (n < 0)
      return -errno;
    int r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
    if (r < 0)
      return -errno;
    if (r == MNL_CB_STOP)
      return 0;
  }
}

static struct nlmsghdr *msg(char *buf, uint16_t type, uint16_t flags)
{
  memset(buf, 0, NLBUF);
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = flags;
  return nlh;
}

static int link_up(struct mnl_socket *nl, unsigned ifindex)
{
  char buf[NLBUF];
  struct nlmsghdr *nlh = msg(buf, RTM_NEWLINK, 0);
  struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
  ifm->ifi_family = AF_UNSPEC;
  ifm->ifi_index = (int)ifindex;
  ifm->ifi_flags = IFF_UP;
  ifm->ifi_change = IFF_UP;
  return nl_talk(nl, nlh, NULL, NULL);
}

static int addr_add(struct mnl_socket *nl, unsigned ifindex, int family, const void *addr,
                    unsigned plen)
{
  char buf[NLBUF];
  struct nlmsghdr *nlh = msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
  struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
  ifa->ifa_family = (unsigned char)family;
  ifa->ifa_prefixlen = (unsigned char)plen;
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = ifindex;
  size_t alen = family == AF_INET ? 4 : 16;
  mnl_attr_put(nlh, IFA_LOCAL, alen, addr);
  mnl_attr_put(nlh, IFA_ADDRESS, alen, addr);
  if (family == AF_INET6) {
    ifa->ifa_flags = IFA_F_NODAD;
    mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
  }
  return nl_talk(nl, nlh, NULL, NULL);
}

static int route_default(struct mnl_socket *nl, unsigned ifindex, int family, const void *gw)
{
  char buf[NLBUF];
  struct nlmsghdr *nlh = msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
  struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
  rtm->rtm_family = (unsigned char)family;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_protocol = RTPROT_STATIC;
  rtm->rtm_scope = RT_SCOPE_UNIVERSE;
  rtm->rtm_type = RTN_UNICAST;
  mnl_attr_put(nlh, RTA_GATEWAY, family == AF_INET ? 4 : 16, gw);
  mnl_attr_put_u32(nlh, RTA_OIF, ifindex);
  return nl_talk(nl, nlh, NULL, NULL);
}

static int link_del_name(struct mnl_socket *nl, const char *name)
{
  char buf[NLBUF];
  struct nlmsghdr *nlh = msg(buf, RTM_DELLINK, 0);
  struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
  return nl_talk(nl, nlh, NULL, NULL);
}

static int veth_create(struct mnl_socket *nl, const char *host_if, int nsfd)
{
  char buf[NLBUF];
  struct nlmsghdr *nlh = msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
  struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
  struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
  struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
  struct ifinfomsg *pifm = mnl_nlmsg_put_extra_header(nlh, sizeof *pifm);
  pifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, "eth0");
  mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)nsfd);
  mnl_attr_nest_end(nlh, peer);
  mnl_attr_nest_end(nlh, data);
  mnl_attr_nest_end(nlh, info);
  return nl_talk(nl, nlh, NULL, NULL);
}

/* Per-interface sysctls of the host end.  IPv6: no router advertisements
 * taken from a sandbox, no DAD.  IPv4: no redirects sent to or accepted
 * from it, no proxy ARP, strict reverse-path filter (a second anti-spoof
 * layer under nft's).  Best effort: nft enforces the policy either way. */
static void host_sysctls(const char *ifname)
{
  static const struct {
    const char *fam, *knob, *val;
  } knobs[] = {
      {"ipv6", "accept_ra", "0"},        {"ipv6", "accept_dad", "0"},
      {"ipv6", "accept_redirects", "0"}, {"ipv4", "send_redirects", "0"},
      {"ipv4", "accept_redirects", "0"}, {"ipv4", "proxy_arp", "0"},
      {"ipv4", "rp_filter", "1"},
  };
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
    char path[128];
    snprintf(path, sizeof path, "/proc/sys/net/%s/conf/%s/%s", knobs[i].fam, ifname,
             knobs[i].knob);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, knobs[i].val, 1) != 1)
      sbx_debug("net", "%s: %s", path, strerror(errno));
  }
}

/* ---- the sandbox side, from a thread inside its netns ------------------- */

struct inside {
  int nsfd;
  const struct sbx_net_slot *s;
  int err;          /* -errno */
  const char *step; /* what failed */
};

static void *inside_thread(void *arg)
{
  struct inside *in = arg;
  in->step = "setns";
  if (setns(in->nsfd, CLONE_NEWNET) < 0) {
    in->err = -errno;
    return NULL;
  }
  _cleanup_nl_ struct mnl_socket *nl = nl_open();
  in->step = "netlink socket";
  if (!nl) {
    in->err = -errno;
    return NULL;
  }
  in->step = "find eth0";
  unsigned idx = if_nametoindex("eth0");
  if (!idx) {
    in->err = -errno;
    return NULL;
  }
  int r;
  in->step = "address";
  if ((r = addr_add(nl, idx, AF_INET, &in->s->addr4, SBX_NET_PREFIX4)) < 0 ||
      (r = addr_add(nl, idx, AF_INET6, &in->s->addr6, SBX_NET_PREFIX6)) < 0)
    goto out;
  in->step = "link up";
  if ((r = link_up(nl, idx)) < 0)
    goto out;
  in->step = "default route";
  if ((r = route_default(nl, idx, AF_INET, &in->s->gw4)) < 0 ||
      (r = route_default(nl, idx, AF_INET6, &in->s->gw6)) < 0)
    goto out;
  r = 0;
out:
  in->err = r;
  return NULL;
}

static int configure_inside(int nsfd, const struct sbx_net_slot *s, struct sbx_error *err)
{
  struct inside in = {.nsfd = nsfd, .s = s};
  pthread_t t;
  int r = pthread_create(&t, NULL, inside_thread, &in);
  if (r)
    return sbx_err_sys(err, r, "net: thread");
  pthread_join(t, NULL);
  if (in.err < 0)
    return sbx_err_sys(err, -in.err, "net: sandbox side of the veth: %s", in.step);
  return 0;
}

int sbx_net_link_create(const char *host_if, pid_t init_pid, const struct sbx_net_slot *s,
                        struct sbx_error *err)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)init_pid);
  _cleanup_close_ int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0)
    return sbx_err_sys(err, errno, "net: open %s", path);
  /* A pid still in the host's netns would get "eth0" and a default route
   * in the host itself: refuse. */
  struct stat them, us;
  if (fstat(nsfd, &them) < 0 || stat("/proc/self/ns/net", &us) < 0)
    return sbx_err_sys(err, errno, "net: stat netns");
  if (them.st_dev == us.st_dev && them.st_ino == us.st_ino)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "net: pid %d is in the host's network namespace",
                       (int)init_pid);
  _cleanup_nl_ struct mnl_socket *nl = nl_open();
  if (!nl)
    return sbx_err_sys(err, errno, "net: netlink socket");
  int r = veth_create(nl, host_if, nsfd);
  if (r < 0)
    return sbx_err_sys(err, -r, "net: create veth %s", host_if);
  const char *step = "find";
  unsigned idx = if_nametoindex(host_if);
  if (!idx) {
    r = -errno;
    goto fail;
  }
  host_sysctls(host_if);
  step = "address";
  if ((r = addr_add(nl, idx, AF_INET, &s->gw4, SBX_NET_PREFIX4)) < 0 ||
      (r = addr_add(nl, idx, AF_INET6, &s->gw6, SBX_NET_PREFIX6)) < 0)
    goto fail;
  step = "link up";
  if ((r = link_up(nl, idx)) < 0)
    goto fail;
  if (configure_inside(nsfd, s, err) < 0) {
    link_del_name(nl, host_if);
    return -1;
  }
  return 0;
fail:
  link_del_name(nl, host_if);
  return sbx_err_sys(err, -r, "net: host end %s: %s", host_if, step);
}

int sbx_net_link_delete(const char *host_if)
{
  _cleanup_nl_ struct mnl_socket *nl = nl_open();
  if (!nl)
    return -1;
  int r = link_del_name(nl, host_if);
  /* Gone already: the sandbox's netns died and took the pair with it. */
  if (r == -ENODEV || r == -ENOENT)
    return 0;
  if (r < 0) {
    errno = -r;
    return -1;
  }
  return 0;
}

bool sbx_net_link_exists(const char *host_if) { return if_nametoindex(host_if) != 0; }

/* ---- recovery: every link with a prefix --------------------------------- */

struct names {
  const char *prefix;
  char (*v)[IFNAMSIZ];
  size_t n, cap;
};

static int dump_attr_cb(const struct nlattr *a, void *data)
{
  const char **name = data;
  if (mnl_attr_get_type(a) == IFLA_IFNAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
    *name = mnl_attr_get_str(a);
  return MNL_CB_OK;
}

static int dump_cb(const struct nlmsghdr *nlh, void *data)
{
  struct names *ns = data;
  const char *name = NULL;
  mnl_attr_parse(nlh, sizeof(struct ifinfomsg), dump_attr_cb, &name);
  if (!name || strncmp(name, ns->prefix, strlen(ns->prefix)) != 0)
    return MNL_CB_OK;
  if (sbx_array_grow(&ns->v, &ns->cap, ns->n + 1, sizeof *ns->v, LINK_DUMP_MAX) < 0)
    return MNL_CB_ERROR;
  snprintf(ns->v[ns->n++], IFNAMSIZ, "%s", name);
  return MNL_CB_OK;
}

int sbx_net_link_delete_prefix(const char *prefix)
{
  if (!prefix || !*prefix)
    return -1;
  _cleanup_nl_ struct mnl_socket *nl = nl_open();
  if (!nl)
    return -1;
  struct names ns = {.prefix = prefix};
  int r = -EINTR;
  /* A dump that raced a link change (other daemons' churn) ends with
   * NLM_F_DUMP_INTR, which libmnl reports as EINTR: dump again. */
  for (int tries = 0; r == -EINTR && tries < 10; tries++) {
    ns.n = 0;
    char buf[NLBUF];
    struct nlmsghdr *nlh = msg(buf, RTM_GETLINK, NLM_F_DUMP);
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
    ifm->ifi_family = AF_UNSPEC;
    r = nl_talk(nl, nlh, dump_cb, &ns);
    if (r == -EINTR) {
      /* drain the rest of the interrupted dump from the socket */
      mnl_socket_close(nl);
      nl = nl_open();
      if (!nl) {
        free(ns.v);
        return -1;
      }
    }
  }
  int deleted = 0;
  for (size_t i = 0; r == 0 && i < ns.n; i++) {
    int d = link_del_name(nl, ns.v[i]);
    if (d == 0)
      deleted++;
    else if (d != -ENODEV)
      sbx_warn("net", "recover: delete link %s: %s", ns.v[i], strerror(-d));
  }
  free(ns.v);
  return r < 0 ? -1 : deleted;
}
