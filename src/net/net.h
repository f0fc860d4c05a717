/* net.h — the egress network policy of sandboxes (DESIGN §5).
 *
 * A sandbox with `{"egress":"none"}` (the default) keeps the netns its wall
 * gave it with only `lo`: this module is never called for it, so the none
 * path costs nothing.  A sandbox with `{"egress":"allowlist", "allow":[…]}`
 * is attached: a veth pair links its netns to the host ("eth0" inside,
 * "sx<tag>-<n>" outside) with addresses from a private pool, and every
 * packet it sends is decided outside the sandbox:
 *
 *   nftables (one table per daemon, libnftables)   CIDR[:port] rules, IPs the
 *       DNS responder handed out for allowed names, the always-closed ranges;
 *       everything else is rejected at once (TCP RST, ICMP admin-prohibited);
 *   DNS responder (daemon thread, dns.c)           answers allowed names only
 *       (pins from --resolve, else the upstream), REFUSED for the rest,
 *       drops answers that point into an always-closed range (rebinding);
 *   egress proxy (daemon thread, egress.c)         explicit HTTP proxy
 *       (HTTP_PROXY/HTTPS_PROXY inside, CONNECT and absolute-form GET) and
 *       transparent target of ports 80/443: checks the Host header or the
 *       TLS SNI against the domain rules, 403 with a reason / TLS alert when
 *       refused, then splices bytes (TLS is never terminated).
 *
 * Files: policy.c (parse, validate, match), addr.c (always-closed ranges,
 * the address pool), link.c (veth over rtnetlink), nft.c (rules), dns.c,
 * egress.c, attach.c (the per-sandbox orchestration below), net.c (module
 * start/stop, decision hook).  Threading: every function here is
 * thread-safe. */
#ifndef SBX_NET_NET_H
#define SBX_NET_NET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* ---- policy (policy.c) ------------------------------------------------ */

enum sbx_net_egress { SBX_NET_EGRESS_NONE = 0, SBX_NET_EGRESS_ALLOWLIST = 1 };

enum sbx_net_rule_kind {
  SBX_NET_RULE_DOMAIN,   /* "pypi.org": that name exactly */
  SBX_NET_RULE_WILDCARD, /* "*.pythonhosted.org": any name below it (not itself) */
  SBX_NET_RULE_CIDR, /* "198.51.100.7", "203.0.113.0/24", "2001:db8::/32", "[2001:db8::1]:443" */
};

#define SBX_NET_MAX_RULES 256 /* more entries than this → 400 */

struct sbx_net_rule {
  enum sbx_net_rule_kind kind;
  char name[254];   /* DOMAIN/WILDCARD: lower-case, no trailing dot; WILDCARD without "*." */
  int family;       /* CIDR: AF_INET or AF_INET6 */
  uint8_t addr[16]; /* CIDR: network address (host bits zero) */
  uint8_t prefix;   /* CIDR: prefix length */
  uint16_t port;    /* 0: any port */
  char text[300];   /* the entry as the user wrote it, for audit and JSON */
};

struct sbx_net_policy {
  enum sbx_net_egress egress;
  size_t nrules;
  struct sbx_net_rule rules[]; /* nrules entries */
};

/* Validates a request's `network` object (NULL/null → none) strictly.
 * Errors are 400 invalid_request with details.field naming the entry,
 * e.g. "network.allow[3]", and a message saying what is wrong with it.
 * `field` is the JSON path of the object ("network"). */
int sbx_net_policy_parse(json_t *network, const char *field, struct sbx_net_policy **out,
                         struct sbx_error *err);
/* {"egress":"none"} or {"egress":"allowlist","allow":[texts…]} (new ref). */
json_t *sbx_net_policy_json(const struct sbx_net_policy *p);
struct sbx_net_policy *sbx_net_policy_dup(const struct sbx_net_policy *p);
void sbx_net_policy_free(struct sbx_net_policy *p);
static inline void sbx_net_policy_freep(struct sbx_net_policy **p) { sbx_net_policy_free(*p); }

/* Index of the first DOMAIN/WILDCARD rule admitting name:port, or -1.
 * port 0 asks "any port" (DNS: is the name allowed at all?). */
int sbx_net_policy_match_name(const struct sbx_net_policy *p, const char *name, uint16_t port);
/* Index of the first CIDR rule admitting addr:port, or -1. */
int sbx_net_policy_match_addr(const struct sbx_net_policy *p, int family, const void *addr,
                              uint16_t port);

