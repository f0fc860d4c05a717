/* db.c — the SQLite backend's low-level helpers: the statement cache,
 * stepping with SQLITE_BUSY retry, transactions, error mapping, binding and
 * column copies.  See sqlite_int.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/fault.h"
#include "store/sqlite/sqlite_int.h"

struct sbx_store *sq_lock(struct sbx_store *st)
{
  pthread_mutex_lock(&st->lock);
  return st;
}

void sq_unlockp(struct sbx_store **st)
{
  if (*st)
    pthread_mutex_unlock(&(*st)->lock);
}

void sq_resetp(sqlite3_stmt **s)
{
  if (*s) {
    sqlite3_reset(*s);
    sqlite3_clear_bindings(*s);
  }
}

int sq_stmt(struct sbx_store *st, enum sq_slot slot, const char *sql, sqlite3_stmt **out,
            struct sbx_error *err)
{
  if (!st->stmt[slot]) {
    int rc =
        sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[slot], NULL);
    if (rc != SQLITE_OK)
      return sq_fail(st, rc, "prepare", err);
  }
  *out = st->stmt[slot];
  return 0;
}

static void busy_pause(int attempt)
{
  /* 10, 20, 40… ms: another process holds the lock; give it room. */
  struct timespec ts = {0, (long)(10 << attempt) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

static int is_busy(int rc)
{
  rc &= 0xff; /* SQLITE_BUSY_RECOVERY, SQLITE_BUSY_SNAPSHOT, … */
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

int sq_step(sqlite3_stmt *s)
{
  if (!sqlite3_stmt_readonly(s) && sbx_fault(SBX_FAULT_STORE_WRITE))
    return SQLITE_IOERR_WRITE;
  for (int attempt = 0;; attempt++) {
    int rc = sqlite3_step(s);
    if (!is_busy(rc) || attempt >= SQ_BUSY_RETRIES)
      return rc;
    sqlite3_reset(s);
    busy_pause(attempt);
  }
}

int sq_exec_stmt(struct sbx_store *st, sqlite3_stmt *s, const char *what, struct sbx_error *err)
{
  int rc = sq_step(s);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW)
    return sq_fail(st, rc, what, err);
  return 0;
}

int sq_exec_sql(struct sbx_store *st, const char *sql, const char *what, struct sbx_error *err)
{
  for (int attempt = 0;; attempt++) {
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
      return 0;
    if (!is_busy(rc) || attempt >= SQ_BUSY_RETRIES) {
      int ret = sbx_err_set(err, is_busy(rc) ? SBX_E_NOT_READY : SBX_E_INTERNAL, 0,
                            "store: %s: %s", what, msg ? msg : sqlite3_errstr(rc));
      sqlite3_free(msg);
      return ret;
    }
    sqlite3_free(msg);
    busy_pause(attempt);
  }
}

static int exec_slot(struct sbx_store *st, enum sq_slot slot, const char *sql,
                     struct sbx_error *err)
{
  sqlite3_stmt *s = NULL;
  if (sq_stmt(st, slot, sql, &s, err) < 0)
    return -1;
  int rc = sq_step(s);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE)
    return sq_fail(st, rc, sql, err);
  return 0;
}

int sq_begin(struct sbx_store *st, struct sbx_error *err)
{
  return exec_slot(st, SQ_BEGIN, "BEGIN IMMEDIATE", err);
}

int sq_commit(struct sbx_store *st, struct sbx_error *err)
{
  if (exec_slot(st, SQ_COMMIT, "COMMIT", err) == 0)
    return 0;
  sq_rollback(st);
  return -1;
}

void sq_rollback(struct sbx_store *st)
{
  /* Nothing to undo if SQLite already rolled back (e.g. after SQLITE_FULL). */
  if (!sqlite3_get_autocommit(st->db))
    exec_slot(st, SQ_ROLLBACK, "ROLLBACK", NULL);
}

