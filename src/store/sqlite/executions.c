/* executions.c — SQLite queries for executions and their collected files.
 *
 * The state machine the API relies on is enforced here, in the WHERE
 * clauses, so it holds across threads and processes: start moves only
 * queued → running, finish writes only a row that is not final yet, and the
 * final row and its files land in one transaction (a cancel racing a finish
 * sees exactly one winner; the other gets SBX_E_CONFLICT). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

static void exec_scalars(sqlite3_stmt *s, struct sbx_execution_row *out)
{
  sq_col_copy(s, 0, out->id, sizeof out->id);
  out->tenant_id = sqlite3_column_int64(s, 1);
  sq_col_copy(s, 2, out->status, sizeof out->status);
  sq_col_copy(s, 3, out->reason, sizeof out->reason);
  sq_col_copy(s, 4, out->profile, sizeof out->profile);
  out->exit_code = sqlite3_column_int(s, 7);
  out->signal = sqlite3_column_int(s, 8);
  out->std_out.truncated = sqlite3_column_int(s, 10) != 0;
  out->std_out.dropped = (uint64_t)sqlite3_column_int64(s, 11);
  out->std_err.truncated = sqlite3_column_int(s, 13) != 0;
  out->std_err.dropped = (uint64_t)sqlite3_column_int64(s, 14);
  out->cpu_seconds = sqlite3_column_double(s, 15);
  out->memory_mb_seconds = sqlite3_column_double(s, 16);
  out->duration_seconds = sqlite3_column_double(s, 17);
  out->memory_peak_bytes = (uint64_t)sqlite3_column_int64(s, 18);
  out->created_at = sqlite3_column_int64(s, 20);
  out->started_at = sqlite3_column_int64(s, 21);
  out->finished_at = sqlite3_column_int64(s, 22);
  out->updated_at = sqlite3_column_int64(s, 23);
  sq_col_copy(s, 24, out->node_id, sizeof out->node_id);
  out->oom_kills = (uint64_t)sqlite3_column_int64(s, 25);
}

static int output_dup(sqlite3_stmt *s, int col, char **buf, size_t *len, struct sbx_error *err)
{
  if (sqlite3_column_type(s, col) == SQLITE_NULL)
    return 0; /* a list row: output not loaded */
  return sq_col_blobdup(s, col, buf, len, err);
}

static int exec_from_row(sqlite3_stmt *s, void *row, struct sbx_error *err)
{
  struct sbx_execution_row *out = row;
  memset(out, 0, sizeof *out);
  exec_scalars(s, out);
  if (sq_col_strdup(s, 5, &out->request_json, err) < 0 ||
      sq_col_strdup(s, 6, &out->metadata_json, err) < 0 ||
      sq_col_strdup(s, 19, &out->error_json, err) < 0 ||
      output_dup(s, 9, &out->std_out.buf, &out->std_out.len, err) < 0 ||
      output_dup(s, 12, &out->std_err.buf, &out->std_err.len, err) < 0) {
    sbx_execution_row_free(out);
    return -1;
  }
  return 0;
}

/* The 13 outcome columns, in table order from exit_code to error_json,
 * bound from parameter `first` on (insert and finish write the same set). */
static void bind_outcome(sqlite3_stmt *s, int first, const struct sbx_execution_row *row)
{
  int i = first;
  sqlite3_bind_int(s, i++, row->exit_code);
  sqlite3_bind_int(s, i++, row->signal);
  sq_bind_blob(s, i++, row->std_out.buf, row->std_out.len);
  sqlite3_bind_int(s, i++, row->std_out.truncated);
  sqlite3_bind_int64(s, i++, (int64_t)row->std_out.dropped);
  sq_bind_blob(s, i++, row->std_err.buf, row->std_err.len);
  sqlite3_bind_int(s, i++, row->std_err.truncated);
  sqlite3_bind_int64(s, i++, (int64_t)row->std_err.dropped);
  sqlite3_bind_double(s, i++, row->cpu_seconds);
  sqlite3_bind_double(s, i++, row->memory_mb_seconds);
  sqlite3_bind_double(s, i++, row->duration_seconds);
  sqlite3_bind_int64(s, i++, (int64_t)row->memory_peak_bytes);
  sq_bind_text(s, i, row->error_json);
}

