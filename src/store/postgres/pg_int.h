/* pg_int.h — internals shared by the PostgreSQL backend's files: the store
 * state (a small connection pool), transactions scoped to one tenant, the
 * prepared-statement slots, parameter building, result decoding and error
 * mapping.  Not part of the storage seam.
 *
 * Every op runs in one transaction on one pooled connection:
 *   pg_begin(st, &tx, tenant_id)  BEGIN; SELECT set_config('app.tenant_id', id, true)
 *   pg_q(&tx, slot, sql, &params)  as many statements as the op needs
 *   pg_end(&tx, ret)               COMMIT if ret == 0, else ROLLBACK
 * so row-level security sees the tenant (docs/postgres.md), and an op that
 * fails half-way leaves nothing behind.  tenant_id PG_NO_TENANT begins
 * without a tenant: tenant tables then show no rows, only the SECURITY
 * DEFINER functions of 0003_rls.postgres.sql reach across tenants.
 *
 * Connections are opened lazily and reset after the server went away; a
 * transaction whose very first round trip fails on a dead connection is
 * retried once on a fresh one (nothing was sent that could have been
 * applied).  Callbacks of list ops run after pg_end, with no connection
 * held, so they may call the store again. */
#ifndef SBX_STORE_PG_INT_H
#define SBX_STORE_PG_INT_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>

#include "store/backend.h"

#define PG_POOL_MAX 4
#define PG_NO_TENANT (-1)
/* Advisory lock keys (pg_advisory_xact_lock): one per serialised job.  The
 * tenant key 5862001 is used inside sbx_tenant_ensure() (SQL). */
#define PG_LOCK_MIGRATE 5862000
#define PG_LOCK_AUDIT 5862002

/* Prepared statements: one slot per query, prepared per connection on
 * first use. */
enum pg_slot {
  PGQ_PING,
  PGQ_TENANT_ENSURE,
  PGQ_KEY_INSERT,
  PGQ_KEY_GET,
  PGQ_SES_INSERT,
  PGQ_SES_GET,
  PGQ_SES_CURSOR,
  PGQ_SES_LIST,
  PGQ_SES_LIST_READY,
  PGQ_SES_SET_STATUS,
  PGQ_SES_UPDATE,
  PGQ_SES_TOUCH,
  PGQ_SES_COUNT,
  PGQ_EXE_INSERT,
  PGQ_EXE_GET,
  PGQ_EXE_FILES,
  PGQ_EXE_CURSOR,
  PGQ_EXE_LIST,
  PGQ_EXE_LIST_STATUS,
  PGQ_EXE_START,
  PGQ_EXE_FINISH,
  PGQ_EXE_STATUS,
  PGQ_EXE_FILE_INSERT,
  PGQ_EXE_FILE_GET,
  PGQ_EXE_COUNT,
  PGQ_AUD_LOCK,
  PGQ_AUD_HEAD,
  PGQ_AUD_INSERT,
  PGQ_AUD_LIST,
  PGQ_AUD_ALL,
  PGQ_USE_INSERT,
  PGQ_USE_BY_PROFILE,
  PGQ_USE_BY_PROJECT,
  PGQ_USE_BY_AGENT,
  PGQ_OUT_DUE,
  PGQ_OUT_MARK,
  PGQ_TOOL_INSERT,
  PGQ_TOOL_UPDATE,
  PGQ_TOOL_GET,
  PGQ_TOOL_LIST,
  PGQ_TOOL_DELETE,
  PGQ_TOOL_COUNT,
  PGQ_NODE_JOIN,
  PGQ_NODE_BEAT,
  PGQ_NODE_LEAVE,
  PGQ_NODE_LIST,
  PGQ_NODE_RESERVE,
  PGQ_NODE_REAP,
  PGQ_NODE_RELEASE,
  PGQ_EXEC_CLAIM,
  PGQ_EXEC_RENEW,
  PGQ_QUEUE_STATS,
  PGQ_EXEC_QUOTA_LOCK,
  PGQ_EXEC_QUOTA_COUNT,
  PGQ_SES_QUOTA_LOCK,
  PGQ_SES_QUOTA_COUNT,
  PGQ_SES_HOLD,
  PGQ_SES_UNHOLD,
  PGQ_NSLOTS
};

struct pg_conn {
  PGconn *c;
  bool in_use;
  bool prepared[PGQ_NSLOTS];
};

struct sbx_store {
  char *url; /* may hold a password: never logged, never in an error */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct pg_conn conns[PG_POOL_MAX];
};

