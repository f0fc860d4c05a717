/* router.h — the route table: every (method, path pattern) the API serves,
 * with its handler and whether it needs an admin key.  The same table is
 * dumped by `sandboxd routes` so a test can check docs/api/openapi.yaml lists
 * exactly these routes. */
#ifndef SBX_API_ROUTER_H
#define SBX_API_ROUTER_H

#include <stdbool.h>

#include "api/http.h"

/* E2B_KEY: our key in X-API-Key; E2B_SANDBOX: a sandbox's access token
 * (api/e2b.h).  Both answer in E2B's error shapes. */
enum sbx_auth {
  SBX_AUTH_NONE,
  SBX_AUTH_KEY,
  SBX_AUTH_ADMIN,
  SBX_AUTH_E2B_KEY,
  SBX_AUTH_E2B_SANDBOX
};

struct sbx_route {
  const char *method;  /* "GET", …, "*" for any */
  const char *pattern; /* "/v1/sandbox/sessions/{id}"; a final "{rest*}" eats the remainder */
  sbx_handler_fn handler;
  enum sbx_auth auth;
  const char *name; /* stable label for metrics */
};

/* Finds the route for method+path.  Fills r->params.  Returns the route, or
 * NULL with *method_mismatch true when the path exists under another method. */
const struct sbx_route *sbx_route_match(const char *method, const char *path, struct sbx_req *r,
                                        bool *method_mismatch);
/* The name of path segment seg (0 = the first after '/') of a raw,
 * still percent-encoded path, for an error that must name what the client
 * got wrong: the pattern's parameter there ("id" of
 * /v1/sandbox/sessions/{id}), or false when no route has a parameter at
 * that place. */
bool sbx_route_segment_name(const char *raw_path, size_t seg, char *name, size_t len);
/* The whole table, terminated by an entry with NULL method. */
const struct sbx_route *sbx_routes(void);

#endif
