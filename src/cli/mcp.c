/* mcp.c — `sbx mcp`: the MCP stdio transport for local agents, relayed to
 * the daemon's Streamable HTTP endpoint (POST <url>/mcp).
 *
 * Each line on stdin is one JSON-RPC message; each message the daemon
 * answers (JSON, or the data of SSE events, relayed as they arrive) goes
 * to stdout as one line.
 * The relay keeps the Mcp-Session-Id and the negotiated protocol version
 * the daemon hands out and ends the MCP session at EOF.  Nothing but
 * JSON-RPC is written to stdout (the stdio transport forbids it); a failure
 * the daemon answers outside JSON-RPC (401, 429, unreachable) becomes a
 * JSON-RPC error for the request that caused it, and a line on stderr.
 * It talks HTTP only, with its own libcurl handle: it needs the response
 * headers, which the CLI's JSON helper (http.c) does not expose. */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/cleanup.h"

#define LINE_MAX_BYTES (64u * 1024 * 1024) /* one message from the agent */
#define RESP_MAX_BYTES (256u * 1024 * 1024)

static const char help[] =
    "Usage: sbx mcp [--url URL] [--api-key KEY]\n"
    "\n"
    "Serves the Model Context Protocol on stdin/stdout (the stdio transport) for\n"
    "an agent that launches it, relaying every message to sandboxd's /mcp with\n"
    "the API key.  The tools are sandboxd's (docs/mcp.md): run_code,\n"
    "session_create, session_exec, session_write_file, session_read_file,\n"
    "session_list, session_delete.\n"
    "\n"
    "Options:\n"
    "      --url URL, --api-key KEY   see `sbx --help` (env SANDBOXD_URL, SANDBOXD_API_KEY)\n"
    "  -h, --help     show this help\n";

static const struct option longopts[] = {SBX_CLI_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};

struct relay {
  CURL *curl;
  char url[2048];
  char auth[1024];
  char session[128];
  char version[32];
};

struct answer {
  struct sbx_buf body; /* bounded by RESP_MAX_BYTES */
  bool overflow;
  char session[128];
  char ctype[128];
  struct relay *rl; /* an event stream is relayed as it arrives */
  bool initializing;
  bool streamed; /* some events were relayed already */
};

static void emit(struct relay *rl, json_t *msg, bool initializing);

/* Relays each complete `data:` line of an event stream and keeps only the
 * unfinished tail, so progress reaches the agent while the call runs. */
static void drain_events(struct answer *a)
{
  char *start = a->body.data, *nl;
  while ((nl = memchr(start, '\n', a->body.len - (size_t)(start - a->body.data)))) {
    *nl = '\0';
    json_t *m = !strncmp(start, "data:", 5) ? json_loads(start + 5, 0, NULL) : NULL;
    if (m) {
      emit(a->rl, m, a->initializing);
      a->streamed = true;
    }
    json_decref(m);
    start = nl + 1;
  }
  size_t rest = a->body.len - (size_t)(start - a->body.data);
  memmove(a->body.data, start, rest);
  a->body.len = rest;
  a->body.data[rest] = '\0';
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
  struct answer *a = ctx;
  size_t add = size * n;
  if (sbx_buf_append(&a->body, p, add) < 0) {
    a->overflow = errno == E2BIG;
    return 0;
  }
  if (!strncmp(a->ctype, "text/event-stream", 17))
    drain_events(a);
  return add;
}

/* Copies the value of header `name` from a raw header line, if it is it. */
static void header_value(const char *line, size_t n, const char *name, char *out, size_t cap)
{
  size_t k = strlen(name);
  if (n <= k + 1 || strncasecmp(line, name, k) || line[k] != ':')
    return;
  const char *v = line + k + 1;
  size_t vl = n - k - 1;
  while (vl && (*v == ' ' || *v == '\t'))
    v++, vl--;
  while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
    vl--;
  if (vl < cap) {
    memcpy(out, v, vl);
    out[vl] = '\0';
  }
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
  struct answer *a = ctx;
  header_value(p, size * n, "Mcp-Session-Id", a->session, sizeof a->session);
  header_value(p, size * n, "Content-Type", a->ctype, sizeof a->ctype);
  return size * n;
}

/* One HTTP exchange; returns the status, 0 when no answer came (errbuf says why). */
static long exchange(struct relay *rl, const char *method, const char *body, size_t len,
                     struct answer *a, char *errbuf)
{
  struct curl_slist *h = NULL;
  char sid[160], pv[64];
  h = curl_slist_append(h, rl->auth);
  h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, "Accept: application/json, text/event-stream");
  if (rl->session[0] && snprintf(sid, sizeof sid, "Mcp-Session-Id: %s", rl->session) > 0)
    h = curl_slist_append(h, sid);
  if (rl->version[0] && snprintf(pv, sizeof pv, "MCP-Protocol-Version: %s", rl->version) > 0)
    h = curl_slist_append(h, pv);
  CURL *c = rl->curl;
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, rl->url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  long status = 0;
  errbuf[0] = '\0';
  if (curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  return status;
}

/* Writes one JSON-RPC message to stdout as one line; remembers what
 * initialize negotiated. */
static void emit(struct relay *rl, json_t *msg, bool initializing)
{
  const char *v =
      json_string_value(json_object_get(json_object_get(msg, "result"), "protocolVersion"));
  if (initializing && v)
    snprintf(rl->version, sizeof rl->version, "%s", v);
  char *txt = json_dumps(msg, JSON_COMPACT);
  if (txt) {
    fputs(txt, stdout);
    fputc('\n', stdout);
    fflush(stdout);
  }
  free(txt);
}

