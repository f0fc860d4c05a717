/* server.h — the HTTP listener (libmicrohttpd, a thread per connection so
 * a handler may block on an exec or a long-poll without stalling others;
 * poll(), so fds past 1023 are fine; per-client and global connection
 * limits and a request-head deadline, so slow clients cannot starve the
 * others). */
#ifndef SBX_API_SERVER_H
#define SBX_API_SERVER_H

#include <stddef.h>

#include "common/err.h"

struct sbx_core;
struct sbx_server;

#define SBX_SERVER_MAX_CONNECTIONS 4096u /* when max_connections is 0 */

struct sbx_server_config {
  const char *listen;                  /* "127.0.0.1:8080", "[::1]:0", ":8080" */
  size_t max_body_bytes;               /* larger bodies → 413 */
  unsigned max_connections;            /* beyond it a new connection is closed at once */
  unsigned max_connections_per_client; /* per client IPv4 address or IPv6 /64 (conn_guard.h);
                                        * 0 = no limit */
  unsigned head_timeout_s;   /* from accept (or the previous response) to a complete request
                            * head (and body, unless authenticated); 0 = no deadline */
  const char *e2b_templates; /* E2B template mapping, "NAME=PROFILE[:IMAGE],…" (api/e2b.h) */
  /* A fleet's shared secret (api/forward.h): node-to-node requests are
   * signed with it.  Required when the core is in a fleet. */
  const char *cluster_secret_file;
};

int sbx_server_start(const struct sbx_server_config *cfg, struct sbx_core *core,
                     struct sbx_server **out, struct sbx_error *err);
/* The bound port (useful with port 0). */
unsigned sbx_server_port(struct sbx_server *s);
/* Stops accepting new connections (graceful shutdown step 1). */
void sbx_server_quiesce(struct sbx_server *s);
/* Waits for in-flight requests to finish and frees. */
void sbx_server_stop(struct sbx_server *s);

#endif
