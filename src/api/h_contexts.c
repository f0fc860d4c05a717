/* h_contexts.c — /v1/sandbox/sessions/{id}/contexts[/{cid}[/run|/restart]]:
 * stateful interpreters.  The work is core/context*.c. */
#include "api/handlers.h"
#include "core/core.h"

int sbx_h_context_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err);
  if (!body)
    return -1;
  json_t *o = NULL;
  int rc = sbx_context_create(r->core, &r->who, r->params[0], body, &o, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 201, o);
  return 0;
}

int sbx_h_context_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *o = NULL;
  if (sbx_context_list(r->core, &r->who, r->params[0], &o, err) < 0)
    return -1;
  sbx_resp_json(out, 200, o);
  return 0;
}

int sbx_h_context_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *o = NULL;
  if (sbx_context_get(r->core, &r->who, r->params[0], r->params[1], &o, err) < 0)
    return -1;
  sbx_resp_json(out, 200, o);
  return 0;
}

int sbx_h_context_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  if (sbx_context_delete(r->core, &r->who, r->params[0], r->params[1], err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_context_run(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, false, err);
  if (!body)
    return -1;
  json_t *o = NULL;
  int rc = sbx_context_run(r->core, &r->who, r->params[0], r->params[1], body, &o, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, o);
  return 0;
}

int sbx_h_context_restart(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *o = NULL;
  if (sbx_context_restart(r->core, &r->who, r->params[0], r->params[1], &o, err) < 0)
    return -1;
  sbx_resp_json(out, 200, o);
  return 0;
}
