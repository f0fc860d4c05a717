/* handlers.h — every API handler, one file per resource:
 * h_platform.c (health, readiness, profiles), h_sessions.c, h_files.c,
 * h_executions.c.  Each follows sbx_handler_fn (http.h). */
#ifndef SBX_API_HANDLERS_H
#define SBX_API_HANDLERS_H

#include "api/http.h"

int sbx_h_healthz(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_readyz(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_profiles(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_session_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_session_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_session_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_session_patch(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_session_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_session_exec(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_files_put(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_files_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_files_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* Directories, archives and watch: h_files.c, h_archive.c, h_watch.c. */
int sbx_h_files_mkdir(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_files_move(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_archive_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_archive_put(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_watch(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_execution_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_execution_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_execution_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_execution_file(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_execution_cancel(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* Ports and contexts: h_ports.c, h_contexts.c. */
int sbx_h_port_proxy(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_context_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_context_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_context_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_context_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_context_run(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_context_restart(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* JSON Schema contracts (h_contracts.c). */
int sbx_h_contract_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_contract_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_contract_validate(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* Tools from tool manifests (h_tools.c). */
int sbx_h_tool_apply(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_tool_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_tool_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_tool_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_tool_invoke(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* The image store (h_images.c). */
int sbx_h_image_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_image_pull(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_image_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_image_gc(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* Audit, usage, metrics (h_obs.c). */
int sbx_h_audit_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_audit_verify(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_usage(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_cluster_nodes(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_metrics(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
/* The dispatcher's audit hook: every mutation (resp set on success, err on
 * failure) and every refusal (401, 403, 429, limits/network over policy)
 * becomes an audit event; refusals are rate-limited per source. */
void sbx_api_audit(struct sbx_req *r, const struct sbx_resp *resp, const struct sbx_error *err);
/* Streaming exec and background processes: h_stream.c,
 * h_processes.c.  The exec handler (h_sessions.c) hands a background body
 * to sbx_api_process_start and an event-stream request to
 * sbx_api_exec_stream. */
int sbx_h_process_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_process_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_process_output(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_process_stdin(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_process_signal(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_process_resize(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_api_process_start(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                          struct sbx_error *err);
int sbx_api_exec_stream(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                        struct sbx_error *err);
/* An output chunk as an SSE event's data: {data|data_base64, offset}. */
json_t *sbx_api_chunk_json(const char *data, size_t len, uint64_t offset);

/* The E2B-compatible surface: api/e2b_api.c, e2b_process.c, e2b_fs.c,
 * e2b_files.c, e2b_code.c (api/e2b.h). */
int sbx_h_e2b_discovery(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_kill(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_timeout(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_connect(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_pause(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_resume(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_snapshot(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_metrics(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_templates(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_volumes(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_health(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_files_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_files_post(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_start(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_connect(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_input(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_close_stdin(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_signal(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_update(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_proc_stream_input(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_stat(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_mkdir(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_move(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_remove(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_watch(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_fs_watchers(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_execute(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_ctx_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_ctx_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_ctx_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);
int sbx_h_e2b_ctx_restart(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err);

#endif
