/* conn_guard.h — the request-head deadline.  libmicrohttpd only has an
 * idle timeout, which a client that sends one byte now and then resets
 * forever: a thousand such sockets hold a thousand connection threads.
 * The guard keeps one slot per connection with the time by which the
 * client must have sent a complete request (head, and the body too when
 * it is not authenticated); a watchdog thread shuts down the sockets that
 * are late.  A slot is disarmed while a request is being handled, so
 * long-polls, uploads by a tenant and event streams are never cut by it.
 *
 * The guard also counts open connections per client network (see
 * sbx_conn_client_key) and shuts down at once a connection past the
 * per-client limit.  libmicrohttpd's own per-IP limit counts each IPv6
 * address apart, and every IPv6 host has a /64 of them. */
#ifndef SBX_API_CONN_GUARD_H
#define SBX_API_CONN_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/err.h"

/* The client network a connection is counted against: an IPv4 address,
 * an IPv4-mapped IPv6 address as its IPv4 address, an IPv6 address by its
 * /64 prefix.  Byte 0 is 4 or 6, the address bytes follow, the rest is 0:
 * two keys are the same client when memcmp says so. */
#define SBX_CONN_KEY_LEN 9
/* -1 for an address family that is neither IPv4 nor IPv6 (never counted). */
int sbx_conn_client_key(const struct sockaddr *sa, uint8_t key[SBX_CONN_KEY_LEN]);

struct sbx_conn_guard;
struct sbx_conn_slot;

/* timeout_s 0: no deadline; per_client 0: no per-client limit (with both 0
 * every call below is a no-op but valid). */
int sbx_conn_guard_new(unsigned timeout_s, unsigned per_client, struct sbx_conn_guard **out,
                       struct sbx_error *err);
/* Stops the watchdog; every slot must have been removed. */
void sbx_conn_guard_free(struct sbx_conn_guard *g);
/* A new connection on fd from client (borrowed; NULL: not counted), armed
 * from now.  When its client network is over the limit the socket is shut
 * down at once; the slot stays, and counts, until it is removed.  NULL when
 * out of memory (the connection then goes unguarded and uncounted).  The fd
 * is borrowed: remove the slot before the fd is closed. */
struct sbx_conn_slot *sbx_conn_guard_add(struct sbx_conn_guard *g, int fd,
                                         const struct sockaddr *client);
void sbx_conn_guard_remove(struct sbx_conn_guard *g, struct sbx_conn_slot *s);
/* The next request on this connection is due within the timeout from now. */
void sbx_conn_guard_arm(struct sbx_conn_guard *g, struct sbx_conn_slot *s);
/* A request was received in time: no deadline until the next arm. */
void sbx_conn_guard_disarm(struct sbx_conn_guard *g, struct sbx_conn_slot *s);

#endif
