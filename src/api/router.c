/* router.c — the route table and the matcher.  Patterns are literal
 * segments and {param} segments; matching is exact per segment, so
 * "/v1/sandbox/sessions/x/../y" never reaches a handler (".." is a literal
 * that no pattern has). */
#include "api/router.h"

#include <stdio.h>
#include <string.h>

#include "api/handlers.h"

static const struct sbx_route routes[] = {
    {"GET", "/healthz", sbx_h_healthz, SBX_AUTH_NONE, "healthz"},
    {"GET", "/readyz", sbx_h_readyz, SBX_AUTH_NONE, "readyz"},
    {"GET", "/v1/sandbox/profiles", sbx_h_profiles, SBX_AUTH_KEY, "profiles"},
    {"POST", "/v1/sandbox/sessions", sbx_h_session_create, SBX_AUTH_KEY, "session_create"},
    {"GET", "/v1/sandbox/sessions", sbx_h_session_list, SBX_AUTH_KEY, "session_list"},
    {"GET", "/v1/sandbox/sessions/{id}", sbx_h_session_get, SBX_AUTH_KEY, "session_get"},
    {"PATCH", "/v1/sandbox/sessions/{id}", sbx_h_session_patch, SBX_AUTH_KEY, "session_patch"},
    {"DELETE", "/v1/sandbox/sessions/{id}", sbx_h_session_delete, SBX_AUTH_KEY, "session_delete"},
    {"POST", "/v1/sandbox/sessions/{id}/exec", sbx_h_session_exec, SBX_AUTH_KEY, "session_exec"},
    {"PUT", "/v1/sandbox/sessions/{id}/files", sbx_h_files_put, SBX_AUTH_KEY, "files_put"},
    {"GET", "/v1/sandbox/sessions/{id}/files", sbx_h_files_get, SBX_AUTH_KEY, "files_get"},
    {"DELETE", "/v1/sandbox/sessions/{id}/files", sbx_h_files_delete, SBX_AUTH_KEY, "files_delete"},
    {"POST", "/v1/sandbox/executions", sbx_h_execution_create, SBX_AUTH_KEY, "execution_create"},
    {"GET", "/v1/sandbox/executions", sbx_h_execution_list, SBX_AUTH_KEY, "execution_list"},
    {"GET", "/v1/sandbox/executions/{id}", sbx_h_execution_get, SBX_AUTH_KEY, "execution_get"},
    {"GET", "/v1/sandbox/executions/{id}/files", sbx_h_execution_file, SBX_AUTH_KEY,
     "execution_file"},
    {"POST", "/v1/sandbox/executions/{id}/cancel", sbx_h_execution_cancel, SBX_AUTH_KEY,
     "execution_cancel"},
    {NULL, NULL, NULL, SBX_AUTH_NONE, NULL},
};

const struct sbx_route *sbx_routes(void) { return routes; }

/* Matches one pattern against a path; fills params when out is non-NULL. */
static bool match(const char *pattern, const char *path, struct sbx_req *out)
{
  const char *p = pattern, *s = path;
  int n = 0;
  while (*p && *s) {
    if (*p != '/' || *s != '/')
      return false;
    p++, s++;
    const char *pe = strchrnul(p, '/'), *se = strchrnul(s, '/');
    size_t plen = (size_t)(pe - p), slen = (size_t)(se - s);
    if (plen >= 2 && p[0] == '{' && p[plen - 1] == '}') {
      if (slen == 0 || slen >= sizeof out->params[0] || n >= SBX_MAX_PARAMS)
        return false;
      if (out)
        snprintf(out->params[n], sizeof out->params[n], "%.*s", (int)slen, s);
      n++;
    } else if (plen != slen || strncmp(p, s, plen) != 0) {
      return false;
    }
    p = pe, s = se;
  }
  if (*p || *s)
    return false;
  if (out)
    out->nparams = n;
  return true;
}

const struct sbx_route *sbx_route_match(const char *method, const char *path, struct sbx_req *r,
                                        bool *method_mismatch)
{
  *method_mismatch = false;
  for (const struct sbx_route *rt = routes; rt->method; rt++) {
    if (!match(rt->pattern, path, NULL))
      continue;
    if (strcmp(rt->method, method) != 0 && strcmp(rt->method, "*") != 0) {
      *method_mismatch = true;
      continue;
    }
    match(rt->pattern, path, r);
    return rt;
  }
  return NULL;
}
