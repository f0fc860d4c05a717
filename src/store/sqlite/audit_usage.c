/* audit_usage.c — SQLite queries for the audit chain (audit_events) and the
 * usage records that double as the FinOps outbox (usage_records).  Contracts
 * in store/store.h.
 *
 * The chain's integrity under concurrency rests on audit_append: the read
 * of the last (seq, hash) and the insert of the next row happen in one
 * BEGIN IMMEDIATE transaction, which holds SQLite's write lock from the
 * start, so two appenders — threads of this daemon or another process on
 * the same file — can never both chain to the same predecessor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

/* Rows per page of audit_scan: bounds memory on a long chain. */
#define AUD_SCAN_PAGE 512

/* ---- audit ---- */

static int64_t wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int audit_last(struct sbx_store *st, int64_t *seq, char *hash, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_AUD_LAST, "SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1",
              &s, err) < 0)
    return -1;
  int rc = sq_step(s);
  if (rc == SQLITE_DONE) {
    *seq = 0;
    snprintf(hash, 65, "%s", SBX_AUDIT_GENESIS);
    return 0;
  }
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "read the audit chain's head", err);
  *seq = sqlite3_column_int64(s, 0);
  sq_col_copy(s, 1, hash, 65);
  return 0;
}

static int audit_insert(struct sbx_store *st, const struct sbx_audit_row *row,
                        struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_AUD_INSERT,
              "INSERT INTO audit_events (" AUD_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, row->seq);
  sqlite3_bind_int64(s, 2, row->time_ms);
  sqlite3_bind_int64(s, 3, row->tenant_id);
  sq_bind_text(s, 4, row->actor);
  sq_bind_text(s, 5, row->action);
  sq_bind_text(s, 6, row->target);
  sq_bind_text(s, 7, row->outcome);
  sq_bind_text(s, 8, row->details_json ? row->details_json : "{}");
  sq_bind_text(s, 9, row->prev_hash);
  sq_bind_text(s, 10, row->hash);
  return sq_exec_stmt(st, s, "append audit event", err);
}

int sq_audit_append(struct sbx_store *st, struct sbx_audit_row *row, sbx_audit_hash_fn hash,
                    void *ctx, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  if (!row->time_ms)
    row->time_ms = wall_ms();
  if (sq_begin(st, err) < 0)
    return -1;
  int64_t last = 0;
  if (audit_last(st, &last, row->prev_hash, err) < 0)
    goto fail;
  row->seq = last + 1;
  row->hash[0] = '\0';
  if (hash(ctx, row) < 0) {
    sbx_err_set(err, SBX_E_INTERNAL, 0, "store: hashing the audit event failed");
    goto fail;
  }
  if (audit_insert(st, row, err) < 0)
    goto fail;
  return sq_commit(st, err);
fail:
  sq_rollback(st);
  return -1;
}

static void audit_rows_free(struct sq_rows *rows)
{
  struct sbx_audit_row *v = rows->v;
  for (size_t i = 0; i < rows->n; i++)
    free(v[i].details_json);
  free(rows->v);
  rows->v = NULL;
  rows->n = rows->cap = 0;
}

/* Steps s to the end, copying each row into rows. */
static int audit_collect(struct sbx_store *st, sqlite3_stmt *s, struct sq_rows *rows,
                         struct sbx_error *err)
{
  for (int rc = sq_step(s);; rc = sqlite3_step(s)) {
    if (rc == SQLITE_DONE)
      return 0;
    if (rc != SQLITE_ROW)
      return sq_fail(st, rc, "read audit events", err);
    struct sbx_audit_row *r = sq_rows_push(rows, err);
    if (!r)
      return -1;
    r->seq = sqlite3_column_int64(s, 0);
    r->time_ms = sqlite3_column_int64(s, 1);
    r->tenant_id = sqlite3_column_int64(s, 2);
    sq_col_copy(s, 3, r->actor, sizeof r->actor);
    sq_col_copy(s, 4, r->action, sizeof r->action);
    sq_col_copy(s, 5, r->target, sizeof r->target);
    sq_col_copy(s, 6, r->outcome, sizeof r->outcome);
    if (sq_col_strdup(s, 7, &r->details_json, err) < 0)
      return -1;
    sq_col_copy(s, 8, r->prev_hash, sizeof r->prev_hash);
    sq_col_copy(s, 9, r->hash, sizeof r->hash);
  }
}

