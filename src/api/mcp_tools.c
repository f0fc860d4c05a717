/* mcp_tools.c — the MCP tools: one-shot code runs on executions, and
 * sessions (create, exec, read/write a file, list, delete).
 *
 * Every tool calls core exactly as the REST handlers do, as the request's
 * principal, so tenant scoping, quotas and limits are the same ones; each
 * mutation then writes the audit event its REST route would (same action,
 * same target), so an MCP client is no way around the audit chain.  A
 * failure is a CallToolResult with isError, carrying our error code and
 * message, never a JSON-RPC error: the model is meant to read it. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/envelope.h"
#include "api/mcp.h"
#include "api/router.h"
#include "api/sse.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "core/core.h"
#include "core/schema.h"

#define READ_MAX (1024u * 1024)         /* bytes one session_read_file returns */
#define COLLECT_FILE_MAX (1024u * 1024) /* bytes of one collected file inlined */
#define COLLECT_TOTAL_MAX (8u * 1024 * 1024)
#define RUN_WAIT_MAX_S (2 * 3600.0)   /* a one-shot run is waited for at most this */
#define STREAM_QUEUE_BYTES (4u << 20) /* progress events not yet read (then dropped) */
#define STREAM_END_WAIT_MS 60000      /* a slow reader still gets the final response */
#define PROGRESS_TEXT_MAX 4096        /* output bytes quoted in one progress message */

typedef json_t *(*tool_fn)(struct sbx_req *r, json_t *args, struct sbx_error *err);

/* ---- results ---- */

static json_t *text_result(json_t *structured, bool is_error)
{
  char *txt = json_dumps(structured, JSON_COMPACT | JSON_REAL_PRECISION(9));
  json_t *res =
      json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text",
                txt ? txt : "{}", "structuredContent", structured, "isError", is_error);
  free(txt);
  return res;
}

/* violations (taken, may be NULL): what the arguments broke of a schema. */
static json_t *error_result(const struct sbx_error *err, json_t *violations)
{
  json_t *e = json_pack("{s:s, s:s}", "code", sbx_envelope_code_name(err->code), "message",
                        err->msg[0] ? err->msg : "internal error");
  if (err->field[0])
    json_object_set_new(e, "field", json_string(err->field));
  if (violations)
    json_object_set_new(e, "violations", violations);
  return text_result(json_pack("{s:o}", "error", e), true);
}

/* ---- audit: the event the equivalent REST route writes ---- */

static const struct sbx_route *route_named(const char *name)
{
  for (const struct sbx_route *rt = sbx_routes(); rt->method; rt++)
    if (!strcmp(rt->name, name))
      return rt;
  return NULL;
}

static void audit_as(struct sbx_req *r, const char *route, const char *param, json_t *res,
                     const struct sbx_error *err)
{
  struct sbx_req sub = *r; /* same principal, request id and client */
  sub.body = NULL;
  sub.body_len = 0;
  sub.route = route_named(route);
  sub.nparams = 0;
  sub.rest = NULL;
  if (param) {
    snprintf(sub.params[0], sizeof sub.params[0], "%s", param);
    sub.nparams = 1;
  }
  struct sbx_resp resp = {.status = 200, .kind = SBX_RESP_JSON, .json = res, .fd = -1};
  sbx_api_audit(&sub, err ? NULL : &resp, err);
}

/* ---- argument helpers ---- */

static const char *str_arg(json_t *args, const char *name, bool required, struct sbx_error *err)
{
  json_t *v = json_object_get(args, name);
  if (!v && !required)
    return NULL;
  if (!json_is_string(v) || !json_string_length(v)) {
    sbx_err_bad_type(err, name, "a non-empty string", "une chaîne non vide");
    return NULL;
  }
  return json_string_value(v);
}

/* A copy of args without the keys named (NULL-terminated). */
static json_t *args_without(json_t *args, const char *const *drop)
{
  json_t *body = json_deep_copy(args);
  for (; *drop; drop++)
    json_object_del(body, *drop);
  return body;
}

static json_t *b64_or_text(const char *data, size_t len, const char *text_key,
                           const char *b64_key, json_t *into)
{
  json_t *s = memchr(data, '\0', len) ? NULL : json_stringn(data, len); /* NULL unless UTF-8 */
  if (s) {
    json_object_set_new(into, text_key, s);
    return into;
  }
  size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
  char *b = malloc(n);
  if (b) {
    sodium_bin2base64(b, n, (const unsigned char *)data, len, sodium_base64_VARIANT_ORIGINAL);
    json_object_set_new(into, b64_key, json_string(b));
  }
  free(b);
  return into;
}

