/* e2b_code.c — the code interpreter's routes (@e2b/code-interpreter) over
 * our stateful contexts (core/context*.c): POST /execute runs code in the
 * context it names, or in the sandbox's default context of the language
 * (made on first use, so state is kept between calls), and answers the
 * JSON lines the SDK parses (stdout, stderr, result with text and rich
 * outputs such as png, error with its traceback, number_of_executions);
 * /contexts creates, lists, removes and restarts contexts.  The answer
 * streams: stdout and stderr lines go out as the code prints them (the
 * run's watcher, core/context_run.c), so the SDK's onStdout/onStderr fire
 * while it runs; results, the error and the count follow at the end. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b.h"
#include "api/handlers.h"
#include "api/sse.h"
#include "common/util.h"
#include "core/core.h"
#include "core/resources.h"

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

/* ---- /execute ---- */

#define QUEUE_BYTES (16u << 20)   /* lines waiting for a slow client, budgets permitting */
#define QUEUE_FLOOR (256u * 1024) /* ... however full the budgets are */
#define PUSH_WAIT_MS 5000         /* how long a line waits for room, until one did not */

/* One stream's bytes as JSON text: a UTF-8 sequence cut by the end of a
 * chunk waits for the next one; an invalid byte becomes U+FFFD. */
struct carry {
  unsigned char b[4];
  size_t n;
};

/* The valid UTF-8 sequence at s (n bytes left): its length, 0 if it is
 * cut short but may still be valid, -1 if it is not valid. */
static int seq_len(const unsigned char *s, size_t n)
{
  unsigned char c = s[0], lo = 0x80, hi = 0xBF;
  int len;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4)
    len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else
    return -1;
  for (int i = 1; i < len; i++) {
    if ((size_t)i >= n)
      return 0;
    if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF))
      return -1;
  }
  return len;
}

/* end: nothing follows, a cut sequence is invalid too. */
static json_t *utf8_text(struct carry *k, const char *data, size_t len, bool end)
{
  size_t n = k->n + len, o = 0;
  unsigned char *in = malloc(n + 1), *out = malloc(3 * n + 1);
  json_t *text = NULL;
  if (in && out) {
    memcpy(in, k->b, k->n);
    memcpy(in + k->n, data, len);
    k->n = 0;
    for (size_t i = 0; i < n;) {
      int l = seq_len(in + i, n - i);
      if (l == 0 && !end) {
        k->n = n - i;
        memcpy(k->b, in + i, k->n);
        break;
      }
      if (l > 0) {
        memcpy(out + o, in + i, (size_t)l);
        o += (size_t)l, i += (size_t)l;
      } else {
        memcpy(out + o, "\xef\xbf\xbd", 3);
        o += 3, i++;
      }
    }
    text = json_stringn((const char *)out, o);
  }
  free(in);
  free(out);
  return text;
}

/* A run on its own thread, its lines streamed as they come: the handler
 * waits until the code went to the interpreter (then answers the stream)
 * or the run was refused (then answers the error). */
struct job {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int refs; /* lock: the handler's and the thread's */
  bool started, done;
  int rc;
  struct sbx_error err;
  struct sbx_sse *sse;
  struct sbx_core *core;
  struct sbx_principal who;
  char sid[256], lang[16], given[64];
  uint64_t queue_mem; /* the queue's charge to the output budgets */
  json_t *run;
  struct carry carry[2];
  bool slow;     /* a line found no room in time: the next ones do not wait */
  uint64_t lost; /* bytes of lines the client was too slow to take */
};

static void job_unref(struct job *j)
{
  pthread_mutex_lock(&j->lock);
  bool last = --j->refs == 0;
  pthread_mutex_unlock(&j->lock);
  if (!last)
    return;
  sbx_res_mem_give(j->who.tenant_id, j->queue_mem);
  sbx_res_fds_give(j->who.tenant_id, j->sid, SBX_RES_FDS_STREAM);
  sbx_sse_unref(j->sse);
  json_decref(j->run);
  pthread_cond_destroy(&j->cond);
  pthread_mutex_destroy(&j->lock);
  free(j);
}

