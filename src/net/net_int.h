/* net_int.h — the net module's internal seams, between the plumbing
 * (link.c, nft.c, attach.c, net.c, pool.c) and the policy services
 * (policy.c, addr.c, registry.c, dns.c, resolve.c, egress.c, sni.c).
 * Not for use outside src/net. */
#ifndef SBX_NET_NET_INT_H
#define SBX_NET_NET_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/net.h"

/* One attached sandbox as the services see it: found by the source
 * address of a packet or connection (the veth addresses are unique and
 * nft drops spoofed sources on the sandbox's veth). */
struct sbx_net_peer {
  char sandbox_id[96];
  char tenant[96];
  char ifname[16];       /* host-side veth name */
  struct in_addr addr4;  /* sandbox side */
  struct in6_addr addr6; /* sandbox side */
  unsigned nft_id;       /* index the nft rules use for this sandbox */
};

/* ---- registry.c: source address → peer + policy in force ------------- */

/* Registers (or replaces the policy of) a peer; the registry keeps its own
 * copies.  Lookups return a snapshot copy of the policy the caller frees
 * with sbx_net_policy_free(), so a PATCH never races a connection. */
int sbx_net_registry_put(const struct sbx_net_peer *peer, const struct sbx_net_policy *policy);
void sbx_net_registry_remove(const char *sandbox_id);
/* 0 and fills *peer and *policy (caller frees) when the address belongs to
 * an attached sandbox; -1 otherwise. */
int sbx_net_registry_find(int family, const void *addr, struct sbx_net_peer *peer,
                          struct sbx_net_policy **policy);
unsigned sbx_net_registry_count(void);

/* ---- resolve.c: names → addresses, for the DNS responder and the proxy -- */

/* Configures pins ("NAME=ADDR", repeatable) and the upstream "ADDR[:PORT]". */
int sbx_net_resolve_configure(const char *const *pins, const char *upstream,
                              struct sbx_error *err);
/* Up to max addresses of name (A and AAAA), pins first.  Returns how many
 * (0: no such name), -1 on upstream failure. */
int sbx_net_resolve(const char *name, struct sockaddr_storage *out, int max);
/* The one question of a DNS message, for a query and for the responder's
 * echo: QDCOUNT 1 in the header msg starts with, then name (a checked host
 * name, written as labels), qtype and qclass after it.  Returns the
 * message's length so far. */
size_t sbx_net_dns_put_question(uint8_t *msg, const char *name, unsigned qtype, unsigned qclass);

/* ---- dns.c / egress.c: the two listening services -------------------- */

/* Each binds the wildcard address on an ephemeral port (v4 and v6) and
 * serves from its own thread; nft redirects the sandboxes' port 53 and
 * 80/443 to these ports and the nft input chain refuses them to anyone
 * but a sandbox veth. */
int sbx_net_dns_start(uint16_t *port_out, struct sbx_error *err);
void sbx_net_dns_stop(void);
/* The responder's answer to one query q from `from`, built in r (512
 * bytes); 0: send nothing.  What both transports call (and the fuzzer). */
size_t sbx_net_dns_answer(const uint8_t *q, size_t qlen, const struct sockaddr_storage *from,
                          uint8_t *r);
int sbx_net_egress_start(uint16_t *port_out, struct sbx_error *err);
void sbx_net_egress_stop(void);

/* ---- nft.c: hooks the services call ---------------------------------- */

/* The DNS responder allowed `name` for a peer and answered with addr: let
 * the sandbox reach addr on the ports its matching rule allows (0: any),
 * for ttl seconds (nft set element with timeout).  Ports 80/443 still go
 * through the proxy, which checks Host/SNI. */
int sbx_net_nft_learn(const struct sbx_net_peer *peer, int family, const void *addr,
                      uint16_t port, unsigned ttl_s);

/* ---- net.c: decisions ---------------------------------------------- */

/* Calls the hook set by sbx_net_set_decision_hook (no-op when unset). */
void sbx_net_decide(const struct sbx_net_decision *d);

/* ---- netpol: helpers shared by policy.c, addr.c, resolve.c, dns.c ----
 * (usable by nft.c/egress.c too) */

#include <stddef.h>
#include <sys/socket.h>

/* addr.c: "ADDR" or "ADDR/PREFIX" (v4 or v6, no brackets).  Fills family,
 * addr (16 bytes, v4 in the first 4) and prefix (32/128 without "/");
 * *hostbits tells whether bits below the prefix were set (the caller
 * decides whether that is an error; addr is returned masked).  0 / -1. */
int sbx_net_cidr_parse(const char *s, int *family, uint8_t addr[16], uint8_t *prefix,
                       bool *hostbits);
/* Whether the first `prefix` bits of a and b are equal. */
bool sbx_net_prefix_match(const uint8_t *a, const uint8_t *b, unsigned prefix);
/* The sandbox pools (net.c calls this at start with its config; the
 * defaults are 10.231.0.0/16 and fd5b:d0c5:a11d::/48).  NULL keeps the
 * current value.  Their addresses are closed like the host's own. */
int sbx_net_addr_set_pools(const char *pool4, const char *pool6, struct sbx_error *err);
/* sbx_net_addr_closed() and the length of the narrowest closed range that
 * contains addr (32/128 for a host address): a CIDR rule opens a closed
 * address only when its own prefix is at least that long, so "0.0.0.0/0"
 * or "10.0.0.0/7" never open the host, the pools or 10/8 by accident. */
const char *sbx_net_addr_closed_prefix(int family, const void *addr, unsigned *prefix);

/* policy.c: whether one DOMAIN/WILDCARD rule admits name:port (name
 * already normalized; port 0 = any). */
bool sbx_net_rule_match_name(const struct sbx_net_rule *r, const char *name, uint16_t port);
/* Index of a CIDR rule that names the closed address addr explicitly
 * (contains it and is no wider than its closed range, see above) and
 * admits port (0 = any), or -1.  For a public address: sbx_net_policy_match_addr. */
int sbx_net_policy_match_closed(const struct sbx_net_policy *p, int family, const void *addr,
                                uint16_t port);
/* A host name (LDH labels of 1–63, ≤ 253, ≥ 2 labels, last label not
 * numeric, one trailing dot allowed) → lower case without the dot in out
 * (≥ 254 bytes).  0 / -1. */
int sbx_net_name_normalize(const char *in, char *out, size_t outlen);

/* resolve.c: sbx_net_resolve() that also gives the seconds the answer may
 * still be cached (pins: 60). */
int sbx_net_resolve_ttl(const char *name, struct sockaddr_storage *out, int max, unsigned *ttl);

#endif
