/* sse.h — Server-Sent Events responses (DESIGN §4 "Streams").
 *
 * A producer (usually its own thread: an exec, a process follower, a
 * watcher) pushes events; the HTTP connection's thread pulls them out as
 * `event: NAME\ndata: {json}\n\n`.  The queue is bounded by bytes: when a
 * slow client lets it fill, sbx_sse_push() refuses the event (returns 1)
 * instead of blocking, so a sandbox is never slowed by a reader — output
 * events carry byte offsets, so a client can see the gap and replay it.
 * A comment line is sent every 15 s of silence to keep proxies open.
 *
 * Ownership: refcounted.  sbx_sse_new() returns one reference for the
 * producer; sbx_sse_respond() takes a second for the response.  The
 * producer calls sbx_sse_finish() when done (the stream ends after the
 * queue drains) and sbx_sse_unref().  When the client goes away,
 * sbx_sse_gone() turns true and the optional on_gone callback runs once
 * (from the connection's thread) — e.g. to cancel the exec. */
#ifndef SBX_API_SSE_H
#define SBX_API_SSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/http.h"

struct sbx_sse;

struct sbx_sse *sbx_sse_new(size_t max_queued_bytes);
/* Queues one event.  Consumes data.  0 queued, 1 dropped (queue full),
 * -1 the client is gone. */
int sbx_sse_push(struct sbx_sse *s, const char *event, json_t *data);
/* Like push, but waits up to timeout_ms for room instead of dropping
 * (for producers that can wait, e.g. replaying stored output). */
int sbx_sse_push_wait(struct sbx_sse *s, const char *event, json_t *data, unsigned timeout_ms);
/* Raw streams (another framing over the same bounded queue, e.g. Connect
 * envelopes or JSON lines): queues bytes as they are (consumed, freed
 * with free()); same return values as push_wait.  A raw stream sends no
 * keep-alive comments: its producer writes its own. */
int sbx_sse_push_raw(struct sbx_sse *s, char *bytes, size_t len, unsigned wait_ms);
void sbx_sse_finish(struct sbx_sse *s);
bool sbx_sse_gone(struct sbx_sse *s);
void sbx_sse_unref(struct sbx_sse *s);
/* Turns the response into the stream (takes a reference). */
void sbx_sse_respond(struct sbx_resp *out, struct sbx_sse *s, void (*on_gone)(void *ctx),
                     void *ctx);
/* Undoes sbx_sse_respond when the producer could not start: drops the
 * response's reference and leaves out empty. */
void sbx_sse_unrespond(struct sbx_resp *out);
/* Like sbx_sse_respond for a raw stream with its own content type. */
void sbx_sse_respond_raw(struct sbx_resp *out, struct sbx_sse *s, const char *content_type,
                         void (*on_gone)(void *ctx), void *ctx);
/* True when the request asks for an event stream (Accept: text/event-stream). */
bool sbx_req_wants_sse(struct sbx_req *r);

#endif
