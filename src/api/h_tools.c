/* h_tools.c — /v1/manifests/apply and /v1/tools[/{name}[/invoke]]: the
 * HTTP face of core/tools.c (docs/tools.md).  A 400 that lists JSON Schema
 * violations carries them in the error envelope's details. */
#include <stdio.h>

#include "api/envelope.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/core.h"

/* The failure of an apply or invoke; its violations (if any) go into the
 * envelope, in the request's language. */
static int refused(struct sbx_req *r, json_t *violations)
{
  if (violations) {
    sbx_envelope_localise(violations, r->lang);
    r->error_details = json_pack("{s:o}", "violations", violations);
  }
  return -1;
}

int sbx_h_tool_apply(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *violations = NULL;
  json_t *res = sbx_tools_apply(r->core, &r->who, r->body, r->body_len,
                                sbx_req_flag(r, "dry_run"), &violations, err);
  if (!res)
    return refused(r, violations);
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_tool_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  int limit;
  const char *cursor;
  if (sbx_api_page(r, &limit, &cursor, err) < 0)
    return -1;
  json_t *res = sbx_tool_list(r->core, &r->who, cursor, limit, err);
  if (!res)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_tool_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res = sbx_tool_get(r->core, &r->who, r->params[0], err);
  if (!res)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_tool_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  if (sbx_tool_delete(r->core, &r->who, r->params[0], err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_tool_invoke(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *violations = NULL;
  json_t *res =
      sbx_tool_invoke(r->core, &r->who, r->params[0], r->body, r->body_len, &violations, err);
  if (!res)
    return refused(r, violations);
  snprintf(out->location, sizeof out->location, "/v1/sandbox/executions/%s",
           json_string_value(json_object_get(res, "id")));
  sbx_resp_json(out, 202, res);
  return 0;
}
