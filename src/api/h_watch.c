/* h_watch.c — GET /v1/sandbox/sessions/{id}/watch?path=D[&recursive=true]:
 * file events as Server-Sent Events.  core/watch.c runs the watch and
 * feeds this file's sink, which only moves events into the SSE queue
 * (api/sse.h): a full queue drops (core counts and reports `overflow`),
 * nothing here ever blocks the watch.
 *
 * Stream: `ready` once the watches are in place, then `create`, `modify`,
 * `delete`, `move` ({from, to}) and `overflow` ({dropped}) events, each
 * {type, path, dir}; `end` {reason} last when the watch ends on its own. */
#include <string.h>

#include "api/handlers.h"
#include "api/sse.h"
#include "core/core.h"
#include "core/schema.h"

#define QUEUE_BYTES (256 * 1024)

static int sink_event(void *ctx, const char *type, json_t *ev)
{
  return sbx_sse_push(ctx, type, ev);
}

static bool sink_gone(void *ctx) { return sbx_sse_gone(ctx); }

static void sink_end(void *ctx, const char *why)
{
  struct sbx_sse *s = ctx;
  if (strcmp(why, "client gone") != 0)
    sbx_sse_push_wait(s, "end", json_pack("{s:s}", "reason", why), 1000);
  sbx_sse_finish(s);
  sbx_sse_unref(s);
}

int sbx_h_watch(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *dir = sbx_req_query(r, "path");
  if (sbx_schema_path(dir, "path", err) < 0)
    return -1;
  struct sbx_sse *s = sbx_sse_new(QUEUE_BYTES);
  if (!s)
    return sbx_err_sys(err, ENOMEM, "watch");
  /* The response takes its reference before the watch thread may drop
   * the producer's; on failure it is released as if the client left. */
  struct sbx_resp tmp = {.fd = -1};
  sbx_sse_respond(&tmp, s, NULL, NULL);
  struct sbx_watch_sink sink = {.event = sink_event,
                                .gone = sink_gone,
                                .end = sink_end,
                                .ctx = s};
  if (sbx_session_watch(r->core, &r->who, r->params[0], dir, sbx_req_flag(r, "recursive"), &sink,
                        err) < 0) {
    tmp.stream_free(tmp.stream_ctx);
    sbx_sse_unref(s);
    return -1;
  }
  *out = tmp;
  return 0;
}
