/* context_run.c — POST …/contexts/{cid}/run: one piece of code in a
 * context's interpreter, and its result:
 *   {status, reason, stdout, stderr, *_encoding, *_truncated, result,
 *    outputs[], error, duration_ms, execution_count}
 * status/reason: succeeded/completed, failed/exception (error is the
 * exception), timeout/timeout (the interpreter was killed at timeout_s: the
 * context is dead until restarted), killed/<why> (the interpreter died
 * during the run: crash, restart, the session ended), error/protocol (the
 * interpreter broke the driver protocol; it is killed).  One run at a time
 * per context (another → 409).  A watched run (sbx_context_run_watched)
 * also hands its output to the watcher as it comes, from the waiting loop. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/context_int.h"
#include "core/resources.h"

#define SEND_TIMEOUT_MS 10000
#define START_WAIT_MS 30000
#define KILL_WAIT_MS 10000

struct run_args {
  const char *code;
  double timeout_s;
  uint64_t max_output; /* per stream, the driver's capture */
  uint64_t live_cap;   /* per stream, a streamed run's queue (output budgets) */
};

static int parse_run(json_t *body, uint64_t max_s, struct run_args *a, struct sbx_error *err)
{
  static const char *const allowed[] = {"code", "timeout_s", NULL};
  if (sbx_schema_only(body, "", allowed, err) < 0)
    return -1;
  json_t *code = json_object_get(body, "code");
  if (!json_is_string(code)) {
    sbx_err_field(err, "code", "code must be a string");
    return sbx_err_fr(err, "Requête invalide : code doit être une chaîne");
  }
  a->code = json_string_value(code);
  a->timeout_s = 0;
  json_t *t = json_object_get(body, "timeout_s");
  if (t && !json_is_null(t)) {
    double v = json_number_value(t);
    if (!json_is_number(t) || !(v > 0) || !isfinite(v) || (max_s && v > (double)max_s)) {
      sbx_err_field(err, "timeout_s", "timeout_s must be a number of seconds > 0 and <= %llu",
                    (unsigned long long)max_s);
      return sbx_err_fr(err,
                        "Requête invalide : timeout_s doit être un nombre de secondes "
                        "> 0 et <= %llu",
                        (unsigned long long)max_s);
    }
    a->timeout_s = v;
  }
  return 0;
}

/* Takes the context for one run (lock held): ready → busy. */
static int claim_locked(struct sbx_context *c, struct sbx_error *err)
{
  uint64_t deadline = sbx_now_ms() + START_WAIT_MS;
  while (c->state == SBX_CTX_STARTING && sbx_ctx_wait_locked(c, deadline))
    ;
  if (c->state == SBX_CTX_READY) {
    c->state = SBX_CTX_BUSY;
    return 0;
  }
  if (c->state == SBX_CTX_DEAD) {
    sbx_err_set(err, SBX_E_CONFLICT, 0,
                "context %s is dead (%s); POST …/contexts/%s/restart "
                "starts a fresh interpreter",
                c->id, c->dead_why, c->id);
    return sbx_err_fr(err,
                      "Le contexte %s est mort (%s) ; POST …/contexts/%s/restart "
                      "démarre un nouvel interpréteur",
                      c->id, c->dead_why, c->id);
  }
  sbx_err_set(err, SBX_E_CONFLICT, 0, "context %s is %s: one run at a time", c->id,
              c->state == SBX_CTX_BUSY ? "busy with another run" : "still starting");
  return sbx_err_fr(err, "Le contexte %s est occupé : une exécution à la fois", c->id);
}

static json_t *err_obj(const char *name, const char *value)
{
  return json_pack("{s:s, s:s, s:s}", "name", name, "value", value, "traceback", "");
}

/* The driver's reply, checked field by field (it is sandbox output). */
static json_t *checked_outputs(json_t *reply)
{
  json_t *arr = json_array(), *o;
  size_t i;
  json_array_foreach(json_object_get(reply, "outputs"), i, o)
  {
    const char *mt = json_string_value(json_object_get(o, "mime_type"));
    const char *data = json_string_value(json_object_get(o, "data"));
    if (mt && data)
      json_array_append_new(arr, json_pack("{s:s, s:s}", "mime_type", mt, "data", data));
  }
  return arr;
}

static json_t *checked_error(json_t *reply)
{
  json_t *e = json_object_get(reply, "error");
  if (!json_is_object(e))
    return json_null();
  const char *n = json_string_value(json_object_get(e, "name"));
  const char *v = json_string_value(json_object_get(e, "value"));
  const char *tb = json_string_value(json_object_get(e, "traceback"));
  return json_pack("{s:s, s:s, s:s}", "name", n ? n : "Error", "value", v ? v : "", "traceback",
                   tb ? tb : "");
}