/* ---- run_code: an execution, waited for, its collected files inlined ---- */

static bool is_final(json_t *ex)
{
  const char *st = json_string_value(json_object_get(ex, "status"));
  return st && strcmp(st, "queued") && strcmp(st, "running");
}

static void inline_files(struct sbx_req *r, const char *id, json_t *ex)
{
  size_t i, total = 0;
  json_t *f;
  json_array_foreach(json_object_get(ex, "files"), i, f)
  {
    const char *path = json_string_value(json_object_get(f, "path"));
    json_int_t size = json_integer_value(json_object_get(f, "size"));
    if (!path || size < 0 || (size_t)size > COLLECT_FILE_MAX ||
        total + (size_t)size > COLLECT_TOTAL_MAX) {
      json_object_set_new(f, "omitted",
                          json_string("too large to inline; read it with "
                                      "GET /v1/sandbox/executions/{id}/files"));
      continue;
    }
    void *data = NULL;
    size_t n = 0;
    struct sbx_error ferr = {0};
    if (sbx_execution_file(r->core, &r->who, id, path, &data, &n, &ferr) < 0) {
      json_object_set_new(f, "omitted", json_string(ferr.msg));
      continue;
    }
    total += n;
    b64_or_text(data, n, "content", "content_base64", f);
    free(data);
  }
}

static json_t *run_body(json_t *args, struct sbx_error *err)
{
  static const char *const drop[] = {"timeout_s", NULL};
  json_t *t = json_object_get(args, "timeout_s");
  if (t && !json_is_number(t)) {
    sbx_err_bad_type(err, "timeout_s", "a number of seconds", "un nombre de secondes");
    return NULL;
  }
  json_t *body = args_without(args, drop);
  if (t) {
    json_t *limits = json_object_get(body, "limits");
    if (!limits) {
      limits = json_object();
      json_object_set_new(body, "limits", limits);
    }
    if (json_is_object(limits))
      json_object_set(limits, "timeout_s", t);
  }
  return body;
}

/* The final state of a queued execution ex (consumed), collected files
 * inlined. */
static json_t *wait_final(struct sbx_req *r, json_t *ex, struct sbx_error *err)
{
  char id[128];
  snprintf(id, sizeof id, "%s", json_string_value(json_object_get(ex, "id")));
  uint64_t deadline = sbx_now_ns() + (uint64_t)(RUN_WAIT_MAX_S * 1e9);
  while (!is_final(ex) && sbx_now_ns() < deadline) {
    json_decref(ex);
    ex = NULL;
    if (sbx_execution_get(r->core, &r->who, id, 60, &ex, err) < 0)
      return NULL;
  }
  inline_files(r, id, ex);
  return ex;
}

static json_t *tool_run_code(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  json_t *body = run_body(args, err), *ex = NULL;
  if (!body)
    return NULL;
  int rc = sbx_execution_create(r->core, &r->who, body, &ex, err);
  json_decref(body);
  audit_as(r, "execution_create", NULL, rc < 0 ? NULL : ex, rc < 0 ? err : NULL);
  return rc < 0 ? NULL : wait_final(r, ex, err);
}

/* ---- the tenant's own tools (applied from tool manifests) ---- */

#define APPLIED_TOOLS_LISTED 1000 /* a tenant has at most this many */

/* MCP's description of one tool (a Tool object of the API): its manifest's
 * metadata.description, else a sentence naming its profile; its input
 * schema, else any object (MCP arguments are always an object). */
static json_t *applied_tool_json(json_t *tool)
{
  json_t *m = json_object_get(tool, "manifest");
  const char *name = json_string_value(json_object_get(tool, "name"));
  const char *desc =
      json_string_value(json_object_get(json_object_get(m, "metadata"), "description"));
  char fallback[256];
  snprintf(fallback, sizeof fallback, "Tool %s (profile %s), applied from a tool manifest.",
           name, json_string_value(json_object_get(tool, "profile")));
  json_t *schema = json_object_get(json_object_get(m, "spec"), "input_schema");
  return json_pack("{s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b}}", "name", name, "description",
                   desc ? desc : fallback, "inputSchema",
                   json_is_object(schema) ? json_incref(schema)
                                          : json_pack("{s:s}", "type", "object"),
                   "annotations", "title", name, "readOnlyHint", 0, "destructiveHint", 0,
                   "openWorldHint", 0);
}