int sq_execution_insert(struct sbx_store *st, const struct sbx_execution_row *row,
                        struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_EXE_INSERT,
              "INSERT INTO executions (" EXE_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
              " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              &s, err) < 0)
    return -1;
  int64_t created = row->created_at ? row->created_at : sbx_wall_s();
  sq_bind_head(s, row->id, row->tenant_id, row->status, row->reason, row->profile);
  sq_bind_text(s, 6, row->request_json);
  sq_bind_text(s, 7, row->metadata_json);
  bind_outcome(s, 8, row); /* ?8 … ?20 */
  sqlite3_bind_int64(s, 21, created);
  sqlite3_bind_int64(s, 22, row->started_at);
  sqlite3_bind_int64(s, 23, row->finished_at);
  sqlite3_bind_int64(s, 24, row->updated_at ? row->updated_at : created);
  sq_bind_text(s, 25, row->node_id);
  sqlite3_bind_int64(s, 26, (int64_t)row->oom_kills);
  return sq_exec_stmt(st, s, "insert execution", err);
}

/* Status of the tenant's execution id: 1 found (status copied), 0 not. */
static int exec_status(struct sbx_store *st, int64_t tenant_id, const char *id, char *status,
                       size_t size, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_EXE_EXISTS, "SELECT status FROM executions WHERE tenant_id = ? AND id = ?",
              &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, id);
  int rc = sq_step(s);
  if (rc == SQLITE_DONE)
    return 0;
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "read execution status", err);
  sq_col_copy(s, 0, status, size);
  return 1;
}

/* Why an UPDATE guarded by status matched nothing: gone, or wrong state. */
static int explain_no_change(struct sbx_store *st, int64_t tenant_id, const char *id,
                             const char *wanted, struct sbx_error *err)
{
  char status[16] = "";
  int found = exec_status(st, tenant_id, id, status, sizeof status, err);
  return sbx_store_explain_no_change(found, status, wanted, err);
}

static int load_files(struct sbx_store *st, struct sbx_execution_row *out, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_EXE_FILES,
              "SELECT f.path, f.size, f.sha256 FROM execution_files f"
              " JOIN executions e ON e.id = f.execution_id"
              " WHERE e.tenant_id = ? AND e.id = ? ORDER BY f.path",
              &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, out->tenant_id);
  sq_bind_text(s, 2, out->id);
  struct sq_rows files = {.elem = sizeof(struct sbx_exec_file_row)};
  int rc = sq_step(s);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
    struct sbx_exec_file_row *f = sq_rows_push(&files, err);
    if (!f) {
      free(files.v);
      return -1;
    }
    sq_col_copy(s, 0, f->path, sizeof f->path);
    f->size = (uint64_t)sqlite3_column_int64(s, 1);
    sq_col_copy(s, 2, f->sha256, sizeof f->sha256);
  }
  out->files = files.v;
  out->nfiles = files.n;
  if (rc != SQLITE_DONE)
    return sq_fail(st, rc, "list execution files", err);
  return 0;
}

int sq_execution_get(struct sbx_store *st, int64_t tenant_id, const char *id,
                     struct sbx_execution_row *out, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  if (sq_get_one(st, SQ_EXE_GET,
                 "SELECT " EXE_COLS " FROM executions WHERE tenant_id = ? AND id = ?", tenant_id,
                 id, exec_from_row, out, "execution", err) < 0)
    return -1;
  if (load_files(st, out, err) < 0) {
    sbx_execution_row_free(out);
    return -1;
  }
  return 0;
}

static const struct sq_kind executions =
    SBX_STORE_KIND(SQ, EXECUTIONS, exec_from_row, SQ_EXE, EXE_SUMMARY_COLS, "executions");

int sq_execution_list(struct sbx_store *st, int64_t tenant_id, const char *status,
                      const char *after, int limit, sbx_execution_cb cb, void *ctx,
                      struct sbx_error *err)
{
  return sq_list_page(st, &executions, tenant_id, status, after, limit,
                      (union sbx_store_cb){.execution = cb}, ctx, err);
}

int sq_execution_list_status(struct sbx_store *st, const char *status, sbx_execution_cb cb,
                             void *ctx, struct sbx_error *err)
{
  return sq_list_all(st, &executions, SQ_EXE_LIST_STATUS,
                     "SELECT " EXE_SUMMARY_COLS " FROM executions WHERE status = ?"
                     " ORDER BY created_at, id",
                     status, (union sbx_store_cb){.execution = cb}, ctx, err);
}

int sq_execution_start(struct sbx_store *st, int64_t tenant_id, const char *id,
                       const char *node_id, int64_t started_at, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_EXE_START,
              "UPDATE executions SET status = 'running', started_at = ?1, updated_at = ?2,"
              " node_id = COALESCE(?5, node_id)"
              " WHERE tenant_id = ?3 AND id = ?4 AND status = 'queued'",
              &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, started_at);
  sqlite3_bind_int64(s, 2, sbx_wall_s());
  sqlite3_bind_int64(s, 3, tenant_id);
  sq_bind_text(s, 4, id);
  sq_bind_text(s, 5, node_id);
  if (sq_exec_stmt(st, s, "start execution", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) == 0)
    return explain_no_change(st, tenant_id, id, "queued", err);
  return 0;
}

