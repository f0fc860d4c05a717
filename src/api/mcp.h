/* mcp.h — the MCP server: Model Context Protocol over the Streamable HTTP
 * transport at /mcp, on the API's own listener and behind its own API keys.
 *
 * mcp.c owns the transport: JSON-RPC 2.0 framing, protocol version
 * negotiation, the Mcp-Session-Id table (each MCP session bound to the
 * tenant that opened it) and the routes' handlers.  mcp_tools.c owns the
 * tools: their JSON schemas and their calls into core, each one audited as
 * the equivalent REST route would be.  docs/mcp.md is the user's view. */
#ifndef SBX_API_MCP_H
#define SBX_API_MCP_H

#include <jansson.h>

#include "api/handlers.h"

sbx_handler sbx_h_mcp_post, sbx_h_mcp_delete;

/* The tools array of a tools/list result (new reference). */
json_t *sbx_mcp_tools_list(struct sbx_req *r);

/* Runs tool `name` with `args` (borrowed object) as r's principal and
 * returns a CallToolResult (new reference): a failure of the tool — bad
 * arguments, a refusal, a session not found — is a result with isError
 * true, so the model reads it.  NULL only when no tool has that name (the
 * caller answers a JSON-RPC error). */
json_t *sbx_mcp_tool_call(struct sbx_req *r, const char *name, json_t *args);

/* tools/call of session_exec with a progressToken, from a client that
 * accepts an event stream: answers on `out` as text/event-stream, each
 * output chunk a notifications/progress (its text in `message`), then the
 * response.  Returns 1 when it took the call, 0 to answer it buffered (not
 * that kind of call, or the exec did not start: the buffered call then
 * reports the same refusal). */
int sbx_mcp_tool_stream(struct sbx_req *r, struct sbx_resp *out, json_t *id, json_t *params);

#endif