/* stdout/stderr: what the driver captured, then what went around it. */
static void set_stream(json_t *o, const char *name, json_t *reply, const struct sbx_context *c,
                       int idx)
{
  const char *cap = reply ? json_string_value(json_object_get(reply, name)) : NULL;
  size_t clen = cap ? json_string_length(json_object_get(reply, name)) : 0;
  size_t slen = c->stray_len[idx];
  char *buf = malloc(clen + slen + 1);
  if (buf) {
    memcpy(buf, cap ? cap : "", clen);
    if (slen)
      memcpy(buf + clen, c->stray[idx], slen);
  }
  sbx_json_set_output(o, name, buf ? buf : "", buf ? clen + slen : 0);
  free(buf);
  char key[32];
  snprintf(key, sizeof key, "%s_truncated", name);
  json_t *tr = reply ? json_object_get(reply, key) : NULL;
  json_object_set_new(o, key, json_boolean(json_is_true(tr) || c->stray_dropped[idx] > 0));
}

static json_t *result_json(struct sbx_context *c, json_t *reply, const char *status,
                           const char *reason, json_t *error, uint64_t ms)
{
  const char *res = reply ? json_string_value(json_object_get(reply, "result")) : NULL;
  json_t *o =
      json_pack("{s:s, s:s, s:o, s:o, s:o, s:I, s:I}", "status", status, "reason", reason,
                "result", res ? json_string(res) : json_null(), "outputs",
                reply ? checked_outputs(reply) : json_array(), "error", error, "duration_ms",
                (json_int_t)ms, "execution_count", (json_int_t)c->execution_count);
  set_stream(o, "stdout", reply, c, 0);
  set_stream(o, "stderr", reply, c, 1);
  return o;
}

/* The run did not answer in time (or broke the protocol): kill the
 * interpreter and wait until it is gone (lock held). */
static void kill_and_wait_locked(struct sbx_context *c, enum sbx_ctx_kill why, uint64_t inc)
{
  sbx_ctx_poke_locked(c, why);
  uint64_t deadline = sbx_now_ms() + KILL_WAIT_MS;
  while (c->state != SBX_CTX_DEAD && c->incarnation == inc && sbx_ctx_wait_locked(c, deadline))
    ;
}

/* After the wait: what became of the run (lock held). */
static json_t *outcome_locked(struct sbx_context *c, uint64_t inc, double timeout_s, uint64_t t0)
{
  if (c->reply && c->incarnation == inc) {
    json_t *ec = json_object_get(c->reply, "execution_count");
    if (json_is_integer(ec) && json_integer_value(ec) >= 0)
      c->execution_count = (uint64_t)json_integer_value(ec);
    if (c->state == SBX_CTX_BUSY)
      c->state = SBX_CTX_READY;
    json_t *error = checked_error(c->reply);
    bool failed = !json_is_null(error);
    return result_json(c, c->reply, failed ? "failed" : "succeeded",
                       failed ? "exception" : "completed", error, sbx_now_ms() - t0);
  }
  bool alive = c->state == SBX_CTX_BUSY && c->incarnation == inc;
  if (alive && c->proto_error) {
    kill_and_wait_locked(c, SBX_CTX_KILL_PROTOCOL, inc);
    return result_json(c, NULL, "error", "protocol",
                       err_obj("ProtocolError", "the interpreter broke the driver protocol "
                                                "and was killed; restart the context"),
                       sbx_now_ms() - t0);
  }
  if (alive) {
    kill_and_wait_locked(c, SBX_CTX_KILL_TIMEOUT, inc);
    char msg[256];
    snprintf(msg, sizeof msg,
             "the run exceeded timeout_s (%g s): the interpreter was killed "
             "and its state is lost; restart the context",
             timeout_s);
    return result_json(c, NULL, "timeout", "timeout", err_obj("Timeout", msg),
                       sbx_now_ms() - t0);
  }
  return result_json(c, NULL, "killed",
                     c->dead_quota ? "quota" : sbx_reason_name(c->dead_reason),
                     err_obj("InterpreterDied", c->dead_why), sbx_now_ms() - t0);
}

/* Hands the queued output to the watcher a chunk at a time, the lock
 * dropped meanwhile (as a wait on c->cond would: the run stays ours, state
 * may move on); each delivered chunk's cost goes back to its stream's
 * budget.  A slow watcher (a client reading slowly) must not keep the run
 * past its deadline, nor a context that was restarted, deleted or ended:
 * false then, and what is still queued is dropped with the run. */