/* Appends the tenant's tools to arr (a store failure lists the built-in
 * tools only: tools/list must answer). */
static void list_applied(struct sbx_req *r, json_t *arr)
{
  struct sbx_error err = {0};
  _cleanup_json_ json_t *page =
      sbx_tool_list(r->core, &r->who, NULL, APPLIED_TOOLS_LISTED, &err);
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(page, "tools"), i, t)
      json_array_append_new(arr, applied_tool_json(t));
}

/* tools/call of an applied tool: invoked with the arguments as its input
 * and waited for, as run_code is; the final execution, or NULL with err
 * (NOT_FOUND: the tenant has no tool of that name; *violations when the
 * arguments break the tool's schema). */
static json_t *call_applied(struct sbx_req *r, const char *name, json_t *args,
                            json_t **violations, struct sbx_error *err)
{
  _cleanup_json_ json_t *req = json_pack("{s:O}", "input", args);
  _cleanup_free_ char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
  if (!body) {
    sbx_err_sys(err, ENOMEM, "tool %s", name);
    return NULL;
  }
  json_t *ex = sbx_tool_invoke(r->core, &r->who, name, body, strlen(body), violations, err);
  if (ex || err->code != SBX_E_NOT_FOUND) /* not found: no tool of that name */
    audit_as(r, "tool_invoke", name, ex, ex ? NULL : err);
  return ex ? wait_final(r, ex, err) : NULL;
}

/* ---- sessions ---- */

static json_t *tool_session_create(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  json_t *res = NULL;
  int rc = sbx_session_create(r->core, &r->who, args, &res, err);
  audit_as(r, "session_create", NULL, rc < 0 ? NULL : res, rc < 0 ? err : NULL);
  return rc < 0 ? NULL : res;
}

static json_t *tool_session_list(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  const char *status = str_arg(args, "status", false, err);
  json_t *res = NULL;
  if (err->code || sbx_session_list(r->core, &r->who, status, NULL, 100, &res, err) < 0)
    return NULL;
  return res;
}

static json_t *tool_session_exec(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  static const char *const drop[] = {"session_id", NULL};
  const char *id = str_arg(args, "session_id", true, err);
  if (!id)
    return NULL;
  json_t *body = args_without(args, drop), *res = NULL;
  int rc = sbx_session_exec(r->core, &r->who, id, body, &res, err);
  json_decref(body);
  audit_as(r, "session_exec", id, rc < 0 ? NULL : res, rc < 0 ? err : NULL);
  return rc < 0 ? NULL : res;
}

static json_t *tool_session_delete(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  const char *id = str_arg(args, "session_id", true, err);
  if (!id)
    return NULL;
  int rc = sbx_session_delete(r->core, &r->who, id, err);
  json_t *res = rc < 0 ? NULL : json_pack("{s:s, s:b}", "id", id, "deleted", 1);
  audit_as(r, "session_delete", id, res, rc < 0 ? err : NULL);
  return res;
}

/* The bytes to write: content as text, or decoded from base64. */
static int content_arg(json_t *args, char **data, size_t *len, struct sbx_error *err)
{
  json_t *c = json_object_get(args, "content");
  const char *enc = json_string_value(json_object_get(args, "encoding"));
  if (!json_is_string(c))
    return sbx_err_bad_type(err, "content", "a string", "une chaîne");
  if (enc && strcmp(enc, "utf-8") && strcmp(enc, "base64"))
    return sbx_err_field(err, "encoding", "encoding must be \"utf-8\" or \"base64\"");
  size_t n = json_string_length(c);
  *data = malloc(n + 1);
  if (!*data)
    return sbx_err_sys(err, ENOMEM, "content");
  if (!enc || !strcmp(enc, "utf-8")) {
    memcpy(*data, json_string_value(c), n);
    *len = n;
    return 0;
  }
  if (sodium_base642bin((unsigned char *)*data, n + 1, json_string_value(c), n, " \n\r", len,
                        NULL, sodium_base64_VARIANT_ORIGINAL) < 0) {
    free(*data);
    *data = NULL;
    return sbx_err_field(err, "content", "content is not valid base64");
  }
  return 0;
}

