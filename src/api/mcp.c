/* mcp.c — the MCP Streamable HTTP transport at /mcp (see mcp.h).
 *
 * POST carries one JSON-RPC message.  A request gets its response as
 * application/json (or as a one-event text/event-stream when the client
 * accepts only that); a session_exec that asked for progress streams its
 * output as progress notifications before the response; a notification or a client's response gets 202 and
 * no body.  The server never sends requests of its own, so GET (a
 * server-to-client stream) is 405, as the transport allows: the router
 * answers it, there being no GET route.  DELETE ends an
 * MCP session.
 *
 * Authentication is the route table's (Bearer API key, before any byte of
 * JSON-RPC is read).  An MCP session id names a session of the tenant that
 * opened it: another tenant's id is answered exactly like an unknown one.
 * The table is bounded: per tenant and overall, the least recently used
 * session is forgotten first, and idle ones expire.  On a loopback
 * listener, a Host or Origin that is not a loopback name is refused (DNS
 * rebinding), as the transport requires. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "api/mcp.h"
#include "common/util.h"

#define SESSIONS_MAX 1024
#define SESSIONS_PER_TENANT 64
#define SESSION_IDLE_NS (24ull * 3600 * 1000000000ull)

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_SESSION_NOT_FOUND -32001

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

struct mcp_session {
  char id[48];
  int64_t tenant_id;
  char version[16];
  uint64_t last_ns;
};

static struct mcp_session sessions[SESSIONS_MAX];
static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;

static bool version_supported(const char *v)
{
  for (size_t i = 0; v && i < sizeof versions / sizeof versions[0]; i++)
    if (!strcmp(versions[i], v))
      return true;
  return false;
}

/* ---- the session table ---- */

static bool live(const struct mcp_session *s, uint64_t now)
{
  return s->id[0] && now - s->last_ns < SESSION_IDLE_NS;
}

/* A free slot, else the tenant's least recently used one once it has its
 * share, else the overall least recently used.  Lock held. */
static struct mcp_session *slot_for(int64_t tenant, uint64_t now)
{
  struct mcp_session *own_lru = NULL, *lru = &sessions[0];
  int own = 0;
  for (size_t i = 0; i < SESSIONS_MAX; i++) {
    struct mcp_session *s = &sessions[i];
    if (!live(s, now))
      return s;
    if (s->tenant_id == tenant && (own++, !own_lru || s->last_ns < own_lru->last_ns))
      own_lru = s;
    if (s->last_ns < lru->last_ns)
      lru = s;
  }
  return own >= SESSIONS_PER_TENANT ? own_lru : lru;
}

static void session_open(int64_t tenant, const char *version, char *id, size_t idlen)
{
  sbx_random_id("mcp", id, idlen);
  pthread_mutex_lock(&sessions_lock);
  uint64_t now = sbx_now_ns();
  struct mcp_session *s = slot_for(tenant, now);
  snprintf(s->id, sizeof s->id, "%s", id);
  snprintf(s->version, sizeof s->version, "%s", version);
  s->tenant_id = tenant;
  s->last_ns = now;
  pthread_mutex_unlock(&sessions_lock);
}

/* Touches the tenant's session `id`; false if there is none (or it is
 * another tenant's).  With end, forgets it. */
static bool session_use(int64_t tenant, const char *id, bool end)
{
  bool found = false;
  pthread_mutex_lock(&sessions_lock);
  uint64_t now = sbx_now_ns();
  for (size_t i = 0; i < SESSIONS_MAX && !found; i++) {
    struct mcp_session *s = &sessions[i];
    if (live(s, now) && s->tenant_id == tenant && !strcmp(s->id, id)) {
      found = true;
      s->last_ns = now;
      if (end)
        s->id[0] = '\0';
    }
  }
  pthread_mutex_unlock(&sessions_lock);
  return found;
}

/* ---- JSON-RPC framing ---- */

static json_t *rpc_error(json_t *id, int code, const char *msg)
{
  return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                   "error", "code", code, "message", msg);
}

