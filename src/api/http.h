/* http.h — the request and response types every API handler sees.
 *
 * One `struct sbx_req` per HTTP request: method, path, parsed route params,
 * the bounded body, the authenticated principal and the request id.  It is
 * created by server.c when the request arrives and freed when MHD reports
 * the request complete; everything a handler allocates for the response is
 * handed over in `struct sbx_resp` and freed by server.c after sending.
 * Handlers never talk to libmicrohttpd directly except through these. */
#ifndef SBX_API_HTTP_H
#define SBX_API_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "core/principal.h"

struct MHD_Connection;
struct sbx_core;
struct sbx_span;

#define SBX_MAX_PARAMS 4

struct sbx_req {
  struct MHD_Connection *conn;
  struct sbx_core *core;
  char method[12];
  char path[2048];
  const struct sbx_route *route;
  char params[SBX_MAX_PARAMS][256]; /* {id}, {pid}, … in route order */
  int nparams;
  const char *rest; /* a final {name*} segment: the rest of path (into it), else NULL */
  char *body;       /* bounded by the server's body limit */
  size_t body_len;
  size_t body_cap;
  bool body_too_large;
  char request_id[40];
  char lang[3]; /* "en" | "fr" from Accept-Language */
  struct sbx_principal who;
  uint64_t start_ns;
  int status_sent;       /* for metrics/logs */
  struct sbx_span *span; /* the request's server span (obs/trace.h), ended at completion */
  /* Set by a handler that fails with more to say than sbx_error holds:
   * members added to the error envelope's details (e.g. "violations");
   * owned, released with the request. */
  json_t *error_details;
  /* The fleet (api/forward.h) */
  const char *target;   /* the request-target as sent (still encoded), for forwarding */
  bool from_node;       /* signed by a node of the fleet: never forwarded again */
  bool placed_here;     /* a session create whose place here a placement reserved */
  char signed_body[65]; /* the body's SHA-256 the forwarding node signed */
};

enum sbx_resp_kind {
  SBX_RESP_JSON,
  SBX_RESP_BYTES,
  SBX_RESP_FD,
  SBX_RESP_EMPTY,
  SBX_RESP_STREAM
};

/* A streamed body: the callback is called from the connection's thread and
 * may block; it returns bytes written into buf, 0 to wait-and-retry never
 * (block instead), -1 at end of stream, -2 when the source broke (the
 * connection is closed without the final chunk, so the client sees a
 * truncated body, not a complete one). (Used for SSE and the ports proxy.) */
typedef long (*sbx_stream_fn)(void *ctx, uint64_t pos, char *buf, size_t max);

struct sbx_resp {
  int status;
  enum sbx_resp_kind kind;
  json_t *json; /* SBX_RESP_JSON: owned, decref'd after sending */
  char *bytes;  /* SBX_RESP_BYTES: owned, freed after sending */
  size_t len;
  int fd; /* SBX_RESP_FD: owned; sent from offset 0, len bytes */
  const char *content_type;
  sbx_stream_fn stream; /* SBX_RESP_STREAM */
  void *stream_ctx;
  void (*stream_free)(void *ctx);
  char location[256];
  /* Optional extra headers, a JSON array of [name, value] pairs added as
   * they are (the ports proxy's upstream headers); owned.  A stream with
   * headers gets no default Cache-Control / X-Accel-Buffering. */
  json_t *headers;
};

/* Header lookup (case-insensitive), NULL if absent. */
const char *sbx_req_header(struct sbx_req *r, const char *name);
/* Query argument (URL-decoded), NULL if absent. */
const char *sbx_req_query(struct sbx_req *r, const char *name);
/* ?name=true or ?name=1. */
bool sbx_req_flag(struct sbx_req *r, const char *name);
/* Every request header / query argument in arrival order (value NULL for
 * "?flag" without "="); for the ports proxy, which forwards them. */
typedef void (*sbx_kv_fn)(void *ctx, const char *name, const char *value);
void sbx_req_each_header(struct sbx_req *r, sbx_kv_fn fn, void *ctx);
void sbx_req_each_query(struct sbx_req *r, sbx_kv_fn fn, void *ctx);
/* The client's address as text ("127.0.0.1", "::1"), "" if unknown. */
void sbx_req_client_addr(struct sbx_req *r, char *buf, size_t len);
/* The client's socket, only to poll it for a hang-up while a stream waits
 * on its source (never read or write it); -1 if unknown. */
int sbx_req_client_fd(struct sbx_req *r);

/* Parses the body as a JSON object (empty body → empty object when
 * allow_empty).  On failure fills err (invalid_request) and returns NULL. */
json_t *sbx_req_json(struct sbx_req *r, bool allow_empty, struct sbx_error *err);

/* Response helpers; each consumes what it is given. */
void sbx_resp_json(struct sbx_resp *out, int status, json_t *body);
void sbx_resp_bytes(struct sbx_resp *out, int status, char *bytes, size_t len,
                    const char *content_type);
void sbx_resp_empty(struct sbx_resp *out, int status);
/* The len bytes of fd from offset 0 (consumes fd). */
void sbx_resp_fd(struct sbx_resp *out, int status, int fd, uint64_t len,
                 const char *content_type);
/* Error envelope from err in the request's language. */
void sbx_resp_error(struct sbx_req *r, struct sbx_resp *out, const struct sbx_error *err);

/* A handler fills out and returns 0, or returns -1 with err set (the server
 * turns it into the error envelope).  Handlers are declared with the type,
 * `sbx_handler sbx_h_name;`, so the signature is written once. */
typedef int sbx_handler(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
typedef sbx_handler *sbx_handler_fn;

#endif
