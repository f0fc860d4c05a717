/* proxy.h — one HTTP exchange over a socket already connected into a
 * sandbox (ports), with libcurl on a thread of its own, bridged to
 * a streamed API response.
 *
 * libcurl never opens a connection here: CURLOPT_OPENSOCKETFUNCTION hands
 * it the given fd and CURLOPT_SOCKOPTFUNCTION says it is connected, no
 * proxy, no redirects, no protocol but HTTP.  sbx_proxy_start() returns
 * once the upstream's final response head arrived (status + headers, 1xx
 * skipped); the body then flows through a bounded buffer: the curl thread
 * blocks when it is full (TCP back-pressure on the sandbox's server), the
 * connection's thread blocks while it is empty.  Nothing buffers a whole
 * response.  The upstream's answer is hostile input: header count and size
 * are bounded, hop-by-hop headers dropped. */
#ifndef SBX_API_PROXY_H
#define SBX_API_PROXY_H

#include <jansson.h>
#include <stddef.h>

#include "api/http.h"
#include "common/err.h"

struct sbx_proxy;

struct sbx_proxy_req {
  int fd;               /* connected socket; consumed (even on failure) */
  const char *method;   /* GET, HEAD, POST, … */
  const char *url;      /* "http://127.0.0.1:PORT/path?query", already encoded */
  char *const *headers; /* "Name: value" lines, NULL-terminated (already filtered) */
  const char *body;     /* may be NULL */
  size_t body_len;
  unsigned head_timeout_ms; /* for the response head */
  int client_fd;            /* polled for a hang-up while waiting for the body; -1: none */
};

/* Sends the request and waits for the response head.  0: *out is the
 * exchange, status and headers filled; the caller hands it to
 * sbx_proxy_respond() or frees it.  -1: err (SBX_E_BAD_GATEWAY when the
 * upstream failed to answer). */
int sbx_proxy_start(const struct sbx_proxy_req *req, struct sbx_proxy **out,
                    struct sbx_error *err);
/* The request header lines a forward hands to curl, NULL-terminated by
 * sbx_proxy_lines_end.  Past SBX_PROXY_LINES_MAX lines, or out of memory,
 * bad is set and nothing more is added. */
#define SBX_PROXY_LINES_MAX 224
struct sbx_proxy_lines {
  char *line[SBX_PROXY_LINES_MAX + 1];
  size_t n;
  bool bad;
};
/* "Name: value" ("Name;" for an empty value: curl's syntax for one). */
void sbx_proxy_line_add(struct sbx_proxy_lines *h, const char *name, const char *value);
/* A line as it is ("Name:" tells curl to leave a header of its own out). */
void sbx_proxy_line_raw(struct sbx_proxy_lines *h, const char *line);
/* The headers curl would add on its own are left out unless the client
 * sent them (has_*), then the list is NULL-terminated. */
void sbx_proxy_lines_end(struct sbx_proxy_lines *h, bool has_content_type, bool has_accept);
void sbx_proxy_lines_free(struct sbx_proxy_lines *h);

/* sbx_proxy_start with the API request r's method and body, and r's
 * client socket watched for a hang-up. */
int sbx_proxy_start_for(struct sbx_req *r, int fd, const char *url, char *const *headers,
                        unsigned head_timeout_ms, struct sbx_proxy **out, struct sbx_error *err);
/* Turns the exchange into a streamed response (owned by it from now on):
 * the upstream's status, headers and body as it arrives. */
void sbx_proxy_respond(struct sbx_proxy *p, struct sbx_resp *out);
/* Aborts the exchange and frees it (joins its thread). */
void sbx_proxy_free(struct sbx_proxy *p);

/* True for request headers never forwarded: hop-by-hop ones, Host,
 * Content-Length, Expect, Authorization (the sandbox must never see an API
 * key) and X-Forwarded-* / Forwarded (the proxy sets its own). */
bool sbx_proxy_drop_request_header(const char *name);

#endif