static json_t *rpc_result(json_t *id, json_t *result)
{
  return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* Sends msg (consumed) as JSON, or as one SSE event to a client that
 * accepts only an event stream. */
static void reply(struct sbx_req *r, struct sbx_resp *out, int status, json_t *msg,
                  const char *session_id)
{
  const char *accept = sbx_req_header(r, "Accept");
  bool sse_only = accept && strstr(accept, "text/event-stream") &&
                  !strstr(accept, "application/json") && !strstr(accept, "*/*");
  if (sse_only) {
    char *txt = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    size_t n = txt ? strlen(txt) : 0;
    char *ev = malloc(n + 32);
    int len = ev ? snprintf(ev, n + 32, "event: message\ndata: %s\n\n", txt ? txt : "") : 0;
    free(txt);
    sbx_resp_bytes(out, status, ev, ev ? (size_t)len : 0, "text/event-stream");
  } else {
    sbx_resp_json(out, status, msg);
  }
  if (session_id)
    out->headers = json_pack("[[s, s]]", "Mcp-Session-Id", session_id);
}

/* ---- DNS rebinding: Host and Origin ---- */

/* Whether the connection came in on a loopback address of ours. */
static bool on_loopback(struct sbx_req *r)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int fd = sbx_req_client_fd(r);
  if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
    return false;
  if (ss.ss_family == AF_INET)
    return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
  return ss.ss_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
}

/* "localhost[:port]", "127.x.y.z[:port]", "[::1][:port]". */
static bool loopback_name(const char *hostport)
{
  char h[256];
  size_t n = hostport[0] == '[' ? strcspn(hostport, "]") + 1 : strcspn(hostport, ":");
  if (!hostport[0] || n >= sizeof h)
    return false;
  memcpy(h, hostport, n);
  h[n] = '\0';
  if (hostport[n] && hostport[n] != ':')
    return false;
  struct in_addr a4;
  return !strcasecmp(h, "localhost") || !strcmp(h, "[::1]") ||
         (inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
}

/* A browser page that rebound its own name to our loopback address carries
 * its name in Host (and Origin): such a request is refused before it runs
 * anything, key or not.  An Origin, when sent, must be the Host itself. */
static bool origin_ok(struct sbx_req *r, struct sbx_resp *out)
{
  const char *host = sbx_req_header(r, "Host");
  const char *origin = sbx_req_header(r, "Origin");
  bool loop = on_loopback(r);
  const char *auth = origin ? strstr(origin, "://") : NULL;
  bool bad =
      (loop && (!host || !loopback_name(host))) ||
      (origin && strcmp(origin, "null") &&
       (!auth || !((host && !strcasecmp(auth + 3, host)) || (loop && loopback_name(auth + 3)))));
  if (bad)
    sbx_resp_json(out, 403,
                  rpc_error(NULL, -32000,
                            "Host or Origin not allowed "
                            "(DNS rebinding protection)"));
  return !bad;
}

/* ---- methods ---- */

static json_t *initialize_result(json_t *params, const char **version)
{
  const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
  *version = version_supported(asked) ? asked : versions[0];
  return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", *version,
                   "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "sandboxd",
                   "title", "sandboxd", "version", "0.1.0", "instructions",
                   "Run untrusted code in isolated sandboxes. run_code runs once in a fresh "
                   "sandbox; session_create gives a sandbox that keeps files and state for "
                   "session_exec, session_write_file and session_read_file; delete it with "
                   "session_delete when done.");
}

static json_t *tools_call(struct sbx_req *r, json_t *id, json_t *params)
{
  const char *name = json_string_value(json_object_get(params, "name"));
  json_t *args = json_object_get(params, "arguments");
  if (!name)
    return rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name, a string");
  if (args && !json_is_object(args))
    return rpc_error(id, RPC_INVALID_PARAMS, "tools/call params.arguments must be an object");
  json_t *empty = args ? NULL : json_object();
  json_t *res = sbx_mcp_tool_call(r, name, args ? args : empty);
  json_decref(empty);
  if (!res) {
    char msg[200];
    snprintf(msg, sizeof msg, "unknown tool: %.100s (tools/list names them)", name);
    return rpc_error(id, RPC_INVALID_PARAMS, msg);
  }
  return rpc_result(id, res);
}

static json_t *dispatch_request(struct sbx_req *r, const char *method, json_t *id,
                                json_t *params)
{
  if (!strcmp(method, "ping"))
    return rpc_result(id, json_object());
  if (!strcmp(method, "tools/list"))
    return rpc_result(id, json_pack("{s:o}", "tools", sbx_mcp_tools_list(r)));
  if (!strcmp(method, "tools/call"))
    return tools_call(r, id, params);
  char msg[200];
  snprintf(msg, sizeof msg, "method not found: %.100s", method);
  return rpc_error(id, RPC_METHOD_NOT_FOUND, msg);
}