static json_t *tool_write_file(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  const char *id = str_arg(args, "session_id", true, err);
  const char *path = id ? str_arg(args, "path", true, err) : NULL;
  _cleanup_free_ char *data = NULL;
  size_t len = 0;
  if (!path || sbx_schema_path(path, "path", err) < 0 || content_arg(args, &data, &len, err) < 0)
    return NULL;
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, id, SBX_CAP_FILES, err);
  int rc = ls ? sbx_files_write(ls, path, data, len, err) : -1;
  if (ls)
    sbx_session_release(r->core, ls);
  json_t *res = rc < 0 ? NULL : json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)len);
  audit_as(r, "files_put", id, res, rc < 0 ? err : NULL);
  return res;
}

static int read_bounded(int fd, uint64_t size, char **out, struct sbx_error *err)
{
  if (size > READ_MAX)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0,
                       "the file is %llu bytes; session_read_file returns at most %u "
                       "(GET /v1/sandbox/sessions/{id}/files reads any size)",
                       (unsigned long long)size, READ_MAX);
  char *buf = malloc(size + 1);
  if (!buf)
    return sbx_err_sys(err, ENOMEM, "read");
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      free(buf);
      return n < 0 ? sbx_err_sys(err, errno, "read")
                   : sbx_err_set(err, SBX_E_CONFLICT, 0, "the file shrank while read");
    }
    got += (size_t)n;
  }
  *out = buf;
  return 0;
}

static json_t *tool_read_file(struct sbx_req *r, json_t *args, struct sbx_error *err)
{
  const char *id = str_arg(args, "session_id", true, err);
  const char *path = id ? str_arg(args, "path", true, err) : NULL;
  if (!path || sbx_schema_path(path, "path", err) < 0)
    return NULL;
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, id, SBX_CAP_FILES, err);
  if (!ls)
    return NULL;
  _cleanup_close_ int fd = -1;
  uint64_t size = 0;
  _cleanup_free_ char *data = NULL;
  int rc = sbx_files_open_read(ls, path, &fd, &size, err);
  if (rc == 0)
    rc = read_bounded(fd, size, &data, err);
  sbx_session_release(r->core, ls);
  if (rc < 0)
    return NULL;
  json_t *res = json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)size);
  return b64_or_text(data, (size_t)size, "content", "content_base64", res);
}

/* ---- session_exec, streamed: output as progress notifications ---- */

struct exec_stream {
  struct sbx_sse *sse; /* the producer's reference */
  uint64_t token;
  json_t *id, *progress_token; /* owned */
  uint64_t progress;           /* output bytes so far: strictly increasing */
};

static void stream_free(struct exec_stream *es)
{
  json_decref(es->id);
  json_decref(es->progress_token);
  free(es);
}

static void on_output(void *ctx, int stream, const char *data, size_t len, uint64_t offset)
{
  struct exec_stream *es = ctx;
  (void)offset;
  es->progress += len ? len : 1;
  char text[PROGRESS_TEXT_MAX + 16];
  int n = snprintf(text, sizeof text, "%s%.*s", stream == 2 ? "[stderr] " : "",
                   (int)(len < PROGRESS_TEXT_MAX ? len : PROGRESS_TEXT_MAX), data);
  json_t *msg = json_stringn(text, (size_t)n); /* NULL unless UTF-8 (binary: no text) */
  json_t *ev = json_pack("{s:s, s:s, s:{s:O, s:I, s:o*}}", "jsonrpc", "2.0", "method",
                         "notifications/progress", "params", "progressToken", es->progress_token,
                         "progress", (json_int_t)es->progress, "message", msg);
  if (ev && sbx_sse_push(es->sse, "message", ev) < 0)
    sbx_exec_stream_cancel(es->token); /* the client left: its exec goes too */
}

/* session_end needs no event of its own here: the tool's result is the
 * exec's final result either way, and the MCP stream ends with it. */
static void on_end(void *ctx, json_t *result, const char *session_end)
{
  (void)session_end;
  struct exec_stream *es = ctx;
  const char *st = json_string_value(json_object_get(result, "status"));
  json_t *res = text_result(result, st && !strcmp(st, "error"));
  json_t *msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", es->id, "result", res);
  sbx_sse_push_wait(es->sse, "message", msg, STREAM_END_WAIT_MS);
  sbx_sse_finish(es->sse);
  sbx_sse_unref(es->sse);
  stream_free(es);
}

static void on_gone(void *ctx) { sbx_exec_stream_cancel((uint64_t)(uintptr_t)ctx); }

