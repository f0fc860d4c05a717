/* audit.c — recording audit events and the canonical encoding and hash
 * that chain them.  See audit.h and docs/audit.md. */
#include "obs/audit.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "obs/metrics.h"

json_t *sbx_audit_details(json_t *d)
{
  if (json_is_real(d)) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", json_real_value(d));
    return json_string(buf);
  }
  if (json_is_array(d)) {
    json_t *a = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(d, i, v) json_array_append_new(a, sbx_audit_details(v));
    return a;
  }
  if (json_is_object(d)) {
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) json_object_set_new(o, k, sbx_audit_details(v));
    return o;
  }
  return d ? json_incref(d) : json_object();
}

char *sbx_audit_canonical(const struct sbx_audit_row *row)
{
  json_t *details = json_loads(row->details_json ? row->details_json : "{}", 0, NULL);
  if (!json_is_object(details)) {
    json_decref(details);
    return NULL;
  }
  json_t *o = json_pack("{s:s, s:s, s:o, s:s, s:I, s:s, s:I, s:I}", "action", row->action,
                        "actor", row->actor, "details", details, "outcome", row->outcome, "seq",
                        (json_int_t)row->seq, "target", row->target, "tenant",
                        (json_int_t)row->tenant_id, "time_ms", (json_int_t)row->time_ms);
  if (!o)
    return NULL; /* a column that is not valid UTF-8 */
  char *txt = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return txt;
}

int sbx_audit_hash(const struct sbx_audit_row *row, char out[65])
{
  char *canon = sbx_audit_canonical(row);
  if (!canon || strlen(row->prev_hash) != 64) {
    free(canon);
    return -1;
  }
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_state h;
  crypto_hash_sha256_init(&h);
  crypto_hash_sha256_update(&h, (const unsigned char *)row->prev_hash, 64);
  crypto_hash_sha256_update(&h, (const unsigned char *)canon, strlen(canon));
  crypto_hash_sha256_final(&h, digest);
  free(canon);
  sbx_hex(digest, sizeof digest, out);
  return 0;
}

/* The store calls this inside its append transaction, once seq and
 * prev_hash are known. */
static int hash_cb(void *ctx, struct sbx_audit_row *row)
{
  (void)ctx;
  return sbx_audit_hash(row, row->hash);
}

int sbx_audit_append(struct sbx_store_handle *st, const struct sbx_audit_event *ev,
                     struct sbx_audit_row *out, struct sbx_error *err)
{
  if (!ev->action || !*ev->action)
    return sbx_err_set(err, SBX_E_INVALID, 0, "audit: an event needs an action");
  struct sbx_audit_row row = {.tenant_id = ev->tenant_id};
  snprintf(row.actor, sizeof row.actor, "%s", ev->actor ? ev->actor : "anonymous");
  snprintf(row.action, sizeof row.action, "%s", ev->action);
  snprintf(row.target, sizeof row.target, "%s", ev->target ? ev->target : "");
  snprintf(row.outcome, sizeof row.outcome, "%s", ev->outcome ? ev->outcome : "ok");
  json_t *d = sbx_audit_details(ev->details);
  row.details_json = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(d);
  if (!row.details_json)
    return sbx_err_sys(err, ENOMEM, "audit details");
  int rc = st->ops->audit_append(st->st, &row, hash_cb, NULL, err);
  free(row.details_json);
  row.details_json = NULL;
  if (rc == 0) {
    sbx_metrics_audit_event(ev->action);
    if (out)
      *out = row;
  }
  return rc;
}

void sbx_audit_record(struct sbx_store_handle *st, int64_t tenant_id, const char *actor,
                      const char *action, const char *target, const char *outcome,
                      json_t *details)
{
  struct sbx_error err = {0};
  struct sbx_audit_event ev = {.tenant_id = tenant_id,
                               .actor = actor,
                               .action = action,
                               .target = target,
                               .outcome = outcome,
                               .details = details};
  if (!st || !st->ops || sbx_audit_append(st, &ev, NULL, &err) < 0) {
    sbx_metrics_audit_failure();
    sbx_error("audit", "could not record %s on %s: %s", action, target ? target : "",
              err.msg[0] ? err.msg : "no store");
  }
  json_decref(details);
}

json_t *sbx_audit_row_json(const struct sbx_audit_row *row)
{
  char t[40], when[48];
  sbx_format_time(row->time_ms / 1000, t, sizeof t);
  /* "…T16:32:00Z" → "…T16:32:00.123Z": the chain orders events finer than seconds. */
  size_t n = strlen(t);
  if (n && t[n - 1] == 'Z')
    snprintf(when, sizeof when, "%.*s.%03dZ", (int)(n - 1), t, (int)(row->time_ms % 1000));
  else
    snprintf(when, sizeof when, "%s", t);
  json_t *d = row->details_json ? json_loads(row->details_json, 0, NULL) : NULL;
  json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "seq",
                        (json_int_t)row->seq, "time", when, "time_ms", (json_int_t)row->time_ms,
                        "tenant_id", (json_int_t)row->tenant_id, "actor", row->actor, "action",
                        row->action, "target", row->target, "outcome", row->outcome, "details",
                        d ? d : json_object(), "prev_hash", row->prev_hash, "hash", row->hash);
  /* A row edited behind the daemon's back may hold bytes that are not UTF-8. */
  return o ? o : json_pack("{s:I, s:s}", "seq", (json_int_t)row->seq, "error", "unreadable row");
}