int sq_fail(struct sbx_store *st, int rc, const char *what, struct sbx_error *err)
{
  /* errmsg describes the connection's last error, which rc may not be. */
  bool own = st && st->db && sqlite3_extended_errcode(st->db) == rc;
  const char *detail = own ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
  enum sbx_errcode code = SBX_E_INTERNAL;
  if ((rc & 0xff) == SQLITE_CONSTRAINT)
    code = SBX_E_CONFLICT;
  else if (is_busy(rc))
    code = SBX_E_NOT_READY;
  return sbx_err_set(err, code, 0, "store: %s: %s", what, detail);
}

void sq_bind_head(sqlite3_stmt *s, const char *id, int64_t tenant_id, const char *status,
                  const char *reason, const char *profile)
{
  sq_bind_text(s, 1, id);
  sqlite3_bind_int64(s, 2, tenant_id);
  sq_bind_text(s, 3, status);
  sq_bind_text(s, 4, reason);
  sq_bind_text(s, 5, profile);
}

int sq_bind_text(sqlite3_stmt *s, int i, const char *v)
{
  if (!v)
    return sqlite3_bind_null(s, i);
  return sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

int sq_bind_blob(sqlite3_stmt *s, int i, const void *v, size_t n)
{
  /* sqlite3_bind_blob() with a NULL pointer binds SQL NULL; a stream that
   * printed nothing is an empty blob, not "no value". */
  if (!v || n == 0)
    return sqlite3_bind_zeroblob(s, i, 0);
  return sqlite3_bind_blob64(s, i, v, n, SQLITE_STATIC);
}

void sq_col_copy(sqlite3_stmt *s, int col, char *buf, size_t size)
{
  const unsigned char *v = sqlite3_column_text(s, col);
  size_t n = v ? (size_t)sqlite3_column_bytes(s, col) : 0;
  if (n >= size)
    n = size - 1;
  if (n)
    memcpy(buf, v, n);
  buf[n] = '\0';
}

int sq_col_strdup(sqlite3_stmt *s, int col, char **out, struct sbx_error *err)
{
  *out = NULL;
  if (sqlite3_column_type(s, col) == SQLITE_NULL)
    return 0;
  const unsigned char *v = sqlite3_column_text(s, col);
  size_t n = (size_t)sqlite3_column_bytes(s, col);
  *out = malloc(n + 1);
  if (!*out)
    return sbx_err_sys(err, ENOMEM, "store: copy column");
  if (n)
    memcpy(*out, v, n);
  (*out)[n] = '\0';
  return 0;
}

int sq_col_blobdup(sqlite3_stmt *s, int col, char **out, size_t *len, struct sbx_error *err)
{
  const void *v = sqlite3_column_blob(s, col);
  size_t n = v ? (size_t)sqlite3_column_bytes(s, col) : 0;
  *out = malloc(n + 1);
  if (!*out)
    return sbx_err_sys(err, ENOMEM, "store: copy blob");
  if (n)
    memcpy(*out, v, n);
  (*out)[n] = '\0';
  *len = n;
  return 0;
}

int sq_exec_status_final(const char *status)
{
  return strcmp(status, "queued") != 0 && strcmp(status, "running") != 0;
}

void *sq_rows_push(struct sq_rows *r, struct sbx_error *err)
{
  if (sbx_array_grow(&r->v, &r->cap, r->n + 1, r->elem, SQ_ROWS_MAX) < 0) {
    sbx_err_sys(err, errno, "store: collect rows");
    return NULL;
  }
  void *e = (char *)r->v + r->n++ * r->elem;
  memset(e, 0, r->elem);
  return e;
}

int sq_cursor_time(struct sbx_store *st, enum sq_slot slot, const char *sql, int64_t tenant_id,
                   const char *after, int64_t *t, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, slot, sql, &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, after);
  int rc = sq_step(s);
  if (rc == SQLITE_DONE)
    return sbx_err_field(err, "after", "unknown pagination cursor");
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "read cursor", err);
  *t = sqlite3_column_int64(s, 0);
  return 0;
}
