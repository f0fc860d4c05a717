/* h_stream.c — output chunks as SSE events, shared by the
 * streamed exec (POST …/exec with Accept: text/event-stream) and a
 * process's output follower (h_processes.c).
 *
 * Events: `stdout` / `stderr` {"data": text, "offset": N} (or
 * {"data_base64": …, "offset": N} when the chunk is not valid UTF-8), then
 * `exit` {result object}, and `end` {reason} when the session ended under
 * it (core/session_cpu.c sbx_session_end_reason).  A live exec never waits for its reader: an event
 * that does not fit the bounded queue is dropped and the next offset shows
 * the gap. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "api/handlers.h"
#include "api/sse.h"
#include "core/core.h"

#define SSE_QUEUE_BYTES (4u << 20)
#define EXIT_WAIT_MS 60000 /* a slow reader still gets the exit event */

json_t *sbx_api_chunk_json(const char *data, size_t len, uint64_t offset)
{
  json_t *s = json_stringn(data, len); /* NULL unless valid UTF-8 */
  if (s)
    return json_pack("{s:o, s:I}", "data", s, "offset", (json_int_t)offset);
  size_t b64len = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
  char *b64 = malloc(b64len);
  if (!b64)
    return NULL;
  sodium_bin2base64(b64, b64len, (const unsigned char *)data, len,
                    sodium_base64_VARIANT_ORIGINAL);
  json_t *o = json_pack("{s:s, s:I}", "data_base64", b64, "offset", (json_int_t)offset);
  free(b64);
  return o;
}

struct exec_stream {
  struct sbx_sse *sse; /* the producer's reference */
  uint64_t token;
};

static void on_output(void *ctx, int stream, const char *data, size_t len, uint64_t offset)
{
  struct exec_stream *es = ctx;
  json_t *ev = sbx_api_chunk_json(data, len, offset);
  if (ev && sbx_sse_push(es->sse, stream == 2 ? "stderr" : "stdout", ev) < 0)
    sbx_exec_stream_cancel(es->token); /* the client left: its exec goes too */
}

static void on_end(void *ctx, json_t *result, const char *session_end)
{
  struct exec_stream *es = ctx;
  sbx_sse_push_wait(es->sse, "exit", result, EXIT_WAIT_MS);
  if (session_end) /* like every stream of a session that ended */
    sbx_sse_push_wait(es->sse, "end", json_pack("{s:s}", "reason", session_end), 1000);
  sbx_sse_finish(es->sse);
  sbx_sse_unref(es->sse);
  free(es);
}

static void on_gone(void *ctx) { sbx_exec_stream_cancel((uint64_t)(uintptr_t)ctx); }

int sbx_api_exec_stream(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                        struct sbx_error *err)
{
  struct exec_stream *es = calloc(1, sizeof *es);
  if (!es || !(es->sse = sbx_sse_new(SSE_QUEUE_BYTES))) {
    free(es);
    return sbx_err_sys(err, ENOMEM, "event stream");
  }
  es->token = sbx_exec_stream_token();
  /* Wired up first: the exec may end before this handler returns. */
  sbx_sse_respond(out, es->sse, on_gone, (void *)(uintptr_t)es->token);
  struct sbx_exec_sink sink = {.output = on_output, .exit = on_end, .ctx = es};
  if (sbx_session_exec_stream(r->core, &r->who, r->params[0], body, &sink, es->token, err) < 0) {
    sbx_sse_unrespond(out);
    sbx_sse_unref(es->sse);
    free(es);
    return -1;
  }
  return 0;
}