/* Runs cb over collected rows (no lock held); frees them. */
static int audit_deliver(struct sq_rows *rows, sbx_audit_cb cb, void *ctx, int *stopped,
                         struct sbx_error *err)
{
  int rc = 0;
  struct sbx_audit_row *v = rows->v;
  for (size_t i = 0; i < rows->n && rc == 0; i++)
    rc = cb(ctx, &v[i]);
  audit_rows_free(rows);
  if (stopped)
    *stopped = rc != 0;
  if (rc < 0)
    return err && err->code ? -1 : sbx_err_set(err, SBX_E_INTERNAL, 0, "audit callback failed");
  return 0;
}

int sq_audit_list(struct sbx_store *st, int64_t tenant_id, const char *action, int64_t after_seq,
                  int limit, sbx_audit_cb cb, void *ctx, struct sbx_error *err)
{
  struct sq_rows rows = {.elem = sizeof(struct sbx_audit_row)};
  {
    _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
    _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
    if (sq_stmt(st, SQ_AUD_LIST,
                "SELECT " AUD_COLS " FROM audit_events WHERE seq > ?1"
                " AND (?2 < 0 OR tenant_id = ?2) AND (?3 IS NULL OR action = ?3)"
                " ORDER BY seq LIMIT ?4",
                &s, err) < 0)
      return -1;
    sqlite3_bind_int64(s, 1, after_seq);
    sqlite3_bind_int64(s, 2, tenant_id);
    sq_bind_text(s, 3, action);
    sqlite3_bind_int64(s, 4, limit > 0 ? limit : -1);
    if (audit_collect(st, s, &rows, err) < 0) {
      audit_rows_free(&rows);
      return -1;
    }
  }
  return audit_deliver(&rows, cb, ctx, NULL, err);
}

int sq_audit_scan(struct sbx_store *st, int64_t after_seq, sbx_audit_cb cb, void *ctx,
                  struct sbx_error *err)
{
  for (;;) {
    struct sq_rows rows = {.elem = sizeof(struct sbx_audit_row)};
    {
      _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
      _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
      if (sq_stmt(st, SQ_AUD_SCAN,
                  "SELECT " AUD_COLS " FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?", &s,
                  err) < 0)
        return -1;
      sqlite3_bind_int64(s, 1, after_seq);
      sqlite3_bind_int(s, 2, AUD_SCAN_PAGE);
      if (audit_collect(st, s, &rows, err) < 0) {
        audit_rows_free(&rows);
        return -1;
      }
    }
    size_t n = rows.n;
    if (n)
      after_seq = ((struct sbx_audit_row *)rows.v)[n - 1].seq;
    int stopped = 0;
    if (audit_deliver(&rows, cb, ctx, &stopped, err) < 0)
      return -1;
    if (stopped || n < AUD_SCAN_PAGE)
      return 0;
  }
}

/* ---- usage records and the outbox ---- */

int sq_usage_insert(struct sbx_store *st, const struct sbx_usage_row *row, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  return sq_usage_insert_row(st, row, err);
}

