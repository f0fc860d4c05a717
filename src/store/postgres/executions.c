/* executions.c — PostgreSQL queries for executions and their collected
 * files.  The state machine lives in the WHERE clauses as in the SQLite
 * backend: start moves only queued → running; finish writes only a row
 * that is not final yet, with its files, in one transaction.  Under READ
 * COMMITTED a second UPDATE of the same row waits for the first to commit
 * and then re-checks the status, so a cancel racing a finish has exactly
 * one winner.  Output and file contents are bytea sent as binary
 * parameters (binary-safe). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/postgres/pg_int.h"

static int exec_from_row(const PGresult *r, int i, void *row, struct sbx_error *err)
{
  struct sbx_execution_row *out = row;
  memset(out, 0, sizeof *out);
  PR_HEAD(r, i, out);
  out->exit_code = (int)pr_i64(r, i, 7);
  out->signal = (int)pr_i64(r, i, 8);
  out->std_out.truncated = pr_i64(r, i, 10) != 0;
  out->std_out.dropped = (uint64_t)pr_i64(r, i, 11);
  out->std_err.truncated = pr_i64(r, i, 13) != 0;
  out->std_err.dropped = (uint64_t)pr_i64(r, i, 14);
  out->cpu_seconds = pr_f64(r, i, 15);
  out->memory_mb_seconds = pr_f64(r, i, 16);
  out->duration_seconds = pr_f64(r, i, 17);
  out->memory_peak_bytes = (uint64_t)pr_i64(r, i, 18);
  out->created_at = pr_i64(r, i, 20);
  out->started_at = pr_i64(r, i, 21);
  out->finished_at = pr_i64(r, i, 22);
  out->updated_at = pr_i64(r, i, 23);
  pr_copy(r, i, 24, out->node_id, sizeof out->node_id);
  out->oom_kills = (uint64_t)pr_i64(r, i, 25);
  if (pr_strdup(r, i, 5, &out->request_json, err) < 0 ||
      pr_strdup(r, i, 6, &out->metadata_json, err) < 0 ||
      pr_strdup(r, i, 19, &out->error_json, err) < 0 ||
      pr_bytea(r, i, 9, &out->std_out.buf, &out->std_out.len, err) < 0 ||
      pr_bytea(r, i, 12, &out->std_err.buf, &out->std_err.len, err) < 0) {
    sbx_execution_row_free(out);
    return -1;
  }
  return 0;
}

/* Listings carry summary rows (no output). */
static const struct pg_kind executions =
    SBX_STORE_KIND(PG, EXECUTIONS, exec_from_row, PGQ_EXE, EXE_SUMMARY_COLS, "executions");

/* The 13 outcome columns, in table order from exit_code to error_json
 * (insert and finish write the same set). */
static void pp_outcome(struct pg_params *p, const struct sbx_execution_row *row)
{
  pp_i64(p, row->exit_code);
  pp_i64(p, row->signal);
  pp_bytes(p, row->std_out.buf, row->std_out.len);
  pp_i64(p, row->std_out.truncated);
  pp_i64(p, (int64_t)row->std_out.dropped);
  pp_bytes(p, row->std_err.buf, row->std_err.len);
  pp_i64(p, row->std_err.truncated);
  pp_i64(p, (int64_t)row->std_err.dropped);
  pp_f64(p, row->cpu_seconds);
  pp_f64(p, row->memory_mb_seconds);
  pp_f64(p, row->duration_seconds);
  pp_i64(p, (int64_t)row->memory_peak_bytes);
  pp_text(p, row->error_json);
}

static void pp_insert(struct pg_params *p, const struct sbx_execution_row *row);
#define EXE_INSERT_SQL                                                                          \
  "INSERT INTO executions (" EXE_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"           \
  " $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)"

int pg_execution_insert(struct sbx_store *st, const struct sbx_execution_row *row,
                        struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_insert(&p, row);
  return pg_run(st, row->tenant_id, PGQ_EXE_INSERT, EXE_INSERT_SQL, &p, NULL, err);
}

int pg_execution_insert_tx(struct pg_tx *tx, const struct sbx_execution_row *row,
                           struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_insert(&p, row);
  return pg_exec(tx, PGQ_EXE_INSERT, EXE_INSERT_SQL, &p, err);
}

static void pp_insert(struct pg_params *p, const struct sbx_execution_row *row)
{
  int64_t created = row->created_at ? row->created_at : sbx_wall_s();
  pp_head(p, row->id, row->tenant_id, row->status, row->reason, row->profile);
  pp_text(p, row->request_json);
  pp_text(p, row->metadata_json);
  pp_outcome(p, row); /* $8 … $20 */
  pp_i64(p, created);
  pp_i64(p, row->started_at);
  pp_i64(p, row->finished_at);
  pp_i64(p, row->updated_at ? row->updated_at : created);
  pp_text(p, row->node_id);
  pp_i64(p, (int64_t)row->oom_kills);
}