struct pg_tx {
  struct sbx_store *st;
  struct pg_conn *pc;
};

/* Query parameters: text, except bytea which goes binary (binary-safe). */
#define PG_MAXP 32
struct pg_params {
  int n;
  const char *v[PG_MAXP];
  int len[PG_MAXP];
  int fmt[PG_MAXP];
  char num[PG_MAXP][32];
};
void pp_text(struct pg_params *p, const char *s); /* NULL → SQL NULL */
/* The first five columns sessions and executions share: id, tenant_id,
 * status, reason, profile. */
void pp_head(struct pg_params *p, const char *id, int64_t tenant_id, const char *status,
             const char *reason, const char *profile);
void pp_i64(struct pg_params *p, int64_t v);
void pp_f64(struct pg_params *p, double v);
void pp_bool(struct pg_params *p, bool v);
void pp_bytes(struct pg_params *p, const void *data, size_t n); /* never NULL */

/* Connections (pool.c). */
PGconn *pg_connect(const char *url, struct sbx_error *err);
int pg_begin(struct sbx_store *st, struct pg_tx *tx, int64_t tenant_id, struct sbx_error *err);
/* Runs a prepared statement; the result (TUPLES_OK or COMMAND_OK) or NULL
 * with err set.  binary_result: all result columns in binary format (for a
 * lone bytea column). */
PGresult *pg_q(struct pg_tx *tx, enum pg_slot slot, const char *sql, const struct pg_params *p,
               bool binary_result, struct sbx_error *err);
/* Runs a statement whose result is not needed: 0, or -1 with err. */
int pg_exec(struct pg_tx *tx, enum pg_slot slot, const char *sql, const struct pg_params *p,
            struct sbx_error *err);
/* created_at of the pagination cursor row `after` within the tenant, by a
 * "SELECT created_at … WHERE tenant_id = $1 AND id = $2" statement
 * (sessions and executions page the same way).  An unknown id is
 * SBX_E_INVALID with field "after".  Returns 0 or -1. */
int pg_cursor_time(struct pg_tx *tx, enum pg_slot slot, const char *sql, int64_t tenant_id,
                   const char *after, int64_t *t, struct sbx_error *err);
/* Runs one statement alone in a transaction scoped to tenant_id and keeps
 * its result (NULL with err when it or the commit failed). */
PGresult *pg_run_keep(struct sbx_store *st, int64_t tenant_id, enum pg_slot slot,
                      const char *sql, const struct pg_params *p, struct sbx_error *err);
/* Same, and NULL unless exactly one row came back: NOT_FOUND with msg. */
PGresult *pg_q1(struct pg_tx *tx, enum pg_slot slot, const char *sql, const struct pg_params *p,
                const char *not_found, struct sbx_error *err);
/* Runs one statement alone in a transaction scoped to tenant_id.  With
 * not_found set, a statement that changed no row is NOT_FOUND with that
 * message.  Returns 0 or -1. */
int pg_run(struct sbx_store *st, int64_t tenant_id, enum pg_slot slot, const char *sql,
           const struct pg_params *p, const char *not_found, struct sbx_error *err);
/* Ends the transaction (COMMIT when ret == 0, else ROLLBACK) and returns
 * the connection to the pool; returns ret, or -1 if the commit failed. */
int pg_end(struct pg_tx *tx, int ret, struct sbx_error *err);
/* pg_end with r's outcome (r NULL: failed), keeping r for the caller:
 * r, or NULL (r cleared) when it failed or the commit did. */
PGresult *pg_end_keep(struct pg_tx *tx, PGresult *r, struct sbx_error *err);
/* Rows changed by an UPDATE/INSERT result. */
long pg_changes(PGresult *r);

/* err from a failed result or connection: 23xxx → CONFLICT, connection
 * lost / server shutting down or starting → NOT_READY, others INTERNAL.
 * res may be NULL.  Returns -1. */
int pg_fail(PGconn *c, PGresult *res, const char *what, struct sbx_error *err);

static inline void pg_clearp(PGresult **r)
{
  if (*r)
    PQclear(*r);
}
#define _cleanup_pg_res_ __attribute__((cleanup(pg_clearp)))

/* Result columns (text format). */
/* The five head columns pp_head writes, decoded into a session or an
 * execution row (both have these members). */