int sq_usage_insert_row(struct sbx_store *st, const struct sbx_usage_row *row,
                        struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_USE_INSERT,
              "INSERT INTO usage_records (" USE_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
              " ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, row->id);
  sqlite3_bind_int64(s, 2, row->tenant_id);
  sq_bind_text(s, 3, row->tenant);
  sq_bind_text(s, 4, row->kind);
  sq_bind_text(s, 5, row->source_id);
  sq_bind_text(s, 6, row->profile);
  sq_bind_text(s, 7, row->status);
  sq_bind_text(s, 8, row->project);
  sq_bind_text(s, 9, row->agent);
  sq_bind_text(s, 10, row->run);
  sqlite3_bind_double(s, 11, row->cpu_seconds);
  sqlite3_bind_double(s, 12, row->memory_mb_seconds);
  sqlite3_bind_double(s, 13, row->duration_seconds);
  sqlite3_bind_int64(s, 14, row->created_at ? row->created_at : sbx_wall_s());
  sq_bind_text(s, 15, row->delivery[0] ? row->delivery : "none");
  sqlite3_bind_int(s, 16, row->attempts);
  sqlite3_bind_int64(s, 17, row->next_attempt_at);
  sqlite3_bind_int64(s, 18, row->delivered_at);
  sq_bind_text(s, 19, row->last_error);
  return sq_exec_stmt(st, s, "insert usage record", err);
}

/* The group_by column is one of three fixed statements, never text pasted
 * from a request. */
static int usage_stmt(struct sbx_store *st, const char *group_by, sqlite3_stmt **s,
                      struct sbx_error *err)
{
#define GROUP_SQL(col)                                                                          \
  "SELECT " col ", COUNT(*), SUM(cpu_seconds), SUM(memory_mb_seconds),"                         \
  " SUM(duration_seconds) FROM usage_records WHERE tenant_id = ?1 AND created_at >= ?2"         \
  " AND (?3 <= 0 OR created_at < ?3) GROUP BY " col " ORDER BY " col
  if (!strcmp(group_by, "profile"))
    return sq_stmt(st, SQ_USE_BY_PROFILE, GROUP_SQL("profile"), s, err);
  if (!strcmp(group_by, "project"))
    return sq_stmt(st, SQ_USE_BY_PROJECT, GROUP_SQL("project"), s, err);
  if (!strcmp(group_by, "agent"))
    return sq_stmt(st, SQ_USE_BY_AGENT, GROUP_SQL("agent"), s, err);
#undef GROUP_SQL
  return sbx_err_field(err, "group_by", "group_by must be profile, project or agent");
}

int sq_usage_query(struct sbx_store *st, int64_t tenant_id, const char *group_by, int64_t from,
                   int64_t to, sbx_usage_group_cb cb, void *ctx, struct sbx_error *err)
{
  struct sq_rows rows = {.elem = sizeof(struct sbx_usage_group)};
  {
    _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
    _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
    if (usage_stmt(st, group_by, &s, err) < 0)
      return -1;
    sqlite3_bind_int64(s, 1, tenant_id);
    sqlite3_bind_int64(s, 2, from);
    sqlite3_bind_int64(s, 3, to);
    for (int rc = sq_step(s);; rc = sqlite3_step(s)) {
      if (rc == SQLITE_DONE)
        break;
      struct sbx_usage_group *g = rc == SQLITE_ROW ? sq_rows_push(&rows, err) : NULL;
      if (!g) {
        free(rows.v);
        return rc == SQLITE_ROW ? -1 : sq_fail(st, rc, "query usage", err);
      }
      sq_col_copy(s, 0, g->key, sizeof g->key);
      g->records = sqlite3_column_int64(s, 1);
      g->cpu_seconds = sqlite3_column_double(s, 2);
      g->memory_mb_seconds = sqlite3_column_double(s, 3);
      g->duration_seconds = sqlite3_column_double(s, 4);
    }
  }
  int rc = 0;
  struct sbx_usage_group *v = rows.v;
  for (size_t i = 0; i < rows.n && rc == 0; i++)
    rc = cb(ctx, &v[i]);
  free(rows.v);
  return rc < 0 ? -1 : 0;
}