static void emit_error(json_t *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit_error(json_t *id, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "sbx mcp: %s\n", msg);
  if (!id) /* a notification: nobody waits for an answer */
    return;
  json_t *e = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                        -32000, "message", msg);
  char *txt = json_dumps(e, JSON_COMPACT);
  if (txt)
    printf("%s\n", txt);
  fflush(stdout);
  free(txt);
  json_decref(e);
}

/* The data lines of each SSE event, each one a JSON-RPC message. */
static void emit_sse(struct relay *rl, char *body, bool initializing)
{
  char *save = NULL;
  for (char *line = strtok_r(body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "data:", 5))
      continue;
    json_t *m = json_loads(line + 5, 0, NULL);
    if (m)
      emit(rl, m, initializing);
    json_decref(m);
  }
}

/* A daemon answer that is not JSON-RPC: its error envelope, said plainly. */
static void emit_http_failure(json_t *id, long status, const char *body, const char *why)
{
  if (!status) {
    emit_error(id, "cannot reach sandboxd: %s", why);
    return;
  }
  json_t *env = body ? json_loads(body, 0, NULL) : NULL;
  json_t *e = json_object_get(env, "error");
  const char *m = json_string_value(json_object_get(e, "message"));
  emit_error(id, "sandboxd answered HTTP %ld: %s", status,
             m               ? m
             : status == 401 ? "unauthenticated (check SANDBOXD_API_KEY)"
                             : "no details");
  json_decref(env);
}

static void relay_line(struct relay *rl, const char *line, size_t len)
{
  json_t *msg = json_loadb(line, len, 0, NULL);
  json_t *id = json_object_get(msg, "id");
  const char *method = json_string_value(json_object_get(msg, "method"));
  bool initializing = method && !strcmp(method, "initialize");
  struct answer a = {.body = SBX_BUF_INIT(RESP_MAX_BYTES),
                     .rl = rl,
                     .initializing = initializing};
  char errbuf[CURL_ERROR_SIZE];
  long status = exchange(rl, "POST", line, len, &a, errbuf);
  if (initializing && a.session[0])
    snprintf(rl->session, sizeof rl->session, "%s", a.session);
  json_t *reply = !strncmp(a.ctype, "application/json", 16) && a.body.data
                      ? json_loads(a.body.data, 0, NULL)
                      : NULL;
  if (status == 202) {
    /* a notification was taken: nothing to say */
  } else if (json_object_get(reply, "jsonrpc")) {
    emit(rl, reply, initializing);
  } else if (!strncmp(a.ctype, "text/event-stream", 17) && (a.streamed || status == 200)) {
    if (a.body.data) /* a last event without its final newline */
      emit_sse(rl, a.body.data, initializing);
  } else if (a.overflow) {
    emit_error(id, "the answer is larger than %u bytes", RESP_MAX_BYTES);
  } else {
    emit_http_failure(id, status, a.body.data, errbuf);
  }
  json_decref(reply);
  json_decref(msg);
  sbx_buf_free(&a.body);
}

static void end_session(struct relay *rl)
{
  if (!rl->session[0])
    return;
  struct answer a = {.body = SBX_BUF_INIT(RESP_MAX_BYTES), .rl = rl};
  char errbuf[CURL_ERROR_SIZE];
  exchange(rl, "DELETE", NULL, 0, &a, errbuf);
  sbx_buf_free(&a.body);
}

static int serve(struct relay *rl)
{
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, stdin)) >= 0) {
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      line[--n] = '\0';
    if (n == 0)
      continue;
    if ((size_t)n > LINE_MAX_BYTES) {
      emit_error(json_null(), "a message is larger than %u bytes", LINE_MAX_BYTES);
      continue;
    }
    relay_line(rl, line, (size_t)n);
  }
  end_session(rl);
  return SBX_EXIT_OK;
}

int sbx_cmd_mcp(struct sbx_cli *cli, int argc, char **argv)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, "sbx mcp", &a);
  int c, exit_now = -1;
  while ((c = sbx_cli_getopt(&a, "+h", longopts)) != -1) {
    if (c == SBX_OPT_POSITIONAL)
      return sbx_cli_usage("mcp", "unexpected argument '%s'", optarg);
    if (!sbx_cli_common_opt(cli, c, help, &exit_now))
      return sbx_cli_usage("mcp", "unknown option");
    if (exit_now >= 0)
      return exit_now;
  }
  if (!cli->api_key) {
    fputs("sbx mcp: no API key: set SANDBOXD_API_KEY or pass --api-key\n", stderr);
    return SBX_EXIT_USAGE;
  }
  struct relay rl = {0};
  size_t ul = strlen(cli->url);
  while (ul && cli->url[ul - 1] == '/')
    ul--;
  if (ul + 5 >= sizeof rl.url || strlen(cli->api_key) + 24 >= sizeof rl.auth)
    return sbx_cli_usage("mcp", "the URL or the API key is too long");
  snprintf(rl.url, sizeof rl.url, "%.*s/mcp", (int)ul, cli->url);
  snprintf(rl.auth, sizeof rl.auth, "Authorization: Bearer %s", cli->api_key);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(rl.curl = curl_easy_init())) {
    fputs("sbx mcp: cannot initialise libcurl\n", stderr);
    return SBX_EXIT_API;
  }
  int rc = serve(&rl);
  curl_easy_cleanup(rl.curl);
  return rc;
}
