/* sqlite_int.h — internals shared by the SQLite backend's files: the store
 * state, the prepared-statement cache, and the small helpers every query
 * uses (locking, stepping with SQLITE_BUSY retry, transactions, error
 * mapping, column copies).  Not part of the storage seam.
 *
 * Concurrency: one connection per store, guarded by st->lock.  Every op
 * takes the lock for its whole duration (statements and transactions
 * included) and never calls back into user code while holding it: list ops
 * collect their rows first, unlock, then run the callbacks, so a callback
 * may call the store again. */
#ifndef SBX_STORE_SQLITE_INT_H
#define SBX_STORE_SQLITE_INT_H

#include <pthread.h>
#include <sqlite3.h>

#include "store/backend.h"

/* Cached statements: one slot per query, prepared on first use. */
enum sq_slot {
  SQ_BEGIN,
  SQ_COMMIT,
  SQ_ROLLBACK,
  SQ_PING,
  SQ_TENANT_BY_NAME,
  SQ_TENANT_NEXT_ID,
  SQ_TENANT_INSERT,
  SQ_KEY_INSERT,
  SQ_KEY_GET,
  SQ_SES_INSERT,
  SQ_SES_GET,
  SQ_SES_CURSOR,
  SQ_SES_LIST,
  SQ_SES_LIST_READY,
  SQ_SES_SET_STATUS,
  SQ_SES_UPDATE,
  SQ_SES_TOUCH,
  SQ_SES_COUNT,
  SQ_EXE_INSERT,
  SQ_EXE_GET,
  SQ_EXE_FILES,
  SQ_EXE_CURSOR,
  SQ_EXE_LIST,
  SQ_EXE_LIST_STATUS,
  SQ_EXE_START,
  SQ_EXE_FINISH,
  SQ_EXE_EXISTS,
  SQ_EXE_FILE_INSERT,
  SQ_EXE_FILE_GET,
  SQ_EXE_COUNT,
  SQ_AUD_LAST,
  SQ_AUD_INSERT,
  SQ_AUD_LIST,
  SQ_AUD_SCAN,
  SQ_USE_INSERT,
  SQ_USE_BY_PROFILE,
  SQ_USE_BY_PROJECT,
  SQ_USE_BY_AGENT,
  SQ_OUT_DUE,
  SQ_OUT_DELIVERED,
  SQ_OUT_RETRY,
  SQ_TOOL_INSERT,
  SQ_TOOL_UPDATE,
  SQ_TOOL_GET,
  SQ_TOOL_LIST,
  SQ_TOOL_DELETE,
  SQ_TOOL_COUNT,
  SQ_NSLOTS
};

struct sbx_store {
  sqlite3 *db;
  pthread_mutex_t lock;
  sqlite3_stmt *stmt[SQ_NSLOTS];
};

/* SQLITE_BUSY past busy_timeout (or where SQLite skips the busy handler,
 * e.g. WAL recovery by another process) is retried this many times. */
#define SQ_BUSY_TIMEOUT_MS 5000
#define SQ_BUSY_RETRIES 5

/* Lock for the current scope: `_cleanup_sq_unlock_ struct sbx_store *l =
 * sq_lock(st);` — declare it before any statement so the statement is
 * reset first (cleanups run in reverse order). */
struct sbx_store *sq_lock(struct sbx_store *st);
void sq_unlockp(struct sbx_store **st);
#define _cleanup_sq_unlock_ __attribute__((cleanup(sq_unlockp), unused))

/* A statement borrowed from the cache, reset and unbound at scope end. */
void sq_resetp(sqlite3_stmt **s);
#define _cleanup_sq_reset_ __attribute__((cleanup(sq_resetp)))

/* The cached statement for slot (preparing sql on first use).  Caller holds
 * the lock. */
int sq_stmt(struct sbx_store *st, enum sq_slot slot, const char *sql, sqlite3_stmt **out,
            struct sbx_error *err);
/* sqlite3_step() that retries SQLITE_BUSY/LOCKED; only for the first step
 * of a statement (a retry resets it). */
int sq_step(sqlite3_stmt *s);
/* Steps a statement that returns no rows; 0 or -1 with err. */
int sq_exec_stmt(struct sbx_store *st, sqlite3_stmt *s, const char *what, struct sbx_error *err);
/* sqlite3_exec() with BUSY retry, for pragmas and migration scripts. */
int sq_exec_sql(struct sbx_store *st, const char *sql, const char *what, struct sbx_error *err);

/* BEGIN IMMEDIATE (the write lock up front, so a transaction never fails
 * half-way on a lock upgrade), COMMIT, ROLLBACK (best effort). */
int sq_begin(struct sbx_store *st, struct sbx_error *err);
int sq_commit(struct sbx_store *st, struct sbx_error *err);
void sq_rollback(struct sbx_store *st);

/* created_at of the pagination cursor row `after`, looked up within the
 * tenant by a "SELECT created_at … WHERE tenant_id = ? AND id = ?"
 * statement (sessions and executions page the same way).  An unknown id is
 * SBX_E_INVALID with field "after".  Caller holds the store lock. */
int sq_cursor_time(struct sbx_store *st, enum sq_slot slot, const char *sql, int64_t tenant_id,
                   const char *after, int64_t *t, struct sbx_error *err);

/* err from an SQLite result code: CONSTRAINT → SBX_E_CONFLICT, BUSY/LOCKED
 * → SBX_E_NOT_READY, others → SBX_E_INTERNAL.  Returns -1. */