static void line(struct job *j, json_t *o)
{
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!s)
    return;
  size_t n = strlen(s);
  s[n] = '\n'; /* json_dumps NUL-terminates: that byte becomes the newline */
  int rc = sbx_sse_push_raw(j->sse, s, n + 1, j->slow ? 0 : PUSH_WAIT_MS);
  if (rc == 1) {
    j->slow = true;
    j->lost += n + 1;
  } else if (rc == 0) {
    j->slow = false;
  }
}

static void text_line(struct job *j, const char *type, json_t *v)
{
  if (json_is_string(v) && json_string_length(v))
    line(j, json_pack("{s:s, s:O}", "type", type, "text", v));
  json_decref(v);
}

static void on_started(void *arg)
{
  struct job *j = arg;
  pthread_mutex_lock(&j->lock);
  j->started = true;
  pthread_cond_broadcast(&j->cond);
  pthread_mutex_unlock(&j->lock);
}

static void on_output(void *arg, int stream, const char *data, size_t len)
{
  struct job *j = arg;
  int i = stream == 2 ? 1 : 0;
  text_line(j, i ? "stderr" : "stdout", utf8_text(&j->carry[i], data, len, false));
}

/* Our run result → the lines the SDK's parseOutput reads after the
 * streamed stdout/stderr. */
static void result_lines(struct job *j, json_t *res)
{
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
      line(j, json_pack("{s:s, s:O, s:b}", "type", "result", kind, json_object_get(o, "data"),
                        "is_main_result", 0));
  }
  json_t *main = json_object_get(res, "result"), *e = json_object_get(res, "error");
  if (json_is_string(main))
    line(j, json_pack("{s:s, s:O, s:b}", "type", "result", "text", main, "is_main_result", 1));
  const char *status = json_string_value(json_object_get(res, "status")) ?: "";
  if (json_is_object(e))
    line(j, json_pack("{s:s, s:O, s:O, s:O}", "type", "error", "name",
                      json_object_get(e, "name"), "value", json_object_get(e, "value"),
                      "traceback", json_object_get(e, "traceback")));
  else if (strcmp(status, "succeeded") != 0) /* timeout, killed: no exception of the code's */
    line(j, json_pack("{s:s, s:s, s:O?, s:s}", "type", "error", "name",
                      !strcmp(status, "timeout") ? "TimeoutError" : "ExecutionError", "value",
                      json_object_get(res, "reason"), "traceback", ""));
  line(j, json_pack("{s:s, s:O}", "type", "number_of_executions", "execution_count",
                    json_object_get(res, "execution_count")));
}

static int new_context(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *lang, json_t **ctx, struct sbx_error *err)
{
  json_t *body = json_pack("{s:s}", "language", lang);
  int rc = sbx_context_create(core, who, sid, body, ctx, err);
  json_decref(body);
  return rc;
}

static int default_context(struct job *j, bool fresh, char cid[64], struct sbx_error *err)
{
  if (!fresh && default_get(j->sid, j->lang, cid))
    return 0;
  json_t *c = NULL;
  if (new_context(j->core, &j->who, j->sid, j->lang, &c, err) < 0)
    return -1;
  snprintf(cid, 64, "%s", json_string_value(json_object_get(c, "id")) ?: "");
  json_decref(c);
  default_set(j->sid, j->lang, cid);
  return 0;
}

/* Runs in the given context or the default one; a default context that
 * vanished (deleted by id) is made again, once, while the sandbox lives. */
static int run_in(struct job *j, const struct sbx_run_watch *w, json_t **res,
                  struct sbx_error *err)
{
  char cid[64];
  if (j->given[0])
    return sbx_context_run_watched(j->core, &j->who, j->sid, j->given, j->run, w, res, err);
  if (default_context(j, false, cid, err) < 0)
    return -1;
  if (sbx_context_run_watched(j->core, &j->who, j->sid, cid, j->run, w, res, err) == 0)
    return 0;
  json_t *probe = NULL;
  struct sbx_error ignore = {0};
  if (j->started || err->code != SBX_E_NOT_FOUND ||
      sbx_context_get(j->core, &j->who, j->sid, cid, &probe, &ignore) == 0 ||
      ignore.code != SBX_E_NOT_FOUND) {
    json_decref(probe);
    return -1;
  }
  sbx_err_clear(err);
  if (default_context(j, true, cid, err) < 0)
    return -1;
  return sbx_context_run_watched(j->core, &j->who, j->sid, cid, j->run, w, res, err);
}

