/* conn_guard.h — the request-head deadline.  libmicrohttpd only has an
 * idle timeout, which a client that sends one byte now and then resets
 * forever: a thousand such sockets hold a thousand connection threads.
 * The guard keeps one slot per connection with the time by which the
 * client must have sent a complete request (head, and the body too when
 * it is not authenticated); a watchdog thread shuts down the sockets that
 * are late.  A slot is disarmed while a request is being handled, so
 * long-polls, uploads by a tenant and event streams are never cut by it. */
#ifndef SBX_API_CONN_GUARD_H
#define SBX_API_CONN_GUARD_H

#include "common/err.h"

struct sbx_conn_guard;
struct sbx_conn_slot;

/* timeout_s 0: no deadline (every call below is then a no-op but valid). */
int sbx_conn_guard_new(unsigned timeout_s, struct sbx_conn_guard **out, struct sbx_error *err);
/* Stops the watchdog; every slot must have been removed. */
void sbx_conn_guard_free(struct sbx_conn_guard *g);
/* A new connection on fd, armed from now; NULL when out of memory (the
 * connection then goes unguarded).  The fd is borrowed: remove the slot
 * before the fd is closed. */
struct sbx_conn_slot *sbx_conn_guard_add(struct sbx_conn_guard *g, int fd);
void sbx_conn_guard_remove(struct sbx_conn_guard *g, struct sbx_conn_slot *s);
/* The next request on this connection is due within the timeout from now. */
void sbx_conn_guard_arm(struct sbx_conn_guard *g, struct sbx_conn_slot *s);
/* A request was received in time: no deadline until the next arm. */
void sbx_conn_guard_disarm(struct sbx_conn_guard *g, struct sbx_conn_slot *s);

#endif