/* The body as one JSON-RPC message, or an error reply already made. */
static json_t *parse_message(struct sbx_req *r, struct sbx_resp *out)
{
  json_error_t je;
  json_t *msg =
      r->body_len ? json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je) : NULL;
  if (!msg) {
    char m[300];
    snprintf(m, sizeof m, "parse error: %s", r->body_len ? je.text : "empty body");
    reply(r, out, 400, rpc_error(NULL, RPC_PARSE_ERROR, m), NULL);
    return NULL;
  }
  json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
  const char *why =
      json_is_array(msg)     ? "batches are not supported (one message per POST)"
      : !json_is_object(msg) ? "a JSON-RPC message is an object"
      : !json_is_string(json_object_get(msg, "jsonrpc")) ||
              strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0")
          ? "jsonrpc must be \"2.0\""
      : id && !json_is_string(id) && !json_is_integer(id) ? "id must be a string or an integer"
      : params && !json_is_object(params)                 ? "params must be an object"
      : json_object_get(msg, "method") && !json_is_string(json_object_get(msg, "method"))
          ? "method must be a string"
      : !json_object_get(msg, "method") && !json_object_get(msg, "result") &&
              !json_object_get(msg, "error")
          ? "a message needs a method (or, answering us, a result or an error)"
          : NULL;
  if (why) {
    reply(r, out, 400, rpc_error(json_is_object(msg) ? id : NULL, RPC_INVALID_REQUEST, why),
          NULL);
    json_decref(msg);
    return NULL;
  }
  return msg;
}

static int handle_initialize(struct sbx_req *r, struct sbx_resp *out, json_t *id, json_t *params)
{
  const char *version;
  json_t *res = initialize_result(params, &version);
  char sid[48];
  session_open(r->who.tenant_id, version, sid, sizeof sid);
  reply(r, out, 200, rpc_result(id, res), sid);
  return 0;
}

/* The request's MCP session, checked; false with an error reply made. */
static bool check_session(struct sbx_req *r, struct sbx_resp *out, json_t *id)
{
  const char *sid = sbx_req_header(r, "Mcp-Session-Id");
  const char *pv = sbx_req_header(r, "MCP-Protocol-Version");
  if (pv && !version_supported(pv)) {
    reply(r, out, 400, rpc_error(id, RPC_INVALID_REQUEST, "unsupported MCP-Protocol-Version"),
          NULL);
    return false;
  }
  if (!sid || !*sid) {
    reply(r, out, 400,
          rpc_error(id, RPC_INVALID_REQUEST,
                    "Mcp-Session-Id header is required after "
                    "initialize"),
          NULL);
    return false;
  }
  if (!session_use(r->who.tenant_id, sid, false)) {
    reply(r, out, 404,
          rpc_error(id, RPC_SESSION_NOT_FOUND, "MCP session not found; initialize again"), NULL);
    return false;
  }
  return true;
}

int sbx_h_mcp_post(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)err;
  if (!origin_ok(r, out))
    return 0;
  json_t *msg = parse_message(r, out);
  if (!msg)
    return 0;
  json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
  const char *method = json_string_value(json_object_get(msg, "method"));
  int rc = 0;
  if (method && id && !strcmp(method, "initialize"))
    rc = handle_initialize(r, out, id, params);
  else if (!check_session(r, out, id))
    rc = 0;
  else if (!method || !id) /* a notification, or a response to us: nothing to answer */
    sbx_resp_empty(out, 202);
  else if (!strcmp(method, "tools/call") && sbx_mcp_tool_stream(r, out, id, params))
    rc = 0;
  else
    reply(r, out, 200, dispatch_request(r, method, id, params), NULL);
  json_decref(msg);
  return rc;
}

int sbx_h_mcp_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)err;
  if (!origin_ok(r, out))
    return 0;
  const char *sid = sbx_req_header(r, "Mcp-Session-Id");
  if (!sid || !*sid) {
    sbx_resp_json(out, 400,
                  rpc_error(NULL, RPC_INVALID_REQUEST,
                            "Mcp-Session-Id header is "
                            "required"));
    return 0;
  }
  if (!session_use(r->who.tenant_id, sid, true)) {
    sbx_resp_json(out, 404, rpc_error(NULL, RPC_SESSION_NOT_FOUND, "MCP session not found"));
    return 0;
  }
  sbx_resp_empty(out, 204);
  return 0;
}
