/* nft.c — the daemon's nftables table, `inet sandboxd_<tag>`, through
 * libnftables (generated scripts run with nft_run_cmd_from_buffer: one
 * netlink transaction each, so a sandbox's rules change atomically).
 *
 * Layout (docs/network.md, "Links, addresses and nftables", has the full
 * listing):
 *   prerouting (nat, dstnat)   DNS address:53 → the DNS responder's port;
 *                              iifname vmap @natmap → n_<idx>: CIDR-admitted
 *                              80/443 pass, other tcp 80/443 → egress proxy
 *   input (filter)             from a sandbox veth: ND, then anti-spoof (the
 *                              services tell sandboxes apart by source
 *                              address), established, DNS and proxy ports,
 *                              ping of a gateway, iifname vmap @inmap →
 *                              i_<idx>: entries naming one host address
 *                              exactly (/32, /128); else refused
 *                              (this guards the host's loopback services and
 *                              the daemon API, which arrive via input)
 *   forward (filter)           iifname vmap @fwdmap → f_<idx>: anti-spoof,
 *                              established, explicit CIDR, closed ranges
 *                              refused, learned sets, else refused; into a
 *                              sandbox only established/related
 *   postrouting (nat, srcnat)  masquerade the pools out of other interfaces
 * Refusals jump to deny_* chains: a rate-limited NFLOG copy (net.c turns it
 * into a decision) then TCP RST or ICMP admin-prohibited — never a silent
 * drop, so a refused connection fails at once.
 *
 * One nft_ctx, serialised by a mutex (libnftables contexts are not
 * thread-safe). */
#include "net/plumb.h"

#include <arpa/inet.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fault.h"
#include "common/log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nft_ctx *ctx;
static char table[64]; /* "sandboxd_<tag>", "" when not set up */
static char ifprefix[16];

/* Learned addresses per sandbox and family: a bound on kernel memory a
 * hostile sandbox can make us spend through DNS answers. */
#define LEARN_MAX 4096
/* A TTL of 0 must still let the connection that follows the answer through. */
#define LEARN_MIN_TTL 30
#define LEARN_MAX_TTL 86400

/* Always closed, whatever a name resolves to: the same ranges as addr.c's
 * sbx_net_addr_closed() (keep them in step).  The host's own addresses are
 * local and so are judged in the input chain, never forwarded. */
static const char *const closed4[] = {
    "0.0.0.0/8",     "10.0.0.0/8",   "100.64.0.0/10",  "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
};
static const char *const closed6[] = {
    "::/96",    "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
    "fc00::/7", "fe80::/10",     "fec0::/10",    "ff00::/8",
};

static int run_locked(const char *script, char **out, struct sbx_error *err)
{
  if (!ctx) {
    ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!ctx)
      return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "nftables: cannot create a context");
    nft_ctx_buffer_output(ctx);
    nft_ctx_buffer_error(ctx);
  }
  int r = sbx_fault(SBX_FAULT_NFT) ? -1 : nft_run_cmd_from_buffer(ctx, script);
  const char *o = nft_ctx_get_output_buffer(ctx); /* also resets it */
  const char *e = nft_ctx_get_error_buffer(ctx);
  if (r != 0) {
    char first[400];
    snprintf(first, sizeof first, "%s", e && *e ? e : "failed");
    char *nl = strchr(first, '\n');
    if (nl)
      *nl = '\0';
    sbx_debug("net", "nft script failed: %s\n%s", e ? e : "", script);
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "nftables: %s", first);
  }
  if (out)
    *out = strdup(o ? o : "");
  return 0;
}

int sbx_net_nft_run(const char *script, char **out, struct sbx_error *err)
{
  pthread_mutex_lock(&lock);
  int r = run_locked(script, out, err);
  pthread_mutex_unlock(&lock);
  return r;
}

static void list(FILE *f, const char *const *v, size_t n, const char *extra)
{
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%s", i ? ", " : "", v[i]);
  fprintf(f, ", %s", extra);
}

