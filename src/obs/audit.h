/* audit.h — the hash-chained audit log (DESIGN §5): recording an
 * event, the canonical encoding and hash that chain events together, the
 * verifier, and the limiter that keeps floods of refusals from filling the
 * store.  Storage is the store seam's audit_* ops; this module owns what an
 * event means and how it is hashed (docs/audit.md is the normative text).
 *
 * hash(event) = lowercase hex SHA-256( prev_hash || canonical(event) ),
 * prev_hash being the previous event's 64 hex characters (SBX_AUDIT_GENESIS
 * for seq 1) and canonical() the event's JSON object
 * {action, actor, details, outcome, seq, target, tenant, time_ms} with
 * sorted keys and no whitespace (jansson JSON_COMPACT | JSON_SORT_KEYS),
 * details being a JSON object whose numbers are integers. */
#ifndef SBX_OBS_AUDIT_H
#define SBX_OBS_AUDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "store/store.h"

/* An event to append.  Strings are borrowed; NULL actor → "anonymous",
 * NULL target → "", NULL outcome → "ok"; details may be NULL ({}), and is
 * borrowed (reals in it are recorded as strings: see sbx_audit_details). */
struct sbx_audit_event {
  int64_t tenant_id; /* 0: no tenant */
  const char *actor;
  const char *action;
  const char *target;
  const char *outcome;
  json_t *details;
};

/* Appends ev to the chain.  out (may be NULL) receives the stored row
 * (its details_json is NULL: not kept). */
int sbx_audit_append(struct sbx_store_handle *st, const struct sbx_audit_event *ev,
                     struct sbx_audit_row *out, struct sbx_error *err);

/* Best effort append for hooks in request paths: a failure is logged and
 * counted (sandboxd_audit_failures_total), never returned.  Steals
 * details (may be NULL). */
void sbx_audit_record(struct sbx_store_handle *st, int64_t tenant_id, const char *actor,
                      const char *action, const char *target, const char *outcome,
                      json_t *details);

/* The limiter for refusals (auth failures, policy denials): at most
 * SBX_AUDIT_DENIALS_PER_MIN events per minute per source (a client
 * address, a tenant) and SBX_AUDIT_DENIALS_GLOBAL_PER_MIN over all
 * sources.  True when this one may be recorded; *suppressed is then the
 * number of events of this source dropped since its last recorded one
 * (to put in the event's details).  Suppressed events are counted in
 * sandboxd_audit_suppressed_total. */
#define SBX_AUDIT_DENIALS_PER_MIN 10
#define SBX_AUDIT_DENIALS_GLOBAL_PER_MIN 300
bool sbx_audit_admit(const char *source, uint64_t *suppressed);
/* Tests: forget every source. */
void sbx_audit_limiter_reset(void);

/* Canonical encoding of row (malloc'd, NUL-terminated) or NULL when its
 * details_json is not a JSON object. */
char *sbx_audit_canonical(const struct sbx_audit_row *row);
/* out = hex SHA-256(row->prev_hash || canonical(row)).  -1 if the row
 * cannot be encoded. */
int sbx_audit_hash(const struct sbx_audit_row *row, char out[65]);

/* Details as they are stored: a copy of d (an object, else {}) where every
 * real is replaced by its text ("%.17g"), so the canonical encoding is
 * stable across a store round trip. */
json_t *sbx_audit_details(json_t *d);

/* Result of walking the whole chain. */
struct sbx_audit_verdict {
  bool ok;
  int64_t events;     /* rows checked */
  int64_t last_seq;   /* seq of the last row read (0: empty) */
  char head_hash[65]; /* hash of the last row read (anchor it elsewhere) */
  int64_t broken_seq; /* first broken sequence number (0 when ok) */
  char problem[256];  /* what is wrong there */
};
int sbx_audit_verify(struct sbx_store_handle *st, struct sbx_audit_verdict *v,
                     struct sbx_error *err);
json_t *sbx_audit_verdict_json(const struct sbx_audit_verdict *v);

/* The API's view of an event. */
json_t *sbx_audit_row_json(const struct sbx_audit_row *row);

#endif