int sq_fail(struct sbx_store *st, int rc, const char *what, struct sbx_error *err);

/* Binding helpers: NULL text binds SQL NULL; a zero-length blob binds an
 * empty blob (not NULL). */
int sq_bind_text(sqlite3_stmt *s, int i, const char *v);
/* ?1…?5: the first five columns sessions and executions share (id,
 * tenant_id, status, reason, profile). */
void sq_bind_head(sqlite3_stmt *s, const char *id, int64_t tenant_id, const char *status,
                  const char *reason, const char *profile);
int sq_bind_blob(sqlite3_stmt *s, int i, const void *v, size_t n);

/* Column helpers. */
void sq_col_copy(sqlite3_stmt *s, int col, char *buf, size_t size);
/* malloc'd copy of a TEXT column, NULL when the column is NULL. */
int sq_col_strdup(sqlite3_stmt *s, int col, char **out, struct sbx_error *err);
/* malloc'd copy of a BLOB column plus a trailing NUL (never NULL on success). */
int sq_col_blobdup(sqlite3_stmt *s, int col, char **out, size_t *len, struct sbx_error *err);

/* True if status is a final execution status (not queued/running). */
int sq_exec_status_final(const char *status);

/* A growable array of rows collected under the lock, at most SQ_ROWS_MAX
 * (a listing without a limit: every ready session, every running exec). */
#define SQ_ROWS_MAX (1u << 22)
struct sq_rows {
  void *v;
  size_t n, cap, elem;
};
/* A zeroed new element at the end, or NULL (err set). */
void *sq_rows_push(struct sq_rows *r, struct sbx_error *err);

/* A table the list ops page through (list.c): how its rows decode, which
 * callback and row type it has, and its two paging statements. */
struct sq_kind {
  enum sbx_store_table table;
  int (*from_row)(sqlite3_stmt *s, void *out, struct sbx_error *err);
  enum sq_slot cursor_slot, page_slot;
  const char *cursor_sql, *page_sql;
};
/* The paging statements of a table: newest first; (created_at, id) is a
 * total order, so a page boundary inside one second neither repeats nor
 * skips a row.  Binds ?1 tenant, ?2 status or NULL, ?3 after or NULL,
 * ?4 the cursor's created_at, ?5 limit (-1: none). */
#define SQ_CURSOR_SQL(table) "SELECT created_at FROM " table " WHERE tenant_id = ? AND id = ?"
#define SQ_PAGE_SQL(cols, table)                                                                \
  "SELECT " cols " FROM " table " WHERE tenant_id = ?1"                                         \
  " AND (?2 IS NULL OR status = ?2)"                                                            \
  " AND (?3 IS NULL OR created_at < ?4 OR (created_at = ?4 AND id < ?3))"                       \
  " ORDER BY created_at DESC, id DESC LIMIT ?5"
#define SQ_COUNT_SQL(table)                                                                     \
  "SELECT COUNT(*) FROM " table " WHERE tenant_id = ?1 AND (?2 IS NULL OR status = ?2)"

/* Rows of s (bound, first step not taken) decoded by k into rows; then
 * handed to cb outside the lock and freed (ret: the collect's outcome). */
int sq_rows_collect(struct sbx_store *st, const struct sq_kind *k, sqlite3_stmt *s,
                    struct sq_rows *rows, struct sbx_error *err);
int sq_rows_deliver(const struct sq_kind *k, struct sq_rows *rows, int ret,
                    union sbx_store_cb cb, void *ctx, struct sbx_error *err);

/* The contract of session_list/execution_list in store/store.h, for k. */
int sq_list_page(struct sbx_store *st, const struct sq_kind *k, int64_t tenant_id,
                 const char *status, const char *after, int limit, union sbx_store_cb cb,
                 void *ctx, struct sbx_error *err);
/* The tenant's row id by sql (?1 tenant, ?2 id), decoded by from_row into
 * out; "<what> not found" is SBX_E_NOT_FOUND.  Caller holds the lock. */
int sq_get_one(struct sbx_store *st, enum sq_slot slot, const char *sql, int64_t tenant_id,
               const char *id,
               int (*from_row)(sqlite3_stmt *s, void *out, struct sbx_error *err), void *out,
               const char *what, struct sbx_error *err);
/* Every row sql selects (any tenant), status bound as ?1 unless NULL. */
int sq_list_all(struct sbx_store *st, const struct sq_kind *k, enum sq_slot slot,
                const char *sql, const char *status, union sbx_store_cb cb, void *ctx,
                struct sbx_error *err);
/* The tenant's rows in status (NULL: any) by a SQ_COUNT_SQL statement. */
int sq_count(struct sbx_store *st, enum sq_slot slot, const char *sql, int64_t tenant_id,
             const char *status, int64_t *count, struct sbx_error *err);

/* Migrations (migrate.c): applies pending ones, refuses a newer schema. */
int sq_migrate(struct sbx_store *st, struct sbx_error *err);

/* The ops, one file per table family; contracts in store/store.h.
 * sq_tenant_ensure, sq_session_list, … with the seam's types. */
#define SQ_DECLARE_OP(op) SBX_STORE_OP_TYPE(op) sq_##op;
SBX_STORE_TABLE_OPS(SQ_DECLARE_OP)
#undef SQ_DECLARE_OP
/* usage_insert with the store lock already held, inside the caller's
 * transaction (execution_finish). */
int sq_usage_insert_row(struct sbx_store *st, const struct sbx_usage_row *row,
                        struct sbx_error *err);

#endif
