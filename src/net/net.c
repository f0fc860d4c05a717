/* net.c — the net module's life: start (pools, name pins, the DNS
 * responder, the egress proxy, forwarding, the nft table, the NFLOG
 * reader), availability, the decision hook, recovery and stop.
 *
 * Availability fails closed: when anything in start fails, what did start
 * is stopped again, the reason is kept and every attach is refused with
 * 503 naming it; sandboxes with egress none never notice.
 *
 * Forwarding: start writes 1 to net.ipv4.ip_forward and
 * net.ipv6.conf.all.forwarding and leaves them so at stop (other daemons
 * or the host may rely on them by then).  With IPv6 forwarding on, the
 * kernel stops accepting router advertisements on host interfaces whose
 * accept_ra is 1 (2 keeps them): a host that takes its IPv6 default route
 * from RAs needs accept_ra=2 on that interface.  See
 * docs/network.md, "Links, addresses and nftables".
 *
 * Denies decided by nft (not by the DNS responder or the proxy, which call
 * sbx_net_decide themselves) reach us as NFLOG copies of the refused
 * packet, rate-limited in the ruleset (20/s): a thread turns each into a
 * decision {proto tcp/udp/icmp, dest, reason from the log prefix}. */
#include "net/plumb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool available;
static char why_not[300] = "network policy support is not started";
static char tag[16];
static char ifprefix[16];
static uint16_t dns_port, proxy_port;
static bool dns_started, egress_started;
static char resolv_text[256];

static sbx_net_decision_fn hook_fn;
static void *hook_ud;

const char *sbx_net_ifprefix(void) { return ifprefix; }
uint16_t sbx_net_proxy_port(void) { return proxy_port; }

/* ---- decisions ------------------------------------------------------------ */

void sbx_net_set_decision_hook(sbx_net_decision_fn fn, void *ud)
{
  pthread_mutex_lock(&lock);
  hook_fn = fn;
  hook_ud = ud;
  pthread_mutex_unlock(&lock);
}

void sbx_net_decide(const struct sbx_net_decision *d)
{
  pthread_mutex_lock(&lock);
  sbx_net_decision_fn fn = hook_fn;
  void *ud = hook_ud;
  pthread_mutex_unlock(&lock);
  if (fn)
    fn(d, ud);
}

/* ---- NFLOG: nft's refusals as decisions ------------------------------------ */

static struct mnl_socket *nflog_nl;
static pthread_t nflog_thread;
static bool nflog_running;
static volatile int nflog_stop;

static int nflog_config(struct mnl_socket *nl, uint16_t group, const void *attr, size_t alen,
                        uint16_t atype)
{
  char buf[8192];
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = 1;
  struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(group);
  mnl_attr_put(nlh, atype, alen, attr);
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
    return -1;
  ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
  if (n < 0)
    return -1;
  return mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), NULL, NULL) < 0 ? -1 : 0;
}

struct nflog_attrs {
  const char *prefix;
  const uint8_t *payload;
  size_t plen;
};

