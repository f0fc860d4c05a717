/* trace.h — W3C trace context, spans, and their export over OTLP/HTTP JSON.
 *
 * Owns: parsing/formatting `traceparent`, the span objects, the thread's
 * current span (the parent of spans begun on that thread and the value of
 * TRACEPARENT handed to a workload), a small table of contexts parked for
 * work that continues on another thread (an execution created by a request
 * and run by a worker), and the exporter: a background thread that batches
 * ended spans from a bounded queue and POSTs them as OTLP JSON to
 * {OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces.  A request never waits for the
 * exporter: ending a span is an O(1) enqueue, and a full queue drops the
 * span (counted by sbx_trace_dropped()).
 *
 * Spans are always made (their context propagates even when nothing is
 * exported); attributes are only kept when the span is recorded: export on
 * and the trace sampled (ParentBased(AlwaysOn): an incoming traceparent with
 * the sampled flag clear is propagated, not recorded).
 *
 * Ownership: sbx_span_begin returns a span the caller owns until
 * sbx_span_end, which consumes it.  Attribute keys are borrowed and MUST be
 * static strings (literals); values are copied.  Every function accepts a
 * NULL span and then does nothing.
 *
 * obs/ never calls core/: the sandbox-specific helpers below take plain
 * strings and JSON. */
#ifndef SBX_OBS_TRACE_H
#define SBX_OBS_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "00-<32 hex>-<16 hex>-<2 hex>" */
#define SBX_TRACEPARENT_LEN 55

struct sbx_trace_ctx {
  uint8_t trace_id[16];
  uint8_t span_id[8];
  uint8_t flags; /* bit 0: sampled */
};

/* Parses a traceparent header value strictly (W3C Trace Context level 1):
 * version 00, exactly 55 characters, lowercase hex, a trace id and a parent
 * id that are not all zero.  Returns 0, or -1 when s is NULL or invalid
 * (the caller then starts a new trace). */
int sbx_traceparent_parse(const char *s, struct sbx_trace_ctx *out);
/* out must hold SBX_TRACEPARENT_LEN + 1 bytes. */
void sbx_traceparent_format(const struct sbx_trace_ctx *c, char *out);

enum sbx_span_kind {
  SBX_SPAN_INTERNAL = 1, /* the OTLP SpanKind numbers */
  SBX_SPAN_SERVER = 2,
  SBX_SPAN_CLIENT = 3,
};

struct sbx_span;

/* A new span named `name`.  Its parent is `parent` if given, else the
 * thread's current span, else none (a new trace).  It does not become the
 * current span (see sbx_span_enter).  Never NULL except out of memory. */
struct sbx_span *sbx_span_begin(const char *name, enum sbx_span_kind kind,
                                const struct sbx_trace_ctx *parent);
void sbx_span_set_name(struct sbx_span *s, const char *name);
void sbx_span_set_str(struct sbx_span *s, const char *key, const char *value);
void sbx_span_set_int(struct sbx_span *s, const char *key, int64_t value);
/* Status ERROR with a message (OTLP status code 2). */
void sbx_span_set_error(struct sbx_span *s, const char *message);
const struct sbx_trace_ctx *sbx_span_context(const struct sbx_span *s);
/* Makes s the thread's current span until sbx_span_leave(s) (or its end):
 * spans begun meanwhile on this thread are its children.  Enter and leave
 * on the same thread, nested like scopes. */
void sbx_span_enter(struct sbx_span *s);
void sbx_span_leave(struct sbx_span *s);
/* Ends s (leaving it first if current) and hands it to the exporter, or
 * frees it when not recorded or the queue is full.  Consumes s. */
void sbx_span_end(struct sbx_span *s);

/* The thread's current span context; false if there is none. */
bool sbx_trace_current(struct sbx_trace_ctx *out);
/* "TRACEPARENT=00-…" for the thread's current span into buf (>= 68 bytes);
 * false (buf "") if there is no current span. */
bool sbx_trace_env_entry(char *buf, size_t len);

/* Parks the thread's current context (and the tenant's name) under key, so
 * a span begun later on another thread continues the trace.  Bounded: an
 * entry never taken is eventually overwritten. */
void sbx_trace_park(const char *key, const char *tenant);
/* Takes (removes) what was parked under key; false if nothing is. */
bool sbx_trace_unpark(const char *key, struct sbx_trace_ctx *ctx, char *tenant, size_t tlen);

/* ---- sandbox operations: one call to begin, one to end ---- */

/* Begins and enters an internal span for a sandbox operation, child of the
 * thread's current span, with sandbox.tenant and sandbox.profile.  With
 * genai (a workload run: exec, execution) and a metadata object naming
 * "agent" or "tool", adds the GenAI attributes gen_ai.operation.name
 * ("execute_tool"), gen_ai.agent.name, gen_ai.tool.name.  Borrows all. */
struct sbx_span *sbx_trace_op_begin(const char *name, const char *tenant, const char *profile,
                                    json_t *metadata, bool genai);
/* Same for work continued on another thread: the parent and tenant are
 * those parked under key (else a new trace, tenant "#<tenant_id>");
 * metadata_json is the stored metadata text (may be NULL). */
struct sbx_span *sbx_trace_op_begin_parked(const char *name, const char *key, int64_t tenant_id,
                                           const char *profile, const char *metadata_json);
/* Sets id_key=id (if id non-empty) and sandbox.status=status (if given),
 * marks the span failed when error is non-NULL, and ends it. */
void sbx_trace_op_end(struct sbx_span *s, const char *id_key, const char *id, const char *status,
                      const char *error);

/* ---- the HTTP server span ---- */

/* A server span for an incoming request, child of its traceparent header
 * when valid (else a new trace), named after the method until the route is
 * known. */
struct sbx_span *sbx_trace_request_begin(const char *method, const char *traceparent);
/* Names the span "METHOD route" and sets http.route. */
void sbx_trace_request_route(struct sbx_span *s, const char *method, const char *route);
/* Sets http.response.status_code (5xx marks it failed) and ends it. */
void sbx_trace_request_end(struct sbx_span *s, int status);

/* ---- the exporter ---- */

/* Reads the OTEL_* environment (docs/traces.md) and, when an endpoint is
 * set, starts the export thread.  Idempotent.  Returns 0; a bad setting is
 * logged and leaves export off. */
int sbx_trace_start(void);
/* The resource attribute service.instance.id of every span exported from
 * now on: a fleet node's id (core/fleet.c). */
void sbx_trace_set_instance(const char *id);
/* Flushes what is queued (bounded: about 2 s at most), stops the thread.
 * Spans ended afterwards are freed, not exported. */
void sbx_trace_stop(void);
/* True while spans are being recorded for export. */
bool sbx_trace_exporting(void);
/* Spans dropped because the export queue was full (never for any other
 * reason), for the metrics. */
uint64_t sbx_trace_dropped(void);
/* Spans lost because their export failed after the retries. */
uint64_t sbx_trace_export_failed(void);
/* Spans the collector accepted. */
uint64_t sbx_trace_exported(void);

#endif