static void *exec_main(void *arg)
{
  struct job *j = arg;
  struct sbx_run_watch w = {.started = on_started, .output = on_output, .arg = j};
  struct sbx_error err = {0};
  json_t *res = NULL;
  int rc = run_in(j, &w, &res, &err);
  if (j->started) {
    for (int i = 0; i < 2; i++)
      text_line(j, i ? "stderr" : "stdout", utf8_text(&j->carry[i], "", 0, true));
    if (j->lost) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "sandboxd: %llu bytes of this run's output were dropped: the client read "
               "them too slowly\n",
               (unsigned long long)j->lost);
      j->slow = false;
      line(j, json_pack("{s:s, s:s}", "type", "stderr", "text", msg));
    }
    if (rc == 0)
      result_lines(j, res);
    else /* cannot happen once started, but a stream must say how it ended */
      line(j, json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", "ExecutionError",
                        "value", err.msg, "traceback", ""));
  }
  json_decref(res);
  pthread_mutex_lock(&j->lock);
  j->done = true;
  j->rc = rc;
  j->err = err;
  pthread_cond_broadcast(&j->cond);
  pthread_mutex_unlock(&j->lock);
  sbx_sse_finish(j->sse);
  job_unref(j);
  sbx_core_thread_leave();
  return NULL;
}

/* The job and its thread; the stream's connection is charged to the
 * session's fds (429 over) and its queue to the output budgets. */
static struct job *job_new(struct sbx_req *r, const char *lang, json_t *ctx, json_t *code,
                           struct sbx_error *err)
{
  const char *sid = sbx_e2b_sid(r);
  if (sbx_res_fds_take(r->core, r->who.tenant_id, sid, SBX_RES_FDS_STREAM, err) < 0)
    return NULL;
  struct job *j = calloc(1, sizeof *j);
  if (j)
    j->queue_mem = sbx_res_mem_take(r->core, r->who.tenant_id, QUEUE_BYTES, QUEUE_FLOOR);
  if (!j || !(j->sse = sbx_sse_new(j->queue_mem))) {
    if (j)
      sbx_res_mem_give(r->who.tenant_id, j->queue_mem);
    sbx_res_fds_give(r->who.tenant_id, sid, SBX_RES_FDS_STREAM);
    free(j);
    sbx_err_sys(err, ENOMEM, "execute");
    return NULL;
  }
  pthread_mutex_init(&j->lock, NULL);
  pthread_cond_init(&j->cond, NULL);
  j->refs = 2;
  j->core = r->core;
  j->who = r->who;
  snprintf(j->sid, sizeof j->sid, "%s", sid);
  snprintf(j->lang, sizeof j->lang, "%s", lang);
  snprintf(j->given, sizeof j->given, "%s", json_string_value(ctx) ?: "");
  j->run = json_pack("{s:O}", "code", code);
  sbx_core_thread_enter(); /* shutdown waits for it: it uses the core */
  int rc = sbx_thread_detached(exec_main, j);
  if (rc != 0) {
    sbx_core_thread_leave();
    j->refs = 1;
    job_unref(j);
    sbx_err_sys(err, rc, "execute");
    return NULL;
  }
  return j;
}

int sbx_h_e2b_execute(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, false, err);
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
  struct job *j = rc == 0 ? job_new(r, lang, ctx, code, err) : NULL;
  json_decref(in);
  if (!j)
    return -1;
  pthread_mutex_lock(&j->lock);
  while (!j->started && !j->done)
    pthread_cond_wait(&j->cond, &j->lock);
  bool refused = !j->started;
  if (refused)
    *err = j->err;
  pthread_mutex_unlock(&j->lock);
  if (!refused)
    sbx_sse_respond_raw(out, j->sse, "application/x-ndjson", NULL, NULL);
  job_unref(j);
  return refused ? -1 : 0;
}

/* ---- /contexts ---- */

int sbx_h_e2b_ctx_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *in = sbx_req_json(r, true, err), *c = NULL;
  if (!in)
    return -1;
  const char *lang = our_language(json_object_get(in, "language"), err);
  json_decref(in);
  if (!lang || new_context(r->core, &r->who, sbx_e2b_sid(r), lang, &c, err) < 0)
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