static void usage_from_row(sqlite3_stmt *s, struct sbx_usage_row *r)
{
  sq_col_copy(s, 0, r->id, sizeof r->id);
  r->tenant_id = sqlite3_column_int64(s, 1);
  sq_col_copy(s, 2, r->tenant, sizeof r->tenant);
  sq_col_copy(s, 3, r->kind, sizeof r->kind);
  sq_col_copy(s, 4, r->source_id, sizeof r->source_id);
  sq_col_copy(s, 5, r->profile, sizeof r->profile);
  sq_col_copy(s, 6, r->status, sizeof r->status);
  sq_col_copy(s, 7, r->project, sizeof r->project);
  sq_col_copy(s, 8, r->agent, sizeof r->agent);
  sq_col_copy(s, 9, r->run, sizeof r->run);
  r->cpu_seconds = sqlite3_column_double(s, 10);
  r->memory_mb_seconds = sqlite3_column_double(s, 11);
  r->duration_seconds = sqlite3_column_double(s, 12);
  r->created_at = sqlite3_column_int64(s, 13);
  sq_col_copy(s, 14, r->delivery, sizeof r->delivery);
  r->attempts = sqlite3_column_int(s, 15);
  r->next_attempt_at = sqlite3_column_int64(s, 16);
  r->delivered_at = sqlite3_column_int64(s, 17);
  sq_col_copy(s, 18, r->last_error, sizeof r->last_error);
}

int sq_outbox_due(struct sbx_store *st, int64_t now, int limit, sbx_usage_cb cb, void *ctx,
                  struct sbx_error *err)
{
  struct sq_rows rows = {.elem = sizeof(struct sbx_usage_row)};
  {
    _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
    _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
    if (sq_stmt(st, SQ_OUT_DUE,
                "SELECT " USE_COLS " FROM usage_records WHERE delivery = 'pending'"
                " AND next_attempt_at <= ? ORDER BY created_at, id LIMIT ?",
                &s, err) < 0)
      return -1;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int64(s, 2, limit > 0 ? limit : -1);
    for (int rc = sq_step(s);; rc = sqlite3_step(s)) {
      if (rc == SQLITE_DONE)
        break;
      struct sbx_usage_row *r = rc == SQLITE_ROW ? sq_rows_push(&rows, err) : NULL;
      if (!r) {
        free(rows.v);
        return rc == SQLITE_ROW ? -1 : sq_fail(st, rc, "read the outbox", err);
      }
      usage_from_row(s, r);
    }
  }
  int rc = 0;
  struct sbx_usage_row *v = rows.v;
  for (size_t i = 0; i < rows.n && rc == 0; i++)
    rc = cb(ctx, &v[i]);
  free(rows.v);
  return rc < 0 ? -1 : 0;
}

int sq_outbox_mark(struct sbx_store *st, const char *id, bool delivered, int64_t next_attempt_at,
                   const char *error, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (delivered) {
    if (sq_stmt(st, SQ_OUT_DELIVERED,
                "UPDATE usage_records SET delivery = 'delivered', delivered_at = ?,"
                " attempts = attempts + 1, last_error = '' WHERE id = ?",
                &s, err) < 0)
      return -1;
    sqlite3_bind_int64(s, 1, sbx_wall_s());
    sq_bind_text(s, 2, id);
  } else {
    if (sq_stmt(st, SQ_OUT_RETRY,
                "UPDATE usage_records SET attempts = attempts + 1, next_attempt_at = ?,"
                " last_error = substr(?, 1, 255) WHERE id = ?",
                &s, err) < 0)
      return -1;
    sqlite3_bind_int64(s, 1, next_attempt_at);
    sq_bind_text(s, 2, error ? error : "");
    sq_bind_text(s, 3, id);
  }
  if (sq_exec_stmt(st, s, "mark outbox entry", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) == 0)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "usage record %s not found", id);
  return 0;
}
