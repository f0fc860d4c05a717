/* h_sessions.c — /v1/sandbox/sessions[/{id}[/exec]]. */
#include "api/handlers.h"
#include "api/pagination.h"
#include "api/sse.h"
#include "core/core.h"

int sbx_h_session_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, true, err), *res = NULL;
  if (!body)
    return -1;
  int rc = sbx_session_create(r->core, &r->who, body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  snprintf(out->location, sizeof out->location, "/v1/sandbox/sessions/%s",
           json_string_value(json_object_get(res, "id")));
  sbx_resp_json(out, 201, res);
  return 0;
}

int sbx_h_session_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  int limit;
  const char *cursor;
  json_t *res;
  if (sbx_api_page(r, &limit, &cursor, err) < 0 ||
      sbx_session_list(r->core, &r->who, sbx_req_query(r, "status"), cursor, limit, &res, err) <
          0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_session_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res;
  if (sbx_session_get(r->core, &r->who, r->params[0], &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_session_patch(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err), *res = NULL;
  if (!body)
    return -1;
  int rc = sbx_session_patch(r->core, &r->who, r->params[0], body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_session_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  if (sbx_session_delete(r->core, &r->who, r->params[0], err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_session_exec(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err), *res = NULL;
  if (!body)
    return -1;
  int rc;
  /* Background → 202 {pid}; Accept: text/event-stream → SSE. */
  if (json_is_true(json_object_get(body, "background"))) {
    rc = sbx_api_process_start(r, out, body, err);
    json_decref(body);
    return rc;
  }
  if (sbx_req_wants_sse(r)) {
    rc = sbx_api_exec_stream(r, out, body, err);
    json_decref(body);
    return rc;
  }
  rc = sbx_session_exec(r->core, &r->who, r->params[0], body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}