/* Status of the tenant's execution: 1 found (copied), 0 not, -1 error. */
static int exec_status(struct pg_tx *tx, int64_t tenant_id, const char *id, char *status,
                       size_t size, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  _cleanup_pg_res_ PGresult *r =
      pg_q(tx, PGQ_EXE_STATUS, "SELECT status FROM executions WHERE tenant_id = $1 AND id = $2",
           &p, false, err);
  if (!r)
    return -1;
  if (PQntuples(r) != 1)
    return 0;
  pr_copy(r, 0, 0, status, size);
  return 1;
}

/* Why an UPDATE guarded by status matched nothing: gone, or wrong state. */
static int explain_no_change(struct pg_tx *tx, int64_t tenant_id, const char *id,
                             const char *wanted, struct sbx_error *err)
{
  char status[16] = "";
  int found = exec_status(tx, tenant_id, id, status, sizeof status, err);
  return sbx_store_explain_no_change(found, status, wanted, err);
}

static int load_files(struct pg_tx *tx, struct sbx_execution_row *out, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_i64(&p, out->tenant_id);
  pp_text(&p, out->id);
  _cleanup_pg_res_ PGresult *r =
      pg_q(tx, PGQ_EXE_FILES,
           "SELECT f.path, f.size, f.sha256 FROM execution_files f"
           " JOIN executions e ON e.id = f.execution_id"
           " WHERE e.tenant_id = $1 AND e.id = $2 ORDER BY f.path COLLATE \"C\"",
           &p, false, err);
  if (!r)
    return -1;
  int n = PQntuples(r);
  if (n == 0)
    return 0;
  out->files = calloc((size_t)n, sizeof *out->files);
  if (!out->files)
    return sbx_err_sys(err, ENOMEM, "store: list execution files");
  for (int i = 0; i < n; i++) {
    pr_copy(r, i, 0, out->files[i].path, sizeof out->files[i].path);
    out->files[i].size = (uint64_t)pr_i64(r, i, 1);
    pr_copy(r, i, 2, out->files[i].sha256, sizeof out->files[i].sha256);
  }
  out->nfiles = (size_t)n;
  return 0;
}

int pg_execution_get(struct sbx_store *st, int64_t tenant_id, const char *id,
                     struct sbx_execution_row *out, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  _cleanup_pg_res_ PGresult *r =
      pg_get_one(&tx, PGQ_EXE_GET,
                 "SELECT " EXE_COLS " FROM executions WHERE tenant_id = $1 AND id = $2",
                 tenant_id, id, "execution not found", err);
  int ret = r ? exec_from_row(r, 0, out, err) : -1;
  if (ret == 0 && load_files(&tx, out, err) < 0) {
    sbx_execution_row_free(out);
    ret = -1;
  }
  ret = pg_end(&tx, ret, err);
  if (ret < 0 && r)
    sbx_execution_row_free(out); /* the commit failed after the row was built */
  return ret;
}

int pg_execution_list(struct sbx_store *st, int64_t tenant_id, const char *status,
                      const char *after, int limit, sbx_execution_cb cb, void *ctx,
                      struct sbx_error *err)
{
  return pg_list_page(st, &executions, tenant_id, status, after, limit,
                      (union sbx_store_cb){.execution = cb}, ctx, err);
}

int pg_execution_list_status(struct sbx_store *st, const char *status, sbx_execution_cb cb,
                             void *ctx, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_text(&p, status);
  PGresult *r =
      pg_q(&tx, PGQ_EXE_LIST_STATUS,
           "SELECT " EXE_SUMMARY_COLS " FROM sbx_executions_in_status($1)", &p, false, err);
  return pg_end_and_deliver(&executions, &tx, r, (union sbx_store_cb){.execution = cb}, ctx,
                            err);
}

int pg_execution_start(struct sbx_store *st, int64_t tenant_id, const char *id,
                       const char *node_id, int64_t started_at, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_i64(&p, started_at);
  pp_i64(&p, sbx_wall_s());
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  pp_text(&p, node_id);
  _cleanup_pg_res_ PGresult *r =
      pg_q(&tx, PGQ_EXE_START,
           "UPDATE executions SET status = 'running', started_at = $1, updated_at = $2,"
           " node_id = COALESCE($5::text, node_id)"
           " WHERE tenant_id = $3 AND id = $4 AND status = 'queued'"
           " AND ($5::text IS NULL OR node_id = $5)",
           &p, false, err);
  int ret = r ? 0 : -1;
  if (r && pg_changes(r) == 0)
    ret = explain_no_change(&tx, tenant_id, id, "queued", err);
  return pg_end(&tx, ret, err);
}