/* ---- addresses (addr.c) ------------------------------------------------ */

/* Loopback, unspecified, link-local and metadata (169.254/16, fe80::/10),
 * RFC 1918, CGNAT (100.64/10), ULA (fc00::/7), multicast, broadcast, the
 * sandbox pools and every address of the host itself: closed unless a CIDR
 * rule names the address explicitly.  Returns a short name of the range
 * ("loopback", "private", "host", …) or NULL when it is public. */
const char *sbx_net_addr_closed(int family, const void *addr);

/* ---- decisions (net.c): every allow/deny, for audit and metrics -------- */

struct sbx_net_decision {
  const char *sandbox_id; /* session or execution id */
  const char *tenant;
  const char *proto; /* "dns", "http", "tls", "tcp", "udp", "icmp" */
  const char *dest;  /* "pypi.org:443", "198.51.100.7:7", "evil.example" */
  const char *rule;  /* the rule's text when allowed, NULL otherwise */
  bool allowed;
  const char *reason; /* when refused: "not in allowlist", "resolves to private", … */
};
typedef void (*sbx_net_decision_fn)(const struct sbx_net_decision *d, void *ud);
/* The core sets this once at start (audit event + metric, rate-limited there). */
void sbx_net_set_decision_hook(sbx_net_decision_fn fn, void *ud);

/* ---- module (net.c) ----------------------------------------------------- */

struct sbx_net_config {
  const char *tag;            /* short per-daemon tag (hash of the state dir): names the
                             * nft table "sandboxd_<tag>" and the veths, so test
                             * daemons never collide */
  const char *pool4;          /* CIDR the veth addresses come from; default "10.231.0.0/16" */
  const char *pool6;          /* default "fd5b:d0c5:a11d::/48" */
  const char *dns_upstream;   /* "ADDR[:PORT]" or NULL (then only pinned names resolve) */
  const char *const *resolve; /* "NAME=ADDR" pins, NULL-terminated (may be NULL) */
};

/* Starts the DNS responder and the egress proxy, creates the nft table,
 * enables forwarding.  On failure (-1, reason in err) the daemon keeps
 * running but every allowlist request is refused with 503
 * runtime_unavailable naming that reason: fail closed. */
int sbx_net_start(const struct sbx_net_config *cfg, struct sbx_error *err);
/* Whether sbx_net_start succeeded; the reason otherwise. */
bool sbx_net_available(char *why, size_t whylen);
/* Removes what a previous daemon with the same tag left (veths, nft table). */
int sbx_net_recover(const char *tag);
/* Stops threads, detaches every sandbox still attached, deletes the table. */
void sbx_net_stop(void);

/* ---- per sandbox (attach.c) -------------------------------------------- */

struct sbx_net_attachment;

/* Links the netns of `init_pid` (a process inside the sandbox's netns) to
 * the host and installs `policy` (egress must be ALLOWLIST).  Fails closed:
 * on error nothing is left and the caller must destroy the sandbox. */
int sbx_net_attach(const char *sandbox_id, const char *tenant, pid_t init_pid,
                   const struct sbx_net_policy *policy, struct sbx_net_attachment **out,
                   struct sbx_error *err);
/* Replaces the policy in force; new connections see it at once.  A policy
 * with egress none keeps the link but admits nothing. */
int sbx_net_update(struct sbx_net_attachment *a, const struct sbx_net_policy *policy,
                   struct sbx_error *err);
/* Removes the veth, rules, learned addresses and proxy state. */
void sbx_net_detach(struct sbx_net_attachment *a);
/* NULL-terminated "KEY=VALUE" strings to add to every exec's environment
 * (HTTP_PROXY, HTTPS_PROXY, NO_PROXY and lower-case forms); owned by a. */
const char *const *sbx_net_env(const struct sbx_net_attachment *a);

/* ---- resolv.conf (net.c; added by the plumbing) ------------------------ */

/* The resolv.conf text every sandbox gets: one fixed DNS address per
 * family (the first address of each pool, reached via the sandbox's
 * default route and redirected by nft to the DNS responder), the same for
 * all sandboxes.  The core passes it to sbx_iso_set_resolv_conf() once,
 * after sbx_net_start().  Static storage. */
const char *sbx_net_resolv_conf(void);

#endif
