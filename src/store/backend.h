/* backend.h — what the two storage backends (sqlite/, postgres/) share
 * beyond the seam itself: the list of table ops, written once.  Each
 * backend declares its implementations and fills its ops table from this
 * list, with the types taken from struct sbx_store_ops, so a signature
 * that drifts from the seam is a compile error in both backends. */
#ifndef SBX_STORE_BACKEND_H
#define SBX_STORE_BACKEND_H

#include "store/store.h"

/* Every op of struct sbx_store_ops except name/open/close/ping, which
 * each backend writes by hand. */
/* clang-format off */
#define SBX_STORE_TABLE_OPS(X)                                                            \
  X(tenant_ensure) X(key_insert) X(key_get)                                               \
  X(session_insert) X(session_get) X(session_list) X(session_list_ready)                  \
  X(session_set_status) X(session_update) X(session_touch) X(session_count)               \
  X(execution_insert) X(execution_get) X(execution_list) X(execution_start)               \
  X(execution_finish) X(execution_file_get) X(execution_list_status) X(execution_count)   \
  X(audit_append) X(audit_list) X(audit_scan)                                             \
  X(usage_insert) X(usage_query) X(outbox_due) X(outbox_mark)                             \
  X(tool_put) X(tool_get) X(tool_list) X(tool_delete) X(tool_count)
/* clang-format on */

/* The columns of each table, in the order both backends select them
 * (column numbers in their from_row decoders follow this order). */
#define SES_COLS                                                                                \
  "id, tenant_id, status, reason, profile, runtime, image, limits_json, network_json,"          \
  " metadata_json, env_json, ttl_s, created_at, updated_at, expires_at, last_used_at, node_id"
/* Full rows (get) carry the output; list rows select NULL in its place. */
#define EXE_COLS                                                                                \
  "id, tenant_id, status, reason, profile, request_json, metadata_json, exit_code,"             \
  " term_signal, stdout, stdout_truncated, stdout_dropped, stderr, stderr_truncated,"           \
  " stderr_dropped, cpu_seconds, memory_mb_seconds, duration_seconds, memory_peak_bytes,"       \
  " error_json, created_at, started_at, finished_at, updated_at, node_id, oom_kills"
#define EXE_SUMMARY_COLS                                                                        \
  "id, tenant_id, status, reason, profile, request_json, metadata_json, exit_code,"             \
  " term_signal, NULL, stdout_truncated, stdout_dropped, NULL, stderr_truncated,"               \
  " stderr_dropped, cpu_seconds, memory_mb_seconds, duration_seconds, memory_peak_bytes,"       \
  " error_json, created_at, started_at, finished_at, updated_at, node_id, oom_kills"
#define AUD_COLS                                                                                \
  "seq, time_ms, tenant_id, actor, action, target, outcome, details_json, "                     \
  "prev_hash, hash"
#define TOOL_COLS                                                                               \
  "tenant_id, name, profile, image, digest, manifest_json, generation, created_at, updated_at"
#define USE_COLS                                                                                \
  "id, tenant_id, tenant_name, kind, source_id, profile, status, project, agent, run,"          \
  " cpu_seconds, memory_mb_seconds, duration_seconds, created_at, delivery, attempts,"          \
  " next_attempt_at, delivered_at, last_error"

/* The tables the backends' list ops page through (each backend's list.c),
 * with what differs between them: the row type and the callback. */
enum sbx_store_table { SBX_STORE_SESSIONS, SBX_STORE_EXECUTIONS, SBX_STORE_TOOLS };
union sbx_store_cb {
  sbx_session_cb session;
  sbx_execution_cb execution;
  sbx_tool_cb tool;
};
/* A backend's list kind (struct sq_kind, pg_kind) for TABLE (SESSIONS,
 * EXECUTIONS): rows decoded by from, statements in slots SLOTS_CURSOR and
 * SLOTS_LIST made by the backend's B_CURSOR_SQL/B_PAGE_SQL, listing cols. */
#define SBX_STORE_KIND(B, TABLE, from, SLOTS, cols, name)                                       \
  {                                                                                             \
    .table = SBX_STORE_##TABLE, .from_row = from, .cursor_slot = SLOTS##_CURSOR,                \
    .cursor_sql = B##_CURSOR_SQL(name), .page_slot = SLOTS##_LIST,                              \
    .page_sql = B##_PAGE_SQL(cols, name)                                                        \
  }
/* "sessions", "executions", "tools" (messages). */
const char *sbx_store_table_name(enum sbx_store_table t);
size_t sbx_store_row_size(enum sbx_store_table t);
/* Calls the table's callback in cb with row. */
int sbx_store_row_call(enum sbx_store_table t, union sbx_store_cb cb, void *ctx,
                       const void *row);
void sbx_store_row_free(enum sbx_store_table t, void *row);

/* Why an UPDATE of an execution guarded by its status matched nothing:
 * found < 0 (the lookup failed, err set), 0 (gone: NOT_FOUND), else it is
 * in status, not in wanted (CONFLICT).  Returns -1. */
int sbx_store_explain_no_change(int found, const char *status, const char *wanted,
                                struct sbx_error *err);

/* The function type of op `op` in the seam. */
#define SBX_STORE_OP_TYPE(op) __typeof__(*((struct sbx_store_ops *)0)->op)

#endif