static bool deliver_locked(struct sbx_context *c, const struct sbx_run_watch *w, uint64_t inc,
                           uint64_t seq, uint64_t deadline)
{
  while (w && c->live_head) {
    if (sbx_now_ms() >= deadline || c->incarnation != inc || c->seq != seq || c->deleted ||
        c->ended)
      return false;
    struct sbx_ctx_chunk *ch = c->live_head;
    if (!(c->live_head = ch->next))
      c->live_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    if (w->output)
      w->output(w->arg, ch->stream, ch->data, ch->len);
    pthread_mutex_lock(&c->lock);
    if (c->live && c->seq == seq)
      c->live_left[ch->stream - 1] += ch->cost;
    free(ch);
  }
  return true;
}

static int run_locked(struct sbx_context *c, const struct run_args *a,
                      const struct sbx_run_watch *w, json_t **out, struct sbx_error *err)
{
  if (claim_locked(c, err) < 0)
    return -1;
  sbx_ctx_reset_run_locked(c);
  if (w) {
    c->live = true;
    c->live_left[0] = c->live_left[1] = a->live_cap;
  }
  uint64_t inc = c->incarnation, seq = ++c->seq, t0 = sbx_now_ms();
  json_t *req =
      json_pack("{s:s, s:I, s:s, s:I, s:b}", "op", "run", "seq", (json_int_t)seq, "code",
                a->code, "max_output", (json_int_t)a->max_output, "stream", w != NULL);
  int rc = req ? sbx_ctx_send_locked(c, req, SEND_TIMEOUT_MS, err)
               : sbx_err_sys(err, ENOMEM, "context request");
  json_decref(req);
  if (rc < 0) {
    if (c->state == SBX_CTX_BUSY && c->incarnation == inc)
      kill_and_wait_locked(c, SBX_CTX_KILL_PROTOCOL, inc); /* stuck: never half-sent again */
    return -1;
  }
  if (w && w->started) {
    pthread_mutex_unlock(&c->lock);
    w->started(w->arg);
    pthread_mutex_lock(&c->lock);
  }
  uint64_t deadline = t0 + (uint64_t)llround(a->timeout_s * 1000.0);
  for (;;) {
    if (!deliver_locked(c, w, inc, seq, deadline) || c->reply || c->proto_error ||
        c->incarnation != inc || c->state != SBX_CTX_BUSY || sbx_now_ms() >= deadline ||
        (!c->live_head && !sbx_ctx_wait_locked(c, deadline)))
      break;
  }
  deliver_locked(c, w, inc, seq, deadline);
  *out = outcome_locked(c, inc, a->timeout_s, t0);
  sbx_ctx_reset_run_locked(c);
  return 0;
}

int sbx_context_run(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                    const char *cid, json_t *body, json_t **out, struct sbx_error *err)
{
  return sbx_context_run_watched(core, who, sid, cid, body, NULL, out, err);
}

int sbx_context_run_watched(struct sbx_core *core, const struct sbx_principal *who,
                            const char *sid, const char *cid, json_t *body,
                            const struct sbx_run_watch *watch, json_t **out,
                            struct sbx_error *err)
{
  if (sbx_quota_cpu_check(core, who, err) < 0) /* a run burns the session's CPU */
    return -1;
  struct sbx_live_session *ls;
  struct sbx_context *c = sbx_ctx_lookup(core, who, sid, cid, &ls, err);
  if (!c)
    return -1;
  struct run_args a = {0};
  int rc = parse_run(body, ls->profile->max.timeout_s, &a, err);
  if (rc == 0) {
    if (!(a.timeout_s > 0))
      a.timeout_s = (double)ls->limits.timeout_s;
    if (!(a.timeout_s > 0))
      a.timeout_s = 30;
    a.max_output = ls->limits.output_bytes ? ls->limits.output_bytes : 1u << 20;
    /* A streamed run's queue is daemon memory held for the tenant: charged
     * to the output budgets like a buffered exec's capture. */
    uint64_t held = 0;
    if (watch)
      a.live_cap = sbx_res_output_take(core, ls->tenant_id, a.max_output, &held);
    pthread_mutex_lock(&c->lock);
    rc = run_locked(c, &a, watch, out, err);
    pthread_mutex_unlock(&c->lock);
    sbx_res_mem_give(ls->tenant_id, held);
  }
  sbx_ctx_unref(c);
  sbx_session_release(core, ls);
  return rc;
}
