/* usage.h — usage records (DESIGN §7): one per session exec and per
 * execution — tenant, profile, CPU seconds, memory MB·seconds, duration and
 * the metadata keys project/agent/run — stored through the store seam, summed
 * for GET /v1/sandbox/usage, and, when a FinOps endpoint is configured,
 * delivered there by the outbox (outbox.c): the record is stored first (its
 * row IS the outbox entry), then POSTed with its id as Idempotency-Key,
 * retried with backoff across endpoint outages and daemon restarts, never
 * dropped. */
#ifndef SBX_OBS_USAGE_H
#define SBX_OBS_USAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "store/store.h"

/* What a finished run reports.  Strings are borrowed. */
struct sbx_usage_input {
  int64_t tenant_id;
  const char *tenant;    /* name if known (NULL: from the name cache) */
  const char *kind;      /* "exec" | "execution" */
  const char *source_id; /* session id / execution id */
  const char *profile;
  const char *status;
  const char *metadata_json; /* the session's / execution's metadata object, or NULL */
  double cpu_seconds;
  double memory_mb_seconds;
  double duration_seconds;
};

/* Stores one record (delivery "pending" when a FinOps endpoint is
 * configured, else "none")
 * and wakes the outbox.  out (may be NULL) receives the stored row. */
int sbx_usage_record(struct sbx_store_handle *st, const struct sbx_usage_input *in,
                     struct sbx_usage_row *out, struct sbx_error *err);
/* The same in two steps, for a record stored in a transaction with
 * something else (the store's execution_finish): the row, with a new id;
 * then, once it is stored, sbx_usage_stored wakes the outbox. */
void sbx_usage_row_of(const struct sbx_usage_input *in, struct sbx_usage_row *out);
void sbx_usage_stored(const struct sbx_usage_row *row);

/* tenant id → name, remembered from authenticated requests so records of
 * work that runs without a request at hand (executions) carry the name. */
void sbx_usage_remember_tenant(int64_t tenant_id, const char *name);

/* The JSON body POSTed to the FinOps endpoint (docs/audit.md#usage). */
json_t *sbx_usage_payload(const struct sbx_usage_row *row);

/* GET /v1/sandbox/usage: the tenant's records in [from, to) summed by
 * group_by ("profile" | "project" | "agent"); to <= 0: no upper bound. */
int sbx_usage_report(struct sbx_store_handle *st, int64_t tenant_id, const char *group_by,
                     int64_t from, int64_t to, json_t **out, struct sbx_error *err);

/* "2026-01-02T03:04:05Z", "…+02:00", "…​.123Z" (RFC 3339) or epoch seconds
 * → seconds since the epoch.  -1 if neither. */
int sbx_usage_parse_time(const char *s, int64_t *out);

/* ---- the outbox (outbox.c) ---- */
struct sbx_outbox_config {
  const char *url;        /* http(s)://…; NULL/"" → no outbox */
  unsigned timeout_s;     /* per POST; 0 → 5 */
  unsigned max_backoff_s; /* retry delay ceiling; 0 → 60 */
};
/* Starts the delivery thread (one per process). */
int sbx_outbox_start(struct sbx_store_handle *st, const struct sbx_outbox_config *cfg,
                     struct sbx_error *err);
/* Stops it (an in-flight POST is aborted; its record stays pending). */
void sbx_outbox_stop(void);
/* True once an outbox was started in this process (even after stop). */
bool sbx_outbox_configured(void);
/* New records are due: deliver now rather than at the next poll. */
void sbx_outbox_kick(void);

#endif
