/* e2b_code.c — the code interpreter's routes (@e2b/code-interpreter) over
 * our stateful contexts (core/context*.c): POST /execute runs code in the
 * context it names, or in the sandbox's default context of the language
 * (made on first use, so state is kept between calls), and answers the
 * JSON lines the SDK parses (stdout, stderr, result with text and rich
 * outputs such as png, error with its traceback, number_of_executions);
 * /contexts creates, lists, removes and restarts contexts.  The run is
 * done when the answer is sent: lines are written in one piece, so the
 * SDK's streaming callbacks all fire at the end of a run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b.h"
#include "api/handlers.h"
#include "core/core.h"

#define MAX_DEFAULTS 4096

/* sandbox + language → its default context; a stale entry is replaced. */
static struct {
  char sid[64], lang[16], cid[64];
} defaults[MAX_DEFAULTS];
static size_t ndefaults, next_victim;
static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;

static bool default_get(const char *sid, const char *lang, char cid[64])
{
  bool found = false;
  pthread_mutex_lock(&defaults_lock);
  for (size_t i = 0; i < ndefaults && !found; i++)
    if (!strcmp(defaults[i].sid, sid) && !strcmp(defaults[i].lang, lang)) {
      snprintf(cid, 64, "%s", defaults[i].cid);
      found = true;
    }
  pthread_mutex_unlock(&defaults_lock);
  return found;
}

static void default_set(const char *sid, const char *lang, const char *cid)
{
  pthread_mutex_lock(&defaults_lock);
  size_t at = ndefaults;
  for (size_t i = 0; i < ndefaults; i++)
    if (!strcmp(defaults[i].sid, sid) && !strcmp(defaults[i].lang, lang))
      at = i;
  if (at == ndefaults && ndefaults < MAX_DEFAULTS)
    ndefaults++;
  else if (at == ndefaults) /* full: the oldest slot goes (its context stays usable by id) */
    at = next_victim++ % MAX_DEFAULTS;
  snprintf(defaults[at].sid, sizeof defaults[at].sid, "%s", sid);
  snprintf(defaults[at].lang, sizeof defaults[at].lang, "%s", lang);
  snprintf(defaults[at].cid, sizeof defaults[at].cid, "%s", cid);
  pthread_mutex_unlock(&defaults_lock);
}

/* E2B's language names → ours. */
static const char *our_language(json_t *v, struct sbx_error *err)
{
  const char *l = json_string_value(v);
  if (!v || json_is_null(v) || (l && !strcmp(l, "python")))
    return "python";
  if (l && (!strcmp(l, "javascript") || !strcmp(l, "js") || !strcmp(l, "node")))
    return "node";
  sbx_err_field(err, "language",
                "language %.40s is not available: sandboxd's contexts run "
                "python and javascript",
                l ? l : "(not a string)");
  sbx_err_fr(err, "Le langage %.40s n'est pas disponible (python, javascript)", l ? l : "?");
  return NULL;
}

static json_t *context_json(json_t *c)
{
  const char *l = json_string_value(json_object_get(c, "language"));
  return json_pack("{s:O, s:s, s:s}", "id", json_object_get(c, "id"), "language",
                   l && !strcmp(l, "node") ? "javascript"
                   : l                     ? l
                                           : "python",
                   "cwd", "/work");
}

static int new_context(struct sbx_req *r, const char *lang, json_t **ctx, struct sbx_error *err)
{
  json_t *body = json_pack("{s:s}", "language", lang);
  int rc = sbx_context_create(r->core, &r->who, sbx_e2b_sid(r), body, ctx, err);
  json_decref(body);
  return rc;
}

/* ---- /execute ---- */

struct lines {
  char *buf;
  size_t len;
  FILE *f;
};

static void line(struct lines *l, json_t *o)
{
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (s)
    fprintf(l->f, "%s\n", s);
  free(s);
}

static void text_line(struct lines *l, const char *type, json_t *v)
{
  if (json_is_string(v) && json_string_length(v))
    line(l, json_pack("{s:s, s:O}", "type", type, "text", v));
}

/* Our run result → the lines the SDK's parseOutput reads. */
static void result_lines(struct lines *l, json_t *res)
{
  text_line(l, "stdout", json_object_get(res, "stdout"));
  text_line(l, "stderr", json_object_get(res, "stderr"));
  json_t *o;
  size_t i;
  json_array_foreach(json_object_get(res, "outputs"), i, o)
  {
    const char *mt = json_string_value(json_object_get(o, "mime_type"));
    const char *kind = !mt                            ? NULL
                       : !strcmp(mt, "image/png")     ? "png"
                       : !strcmp(mt, "image/jpeg")    ? "jpeg"
                       : !strcmp(mt, "image/svg+xml") ? "svg"
                       : !strcmp(mt, "text/html")     ? "html"
                                                      : NULL;
    if (kind)
      line(l, json_pack("{s:s, s:O, s:b}", "type", "result", kind, json_object_get(o, "data"),
                        "is_main_result", 0));
  }
  json_t *main = json_object_get(res, "result"), *e = json_object_get(res, "error");
  if (json_is_string(main))
    line(l, json_pack("{s:s, s:O, s:b}", "type", "result", "text", main, "is_main_result", 1));
  const char *status = json_string_value(json_object_get(res, "status")) ?: "";
  if (json_is_object(e))
    line(l, json_pack("{s:s, s:O, s:O, s:O}", "type", "error", "name",
                      json_object_get(e, "name"), "value", json_object_get(e, "value"),
                      "traceback", json_object_get(e, "traceback")));
  else if (strcmp(status, "succeeded") != 0) /* timeout, killed: no exception of the code's */
    line(l, json_pack("{s:s, s:s, s:O?, s:s}", "type", "error", "name",
                      !strcmp(status, "timeout") ? "TimeoutError" : "ExecutionError", "value",
                      json_object_get(res, "reason"), "traceback", ""));
  line(l, json_pack("{s:s, s:O}", "type", "number_of_executions", "execution_count",
                    json_object_get(res, "execution_count")));
}