int sbx_mcp_tool_stream(struct sbx_req *r, struct sbx_resp *out, json_t *id, json_t *params)
{
  static const char *const drop[] = {"session_id", NULL};
  json_t *args = json_object_get(params, "arguments");
  json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
  const char *name = json_string_value(json_object_get(params, "name"));
  const char *sid = json_string_value(json_object_get(args, "session_id"));
  if (!name || strcmp(name, "session_exec") || !sid || !*sid || !json_is_object(args) ||
      !(json_is_string(tok) || json_is_integer(tok)) || !sbx_req_wants_sse(r))
    return 0;
  struct exec_stream *es = calloc(1, sizeof *es);
  if (!es || !(es->sse = sbx_sse_new(STREAM_QUEUE_BYTES))) {
    free(es);
    return 0;
  }
  es->id = json_incref(id);
  es->progress_token = json_incref(tok);
  es->token = sbx_exec_stream_token();
  /* Wired up first: the exec may end before this returns. */
  sbx_sse_respond(out, es->sse, on_gone, (void *)(uintptr_t)es->token);
  struct sbx_exec_sink sink = {.output = on_output, .exit = on_end, .ctx = es};
  json_t *body = args_without(args, drop);
  struct sbx_error err = {0};
  int rc = sbx_session_exec_stream(r->core, &r->who, sid, body, &sink, es->token, &err);
  json_decref(body);
  if (rc < 0) { /* the buffered path answers the same refusal as a tool error */
    sbx_sse_unrespond(out);
    sbx_sse_unref(es->sse);
    stream_free(es);
    return 0;
  }
  audit_as(r, "session_exec", sid, NULL, NULL);
  return 1;
}

/* ---- the table ---- */

#define S_SESSION_ID                                                                            \
  "\"session_id\":{\"type\":\"string\",\"description\":\"A session id (ses_…) from session_create\"}"
#define S_ENV                                                                                   \
  "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},\"description\":\"Environment variables\"}"
#define S_LANG                                                                                  \
  "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"bash\"],\"description\":\"Interpreter for code\"}"
#define S_CODE "\"code\":{\"type\":\"string\",\"description\":\"Source to run with language\"}"
#define S_CMD                                                                                   \
  "\"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"description\":\"argv to run instead of language+code\"}"
#define S_STDIN "\"stdin\":{\"type\":\"string\",\"description\":\"Text fed to standard input\"}"
#define S_TIMEOUT                                                                               \
  "\"timeout_s\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"Wall-clock limit in seconds; the whole process tree is killed at it\"}"
#define S_LIMITS                                                                                \
  "\"limits\":{\"type\":\"object\",\"description\":\"cpu (\\\"500m\\\"), memory (\\\"256Mi\\\"), disk, pids, timeout_s, output_bytes; never above the profile's ceiling\"}"
#define S_PROFILE                                                                               \
  "\"profile\":{\"type\":\"string\",\"description\":\"Isolation profile (container, gvisor, … see GET /v1/sandbox/profiles)\"}"
#define S_IMAGE "\"image\":{\"type\":\"string\",\"description\":\"Root filesystem image\"}"
#define S_NETWORK                                                                               \
  "\"network\":{\"type\":\"object\",\"description\":\"Egress policy, e.g. {\\\"egress\\\":\\\"allowlist\\\",\\\"allow\\\":[\\\"pypi.org\\\"]}; default none\"}"
#define S_PATH                                                                                  \
  "\"path\":{\"type\":\"string\",\"description\":\"Path inside the sandbox; relative paths are under /work\"}"