static void deny_chain(FILE *f, const char *name, const char *reason, unsigned group)
{
  fprintf(f, "  chain %s {\n", name);
  if (group)
    fprintf(f,
            "    limit rate 20/second burst 40 packets log prefix \"%s\" group %u snaplen 128\n",
            reason, group);
  fprintf(f, "    meta l4proto tcp reject with tcp reset\n"
             "    reject with icmpx admin-prohibited\n  }\n");
}

/* The addresses the chains name, as text: the pools (p4, p6) and the DNS
 * address sandboxes are given (d4, d6). */
struct script_addrs {
  char p4[64], p6[64], d4[INET_ADDRSTRLEN], d6[INET6_ADDRSTRLEN];
};

static void get_script_addrs(struct script_addrs *a)
{
  struct in_addr dns4;
  struct in6_addr dns6;
  sbx_net_pool_text(a->p4, sizeof a->p4, a->p6, sizeof a->p6);
  sbx_net_pool_dns(&dns4, &dns6);
  inet_ntop(AF_INET, &dns4, a->d4, sizeof a->d4);
  inet_ntop(AF_INET6, &dns6, a->d6, sizeof a->d6);
}

/* The always-closed ranges (and the pools), the anti-spoof sets and the
 * per-sandbox verdict maps. */
static void put_sets(FILE *f, const struct script_addrs *a)
{
  fprintf(f, "  set closed4 { type ipv4_addr; flags interval; auto-merge; elements = { ");
  list(f, closed4, sizeof closed4 / sizeof closed4[0], a->p4);
  fprintf(f, " }; }\n  set closed6 { type ipv6_addr; flags interval; auto-merge; elements = { ");
  list(f, closed6, sizeof closed6 / sizeof closed6[0], a->p6);
  fprintf(f, " }; }\n"
             "  set own4 { type ifname . ipv4_addr; }\n"
             "  set own6 { type ifname . ipv6_addr; }\n"
             "  map fwdmap { type ifname : verdict; }\n"
             "  map inmap { type ifname : verdict; }\n"
             "  map natmap { type ifname : verdict; }\n");
}

/* What reaches the host from a sandbox (input) and what it forwards. */
static void put_filter_chains(FILE *f, const struct sbx_net_nft_params *p,
                              const struct script_addrs *a)
{
  const char *pf = ifprefix;
  fprintf(f,
          "  chain sbx_input {\n"
          "    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit,"
          " mld2-listener-report } accept\n"
          "    iifname . ip saddr != @own4 drop\n"
          "    iifname . ip6 saddr != @own6 drop\n"
          "    ct state established,related accept\n"
          "    meta l4proto { tcp, udp } th dport %u accept\n"
          "    tcp dport %u accept\n"
          "    ip daddr %s icmp type echo-request accept\n"
          "    ip6 daddr %s icmpv6 type echo-request accept\n"
          "    iifname vmap @inmap\n"
          "    goto deny_host\n  }\n",
          p->dns_port, p->proxy_port, a->p4, a->p6);
  fprintf(f,
          "  chain input {\n    type filter hook input priority filter; policy accept;\n"
          "    iifname \"%s*\" jump sbx_input\n  }\n",
          pf);
  fprintf(f,
          "  chain forward {\n    type filter hook forward priority filter; policy accept;\n"
          "    iifname vmap @fwdmap\n"
          "    iifname \"%s*\" goto deny_other\n"
          "    oifname \"%s*\" ct state established,related accept\n"
          "    oifname \"%s*\" drop\n  }\n",
          pf, pf, pf);
}

/* DNS redirected to the responder, the per-sandbox nat map, and the
 * pools masqueraded on the way out. */
