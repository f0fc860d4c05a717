/* plumb.h — the seams between the net module's plumbing files: the
 * address pool (pool.c), the veth pair (link.c), the nftables table
 * (nft.c), the per-sandbox orchestration (attach.c) and module state
 * (net.c).  Not for use outside src/net.
 *
 * Addressing (docs/network.md, "Links, addresses and nftables"): pool4 and
 * pool6 are cut into blocks of 4 addresses (a /30 and a /126).  Block 0 is reserved: its
 * first address is the one DNS address every sandbox's resolv.conf names.
 * Block i (i ≥ 1) is sandbox i's link: .1 the host end (the sandbox's
 * gateway), .2 the sandbox's eth0. */
#ifndef SBX_NET_PLUMB_H
#define SBX_NET_PLUMB_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "net/net_int.h"

/* ---- pool.c ------------------------------------------------------------- */

#define SBX_NET_DEFAULT_POOL4 "10.231.0.0/16"
#define SBX_NET_DEFAULT_POOL6 "fd5b:d0c5:a11d::/48"
#define SBX_NET_PREFIX4 30
#define SBX_NET_PREFIX6 126

struct sbx_net_slot {
  unsigned idx;              /* ≥ 1 */
  struct in_addr gw4, addr4; /* host end, sandbox end */
  struct in6_addr gw6, addr6;
};

/* Parses the pools (NULL/"" → defaults) and caps the index space at
 * max_idx (what fits in an interface name).  Resets every allocation. */
int sbx_net_pool_configure(const char *pool4, const char *pool6, unsigned max_idx,
                           struct sbx_error *err);
/* Lowest free index at or after the last one handed out (so a freed
 * index is not reused at once while stale conntrack entries age out). */
int sbx_net_pool_alloc(struct sbx_net_slot *out, struct sbx_error *err);
void sbx_net_pool_release(unsigned idx);
/* The fixed DNS addresses (first address of each pool). */
void sbx_net_pool_dns(struct in_addr *dns4, struct in6_addr *dns6);
/* The pools as normalised CIDR text ("10.231.0.0/16"). */
void sbx_net_pool_text(char *p4, size_t l4, char *p6, size_t l6);
unsigned sbx_net_pool_used(void);

/* ---- link.c ------------------------------------------------------------- */

/* Creates the veth pair: `host_if` on the host with gw4/30 and gw6/126,
 * "eth0" in the netns of init_pid with addr4/addr6 and default routes via
 * the gateways.  On error nothing is left. */
int sbx_net_link_create(const char *host_if, pid_t init_pid, const struct sbx_net_slot *s,
                        struct sbx_error *err);
/* Deletes the pair by its host end (0 when it is already gone). */
int sbx_net_link_delete(const char *host_if);
/* Deletes every host link whose name starts with prefix; returns how many. */
int sbx_net_link_delete_prefix(const char *prefix);
/* Whether a host link of that name exists. */
bool sbx_net_link_exists(const char *host_if);

/* ---- nft.c -------------------------------------------------------------- */

struct sbx_net_nft_params {
  const char *tag;
  uint16_t dns_port, proxy_port;
  unsigned nflog_group; /* 0: no NFLOG of denies */
};

/* Creates table inet sandboxd_<tag> (deleting any leftover first). */
int sbx_net_nft_init(const struct sbx_net_nft_params *p, struct sbx_error *err);
/* Deletes the table; idempotent. */
void sbx_net_nft_fini(void);
/* Deletes table inet sandboxd_<tag> if present (recovery); 0 when absent. */
int sbx_net_nft_delete_table(const char *tag);
/* Installs or replaces (one transaction) the chains, learned sets and map
 * entries of one sandbox; an update also forgets the learned addresses. */
int sbx_net_nft_sandbox_set(const struct sbx_net_peer *peer, const struct sbx_net_policy *pol,
                            struct sbx_error *err);
/* Removes them (one transaction). */
int sbx_net_nft_sandbox_del(const struct sbx_net_peer *peer);
/* Runs an nft script against the daemon's context; out (may be NULL) gets
 * the output, malloc'd.  For tests and recovery. */
int sbx_net_nft_run(const char *script, char **out, struct sbx_error *err);

/* ---- net.c: module state the attachments read --------------------------- */

/* The host-side interface name prefix "sx<tag>-". */
const char *sbx_net_ifprefix(void);
uint16_t sbx_net_proxy_port(void);

/* ---- attach.c ----------------------------------------------------------- */

/* Detaches every attachment (sbx_net_stop); their handles stay valid
 * and a later sbx_net_detach on them only frees. */
void sbx_net_detach_all(void);
/* The peer record of an attachment (its link name, addresses, nft id). */
const struct sbx_net_peer *sbx_net_attachment_peer(const struct sbx_net_attachment *a);

#endif
