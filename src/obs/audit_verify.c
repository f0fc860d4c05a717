/* audit_verify.c — walks the whole audit chain in seq order and names the
 * first sequence number where it breaks: a gap (a deleted row), a row that
 * does not chain to its predecessor (an inserted or replaced row), or a
 * row whose hash does not match its content (an edited row).  A truncated
 * tail leaves no gap: compare head_hash with a copy kept elsewhere. */
#include <stdio.h>
#include <string.h>

#include "obs/audit.h"

struct walk {
  struct sbx_audit_verdict *v;
  char prev_hash[65];
};

static int broken(struct sbx_audit_verdict *v, int64_t seq, const char *problem)
{
  v->ok = false;
  v->broken_seq = seq;
  snprintf(v->problem, sizeof v->problem, "%s", problem);
  return 1; /* stop the scan */
}

static int check_row(void *ctx, const struct sbx_audit_row *row)
{
  struct walk *w = ctx;
  struct sbx_audit_verdict *v = w->v;
  int64_t want = v->last_seq + 1;
  char msg[256];
  if (row->seq != want) {
    snprintf(msg, sizeof msg,
             "event %lld is missing (the next one stored is %lld): "
             "a row was deleted",
             (long long)want, (long long)row->seq);
    return broken(v, want, msg);
  }
  if (strcmp(row->prev_hash, w->prev_hash) != 0) {
    snprintf(msg, sizeof msg,
             "event %lld does not chain to event %lld (prev_hash differs): "
             "a row was inserted or replaced",
             (long long)row->seq, (long long)(want - 1));
    return broken(v, row->seq, msg);
  }
  char h[65];
  if (sbx_audit_hash(row, h) < 0 || strcmp(h, row->hash) != 0) {
    snprintf(msg, sizeof msg,
             "event %lld: the stored hash does not match its content: "
             "the row was edited (or forged)",
             (long long)row->seq);
    return broken(v, row->seq, msg);
  }
  v->events++;
  v->last_seq = row->seq;
  snprintf(v->head_hash, sizeof v->head_hash, "%s", row->hash);
  snprintf(w->prev_hash, sizeof w->prev_hash, "%s", row->hash);
  return 0;
}

int sbx_audit_verify(struct sbx_store_handle *st, struct sbx_audit_verdict *v,
                     struct sbx_error *err)
{
  memset(v, 0, sizeof *v);
  v->ok = true;
  snprintf(v->head_hash, sizeof v->head_hash, "%s", SBX_AUDIT_GENESIS);
  struct walk w = {.v = v};
  snprintf(w.prev_hash, sizeof w.prev_hash, "%s", SBX_AUDIT_GENESIS);
  return st->ops->audit_scan(st->st, 0, check_row, &w, err);
}

json_t *sbx_audit_verdict_json(const struct sbx_audit_verdict *v)
{
  json_t *o = json_pack("{s:b, s:I, s:I, s:s}", "ok", v->ok, "events", (json_int_t)v->events,
                        "last_seq", (json_int_t)v->last_seq, "head_hash", v->head_hash);
  json_object_set_new(o, "first_broken_seq",
                      v->ok ? json_null() : json_integer((json_int_t)v->broken_seq));
  json_object_set_new(o, "problem", v->ok ? json_null() : json_string(v->problem));
  return o;
}
