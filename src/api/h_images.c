/* h_images.c — the image store over HTTP: list what is stored
 * (any key: images are host-wide, like profiles), pull, remove and collect
 * garbage (admin keys: they change what every tenant can start), through
 * core (core/images.c); `sandboxd image …` does the same offline.
 *
 * A pull asked for with `Accept: text/event-stream` runs on its own thread
 * and streams `progress` {blob, done, total} (at most ~10 a second per
 * blob, the last one always), then `done` {ref, digest} or `error` {the
 * envelope's error object}.  A client that leaves does not cancel it: the
 * pull finishes (a stored image is harmless) and the events stop. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/envelope.h"
#include "api/handlers.h"
#include "api/sse.h"
#include "common/util.h"
#include "core/core.h"

#define PULL_QUEUE_BYTES (256u << 10)
#define PROGRESS_EVERY_MS 100 /* per blob; the final event always goes */
#define FINAL_WAIT_MS 60000   /* a slow reader still gets done/error */

int sbx_h_image_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *arr = NULL;
  if (sbx_core_image_list(&arr, err) < 0)
    return -1;
  sbx_resp_json(out, 200, json_pack("{s:o}", "images", arr));
  return 0;
}

struct pull_stream {
  struct sbx_sse *sse; /* the producer's reference */
  char *ref;
  char lang[3];
  char request_id[40];
  /* rate limit: blobs are fetched one after another, so one slot does */
  char blob[80];
  uint64_t last_ms;
};

static void on_progress(void *ud, const char *what, uint64_t done, uint64_t total)
{
  struct pull_stream *ps = ud;
  if (sbx_sse_gone(ps->sse))
    return;
  uint64_t now = sbx_now_ms();
  bool same = !strcmp(ps->blob, what ? what : "");
  bool final = total && done >= total;
  if (same && !final && now - ps->last_ms < PROGRESS_EVERY_MS)
    return;
  snprintf(ps->blob, sizeof ps->blob, "%s", what ? what : "");
  ps->last_ms = now;
  json_t *ev = json_pack("{s:s, s:I, s:I}", "blob", ps->blob, "done", (json_int_t)done, "total",
                         (json_int_t)total);
  /* The final event of a blob waits for room; the others may be dropped. */
  if (ev && final)
    sbx_sse_push_wait(ps->sse, "progress", ev, 1000);
  else if (ev)
    sbx_sse_push(ps->sse, "progress", ev);
}

static void *pull_main(void *arg)
{
  struct pull_stream *ps = arg;
  struct sbx_error err = {0};
  char canonical[700], digest[80];
  if (sbx_core_image_pull(ps->ref, on_progress, ps, canonical, digest, &err) == 0) {
    sbx_sse_push_wait(ps->sse, "done",
                      json_pack("{s:s, s:s}", "ref", canonical, "digest", digest),
                      FINAL_WAIT_MS);
  } else {
    json_t *env = sbx_envelope_build(&err, ps->lang, ps->request_id);
    json_t *e = json_incref(json_object_get(env, "error"));
    json_decref(env);
    if (e)
      sbx_sse_push_wait(ps->sse, "error", e, FINAL_WAIT_MS);
  }
  sbx_sse_finish(ps->sse);
  sbx_sse_unref(ps->sse);
  free(ps->ref);
  free(ps);
  return NULL;
}

static int pull_stream(struct sbx_req *r, struct sbx_resp *out, const char *ref,
                       struct sbx_error *err)
{
  struct pull_stream *ps = calloc(1, sizeof *ps);
  if (!ps || !(ps->ref = strdup(ref)) || !(ps->sse = sbx_sse_new(PULL_QUEUE_BYTES))) {
    if (ps)
      free(ps->ref);
    free(ps);
    return sbx_err_sys(err, ENOMEM, "event stream");
  }
  memcpy(ps->lang, r->lang, sizeof ps->lang);
  snprintf(ps->request_id, sizeof ps->request_id, "%s", r->request_id);
  /* The response takes its reference before the thread may drop the
   * producer's; if the thread cannot start, the request fails as JSON. */
  struct sbx_resp tmp = {.fd = -1};
  sbx_sse_respond(&tmp, ps->sse, NULL, NULL);
  int rc = sbx_thread_detached(pull_main, ps);
  if (rc != 0) {
    tmp.stream_free(tmp.stream_ctx);
    sbx_sse_unref(ps->sse);
    free(ps->ref);
    free(ps);
    return sbx_err_sys(err, rc, "pull thread");
  }
  *out = tmp;
  return 0;
}

int sbx_h_image_pull(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err);
  if (!body)
    return -1;
  json_t *ref = json_object_get(body, "ref");
  int rc = -1;
  if (json_object_size(body) != 1 || !json_is_string(ref) || !json_string_length(ref)) {
    sbx_err_field(err, "ref", "the body is {\"ref\": \"name[:tag] or name@sha256:…\"}");
    sbx_err_fr(err, "Le corps est {\"ref\": \"nom[:étiquette] ou nom@sha256:…\"}");
    goto out;
  }
  /* Validate first: a bad reference is the caller's error (400), not the
   * registry's. */
  if (sbx_core_image_ref_check(json_string_value(ref), "ref", err) < 0)
    goto out;
  if (sbx_req_wants_sse(r)) {
    rc = pull_stream(r, out, json_string_value(ref), err);
    goto out;
  }
  char canonical[700], digest[80];
  if (sbx_core_image_pull(json_string_value(ref), NULL, NULL, canonical, digest, err) < 0)
    goto out;
  sbx_resp_json(out, 200, json_pack("{s:s, s:s}", "ref", canonical, "digest", digest));
  rc = 0;
out:
  json_decref(body);
  return rc;
}

int sbx_h_image_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *ref = r->rest ? r->rest : "";
  if (!*ref) {
    sbx_err_field(err, "ref", "name the image: DELETE /v1/sandbox/images/{ref}");
    return sbx_err_fr(err, "Nommez l'image : DELETE /v1/sandbox/images/{ref}");
  }
  if (sbx_core_image_remove(ref, err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_image_gc(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *stats;
  if (sbx_core_image_gc(&stats, err) < 0)
    return -1;
  sbx_resp_json(out, 200, stats);
  return 0;
}