static const struct tool {
  const char *name;
  const char *title;
  const char *description;
  const char *schema;
  tool_fn fn;
  bool read_only, destructive;
} tools[] = {
    {"run_code", "Run code once",
     "Run code in a fresh sandbox that is destroyed afterwards: give language+code or "
     "command, optionally files to put in first and glob patterns of files to collect "
     "(their contents come back inline). Returns status, exit_code, stdout, stderr, "
     "files and usage.",
     "{\"type\":\"object\",\"properties\":{" S_LANG "," S_CODE "," S_CMD ","
     "\"files\":{\"type\":\"array\",\"description\":\"Files written before the run\",\"items\":"
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":"
     "\"string\"},\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]}},\"required\":"
     "[\"path\",\"content\"],\"additionalProperties\":false}},"
     "\"collect\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"Glob "
     "patterns of files to return, e.g. /work/out/*\"}," S_STDIN "," S_ENV "," S_TIMEOUT
     "," S_LIMITS "," S_PROFILE "," S_IMAGE "," S_NETWORK "},\"additionalProperties\":false}",
     tool_run_code, false, false},
    {"session_create", "Create a session",
     "Create a sandbox session that keeps its files and state between calls until deleted "
     "or its ttl_s runs out. Returns the session object; pass its id to the session_* tools.",
     "{\"type\":\"object\",\"properties\":{" S_PROFILE "," S_IMAGE "," S_LIMITS "," S_NETWORK
     "," S_ENV ",\"ttl_s\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Seconds "
     "before the session expires\"},\"metadata\":{\"type\":\"object\",\"additionalProperties\":"
     "{\"type\":\"string\"}}},\"additionalProperties\":false}",
     tool_session_create, false, false},
    {"session_exec", "Run in a session",
     "Run a command (argv) or language+code in an existing session and wait for it. "
     "Returns status, exit_code, stdout, stderr, duration_ms.",
     "{\"type\":\"object\",\"properties\":{" S_SESSION_ID "," S_LANG "," S_CODE "," S_CMD
     "," S_STDIN "," S_ENV ",\"cwd\":{\"type\":\"string\"}," S_TIMEOUT "},\"required\":"
     "[\"session_id\"],\"additionalProperties\":false}",
     tool_session_exec, false, false},
    {"session_write_file", "Write a file",
     "Write a file in a session (parents are created). content is text, or base64 with "
     "encoding \"base64\".",
     "{\"type\":\"object\",\"properties\":{" S_SESSION_ID "," S_PATH ",\"content\":{\"type\":"
     "\"string\"},\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"default\":"
     "\"utf-8\"}},\"required\":[\"session_id\",\"path\",\"content\"],\"additionalProperties\":"
     "false}",
     tool_write_file, false, false},
    {"session_read_file", "Read a file",
     "Read a file of a session (up to 1 MiB): content as text, or content_base64 when it is "
     "not UTF-8.",
     "{\"type\":\"object\",\"properties\":{" S_SESSION_ID "," S_PATH "},\"required\":"
     "[\"session_id\",\"path\"],\"additionalProperties\":false}",
     tool_read_file, true, false},
    {"session_list", "List sessions", "List this tenant's sessions (the first 100).",
     "{\"type\":\"object\",\"properties\":{\"status\":{\"type\":\"string\",\"enum\":[\"ready\","
     "\"terminated\",\"expired\",\"failed\",\"lost\"]}},\"additionalProperties\":false}",
     tool_session_list, true, false},
    {"session_delete", "Delete a session",
     "Delete a session: every process in it is killed and its files are gone.",
     "{\"type\":\"object\",\"properties\":{" S_SESSION_ID "},\"required\":[\"session_id\"],"
     "\"additionalProperties\":false}",
     tool_session_delete, false, true},
};

json_t *sbx_mcp_tools_list(struct sbx_req *r)
{
  json_t *arr = json_array();
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
    const struct tool *t = &tools[i];
    json_t *schema = json_loads(t->schema, 0, NULL); /* a literal: a typo fails the tests */
    json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b}}", "name",
                                         t->name, "title", t->title, "description",
                                         t->description, "inputSchema",
                                         schema ? schema : json_object(), "annotations", "title",
                                         t->title, "readOnlyHint", t->read_only,
                                         "destructiveHint", t->destructive, "openWorldHint", 0));
  }
  list_applied(r, arr);
  return arr;
}

/* A run the service could not carry out (status "error"): the tool failed.
 * A program that exits non-zero is a result the model reads, not a failure. */
static bool is_service_error(json_t *res)
{
  const char *st = json_string_value(json_object_get(res, "status"));
  return st && !strcmp(st, "error");
}

json_t *sbx_mcp_tool_call(struct sbx_req *r, const char *name, json_t *args)
{
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
    if (strcmp(tools[i].name, name))
      continue;
    struct sbx_error err = {0};
    json_t *res = tools[i].fn(r, args, &err);
    if (!res && err.code == SBX_E_NONE)
      sbx_err_set(&err, SBX_E_INTERNAL, 0, "internal error");
    return res ? text_result(res, is_service_error(res)) : error_result(&err, NULL);
  }
  struct sbx_error err = {0};
  json_t *violations = NULL;
  json_t *res = call_applied(r, name, args, &violations, &err);
  if (res)
    return text_result(res, is_service_error(res));
  if (err.code == SBX_E_NOT_FOUND) /* invoke's only NOT_FOUND: no such tool */
    return NULL;
  if (violations) /* the model reads which argument was wrong */
    sbx_envelope_localise(violations, r->lang);
  return error_result(&err, violations);
}