static int finish_row(struct pg_tx *tx, const struct sbx_execution_row *row,
                      struct sbx_error *err)
{
  int64_t now = sbx_wall_s();
  struct pg_params p = {0};
  pp_text(&p, row->status);
  pp_text(&p, row->reason);
  pp_outcome(&p, row); /* $3 … $15 */
  pp_i64(&p, row->started_at);
  pp_i64(&p, row->finished_at ? row->finished_at : now);
  pp_i64(&p, now);
  pp_i64(&p, row->tenant_id);
  pp_text(&p, row->id);
  pp_i64(&p, (int64_t)row->oom_kills);
  _cleanup_pg_res_ PGresult *r =
      pg_q(tx, PGQ_EXE_FINISH,
           "UPDATE executions SET status = $1, reason = $2, exit_code = $3, term_signal = $4,"
           " stdout = $5, stdout_truncated = $6, stdout_dropped = $7,"
           " stderr = $8, stderr_truncated = $9, stderr_dropped = $10,"
           " cpu_seconds = $11, memory_mb_seconds = $12, duration_seconds = $13,"
           " memory_peak_bytes = $14, error_json = $15,"
           " started_at = CASE WHEN $16::bigint > 0 THEN $16 ELSE started_at END,"
           " finished_at = $17, updated_at = $18, oom_kills = $21"
           " WHERE tenant_id = $19 AND id = $20 AND status IN ('queued', 'running')",
           &p, false, err);
  if (!r)
    return -1;
  if (pg_changes(r) == 0)
    return explain_no_change(tx, row->tenant_id, row->id, "queued or running", err);
  return 0;
}

static int insert_file(struct pg_tx *tx, const char *exec_id, const struct sbx_exec_file_blob *f,
                       struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, exec_id);
  pp_text(&p, f->path);
  pp_i64(&p, (int64_t)f->size);
  pp_text(&p, f->sha256);
  pp_bytes(&p, f->data, f->size);
  _cleanup_pg_res_ PGresult *r =
      pg_q(tx, PGQ_EXE_FILE_INSERT,
           "INSERT INTO execution_files (execution_id, path, size, sha256, content)"
           " VALUES ($1, $2, $3, $4, $5)",
           &p, false, err);
  if (!r)
    return sbx_err_prefix(err, "%s", f->path);
  return 0;
}

int pg_execution_finish(struct sbx_store *st, const struct sbx_execution_row *row,
                        const struct sbx_exec_file_blob *files, size_t nfiles,
                        const struct sbx_usage_row *usage, struct sbx_error *err)
{
  if (!strcmp(row->status, "queued") || !strcmp(row->status, "running"))
    return sbx_err_set(err, SBX_E_INTERNAL, 0,
                       "store: execution_finish needs a final status, got '%s'", row->status);
  struct pg_tx tx;
  if (pg_begin(st, &tx, row->tenant_id, err) < 0)
    return -1;
  int ret = finish_row(&tx, row, err);
  for (size_t i = 0; ret == 0 && i < nfiles; i++)
    ret = insert_file(&tx, row->id, &files[i], err);
  if (ret == 0 && usage)
    ret = pg_usage_insert_tx(&tx, usage, err);
  return pg_end(&tx, ret, err);
}

int pg_execution_file_get(struct sbx_store *st, int64_t tenant_id, const char *id,
                          const char *path, void **data, size_t *size, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_i64(&p, tenant_id);
  pp_text(&p, id);
  pp_text(&p, path);
  /* Binary result: the lone bytea column arrives as raw bytes. */
  _cleanup_pg_res_ PGresult *r =
      pg_q(&tx, PGQ_EXE_FILE_GET,
           "SELECT f.content FROM execution_files f JOIN executions e ON e.id = f.execution_id"
           " WHERE e.tenant_id = $1 AND e.id = $2 AND f.path = $3",
           &p, true, err);
  int ret = r ? 0 : -1;
  char *buf = NULL;
  size_t n = 0;
  if (r && PQntuples(r) == 1) {
    n = PQgetisnull(r, 0, 0) ? 0 : (size_t)PQgetlength(r, 0, 0);
    buf = malloc(n + 1);
    if (!buf) {
      ret = sbx_err_sys(err, ENOMEM, "store: copy file");
    } else {
      if (n)
        memcpy(buf, PQgetvalue(r, 0, 0), n);
      buf[n] = '\0';
    }
  } else if (r) {
    char status[16];
    int found = exec_status(&tx, tenant_id, id, status, sizeof status, err);
    ret = found < 0 ? -1
                    : sbx_err_set(err, SBX_E_NOT_FOUND, 0,
                                  found ? "file not found" : "execution not found");
  }
  if (pg_end(&tx, ret, err) < 0) {
    free(buf);
    return -1;
  }
  *data = buf;
  *size = n;
  return 0;
}

int pg_execution_count(struct sbx_store *st, int64_t tenant_id, const char *status,
                       int64_t *count, struct sbx_error *err)
{
  return pg_count(st, PGQ_EXE_COUNT, PG_COUNT_SQL("executions"), tenant_id, status, count, err);
}