static int finish_row(struct sbx_store *st, const struct sbx_execution_row *row,
                      struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_EXE_FINISH,
              "UPDATE executions SET status = ?, reason = ?, exit_code = ?, term_signal = ?,"
              " stdout = ?, stdout_truncated = ?, stdout_dropped = ?,"
              " stderr = ?, stderr_truncated = ?, stderr_dropped = ?,"
              " cpu_seconds = ?, memory_mb_seconds = ?, duration_seconds = ?,"
              " memory_peak_bytes = ?, error_json = ?,"
              " started_at = CASE WHEN ? > 0 THEN ? ELSE started_at END,"
              " finished_at = ?, updated_at = ?, oom_kills = ?"
              " WHERE tenant_id = ? AND id = ? AND status IN ('queued', 'running')",
              &s, err) < 0)
    return -1;
  int64_t now = sbx_wall_s();
  sq_bind_text(s, 1, row->status);
  sq_bind_text(s, 2, row->reason);
  bind_outcome(s, 3, row); /* ?3 … ?15 */
  sqlite3_bind_int64(s, 16, row->started_at);
  sqlite3_bind_int64(s, 17, row->started_at);
  sqlite3_bind_int64(s, 18, row->finished_at ? row->finished_at : now);
  sqlite3_bind_int64(s, 19, now);
  sqlite3_bind_int64(s, 20, (int64_t)row->oom_kills);
  sqlite3_bind_int64(s, 21, row->tenant_id);
  sq_bind_text(s, 22, row->id);
  if (sq_exec_stmt(st, s, "finish execution", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) == 0)
    return explain_no_change(st, row->tenant_id, row->id, "queued or running", err);
  return 0;
}

static int insert_file(struct sbx_store *st, const char *exec_id,
                       const struct sbx_exec_file_blob *f, struct sbx_error *err)
{
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_EXE_FILE_INSERT,
              "INSERT INTO execution_files (execution_id, path, size, sha256, content)"
              " VALUES (?, ?, ?, ?, ?)",
              &s, err) < 0)
    return -1;
  sq_bind_text(s, 1, exec_id);
  sq_bind_text(s, 2, f->path);
  sqlite3_bind_int64(s, 3, (int64_t)f->size);
  sq_bind_text(s, 4, f->sha256);
  sq_bind_blob(s, 5, f->data, f->size);
  if (sq_exec_stmt(st, s, "store collected file", err) < 0)
    return sbx_err_prefix(err, "%s", f->path);
  return 0;
}

int sq_execution_finish(struct sbx_store *st, const struct sbx_execution_row *row,
                        const struct sbx_exec_file_blob *files, size_t nfiles,
                        const struct sbx_usage_row *usage, struct sbx_error *err)
{
  if (!sq_exec_status_final(row->status))
    return sbx_err_set(err, SBX_E_INTERNAL, 0,
                       "store: execution_finish needs a final status, got '%s'", row->status);
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  if (sq_begin(st, err) < 0)
    return -1;
  int ret = finish_row(st, row, err);
  for (size_t i = 0; ret == 0 && i < nfiles; i++)
    ret = insert_file(st, row->id, &files[i], err);
  if (ret == 0 && usage)
    ret = sq_usage_insert_row(st, usage, err);
  if (ret < 0) {
    sq_rollback(st);
    return -1;
  }
  return sq_commit(st, err);
}

int sq_execution_file_get(struct sbx_store *st, int64_t tenant_id, const char *id,
                          const char *path, void **data, size_t *size, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(
          st, SQ_EXE_FILE_GET,
          "SELECT f.content FROM execution_files f JOIN executions e ON e.id = f.execution_id"
          " WHERE e.tenant_id = ? AND e.id = ? AND f.path = ?",
          &s, err) < 0)
    return -1;
  sqlite3_bind_int64(s, 1, tenant_id);
  sq_bind_text(s, 2, id);
  sq_bind_text(s, 3, path);
  int rc = sq_step(s);
  if (rc == SQLITE_ROW)
    return sq_col_blobdup(s, 0, (char **)data, size, err);
  if (rc != SQLITE_DONE)
    return sq_fail(st, rc, "get execution file", err);
  char status[16];
  int found = exec_status(st, tenant_id, id, status, sizeof status, err);
  if (found < 0)
    return -1;
  return sbx_err_set(err, SBX_E_NOT_FOUND, 0, found ? "file not found" : "execution not found");
}

int sq_execution_count(struct sbx_store *st, int64_t tenant_id, const char *status,
                       int64_t *count, struct sbx_error *err)
{
  return sq_count(st, SQ_EXE_COUNT, SQ_COUNT_SQL("executions"), tenant_id, status, count, err);
}
