/* forward.h — the node-to-node channel of a fleet (docs/fleet.md): a
 * request for a session another node owns is sent to that node, and the
 * owner's answer — status, headers, body, streams and SSE included — flows
 * back as it arrives (api/proxy.c: nothing buffers a whole response).
 *
 * The caller's key never travels.  The forwarding node has authenticated
 * the caller; it tells the owner who the caller is in X-Sandboxd-Principal
 * and signs the request with HMAC-SHA256 under the fleet's shared secret
 * (--cluster-secret-file): method, target, principal, the forwarding node,
 * a time, a nonce and the body's SHA-256.  The owner accepts a signed
 * request only if the MAC matches, the time is within FORWARD_SKEW_S of
 * its own, the nonce is new to it, and the body hashes as signed; it never
 * forwards such a request again (no loops).  A client cannot pass for a
 * node without the secret. */
#ifndef SBX_API_FORWARD_H
#define SBX_API_FORWARD_H

#include <stdbool.h>

#include "api/http.h"
#include "common/err.h"
#include "core/fleet.h"

/* Loads the secret (at least 32 bytes, a file readable by the daemon
 * only).  path NULL/"" with cluster off: nothing to do. */
int sbx_forward_init(const char *secret_path, bool cluster, struct sbx_error *err);
void sbx_forward_shutdown(void);

/* Whether the request claims to come from a node (carries the signature
 * header); such a request is authenticated by sbx_forward_authenticate
 * only, never by a key. */
bool sbx_forward_claimed(struct sbx_req *r);
/* Checks the signature over the head and fills r->who from the principal
 * header; the body's digest is checked by sbx_forward_body_ok once the
 * body is in.  401 for anything wrong (audited by the caller). */
int sbx_forward_authenticate(struct sbx_req *r, struct sbx_error *err);
int sbx_forward_body_ok(struct sbx_req *r, struct sbx_error *err);

/* Sends r to the node `to` and turns its answer into *out (streamed).
 * placed: a session create whose place on `to` this node reserved.  502
 * bad_gateway when the node cannot be reached or does not answer. */
int sbx_forward(struct sbx_req *r, const struct sbx_fleet_target *to, bool placed,
                struct sbx_resp *out, struct sbx_error *err);

#endif
