/* router.c — the route table and the matcher.  Patterns are literal
 * segments and {param} segments; matching is exact per segment, so
 * "/v1/sandbox/sessions/x/../y" never reaches a handler (".." is a literal
 * that no pattern has).  The one exception is a final {name*} segment,
 * which takes the rest of the path as is (r->rest): only the ports proxy
 * uses it, and it forwards that rest into the sandbox, never to the host. */
#include "api/router.h"

#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "api/mcp.h"

#define E2B_API "/e2b/api"   /* SBX_E2B_API_PREFIX */
#define E2B_ENVD "/e2b/envd" /* SBX_E2B_ENVD_PREFIX */
#define E2B_KEY SBX_AUTH_E2B_KEY
#define E2B_SBX SBX_AUTH_E2B_SANDBOX
#define SBX_PORTS_PATTERN "/v1/sandbox/sessions/{id}/ports/{port}/{rest*}"

static const struct sbx_route routes[] = {
    {"GET", "/healthz", sbx_h_healthz, SBX_AUTH_NONE, "healthz"},
    {"GET", "/readyz", sbx_h_readyz, SBX_AUTH_NONE, "readyz"},
    {"GET", "/v1/sandbox/profiles", sbx_h_profiles, SBX_AUTH_KEY, "profiles"},
    {"GET", "/v1/contracts", sbx_h_contract_list, SBX_AUTH_KEY, "contract_list"},
    {"GET", "/v1/contracts/{name}", sbx_h_contract_get, SBX_AUTH_KEY, "contract_get"},
    {"POST", "/v1/contracts/{name}/validate", sbx_h_contract_validate, SBX_AUTH_KEY,
     "contract_validate"},
    {"POST", "/v1/manifests/apply", sbx_h_tool_apply, SBX_AUTH_KEY, "tool_apply"},
    {"GET", "/v1/tools", sbx_h_tool_list, SBX_AUTH_KEY, "tool_list"},
    {"GET", "/v1/tools/{name}", sbx_h_tool_get, SBX_AUTH_KEY, "tool_get"},
    {"DELETE", "/v1/tools/{name}", sbx_h_tool_delete, SBX_AUTH_KEY, "tool_delete"},
    {"POST", "/v1/tools/{name}/invoke", sbx_h_tool_invoke, SBX_AUTH_KEY, "tool_invoke"},
    {"GET", "/v1/cluster/nodes", sbx_h_cluster_nodes, SBX_AUTH_ADMIN, "cluster_nodes"},
    {"POST", "/v1/sandbox/sessions", sbx_h_session_create, SBX_AUTH_KEY, "session_create"},
    {"GET", "/v1/sandbox/sessions", sbx_h_session_list, SBX_AUTH_KEY, "session_list"},
    {"GET", "/v1/sandbox/sessions/{id}", sbx_h_session_get, SBX_AUTH_KEY, "session_get"},
    {"PATCH", "/v1/sandbox/sessions/{id}", sbx_h_session_patch, SBX_AUTH_KEY, "session_patch"},
    {"DELETE", "/v1/sandbox/sessions/{id}", sbx_h_session_delete, SBX_AUTH_KEY,
     "session_delete"},
    {"POST", "/v1/sandbox/sessions/{id}/exec", sbx_h_session_exec, SBX_AUTH_KEY, "session_exec"},
    {"PUT", "/v1/sandbox/sessions/{id}/files", sbx_h_files_put, SBX_AUTH_KEY, "files_put"},
    {"GET", "/v1/sandbox/sessions/{id}/files", sbx_h_files_get, SBX_AUTH_KEY, "files_get"},
    {"DELETE", "/v1/sandbox/sessions/{id}/files", sbx_h_files_delete, SBX_AUTH_KEY,
     "files_delete"},
    /* Files, archives and watch. */
    {"POST", "/v1/sandbox/sessions/{id}/files/mkdir", sbx_h_files_mkdir, SBX_AUTH_KEY,
     "files_mkdir"},
    {"POST", "/v1/sandbox/sessions/{id}/files/move", sbx_h_files_move, SBX_AUTH_KEY,
     "files_move"},
    {"GET", "/v1/sandbox/sessions/{id}/archive", sbx_h_archive_get, SBX_AUTH_KEY, "archive_get"},
    {"PUT", "/v1/sandbox/sessions/{id}/archive", sbx_h_archive_put, SBX_AUTH_KEY, "archive_put"},
    {"GET", "/v1/sandbox/sessions/{id}/watch", sbx_h_watch, SBX_AUTH_KEY, "watch"},
    {"POST", "/v1/sandbox/executions", sbx_h_execution_create, SBX_AUTH_KEY, "execution_create"},
    {"GET", "/v1/sandbox/executions", sbx_h_execution_list, SBX_AUTH_KEY, "execution_list"},
    {"GET", "/v1/sandbox/executions/{id}", sbx_h_execution_get, SBX_AUTH_KEY, "execution_get"},
    {"GET", "/v1/sandbox/executions/{id}/files", sbx_h_execution_file, SBX_AUTH_KEY,
     "execution_file"},
    {"POST", "/v1/sandbox/executions/{id}/cancel", sbx_h_execution_cancel, SBX_AUTH_KEY,
     "execution_cancel"},
    /* Background processes and terminals. */
    {"GET", "/v1/sandbox/sessions/{id}/processes", sbx_h_process_list, SBX_AUTH_KEY,
     "process_list"},
    {"GET", "/v1/sandbox/sessions/{id}/processes/{pid}", sbx_h_process_get, SBX_AUTH_KEY,
     "process_get"},
    {"GET", "/v1/sandbox/sessions/{id}/processes/{pid}/output", sbx_h_process_output,
     SBX_AUTH_KEY, "process_output"},
    {"POST", "/v1/sandbox/sessions/{id}/processes/{pid}/stdin", sbx_h_process_stdin,
     SBX_AUTH_KEY, "process_stdin"},
    {"POST", "/v1/sandbox/sessions/{id}/processes/{pid}/signal", sbx_h_process_signal,
     SBX_AUTH_KEY, "process_signal"},
    {"POST", "/v1/sandbox/sessions/{id}/processes/{pid}/resize", sbx_h_process_resize,
     SBX_AUTH_KEY, "process_resize"},
    /* Ports (Upstream): one entry per proxied method (TRACE and
     * CONNECT are not), so `sandboxd routes` and openapi.yaml list each. */
    {"GET", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    {"HEAD", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    {"POST", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    {"PUT", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    {"PATCH", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    {"DELETE", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    {"OPTIONS", SBX_PORTS_PATTERN, sbx_h_port_proxy, SBX_AUTH_KEY, "port_proxy"},
    /* Contexts: stateful interpreters. */
    {"POST", "/v1/sandbox/sessions/{id}/contexts", sbx_h_context_create, SBX_AUTH_KEY,
     "context_create"},
    {"GET", "/v1/sandbox/sessions/{id}/contexts", sbx_h_context_list, SBX_AUTH_KEY,
     "context_list"},
    {"GET", "/v1/sandbox/sessions/{id}/contexts/{cid}", sbx_h_context_get, SBX_AUTH_KEY,
     "context_get"},
    {"DELETE", "/v1/sandbox/sessions/{id}/contexts/{cid}", sbx_h_context_delete, SBX_AUTH_KEY,
     "context_delete"},
    {"POST", "/v1/sandbox/sessions/{id}/contexts/{cid}/run", sbx_h_context_run, SBX_AUTH_KEY,
     "context_run"},
    {"POST", "/v1/sandbox/sessions/{id}/contexts/{cid}/restart", sbx_h_context_restart,
     SBX_AUTH_KEY, "context_restart"},
    /* Audit, usage, metrics (/metrics checks config metrics_auth itself). */
    /* Images (list: any key; changes: admin). */
    {"GET", "/v1/sandbox/images", sbx_h_image_list, SBX_AUTH_KEY, "image_list"},
    {"POST", "/v1/sandbox/images/pull", sbx_h_image_pull, SBX_AUTH_ADMIN, "image_pull"},
    {"POST", "/v1/sandbox/images/gc", sbx_h_image_gc, SBX_AUTH_ADMIN, "image_gc"},
    {"DELETE", "/v1/sandbox/images/{ref*}", sbx_h_image_delete, SBX_AUTH_ADMIN, "image_delete"},
    {"GET", "/v1/audit", sbx_h_audit_list, SBX_AUTH_ADMIN, "audit_list"},
    {"GET", "/v1/audit/verify", sbx_h_audit_verify, SBX_AUTH_ADMIN, "audit_verify"},
    {"GET", "/v1/sandbox/usage", sbx_h_usage, SBX_AUTH_KEY, "usage"},
    {"GET", "/metrics", sbx_h_metrics, SBX_AUTH_NONE, "metrics"},
    /* The E2B-compatible surface (api/e2b*.c, docs/compat/e2b.md). */
    {"GET", "/v1/compat/e2b", sbx_h_e2b_discovery, SBX_AUTH_NONE, "e2b_discovery"},
    {"POST", E2B_API "/v2/sandboxes", sbx_h_e2b_create, E2B_KEY, "e2b_create"},
    {"GET", E2B_API "/v2/sandboxes", sbx_h_e2b_list, E2B_KEY, "e2b_list"},
    {"GET", E2B_API "/sandboxes", sbx_h_e2b_list, E2B_KEY, "e2b_list"},
    {"GET", E2B_API "/sandboxes/{id}", sbx_h_e2b_get, E2B_KEY, "e2b_get"},
    {"DELETE", E2B_API "/sandboxes/{id}", sbx_h_e2b_kill, E2B_KEY, "e2b_kill"},
    {"POST", E2B_API "/sandboxes/{id}/timeout", sbx_h_e2b_timeout, E2B_KEY, "e2b_timeout"},
    {"POST", E2B_API "/v2/sandboxes/{id}/connect", sbx_h_e2b_connect, E2B_KEY, "e2b_connect"},
    {"POST", E2B_API "/sandboxes/{id}/pause", sbx_h_e2b_pause, E2B_KEY, "e2b_unsupported"},
    {"POST", E2B_API "/sandboxes/{id}/resume", sbx_h_e2b_resume, E2B_KEY, "e2b_unsupported"},
    {"POST", E2B_API "/sandboxes/{id}/snapshots", sbx_h_e2b_snapshot, E2B_KEY,
     "e2b_unsupported"},
    {"GET", E2B_API "/sandboxes/{id}/metrics", sbx_h_e2b_metrics, E2B_KEY, "e2b_metrics"},
    {"GET", E2B_API "/templates", sbx_h_e2b_templates, E2B_KEY, "e2b_unsupported"},
    {"POST", E2B_API "/v3/templates", sbx_h_e2b_templates, E2B_KEY, "e2b_unsupported"},
    {"GET", E2B_API "/volumes", sbx_h_e2b_volumes, E2B_KEY, "e2b_unsupported"},
    {"POST", E2B_API "/volumes", sbx_h_e2b_volumes, E2B_KEY, "e2b_unsupported"},
    {"GET", E2B_ENVD "/health", sbx_h_e2b_health, E2B_SBX, "e2b_health"},
    {"GET", E2B_ENVD "/files", sbx_h_e2b_files_get, E2B_SBX, "e2b_files_read"},
    {"POST", E2B_ENVD "/files", sbx_h_e2b_files_post, E2B_SBX, "e2b_files_write"},
    {"POST", E2B_ENVD "/process.Process/Start", sbx_h_e2b_proc_start, E2B_SBX, "e2b_proc_start"},
    {"POST", E2B_ENVD "/process.Process/Connect", sbx_h_e2b_proc_connect, E2B_SBX,
     "e2b_proc_connect"},
    {"POST", E2B_ENVD "/process.Process/List", sbx_h_e2b_proc_list, E2B_SBX, "e2b_proc_list"},
    {"POST", E2B_ENVD "/process.Process/SendInput", sbx_h_e2b_proc_input, E2B_SBX,
     "e2b_proc_input"},
    {"POST", E2B_ENVD "/process.Process/CloseStdin", sbx_h_e2b_proc_close_stdin, E2B_SBX,
     "e2b_proc_input"},
    {"POST", E2B_ENVD "/process.Process/SendSignal", sbx_h_e2b_proc_signal, E2B_SBX,
     "e2b_proc_signal"},
    {"POST", E2B_ENVD "/process.Process/Update", sbx_h_e2b_proc_update, E2B_SBX,
     "e2b_proc_update"},
    {"POST", E2B_ENVD "/process.Process/StreamInput", sbx_h_e2b_proc_stream_input, E2B_SBX,
     "e2b_unsupported"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/Stat", sbx_h_e2b_fs_stat, E2B_SBX, "e2b_fs_stat"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/ListDir", sbx_h_e2b_fs_list, E2B_SBX,
     "e2b_fs_list"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/MakeDir", sbx_h_e2b_fs_mkdir, E2B_SBX,
     "e2b_fs_mkdir"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/Move", sbx_h_e2b_fs_move, E2B_SBX, "e2b_fs_move"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/Remove", sbx_h_e2b_fs_remove, E2B_SBX,
     "e2b_fs_remove"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/WatchDir", sbx_h_e2b_fs_watch, E2B_SBX,
     "e2b_fs_watch"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/CreateWatcher", sbx_h_e2b_fs_watchers, E2B_SBX,
     "e2b_unsupported"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/GetWatcherEvents", sbx_h_e2b_fs_watchers, E2B_SBX,
     "e2b_unsupported"},
    {"POST", E2B_ENVD "/filesystem.Filesystem/RemoveWatcher", sbx_h_e2b_fs_watchers, E2B_SBX,
     "e2b_unsupported"},
    {"POST", E2B_ENVD "/execute", sbx_h_e2b_execute, E2B_SBX, "e2b_execute"},
    {"POST", E2B_ENVD "/contexts", sbx_h_e2b_ctx_create, E2B_SBX, "e2b_ctx_create"},
    {"GET", E2B_ENVD "/contexts", sbx_h_e2b_ctx_list, E2B_SBX, "e2b_ctx_list"},
    {"DELETE", E2B_ENVD "/contexts/{cid}", sbx_h_e2b_ctx_delete, E2B_SBX, "e2b_ctx_delete"},
    {"POST", E2B_ENVD "/contexts/{cid}/restart", sbx_h_e2b_ctx_restart, E2B_SBX,
     "e2b_ctx_restart"},
    /* MCP, Streamable HTTP transport (api/mcp.c, docs/mcp.md).  No GET:
     * the server opens no stream of its own, and the transport says a GET
     * is then 405, which the matcher answers. */
    {"POST", "/mcp", sbx_h_mcp_post, SBX_AUTH_KEY, "mcp"},
    {"DELETE", "/mcp", sbx_h_mcp_delete, SBX_AUTH_KEY, "mcp_end"},
    {NULL, NULL, NULL, SBX_AUTH_NONE, NULL},
};

const struct sbx_route *sbx_routes(void) { return routes; }

/* A final "{name*}" segment: it takes the rest of the path, slashes
 * included, possibly empty (the ports proxy forwards it as is). */
static bool is_rest(const char *p, size_t plen)
{
  return plen >= 4 && p[0] == '{' && p[plen - 2] == '*' && p[plen - 1] == '}' && !p[plen];
}

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
    if (is_rest(p, plen)) {
      if (out)
        out->rest = s; /* points into the request's path */
      p = pe;
      s += strlen(s);
      break;
    }
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
  if (!*s && p[0] == '/' && is_rest(p + 1, strlen(p + 1))) { /* ".../8000": rest "" */
    if (out)
      out->rest = s;
    p += strlen(p);
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

/* Pattern segment seg of pattern: its parameter name without braces (and
 * "*"), or false for a literal. */
static bool pattern_param(const char *pattern, size_t seg, char *name, size_t len)
{
  const char *p = pattern;
  for (size_t i = 0; *p == '/'; i++) {
    p++;
    const char *pe = strchrnul(p, '/');
    size_t plen = (size_t)(pe - p);
    bool rest = is_rest(p, plen);
    if ((i == seg || rest) && plen >= 2 && p[0] == '{' && p[plen - 1] == '}') {
      snprintf(name, len, "%.*s", (int)(plen - (rest ? 3 : 2)), p + 1);
      return true;
    }
    if (i == seg)
      return false;
    p = pe;
  }
  return false;
}

bool sbx_route_segment_name(const char *raw_path, size_t seg, char *name, size_t len)
{
  for (const struct sbx_route *rt = routes; rt->method; rt++)
    if (match(rt->pattern, raw_path, NULL) && pattern_param(rt->pattern, seg, name, len))
      return true;
  return false;
}
