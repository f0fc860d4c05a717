/* handlers.h — every API handler, one file per resource:
 * h_platform.c (health, readiness, profiles), h_sessions.c, h_files.c,
 * h_executions.c.  Each follows sbx_handler_fn (http.h). */
#ifndef SBX_API_HANDLERS_H
#define SBX_API_HANDLERS_H

#include "api/http.h"

#define SBX_HANDLER(name) int name(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)

SBX_HANDLER(sbx_h_healthz);
SBX_HANDLER(sbx_h_readyz);
SBX_HANDLER(sbx_h_profiles);
SBX_HANDLER(sbx_h_session_create);
SBX_HANDLER(sbx_h_session_list);
SBX_HANDLER(sbx_h_session_get);
SBX_HANDLER(sbx_h_session_patch);
SBX_HANDLER(sbx_h_session_delete);
SBX_HANDLER(sbx_h_session_exec);
SBX_HANDLER(sbx_h_files_put);
SBX_HANDLER(sbx_h_files_get);
SBX_HANDLER(sbx_h_files_delete);
/* Issue 4, files/archives/watch (engineer B): h_files.c, h_archive.c, h_watch.c. */
SBX_HANDLER(sbx_h_files_mkdir);
SBX_HANDLER(sbx_h_files_move);
SBX_HANDLER(sbx_h_archive_get);
SBX_HANDLER(sbx_h_archive_put);
SBX_HANDLER(sbx_h_watch);
SBX_HANDLER(sbx_h_execution_create);
SBX_HANDLER(sbx_h_execution_list);
SBX_HANDLER(sbx_h_execution_get);
SBX_HANDLER(sbx_h_execution_file);
SBX_HANDLER(sbx_h_execution_cancel);
/* Issue 4, ports and contexts: h_ports.c, h_contexts.c. */
SBX_HANDLER(sbx_h_port_proxy);
SBX_HANDLER(sbx_h_context_create);
SBX_HANDLER(sbx_h_context_list);
SBX_HANDLER(sbx_h_context_get);
SBX_HANDLER(sbx_h_context_delete);
SBX_HANDLER(sbx_h_context_run);
SBX_HANDLER(sbx_h_context_restart);
/* Issue 7: the image store (h_images.c). */
SBX_HANDLER(sbx_h_image_list);
SBX_HANDLER(sbx_h_image_pull);
SBX_HANDLER(sbx_h_image_delete);
SBX_HANDLER(sbx_h_image_gc);
/* Issue 8, engineer O: audit, usage, metrics (h_obs.c). */
SBX_HANDLER(sbx_h_audit_list);
SBX_HANDLER(sbx_h_audit_verify);
SBX_HANDLER(sbx_h_usage);
SBX_HANDLER(sbx_h_metrics);
/* The dispatcher's audit hook: every mutation (resp set on success, err on
 * failure) and every refusal (401, 403, 429, limits/network over policy)
 * becomes an audit event; refusals are rate-limited per source. */
void sbx_api_audit(struct sbx_req *r, const struct sbx_resp *resp, const struct sbx_error *err);
/* Issue 4, streaming exec and background processes: h_stream.c,
 * h_processes.c.  The exec handler (h_sessions.c) hands a background body
 * to sbx_api_process_start and an event-stream request to
 * sbx_api_exec_stream. */
SBX_HANDLER(sbx_h_process_list);
SBX_HANDLER(sbx_h_process_get);
SBX_HANDLER(sbx_h_process_output);
SBX_HANDLER(sbx_h_process_stdin);
SBX_HANDLER(sbx_h_process_signal);
SBX_HANDLER(sbx_h_process_resize);
int sbx_api_process_start(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                          struct sbx_error *err);
int sbx_api_exec_stream(struct sbx_req *r, struct sbx_resp *out, json_t *body,
                        struct sbx_error *err);
/* An output chunk as an SSE event's data: {data|data_base64, offset}. */
json_t *sbx_api_chunk_json(const char *data, size_t len, uint64_t offset);

/* The E2B-compatible surface: api/e2b_api.c, e2b_process.c, e2b_fs.c,
 * e2b_files.c, e2b_code.c (api/e2b.h). */
SBX_HANDLER(sbx_h_e2b_discovery);
SBX_HANDLER(sbx_h_e2b_create);
SBX_HANDLER(sbx_h_e2b_list);
SBX_HANDLER(sbx_h_e2b_get);
SBX_HANDLER(sbx_h_e2b_kill);
SBX_HANDLER(sbx_h_e2b_timeout);
SBX_HANDLER(sbx_h_e2b_connect);
SBX_HANDLER(sbx_h_e2b_pause);
SBX_HANDLER(sbx_h_e2b_resume);
SBX_HANDLER(sbx_h_e2b_snapshot);
SBX_HANDLER(sbx_h_e2b_metrics);
SBX_HANDLER(sbx_h_e2b_templates);
SBX_HANDLER(sbx_h_e2b_volumes);
SBX_HANDLER(sbx_h_e2b_health);
SBX_HANDLER(sbx_h_e2b_files_get);
SBX_HANDLER(sbx_h_e2b_files_post);
SBX_HANDLER(sbx_h_e2b_proc_start);
SBX_HANDLER(sbx_h_e2b_proc_connect);
SBX_HANDLER(sbx_h_e2b_proc_list);
SBX_HANDLER(sbx_h_e2b_proc_input);
SBX_HANDLER(sbx_h_e2b_proc_close_stdin);
SBX_HANDLER(sbx_h_e2b_proc_signal);
SBX_HANDLER(sbx_h_e2b_proc_update);
SBX_HANDLER(sbx_h_e2b_proc_stream_input);
SBX_HANDLER(sbx_h_e2b_fs_stat);
SBX_HANDLER(sbx_h_e2b_fs_list);
SBX_HANDLER(sbx_h_e2b_fs_mkdir);
SBX_HANDLER(sbx_h_e2b_fs_move);
SBX_HANDLER(sbx_h_e2b_fs_remove);
SBX_HANDLER(sbx_h_e2b_fs_watch);
SBX_HANDLER(sbx_h_e2b_fs_watchers);
SBX_HANDLER(sbx_h_e2b_execute);
SBX_HANDLER(sbx_h_e2b_ctx_create);
SBX_HANDLER(sbx_h_e2b_ctx_list);
SBX_HANDLER(sbx_h_e2b_ctx_delete);
SBX_HANDLER(sbx_h_e2b_ctx_restart);

#endif