#define PR_HEAD(r, i, out)                                                                      \
  do {                                                                                          \
    pr_copy(r, i, 0, (out)->id, sizeof(out)->id);                                               \
    (out)->tenant_id = pr_i64(r, i, 1);                                                         \
    pr_copy(r, i, 2, (out)->status, sizeof(out)->status);                                       \
    pr_copy(r, i, 3, (out)->reason, sizeof(out)->reason);                                       \
    pr_copy(r, i, 4, (out)->profile, sizeof(out)->profile);                                     \
  } while (0)
int64_t pr_i64(const PGresult *r, int row, int col);
double pr_f64(const PGresult *r, int row, int col);
void pr_copy(const PGresult *r, int row, int col, char *buf, size_t size);
/* malloc'd copy, NULL when SQL NULL. */
int pr_strdup(const PGresult *r, int row, int col, char **out, struct sbx_error *err);
/* A text-format bytea column decoded into a malloc'd buffer plus a NUL;
 * SQL NULL leaves *out NULL (list rows). */
int pr_bytea(const PGresult *r, int row, int col, char **out, size_t *len,
             struct sbx_error *err);

/* A table the list ops page through (list.c): how its rows decode, which
 * callback and row type it has, and its two paging statements. */
struct pg_kind {
  enum sbx_store_table table;
  int (*from_row)(const PGresult *r, int i, void *out, struct sbx_error *err);
  enum pg_slot cursor_slot, page_slot;
  const char *cursor_sql, *page_sql;
};
/* The paging statements of a table: newest first; (created_at, id) is a
 * total order, so a page boundary inside one second neither repeats nor
 * skips a row.  $1 tenant, $2 status or NULL, $3 after or NULL, $4 the
 * cursor's created_at, $5 limit (NULL: none). */
#define PG_CURSOR_SQL(table) "SELECT created_at FROM " table " WHERE tenant_id = $1 AND id = $2"
#define PG_PAGE_SQL(cols, table)                                                                \
  "SELECT " cols " FROM " table " WHERE tenant_id = $1"                                         \
  " AND ($2::text IS NULL OR status = $2)"                                                      \
  " AND ($3::text IS NULL OR created_at < $4"                                                   \
  "      OR (created_at = $4 AND id COLLATE \"C\" < $3))"                                       \
  " ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT $5"
#define PG_COUNT_SQL(table)                                                                     \
  "SELECT COUNT(*) FROM " table " WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)"

/* The contract of session_list/execution_list in store/store.h, for k. */
int pg_list_page(struct sbx_store *st, const struct pg_kind *k, int64_t tenant_id,
                 const char *status, const char *after, int limit, union sbx_store_cb cb,
                 void *ctx, struct sbx_error *err);
/* The tenant's row id by sql ($1 tenant, $2 id): pg_q1 with not_found. */
PGresult *pg_get_one(struct pg_tx *tx, enum pg_slot slot, const char *sql, int64_t tenant_id,
                     const char *id, const char *not_found, struct sbx_error *err);
/* Ends tx with r's outcome, then hands r's rows to the callback. */
int pg_end_and_deliver(const struct pg_kind *k, struct pg_tx *tx, PGresult *r,
                       union sbx_store_cb cb, void *ctx, struct sbx_error *err);
/* The tenant's rows in status (NULL: any) by a PG_COUNT_SQL statement. */
int pg_count(struct sbx_store *st, enum pg_slot slot, const char *sql, int64_t tenant_id,
             const char *status, int64_t *count, struct sbx_error *err);

/* Migrations (migrate.c), on a connection of the schema owner. */
int pg_migrate(PGconn *c, struct sbx_error *err);
/* The app role's checks at open: schema version, not a superuser / owner,
 * RLS forced on every tenant table. */
int pg_check_schema(PGconn *c, struct sbx_error *err);
int pg_check_role(PGconn *c, struct sbx_error *err);

/* The ops, one file per table family; contracts in store/store.h.
 * pg_tenant_ensure, pg_session_list, … with the seam's types. */
#define PG_DECLARE_OP(op) SBX_STORE_OP_TYPE(op) pg_##op;
SBX_STORE_TABLE_OPS(PG_DECLARE_OP)
#undef PG_DECLARE_OP
/* execution_insert inside a transaction the caller holds (fleet.c). */
int pg_execution_insert_tx(struct pg_tx *tx, const struct sbx_execution_row *row,
                           struct sbx_error *err);
/* usage_insert inside a transaction the caller holds (execution_finish). */
int pg_usage_insert_tx(struct pg_tx *tx, const struct sbx_usage_row *row, struct sbx_error *err);
/* The fleet's ops (fleet.c). */
extern const struct sbx_store_fleet_ops pg_fleet_ops;

#endif
