/* e2b.h — the E2B-compatible surface (docs/compat/e2b.md): what its files
 * share.  e2b_common.c owns the error shapes, authentication (our API keys
 * in X-API-Key for the control plane; per-sandbox access tokens for the
 * in-sandbox "envd" surface), the template mapping and Connect framing;
 * e2b_api.c is the control plane, e2b_process.c and e2b_fs.c the envd
 * Connect services, e2b_files.c /files and /health, e2b_code.c the code
 * interpreter's /execute and /contexts.  Every handler goes through core
 * with the caller's principal, like our own handlers.
 *
 * URL layout (one listener): /e2b/api/... is E2B_API_URL, /e2b/envd/...
 * is E2B_SANDBOX_URL; the sandbox is named by the E2b-Sandbox-Id header. */
#ifndef SBX_API_E2B_H
#define SBX_API_E2B_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/http.h"

#define SBX_E2B_API_PREFIX "/e2b/api"
#define SBX_E2B_ENVD_PREFIX "/e2b/envd"
#define SBX_E2B_ENVD_VERSION "0.5.7" /* the envd feature level the SDK sees */
#define SBX_E2B_TOKEN_MAX 128

/* Is this request one of the E2B surface's (its errors take E2B's shapes)? */
bool sbx_e2b_owns(const struct sbx_req *r);
/* The error in the shape of the surface the request came through:
 * control plane and envd HTTP {code:int, message}; Connect unary
 * {code:"not_found", message}; Connect streams a 200 whose end-of-stream
 * frame carries the error. */
void sbx_e2b_error(struct sbx_req *r, struct sbx_resp *out, const struct sbx_error *err);
/* sandbox=false: X-API-Key (one of our keys) → r->who.  sandbox=true:
 * E2b-Sandbox-Id + X-Access-Token / E2B-Traffic-Access-Token → r->who of
 * the key that created or connected the sandbox, and r->params[0] = the
 * session id.  A token that does not belong to that id answers 404, like
 * a sandbox that does not exist. */
int sbx_e2b_authenticate(struct sbx_req *r, bool sandbox, struct sbx_error *err);
/* The access token of sandbox sid for the key of who (stateless: an HMAC
 * under a secret drawn at start, so it dies with the daemon's sessions). */
void sbx_e2b_token(const struct sbx_principal *who, const char *sid,
                   char out[SBX_E2B_TOKEN_MAX]);
/* Operator templates, "NAME=PROFILE[:IMAGE],…", checked at start. */
int sbx_e2b_configure(const char *templates, struct sbx_error *err);
/* template → profile and image ("" = the profile's own); 404 if unknown. */
int sbx_e2b_template(const char *name, char profile[64], char image[512], struct sbx_error *err);
/* The session id of an envd request (set by authentication). */
static inline const char *sbx_e2b_sid(struct sbx_req *r) { return r->params[0]; }

/* Connect: the request message (unary JSON, or the one enveloped message
 * of a server-streaming call); NULL with err (invalid) otherwise. */
json_t *sbx_e2b_connect_msg(struct sbx_req *r, struct sbx_error *err);
bool sbx_e2b_connect_streaming(struct sbx_req *r);
/* One Connect envelope: flags, 4-byte big-endian length, JSON (consumed).
 * Returns malloc'd bytes, NULL on allocation failure. */
char *sbx_e2b_frame(int flags, json_t *msg, size_t *len);
/* The end-of-stream envelope: {} or {"error":{code, message}}. */
char *sbx_e2b_end_frame(const struct sbx_error *err, size_t *len);
/* Connect's code name of one of our error codes. */
const char *sbx_e2b_connect_code(int code);
/* Connect-Timeout-Ms of the request in ms, 0 if none. */
unsigned long sbx_e2b_deadline_ms(struct sbx_req *r);
/* Base64 text of bytes (a new JSON string). */
json_t *sbx_e2b_b64(const void *data, size_t len);
/* Decoded base64 of a JSON string (malloc'd into *out); -1 if malformed. */
int sbx_e2b_unb64(json_t *s, char **out, size_t *len);
/* "http://host:port" this request reached (Host header), for absolute URLs. */
void sbx_e2b_origin(struct sbx_req *r, char *buf, size_t len);

#endif