static int nflog_attr_cb(const struct nlattr *a, void *data)
{
  struct nflog_attrs *at = data;
  if (mnl_attr_get_type(a) == NFULA_PREFIX && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
    at->prefix = mnl_attr_get_str(a);
  else if (mnl_attr_get_type(a) == NFULA_PAYLOAD) {
    at->payload = mnl_attr_get_payload(a);
    at->plen = mnl_attr_get_payload_len(a);
  }
  return MNL_CB_OK;
}

/* The packet is the sandbox's (spoofed sources are dropped before any
 * deny chain), but still bounded: every offset is checked against plen. */
static void nflog_decide(const char *prefix, const uint8_t *p, size_t n)
{
  int family;
  const uint8_t *src, *dst, *l4;
  unsigned proto;
  if (n >= 20 && p[0] >> 4 == 4) {
    size_t ihl = (size_t)(p[0] & 15) * 4;
    if (ihl < 20 || ihl > n)
      return;
    family = AF_INET, proto = p[9], src = p + 12, dst = p + 16, l4 = p + ihl;
  } else if (n >= 40 && p[0] >> 4 == 6) {
    family = AF_INET6, proto = p[6], src = p + 8, dst = p + 24, l4 = p + 40;
  } else {
    return;
  }
  const char *pname = proto == 6                    ? "tcp"
                      : proto == 17                 ? "udp"
                      : (proto == 1 || proto == 58) ? "icmp"
                                                    : "ip";
  char a[INET6_ADDRSTRLEN], dest[INET6_ADDRSTRLEN + 16];
  inet_ntop(family, dst, a, sizeof a);
  if ((proto == 6 || proto == 17) && l4 + 4 <= p + n) {
    unsigned port = (unsigned)l4[2] << 8 | l4[3];
    snprintf(dest, sizeof dest, family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, port);
  } else {
    snprintf(dest, sizeof dest, "%s", a);
  }
  struct sbx_net_peer peer;
  struct sbx_net_policy *pol = NULL;
  uint8_t sa[16];
  memcpy(sa, src, family == AF_INET ? 4 : 16);
  if (sbx_net_registry_find(family, sa, &peer, &pol) < 0)
    return; /* detached since: nobody to charge it to */
  sbx_net_policy_free(pol);
  struct sbx_net_decision d = {.sandbox_id = peer.sandbox_id,
                               .tenant = peer.tenant,
                               .proto = pname,
                               .dest = dest,
                               .allowed = false,
                               .reason = prefix};
  sbx_net_decide(&d);
}

static int nflog_msg_cb(const struct nlmsghdr *nlh, void *data)
{
  if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
    return MNL_CB_OK;
  struct nflog_attrs at = {0};
  mnl_attr_parse(nlh, sizeof(struct nfgenmsg), nflog_attr_cb, &at);
  if (at.prefix && at.payload)
    nflog_decide(at.prefix, at.payload, at.plen);
  return MNL_CB_OK;
}

static void *nflog_main(void *arg)
{
  char buf[65536];
  while (!nflog_stop) {
    ssize_t n = mnl_socket_recvfrom(nflog_nl, buf, sizeof buf);
    if (n < 0)
      continue; /* timeout (stop check) or ENOBUFS under a flood: go on */
    mnl_cb_run(buf, (size_t)n, 0, 0, nflog_msg_cb, NULL);
  }
  return NULL;
}

static unsigned nflog_group_of(const char *t)
{
  uint32_t h = 2166136261u; /* FNV-1a: daemons with different tags, different groups */
  for (; *t; t++)
    h = (h ^ (unsigned char)*t) * 16777619u;
  return 20000 + h % 40000;
}

/* Best effort: without it nft still refuses, only the decisions are lost. */
static void nflog_start(unsigned group)
{
  struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
  if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
    goto fail;
  struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
  struct nfulnl_msg_config_mode mode = {.copy_range = htonl(128),
                                        .copy_mode = NFULNL_COPY_PACKET};
  if (nflog_config(nl, (uint16_t)group, &cmd, sizeof cmd, NFULA_CFG_CMD) < 0 ||
      nflog_config(nl, (uint16_t)group, &mode, sizeof mode, NFULA_CFG_MODE) < 0)
    goto fail;
  struct timeval tv = {.tv_usec = 250000};
  setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  nflog_nl = nl;
  nflog_stop = 0;
  if (pthread_create(&nflog_thread, NULL, nflog_main, NULL) != 0) {
    nflog_nl = NULL;
    goto fail;
  }
  nflog_running = true;
  return;
fail:
  sbx_warn("net", "NFLOG group %u: %s; nft refusals will not be audited", group,
           strerror(errno));
  if (nl)
    mnl_socket_close(nl);
}

static void nflog_end(void)
{
  if (!nflog_running)
    return;
  nflog_stop = 1;
  pthread_join(nflog_thread, NULL);
  mnl_socket_close(nflog_nl);
  nflog_nl = NULL;
  nflog_running = false;
}

/* ---- start / stop ----------------------------------------------------------- */

static int write_proc(const char *path, const char *val)
{
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  return write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
}

static bool tag_ok(const char *t)
{
  size_t n = t ? strlen(t) : 0;
  if (n < 1 || n > 8)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9')))
      return false;
  return true;
}

static void make_resolv_conf(void)
{
  struct in_addr d4;
  struct in6_addr d6;
  char a4[INET_ADDRSTRLEN], a6[INET6_ADDRSTRLEN];
  sbx_net_pool_dns(&d4, &d6);
  inet_ntop(AF_INET, &d4, a4, sizeof a4);
  inet_ntop(AF_INET6, &d6, a6, sizeof a6);
  snprintf(resolv_text, sizeof resolv_text,
           "# sandboxd: answers only names the sandbox's network policy allows\n"
           "nameserver %s\nnameserver %s\noptions timeout:2 attempts:2\n",
           a4, a6);
}

const char *sbx_net_resolv_conf(void)
{
  pthread_mutex_lock(&lock);
  if (!resolv_text[0]) /* before start: the default pools' addresses */
    snprintf(resolv_text, sizeof resolv_text,
             "nameserver 10.231.0.1\nnameserver fd5b:d0c5:a11d::1\n");
  pthread_mutex_unlock(&lock);
  return resolv_text;
}

static void stop_services(void)
{
  nflog_end();
  sbx_net_nft_fini();
  if (egress_started)
    sbx_net_egress_stop();
  if (dns_started)
    sbx_net_dns_stop();
  egress_started = dns_started = false;
}

static int start_steps(const struct sbx_net_config *cfg, struct sbx_error *err)
{
  if (!tag_ok(cfg->tag))
    return sbx_err_set(err, SBX_E_INVALID, 0, "net tag \"%s\": want 1-8 of [a-z0-9]",
                       cfg->tag ? cfg->tag : "");
  snprintf(tag, sizeof tag, "%s", cfg->tag);
  snprintf(ifprefix, sizeof ifprefix, "sx%s-", tag);
  unsigned digits = 15 - (unsigned)strlen(ifprefix), max_idx = 1;
  for (unsigned i = 0; i < digits && max_idx < 100000; i++)
    max_idx *= 10;
  if (sbx_net_pool_configure(cfg->pool4, cfg->pool6, max_idx - 1, err) < 0)
    return -1;
  char p4[64], p6[64];
  sbx_net_pool_text(p4, sizeof p4, p6, sizeof p6);
  if (sbx_net_addr_set_pools(p4, p6, err) < 0) /* the pools are closed ranges too */
    return -1;
  pthread_mutex_lock(&lock);
  make_resolv_conf();
  pthread_mutex_unlock(&lock);
  if (sbx_net_resolve_configure(cfg->resolve, cfg->dns_upstream, err) < 0)
    return sbx_err_prefix(err, "name pins / upstream");
  if (sbx_net_dns_start(&dns_port, err) < 0)
    return sbx_err_prefix(err, "DNS responder");
  dns_started = true;
  if (sbx_net_egress_start(&proxy_port, err) < 0)
    return sbx_err_prefix(err, "egress proxy");
  egress_started = true;
  if (write_proc("/proc/sys/net/ipv4/ip_forward", "1") < 0 ||
      write_proc("/proc/sys/net/ipv6/conf/all/forwarding", "1") < 0)
    return sbx_err_sys(err, errno, "enable IP forwarding");
  sbx_net_recover(tag);
  unsigned group = nflog_group_of(tag);
  struct sbx_net_nft_params p = {.tag = tag,
                                 .dns_port = dns_port,
                                 .proxy_port = proxy_port,
                                 .nflog_group = group};
  if (sbx_net_nft_init(&p, err) < 0)
    return -1;
  nflog_start(group);
  return 0;
}

int sbx_net_start(const struct sbx_net_config *cfg, struct sbx_error *err)
{
  struct sbx_error e = {0};
  if (start_steps(cfg, &e) < 0) {
    stop_services();
    pthread_mutex_lock(&lock);
    available = false;
    snprintf(why_not, sizeof why_not, "network policy support is unavailable: %s", e.msg);
    pthread_mutex_unlock(&lock);
    sbx_warn("net", "%s", why_not);
    if (err)
      *err = e;
    return -1;
  }
  pthread_mutex_lock(&lock);
  available = true;
  why_not[0] = '\0';
  pthread_mutex_unlock(&lock);
  sbx_info("net",
           "egress policy ready: table inet sandboxd_%s, links %s*, DNS port %u, proxy port %u",
           tag, ifprefix, dns_port, proxy_port);
  return 0;
}

bool sbx_net_available(char *why, size_t whylen)
{
  pthread_mutex_lock(&lock);
  bool ok = available;
  if (!ok && why && whylen)
    snprintf(why, whylen, "%s", why_not);
  pthread_mutex_unlock(&lock);
  return ok;
}

int sbx_net_recover(const char *t)
{
  if (!tag_ok(t))
    return -1;
  char prefix[16];
  snprintf(prefix, sizeof prefix, "sx%s-", t);
  int links = sbx_net_link_delete_prefix(prefix);
  int r = sbx_net_nft_delete_table(t);
  if (links > 0)
    sbx_info("net", "recover: deleted %d leftover veth(s) %s*", links, prefix);
  return links < 0 || r < 0 ? -1 : 0;
}

void sbx_net_stop(void)
{
  pthread_mutex_lock(&lock);
  bool was = available;
  available = false;
  snprintf(why_not, sizeof why_not, "network policy support is stopped");
  pthread_mutex_unlock(&lock);
  if (was)
    sbx_net_detach_all();
  stop_services();
}