static int default_context(struct sbx_req *r, const char *lang, bool fresh, char cid[64],
                           struct sbx_error *err)
{
  const char *sid = sbx_e2b_sid(r);
  if (!fresh && default_get(sid, lang, cid))
    return 0;
  json_t *c = NULL;
  if (new_context(r, lang, &c, err) < 0)
    return -1;
  snprintf(cid, 64, "%s", json_string_value(json_object_get(c, "id")) ?: "");
  json_decref(c);
  default_set(sid, lang, cid);
  return 0;
}

/* Runs in the given context or the default one; a default context that
 * vanished (deleted by id) is made again, once, while the sandbox lives. */
static int run_in(struct sbx_req *r, const char *lang, const char *given, json_t *run,
                  json_t **res, struct sbx_error *err)
{
  const char *sid = sbx_e2b_sid(r);
  char cid[64];
  if (given)
    return sbx_context_run(r->core, &r->who, sid, given, run, res, err);
  if (default_context(r, lang, false, cid, err) < 0)
    return -1;
  if (sbx_context_run(r->core, &r->who, sid, cid, run, res, err) == 0)
    return 0;
  json_t *probe = NULL;
  struct sbx_error ignore = {0};
  if (err->code != SBX_E_NOT_FOUND ||
      sbx_context_get(r->core, &r->who, sid, cid, &probe, &ignore) == 0 ||
      ignore.code != SBX_E_NOT_FOUND) {
    json_decref(probe);
    return -1;
  }
  sbx_err_clear(err);
  if (default_context(r, lang, true, cid, err) < 0)
    return -1;
  return sbx_context_run(r->core, &r->who, sid, cid, run, res, err);
}

int sbx_h_e2b_execute(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, false, err), *res = NULL;
  if (!in)
    return -1;
  json_t *code = json_object_get(in, "code"), *ctx = json_object_get(in, "context_id");
  json_t *envs = json_object_get(in, "env_vars");
  const char *lang = our_language(json_object_get(in, "language"), err);
  int rc = lang ? 0 : -1;
  if (rc == 0 && !json_is_string(code))
    rc = sbx_err_field(err, "code", "code must be a string");
  if (rc == 0 && ctx && !json_is_null(ctx) && !json_is_string(ctx))
    rc = sbx_err_field(err, "context_id", "context_id must be a string");
  if (rc == 0 && json_object_size(envs))
    rc = sbx_err_field(err, "env_vars",
                       "per-run env_vars are not supported: set envs when the "
                       "sandbox is created");
  json_t *run = rc == 0 ? json_pack("{s:O}", "code", code) : NULL;
  if (rc == 0)
    rc = run_in(r, lang, json_string_value(ctx), run, &res, err);
  json_decref(run);
  json_decref(in);
  if (rc < 0)
    return -1;
  struct lines l = {0};
  l.f = open_memstream(&l.buf, &l.len);
  if (!l.f) {
    json_decref(res);
    return sbx_err_sys(err, errno, "execute");
  }
  result_lines(&l, res);
  fclose(l.f);
  json_decref(res);
  sbx_resp_bytes(out, 200, l.buf, l.len, "application/x-ndjson");
  return 0;
}

/* ---- /contexts ---- */

int sbx_h_e2b_ctx_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, true, err), *c = NULL;
  if (!in)
    return -1;
  const char *lang = our_language(json_object_get(in, "language"), err);
  json_decref(in);
  if (!lang || new_context(r, lang, &c, err) < 0)
    return -1;
  sbx_resp_json(out, 200, context_json(c));
  json_decref(c);
  return 0;
}

int sbx_h_e2b_ctx_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res = NULL, *arr = json_array(), *c;
  if (sbx_context_list(r->core, &r->who, sbx_e2b_sid(r), &res, err) < 0) {
    json_decref(arr);
    return -1;
  }
  size_t i;
  json_array_foreach(json_object_get(res, "contexts"), i, c)
      json_array_append_new(arr, context_json(c));
  json_decref(res);
  sbx_resp_json(out, 200, arr);
  return 0;
}

int sbx_h_e2b_ctx_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  if (sbx_context_delete(r->core, &r->who, sbx_e2b_sid(r), r->params[1], err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_e2b_ctx_restart(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res = NULL;
  if (sbx_context_restart(r->core, &r->who, sbx_e2b_sid(r), r->params[1], &res, err) < 0)
    return -1;
  json_decref(res);
  sbx_resp_empty(out, 204);
  return 0;
}
