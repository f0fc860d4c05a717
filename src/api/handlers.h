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
SBX_HANDLER(sbx_h_execution_create);
SBX_HANDLER(sbx_h_execution_list);
SBX_HANDLER(sbx_h_execution_get);
SBX_HANDLER(sbx_h_execution_file);
SBX_HANDLER(sbx_h_execution_cancel);

#endif
