/* handlers.h — every API handler, one file per resource:
 * h_platform.c (health, readiness, profiles), h_sessions.c, h_files.c,
 * h_executions.c.  Each is an sbx_handler (http.h). */
#ifndef SBX_API_HANDLERS_H
#define SBX_API_HANDLERS_H

#include "api/http.h"

sbx_handler sbx_h_healthz, sbx_h_readyz, sbx_h_profiles, sbx_h_session_create,
    sbx_h_session_list, sbx_h_session_get, sbx_h_session_patch, sbx_h_session_delete,
    sbx_h_session_exec, sbx_h_files_put, sbx_h_files_get, sbx_h_files_delete;
/* Directories, archives and watch: h_files.c, h_archive.c, h_watch.c. */
sbx_handler sbx_h_files_mkdir, sbx_h_files_move, sbx_h_archive_get, sbx_h_archive_put,
    sbx_h_watch, sbx_h_execution_create, sbx_h_execution_list, sbx_h_execution_get,
    sbx_h_execution_file, sbx_h_execution_cancel;
/* Ports and contexts: h_ports.c, h_contexts.c. */
sbx_handler sbx_h_port_proxy, sbx_h_context_create, sbx_h_context_list, sbx_h_context_get,
    sbx_h_context_delete, sbx_h_context_run, sbx_h_context_restart;
/* JSON Schema contracts (h_contracts.c). */
sbx_handler sbx_h_contract_list, sbx_h_contract_get, sbx_h_contract_validate;
/* Tools from tool manifests (h_tools.c). */
sbx_handler sbx_h_tool_apply, sbx_h_tool_list, sbx_h_tool_get, sbx_h_tool_delete,
    sbx_h_tool_invoke;
/* The image store (h_images.c). */
sbx_handler sbx_h_image_list, sbx_h_image_pull, sbx_h_image_delete, sbx_h_image_gc;
/* Audit, usage, metrics (h_obs.c). */
sbx_handler sbx_h_audit_list, sbx_h_audit_verify, sbx_h_usage, sbx_h_metrics;
sbx_handler sbx_h_cluster_nodes;
/* The dispatcher's audit hook: every mutation (resp set on success, err on
 * failure) and every refusal (401, 403, 429, limits/network over policy)
 * becomes an audit event; refusals are rate-limited per source. */
void sbx_api_audit(struct sbx_req *r, const struct sbx_resp *resp, const struct sbx_error *err);
/* Streaming exec and background processes: h_stream.c,
 * h_processes.c.  The exec handler (h_sessions.c) hands a background body
 * to sbx_api_process_start and an event-stream request to
 * sbx_api_exec_stream. */
sbx_handler sbx_h_process_list, sbx_h_process_get, sbx_h_process_output, sbx_h_process_stdin,
    sbx_h_process_signal, sbx_h_process_resize;
int sbx_api_process_start(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                          struct sbx_error *err);
int sbx_api_exec_stream(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                        struct sbx_error *err);
/* An output chunk as an SSE event's data: {data|data_base64, offset}. */
json_t *sbx_api_chunk_json(const char *data, size_t len, uint64_t offset);

/* The E2B-compatible surface: api/e2b_api.c, e2b_process.c, e2b_fs.c,
 * e2b_files.c, e2b_code.c (api/e2b.h). */
sbx_handler sbx_h_e2b_discovery, sbx_h_e2b_create, sbx_h_e2b_list, sbx_h_e2b_get, sbx_h_e2b_kill,
    sbx_h_e2b_timeout, sbx_h_e2b_connect, sbx_h_e2b_pause, sbx_h_e2b_resume, sbx_h_e2b_snapshot,
    sbx_h_e2b_metrics, sbx_h_e2b_templates, sbx_h_e2b_volumes, sbx_h_e2b_health,
    sbx_h_e2b_files_get, sbx_h_e2b_files_post, sbx_h_e2b_proc_start, sbx_h_e2b_proc_connect,
    sbx_h_e2b_proc_list, sbx_h_e2b_proc_input, sbx_h_e2b_proc_close_stdin, sbx_h_e2b_proc_signal,
    sbx_h_e2b_proc_update, sbx_h_e2b_proc_stream_input, sbx_h_e2b_fs_stat, sbx_h_e2b_fs_list,
    sbx_h_e2b_fs_mkdir, sbx_h_e2b_fs_move, sbx_h_e2b_fs_remove, sbx_h_e2b_fs_watch,
    sbx_h_e2b_fs_watchers, sbx_h_e2b_execute, sbx_h_e2b_ctx_create, sbx_h_e2b_ctx_list,
    sbx_h_e2b_ctx_delete, sbx_h_e2b_ctx_restart;

#endif
