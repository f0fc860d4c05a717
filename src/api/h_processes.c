/* h_processes.c — /v1/sandbox/sessions/{id}/processes[/{pid}[/output|
 * /stdin|/signal|/resize]] and the background start of POST …/exec.
 * A follower of …/output (SSE) is a thread of its own that
 * replays the kept output from the asked offsets and then follows the
 * process live; it waits for a slow client (the process never does: its
 * output goes to bounded buffers) and ends with `exit` once the process
 * has ended and everything kept was sent. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "api/sse.h"
#include "common/util.h"
#include "core/core.h"
#include "core/resources.h"

#define FOLLOW_QUEUE_BYTES (1u << 20)
#define POLL_MS 1000 /* how often a silent follower checks its client */

int sbx_api_process_start(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                          struct sbx_error *err)
{
  json_t *res;
  if (sbx_process_start(r->core, &r->who, r->params[0], body, &res, err) < 0)
    return -1;
  snprintf(out->location, sizeof out->location, "/v1/sandbox/sessions/%s/processes/%lld",
           r->params[0], (long long)json_integer_value(json_object_get(res, "pid")));
  sbx_resp_json(out, 202, res);
  return 0;
}

int sbx_h_process_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res;
  if (sbx_process_list(r->core, &r->who, r->params[0], &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_process_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res;
  if (sbx_process_get(r->core, &r->who, r->params[0], r->params[1], &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

/* ?offset=N for both streams; stdout_offset / stderr_offset override. */
static int parse_offsets(struct sbx_req *r, uint64_t off[2], struct sbx_error *err)
{
  static const char *const names[3] = {"offset", "stdout_offset", "stderr_offset"};
  off[0] = off[1] = 0;
  for (int i = 0; i < 3; i++) {
    const char *v = sbx_req_query(r, names[i]);
    if (!v)
      continue;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
      sbx_err_field(err, names[i], "%s must be a byte offset (an integer ≥ 0)", names[i]);
      return sbx_err_fr(err,
                        "Requête invalide : %s doit être un décalage en octets (entier "
                        "≥ 0)",
                        names[i]);
    }
    if (i == 0)
      off[0] = off[1] = n;
    else
      off[i - 1] = n;
  }
  return 0;
}

struct follower {
  struct sbx_proc *p;
  struct sbx_sse *sse;
  uint64_t off[2];
  int64_t tenant; /* its connection is charged to the session (core/resources.h) */
  char sid[64];
};

/* Waits for room (the client is slow, not gone); false once it is gone. */
static bool push_all(struct sbx_sse *sse, const char *event, json_t *ev)
{
  for (;;) {
    int rc = sbx_sse_push_wait(sse, event, json_incref(ev), POLL_MS);
    if (rc != 1) {
      json_decref(ev);
      return rc == 0;
    }
  }
}

static bool send_chunk(struct follower *f, const struct sbx_proc_chunk *c)
{
  const char *name = c->stream == 2 ? "stderr" : "stdout";
  if (c->gap_from < c->offset &&
      !push_all(f->sse, "gap",
                json_pack("{s:s, s:I, s:I, s:I}", "stream", name, "from",
                          (json_int_t)c->gap_from, "to", (json_int_t)c->offset, "dropped_bytes",
                          (json_int_t)(c->offset - c->gap_from))))
    return false;
  if (c->len == 0) /* nothing kept past the gap */
    return true;
  json_t *ev = sbx_api_chunk_json(c->data, c->len, c->offset);
  return ev && push_all(f->sse, name, ev);
}

static void *follow_main(void *arg)
{
  struct follower *f = arg;
  struct sbx_proc_chunk *c = malloc(sizeof *c);
  while (c && !sbx_sse_gone(f->sse)) {
    json_t *result = NULL;
    int rc = sbx_process_next(f->p, f->off, c, POLL_MS, &result);
    if (rc == 1 && !send_chunk(f, c))
      break;
    if (rc == -2) { /* the session ended: say so now, whatever was still unsent */
      push_all(f->sse, "end", result ? result : json_null());
      break;
    }
    if (rc < 0) {
      push_all(f->sse, "exit", result ? result : json_null());
      break;
    }
  }
  free(c);
  sbx_sse_finish(f->sse);
  sbx_sse_unref(f->sse);
  sbx_process_detach(f->p);
  sbx_res_fds_give(f->tenant, f->sid, SBX_RES_FDS_STREAM);
  free(f);
  return NULL;
}

static int follow(struct sbx_req *r, struct sbx_resp *out, const uint64_t off[2],
                  struct sbx_error *err)
{
  struct follower *f = calloc(1, sizeof *f);
  if (!f)
    return sbx_err_sys(err, ENOMEM, "follower");
  memcpy(f->off, off, sizeof f->off);
  f->tenant = r->who.tenant_id;
  snprintf(f->sid, sizeof f->sid, "%s", r->params[0]);
  if (!(f->p = sbx_process_attach(r->core, &r->who, r->params[0], r->params[1], err))) {
    free(f);
    return -1;
  }
  if (sbx_res_fds_take(r->core, f->tenant, f->sid, SBX_RES_FDS_STREAM, err) < 0) {
    sbx_process_detach(f->p);
    free(f);
    return -1;
  }
  if (!(f->sse = sbx_sse_new(FOLLOW_QUEUE_BYTES))) {
    sbx_process_detach(f->p);
    sbx_res_fds_give(f->tenant, f->sid, SBX_RES_FDS_STREAM);
    free(f);
    return sbx_err_sys(err, ENOMEM, "event stream");
  }
  sbx_sse_respond(out, f->sse, NULL, NULL);
  int rc = sbx_thread_detached(follow_main, f);
  if (rc != 0) { /* no producer: end the stream at once */
    sbx_sse_finish(f->sse);
    sbx_sse_unref(f->sse);
    sbx_process_detach(f->p);
    sbx_res_fds_give(f->tenant, f->sid, SBX_RES_FDS_STREAM);
    free(f);
  }
  return 0;
}

int sbx_h_process_output(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  uint64_t off[2];
  if (parse_offsets(r, off, err) < 0)
    return -1;
  if (sbx_req_wants_sse(r))
    return follow(r, out, off, err);
  json_t *res;
  if (sbx_process_output(r->core, &r->who, r->params[0], r->params[1], off, &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_process_stdin(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *eof = sbx_req_query(r, "eof");
  bool close_it = eof && (!strcmp(eof, "true") || !strcmp(eof, "1"));
  if (eof && !close_it && strcmp(eof, "false") && strcmp(eof, "0")) {
    sbx_err_field(err, "eof", "eof must be true or false");
    return sbx_err_fr(err, "Requête invalide : eof doit valoir true ou false");
  }
  json_t *res;
  if (sbx_process_stdin(r->core, &r->who, r->params[0], r->params[1], r->body ? r->body : "",
                        r->body_len, close_it, &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_process_signal(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err), *res = NULL;
  if (!body)
    return -1;
  int rc = sbx_process_signal(r->core, &r->who, r->params[0], r->params[1], body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_process_resize(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err), *res = NULL;
  if (!body)
    return -1;
  int rc = sbx_process_resize(r->core, &r->who, r->params[0], r->params[1], body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}
