/* trace_int.h — what trace.c (spans) and trace_export.c (the exporter)
 * share: the span object and the hand-over of an ended span. */
#ifndef SBX_OBS_TRACE_INT_H
#define SBX_OBS_TRACE_INT_H

#include "obs/trace.h"

#define SBX_SPAN_MAX_ATTRS 20

struct sbx_span_attr {
  const char *key; /* static */
  bool is_int;
  int64_t i;
  char *s; /* owned */
};

struct sbx_span {
  struct sbx_trace_ctx ctx;
  uint8_t parent_id[8];
  bool has_parent;
  bool recording; /* attributes kept and the span exported at its end */
  bool entered;
  enum sbx_span_kind kind;
  char name[128];
  uint64_t start_ns, end_ns; /* wall clock, ns since the epoch */
  struct sbx_span_attr attrs[SBX_SPAN_MAX_ATTRS];
  int nattrs;
  int status_code; /* 0 unset, 2 error */
  char *status_msg;
  struct sbx_span *prev; /* the thread's current span before enter */
};

void sbx_span_free(struct sbx_span *s);
/* Queues an ended, recorded span for export (consumes it); frees it when
 * export is off or the queue is full (counted). */
void sbx_trace_export_span(struct sbx_span *s);
/* A JSON object {"resourceSpans":[…]} for n spans (borrowed). */
json_t *sbx_trace_otlp_json(struct sbx_span *const *spans, size_t n, const char *service);

#endif
