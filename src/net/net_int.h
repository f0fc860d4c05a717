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
  char ifname[16];           /* host-side veth name */
  struct in_addr addr4;      /* sandbox side */
  struct in6_addr addr6;     /* sandbox side */
  unsigned nft_id;           /* index the nft rules use for this sandbox */
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
int sbx_net_resolve_configure(const char *const *pins, const char *upstream, struct sbx_error *err);
/* Up to max addresses of name (A and AAAA), pins first.  Returns how many
 * (0: no such name), -1 on upstream failure. */
int sbx_net_resolve(const char *name, struct sockaddr_storage *out, int max);

/* ---- dns.c / egress.c: the two listening services -------------------- */

/* Each binds the wildcard address on an ephemeral port (v4 and v6) and
 * serves from its own thread; nft redirects the sandboxes' port 53 and
 * 80/443 to these ports and the nft input chain refuses them to anyone
 * but a sandbox veth. */
int sbx_net_dns_start(uint16_t *port_out, struct sbx_error *err);
void sbx_net_dns_stop(void);
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

#endif