static void put_nat_chains(FILE *f, const struct sbx_net_nft_params *p,
                           const struct script_addrs *a)
{
  const char *pf = ifprefix;
  fprintf(
      f,
      "  chain prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n"
      "    iifname \"%s*\" ip daddr %s meta l4proto { tcp, udp } th dport 53 redirect to :%u\n"
      "    iifname \"%s*\" ip6 daddr %s meta l4proto { tcp, udp } th dport 53 redirect to :%u\n"
      "    iifname vmap @natmap\n  }\n",
      pf, a->d4, p->dns_port, pf, a->d6, p->dns_port);
  fprintf(
      f,
      "  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
      "    ip saddr %s oifname != \"%s*\" masquerade\n"
      "    ip6 saddr %s oifname != \"%s*\" masquerade\n  }\n",
      a->p4, pf, a->p6, pf);
}

/* The whole table (the layout at the top); NULL when out of memory. */
static char *base_script(const struct sbx_net_nft_params *p)
{
  char *s = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&s, &len);
  if (!f)
    return NULL;
  struct script_addrs a;
  get_script_addrs(&a);
  fprintf(f, "table inet %s {\n", table);
  put_sets(f, &a);
  deny_chain(f, "deny_closed", "closed range", p->nflog_group);
  deny_chain(f, "deny_other", "not in allowlist", p->nflog_group);
  deny_chain(f, "deny_host", "host address", p->nflog_group);
  put_filter_chains(f, p, &a);
  put_nat_chains(f, p, &a);
  fprintf(f, "}\n");
  if (fclose(f) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

static int delete_table_once(const char *tag)
{
  char script[128], *out = NULL;
  /* nft 1.0.6 has no "destroy": look first, so a missing table is not an error. */
  snprintf(script, sizeof script, "list tables inet");
  if (sbx_net_nft_run(script, &out, NULL) < 0)
    return -1;
  char want[80];
  snprintf(want, sizeof want, "table inet sandboxd_%s\n", tag);
  bool present = out && strstr(out, want);
  free(out);
  if (!present)
    return 0;
  snprintf(script, sizeof script, "delete table inet sandboxd_%s\n", tag);
  return sbx_net_nft_run(script, NULL, NULL);
}

/* Retried: a table left by a transient failure at stop outlives the
 * daemon (a start on the same state dir would remove it; a state dir
 * that is gone never starts again). */
int sbx_net_nft_delete_table(const char *tag)
{
  int r = -1;
  for (int attempt = 0; attempt < 3 && r < 0; attempt++)
    r = delete_table_once(tag);
  return r;
}

int sbx_net_nft_init(const struct sbx_net_nft_params *p, struct sbx_error *err)
{
  if (sbx_net_nft_delete_table(p->tag) < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                       "nftables: cannot list or delete a leftover table sandboxd_%s", p->tag);
  pthread_mutex_lock(&lock);
  snprintf(table, sizeof table, "sandboxd_%s", p->tag);
  snprintf(ifprefix, sizeof ifprefix, "%s", sbx_net_ifprefix());
  _cleanup_free_ char *s = base_script(p);
  int r = s ? run_locked(s, NULL, err) : sbx_err_sys(err, ENOMEM, "nftables script");
  if (r < 0)
    table[0] = '\0';
  pthread_mutex_unlock(&lock);
  return r;
}

void sbx_net_nft_fini(void)
{
  pthread_mutex_lock(&lock);
  if (table[0]) {
    char script[128];
    snprintf(script, sizeof script, "delete table inet %s\n", table);
    struct sbx_error err;
    /* Retried: a table left by a transient failure outlives the daemon. */
    int r = -1;
    for (int attempt = 0; attempt < 3 && r < 0; attempt++)
      if ((r = run_locked(script, NULL, &err)) < 0)
        sbx_warn("net", "delete table %s: %s", table, err.msg);
    table[0] = '\0';
  }
  if (ctx) {
    nft_ctx_free(ctx);
    ctx = NULL;
  }
  pthread_mutex_unlock(&lock);
}

/* ---- per sandbox ---------------------------------------------------------- */

static bool in_prefix(int family, const uint8_t *a, unsigned alen_prefix, const uint8_t *net,
                      unsigned plen)
{
  if (alen_prefix < plen)
    return false; /* the rule is wider than the range */
  for (unsigned i = 0; i < plen; i++) {
    unsigned byte = i / 8, m = 0x80u >> (i % 8);
    if ((a[byte] & m) != (net[byte] & m))
      return false;
  }
  (void)family;
  return true;
}

/* Whether the rule's whole range lies inside one always-closed range (or a
 * pool): such an entry names the closed addresses explicitly and opens
 * them.  A wider entry (0.0.0.0/0, ::/0) opens only what is public. */
static bool names_closed(const struct sbx_net_rule *r)
{
  char p4[64], p6[64];
  sbx_net_pool_text(p4, sizeof p4, p6, sizeof p6);
  const char *const *v = r->family == AF_INET ? closed4 : closed6;
  size_t n = r->family == AF_INET ? sizeof closed4 / sizeof closed4[0]
                                  : sizeof closed6 / sizeof closed6[0];
  for (size_t i = 0; i <= n; i++) {
    const char *cidr = i < n ? v[i] : (r->family == AF_INET ? p4 : p6);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", cidr);
    char *slash = strchr(buf, '/');
    if (!slash)
      continue;
    *slash = '\0';
    uint8_t net[16];
    if (inet_pton(r->family, buf, net) != 1)
      continue;
    if (in_prefix(r->family, r->addr, r->prefix, net, (unsigned)atoi(slash + 1)))
      return true;
  }
  return false;
}

static void rule_dst(FILE *f, const struct sbx_net_rule *r)
{
  char a[INET6_ADDRSTRLEN];
  inet_ntop(r->family, r->addr, a, sizeof a);
  if (r->prefix == 0)
    fprintf(f, "meta nfproto %s", r->family == AF_INET ? "ipv4" : "ipv6");
  else
    fprintf(f, "%s daddr %s/%u", r->family == AF_INET ? "ip" : "ip6", a, r->prefix);
}

static void fwd_rules(FILE *f, const struct sbx_net_policy *pol, unsigned id, bool explicit)
{
  for (size_t i = 0; pol && pol->egress == SBX_NET_EGRESS_ALLOWLIST && i < pol->nrules; i++) {
    const struct sbx_net_rule *r = &pol->rules[i];
    if (r->kind != SBX_NET_RULE_CIDR || (r->family != AF_INET && r->family != AF_INET6))
      continue;
    if (names_closed(r) != explicit)
      continue;
    fprintf(f, "add rule inet %s f_%u ", table, id);
    rule_dst(f, r);
    if (r->port)
      fprintf(f, " meta l4proto { tcp, udp } th dport %u", r->port);
    fprintf(f, " accept\n");
  }
}

/* A host address is closed as a single address: only an entry naming it
 * exactly (a /32 or /128, as addr.c judges it) opens it. */
static void input_rules(FILE *f, const struct sbx_net_policy *pol, unsigned id)
{
  for (size_t i = 0; pol && pol->egress == SBX_NET_EGRESS_ALLOWLIST && i < pol->nrules; i++) {
    const struct sbx_net_rule *r = &pol->rules[i];
    if (r->kind != SBX_NET_RULE_CIDR || !((r->family == AF_INET && r->prefix == 32) ||
                                          (r->family == AF_INET6 && r->prefix == 128)))
      continue;
    fprintf(f, "add rule inet %s i_%u ", table, id);
    rule_dst(f, r);
    if (r->port)
      fprintf(f, " meta l4proto { tcp, udp } th dport %u", r->port);
    fprintf(f, " accept\n");
  }
}

static void nat_rules(FILE *f, const struct sbx_net_policy *pol, unsigned id)
{
  for (size_t i = 0; pol && pol->egress == SBX_NET_EGRESS_ALLOWLIST && i < pol->nrules; i++) {
    const struct sbx_net_rule *r = &pol->rules[i];
    if (r->kind != SBX_NET_RULE_CIDR || (r->family != AF_INET && r->family != AF_INET6))
      continue;
    if (r->port && r->port != 80 && r->port != 443)
      continue;
    /* An address the rule admits on 80/443 is reached directly, not
     * through the proxy (which would want a Host/SNI the rule lacks). */
    fprintf(f, "add rule inet %s n_%u ", table, id);
    rule_dst(f, r);
    if (r->port)
      fprintf(f, " tcp dport %u accept\n", r->port);
    else
      fprintf(f, " tcp dport { 80, 443 } accept\n");
  }
  fprintf(f, "add rule inet %s n_%u tcp dport { 80, 443 } redirect to :%u\n", table, id,
          sbx_net_proxy_port());
}

static char *sandbox_script(const struct sbx_net_peer *peer, const struct sbx_net_policy *pol)
{
  char *s = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&s, &len);
  if (!f)
    return NULL;
  const char *t = table;
  unsigned id = peer->nft_id;
  char a4[INET_ADDRSTRLEN], a6[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET, &peer->addr4, a4, sizeof a4);
  inet_ntop(AF_INET6, &peer->addr6, a6, sizeof a6);
  fprintf(f, "add chain inet %s f_%u\nadd chain inet %s n_%u\nadd chain inet %s i_%u\n", t, id,
          t, id, t, id);
  static const char *const sets[][2] = {{"l4", "ipv4_addr . inet_service"},
                                        {"l4a", "ipv4_addr"},
                                        {"l6", "ipv6_addr . inet_service"},
                                        {"l6a", "ipv6_addr"}};
  for (size_t i = 0; i < 4; i++)
    fprintf(
        f,
        "add set inet %s %s_%u { type %s; flags timeout; size %d; }\nflush set inet %s %s_%u\n",
        t, sets[i][0], id, sets[i][1], LEARN_MAX, t, sets[i][0], id);
  fprintf(f, "flush chain inet %s f_%u\nflush chain inet %s n_%u\nflush chain inet %s i_%u\n", t,
          id, t, id, t, id);
  /* Anti-spoof first: the services find a sandbox by source address. */
  fprintf(f, "add rule inet %s f_%u ip saddr != %s drop\n", t, id, a4);
  fprintf(f, "add rule inet %s f_%u ip6 saddr != %s drop\n", t, id, a6);
  fprintf(f, "add rule inet %s f_%u ct state established,related accept\n", t, id);
  fwd_rules(f, pol, id, true);
  fprintf(f, "add rule inet %s f_%u ip daddr @closed4 goto deny_closed\n", t, id);
  fprintf(f, "add rule inet %s f_%u ip6 daddr @closed6 goto deny_closed\n", t, id);
  fwd_rules(f, pol, id, false);
  fprintf(f, "add rule inet %s f_%u ip daddr @l4a_%u accept\n", t, id, id);
  fprintf(f,
          "add rule inet %s f_%u meta l4proto { tcp, udp } ip daddr . th dport @l4_%u accept\n",
          t, id, id);
  fprintf(f, "add rule inet %s f_%u ip6 daddr @l6a_%u accept\n", t, id, id);
  fprintf(f,
          "add rule inet %s f_%u meta l4proto { tcp, udp } ip6 daddr . th dport @l6_%u accept\n",
          t, id, id);
  fprintf(f, "add rule inet %s f_%u goto deny_other\n", t, id);
  nat_rules(f, pol, id);
  input_rules(f, pol, id);
  fprintf(f, "add element inet %s own4 { \"%s\" . %s }\n", t, peer->ifname, a4);
  fprintf(f, "add element inet %s own6 { \"%s\" . %s }\n", t, peer->ifname, a6);
  fprintf(f, "add element inet %s fwdmap { \"%s\" : jump f_%u }\n", t, peer->ifname, id);
  fprintf(f, "add element inet %s natmap { \"%s\" : jump n_%u }\n", t, peer->ifname, id);
  fprintf(f, "add element inet %s inmap { \"%s\" : jump i_%u }\n", t, peer->ifname, id);
  if (fclose(f) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

int sbx_net_nft_sandbox_set(const struct sbx_net_peer *peer, const struct sbx_net_policy *pol,
                            struct sbx_error *err)
{
  pthread_mutex_lock(&lock);
  int r;
  if (!table[0]) {
    r = sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "nftables table not set up");
  } else {
    _cleanup_free_ char *s = sandbox_script(peer, pol);
    r = s ? run_locked(s, NULL, err) : sbx_err_sys(err, ENOMEM, "nftables script");
  }
  pthread_mutex_unlock(&lock);
  return r;
}

int sbx_net_nft_sandbox_del(const struct sbx_net_peer *peer)
{
  pthread_mutex_lock(&lock);
  if (!table[0]) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  const char *t = table;
  unsigned id = peer->nft_id;
  char a4[INET_ADDRSTRLEN], a6[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET, &peer->addr4, a4, sizeof a4);
  inet_ntop(AF_INET6, &peer->addr6, a6, sizeof a6);
  char s[1536];
  snprintf(s, sizeof s,
           "delete element inet %s own4 { \"%s\" . %s }\n"
           "delete element inet %s own6 { \"%s\" . %s }\n"
           "delete element inet %s fwdmap { \"%s\" }\n"
           "delete element inet %s natmap { \"%s\" }\n"
           "delete element inet %s inmap { \"%s\" }\n"
           "flush chain inet %s f_%u\ndelete chain inet %s f_%u\n"
           "flush chain inet %s n_%u\ndelete chain inet %s n_%u\n"
           "flush chain inet %s i_%u\ndelete chain inet %s i_%u\n"
           "delete set inet %s l4_%u\ndelete set inet %s l4a_%u\n"
           "delete set inet %s l6_%u\ndelete set inet %s l6a_%u\n",
           t, peer->ifname, a4, t, peer->ifname, a6, t, peer->ifname, t, peer->ifname, t,
           peer->ifname, t, id, t, id, t, id, t, id, t, id, t, id, t, id, t, id, t, id, t, id);
  struct sbx_error err;
  /* One transaction, all or nothing, so safe to run again: rules left
   * here after a transient failure would outlive their sandbox. */
  int r = -1;
  for (int attempt = 0; attempt < 3 && r < 0; attempt++)
    if ((r = run_locked(s, NULL, &err)) < 0)
      sbx_warn("net", "remove rules of %s (%s): %s", peer->sandbox_id, peer->ifname, err.msg);
  pthread_mutex_unlock(&lock);
  return r;
}

int sbx_net_nft_learn(const struct sbx_net_peer *peer, int family, const void *addr,
                      uint16_t port, unsigned ttl_s)
{
  if (family != AF_INET && family != AF_INET6)
    return -1;
  if (ttl_s < LEARN_MIN_TTL)
    ttl_s = LEARN_MIN_TTL;
  if (ttl_s > LEARN_MAX_TTL)
    ttl_s = LEARN_MAX_TTL;
  char a[INET6_ADDRSTRLEN];
  inet_ntop(family, addr, a, sizeof a);
  const char *set = family == AF_INET ? (port ? "l4" : "l4a") : (port ? "l6" : "l6a");
  char s[256], key[80];
  if (port)
    snprintf(key, sizeof key, "%s . %u", a, port);
  else
    snprintf(key, sizeof key, "%s", a);
  pthread_mutex_lock(&lock);
  int r = -1;
  if (table[0]) {
    /* Re-adding an element refreshes its timeout (kernels ≥ 6.x; older ones
     * keep the first expiry, and established flows survive it anyway). */
    snprintf(s, sizeof s, "add element inet %s %s_%u { %s timeout %us }\n", table, set,
             peer->nft_id, key, ttl_s);
    struct sbx_error err;
    r = run_locked(s, NULL, &err);
    if (r < 0)
      sbx_warn("net", "learn %s for %s: %s", key, peer->sandbox_id, err.msg);
  }
  pthread_mutex_unlock(&lock);
  return r;
}
