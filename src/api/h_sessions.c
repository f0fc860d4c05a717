/* h_sessions.c — /v1/sandbox/sessions[/{id}[/exec]]. */
#include "api/collection.h"
#include "api/handlers.h"
#include "api/sse.h"
#include "core/core.h"

/* An empty body is a session with every default. */
static const struct sbx_api_collection sessions = {"/v1/sandbox/sessions", true, 201,
                                                   sbx_session_create, sbx_session_list};

/* A create whose place on this node a fleet placement reserved. */
static int create_placed(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                         json_t **out, struct sbx_error *err)
{
  return sbx_session_create_placed(core, who, body, true, out, err);
}
static const struct sbx_api_collection placed_sessions = {"/v1/sandbox/sessions", true, 201,
                                                          create_placed, sbx_session_list};

int sbx_h_session_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return sbx_api_create(r->placed_here ? &placed_sessions : &sessions, r, out, err);
}

int sbx_h_session_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return sbx_api_list(&sessions, r, out, err);
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
