/* observe.c — what the API shows of observability, through core: the
 * audit log (list, verify, the dispatcher's events), usage reports, the
 * metrics text and the request's trace span.  obs/ owns the records and
 * the store holds them; the API only parses and renders, so it never holds
 * the store handle (core-internal) or obs/'s types. */
#include "core/internal.h"
#include "obs/audit.h"
#include "obs/metrics.h"
#include "obs/usage.h"

struct audit_page {
  json_t *events;
  int64_t last;
  int n;
};

static int audit_cb(void *ctx, const struct sbx_audit_row *row)
{
  struct audit_page *p = ctx;
  json_array_append_new(p->events, sbx_audit_row_json(row));
  p->last = row->seq;
  p->n++;
  return 0;
}

int sbx_core_audit_list(struct sbx_core *core, int64_t tenant, const char *action, int64_t after,
                        int limit, json_t **events, int64_t *last_seq, struct sbx_error *err)
{
  struct sbx_store_handle *st = sbx_core_store(core);
  struct audit_page p = {.events = json_array()};
  if (st->ops->audit_list(st->st, tenant, action, after, limit, audit_cb, &p, err) < 0) {
    json_decref(p.events);
    return -1;
  }
  *events = p.events;
  *last_seq = p.last;
  return p.n;
}

int sbx_core_audit_verify(struct sbx_core *core, json_t **out, struct sbx_error *err)
{
  struct sbx_audit_verdict v;
  if (sbx_audit_verify(sbx_core_store(core), &v, err) < 0)
    return -1;
  *out = sbx_audit_verdict_json(&v);
  return 0;
}

bool sbx_core_audit_admit(const char *source, uint64_t *suppressed)
{
  return sbx_audit_admit(source, suppressed);
}

void sbx_core_audit_record(struct sbx_core *core, const struct sbx_principal *who,
                           const char *action, const char *target, const char *outcome,
                           json_t *details)
{
  sbx_audit_record(sbx_core_store(core), who->tenant_id, who->key_id[0] ? who->key_id : NULL,
                   action, target, outcome, details);
}

void sbx_core_usage_tenant(const struct sbx_principal *who)
{
  if (who->tenant_id > 0)
    sbx_usage_remember_tenant(who->tenant_id, who->tenant);
}

int sbx_core_usage_parse_time(const char *s, int64_t *out)
{
  return sbx_usage_parse_time(s, out);
}

int sbx_core_usage_report(struct sbx_core *core, const struct sbx_principal *who,
                          const char *group_by, int64_t from, int64_t to, json_t **out,
                          struct sbx_error *err)
{
  return sbx_usage_report(sbx_core_store(core), who->tenant_id, group_by, from, to, out, err);
}

char *sbx_core_metrics_render(size_t *len) { return sbx_metrics_render(len); }

struct sbx_span *sbx_core_request_begin(const char *method, const char *traceparent)
{
  return sbx_trace_request_begin(method, traceparent);
}

void sbx_core_request_route(struct sbx_span *s, const char *method, const char *pattern)
{
  sbx_trace_request_route(s, method, pattern);
}

void sbx_core_request_tenant(struct sbx_span *s, const char *tenant)
{
  sbx_span_set_str(s, "sandbox.tenant", tenant);
}

void sbx_core_request_enter(struct sbx_span *s) { sbx_span_enter(s); }

void sbx_core_request_leave(struct sbx_span *s) { sbx_span_leave(s); }

void sbx_core_request_end(struct sbx_span *s, int status) { sbx_trace_request_end(s, status); }
