/* h_executions.c — /v1/sandbox/executions[/{id}[/files|/cancel]]. */
#include <stdlib.h>

#include "api/collection.h"
#include "api/handlers.h"
#include "core/core.h"

/* A body is required (the command); 202: queued, not run yet. */
static const struct sbx_api_collection executions = {"/v1/sandbox/executions", false, 202,
                                                     sbx_execution_create, sbx_execution_list};

int sbx_h_execution_create(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return sbx_api_create(&executions, r, out, err);
}

int sbx_h_execution_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return sbx_api_list(&executions, r, out, err);
}

int sbx_h_execution_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  double wait_s = 0;
  const char *w = sbx_req_query(r, "wait_s");
  if (w) {
    char *end;
    wait_s = strtod(w, &end);
    if (*end || end == w || !(wait_s >= 0 && wait_s <= 60)) {
      sbx_err_field(err, "wait_s", "wait_s must be a number of seconds from 0 to 60");
      return sbx_err_fr(err,
                        "Requête invalide : wait_s doit être un nombre de secondes de 0 à 60");
    }
  }
  json_t *res;
  if (sbx_execution_get(r->core, &r->who, r->params[0], wait_s, &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

int sbx_h_execution_file(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *path = sbx_req_query(r, "path");
  if (!path || !*path) {
    sbx_err_field(err, "path", "the path query parameter is required");
    return sbx_err_fr(err, "Requête invalide : le paramètre path est requis");
  }
  void *data;
  size_t size;
  if (sbx_execution_file(r->core, &r->who, r->params[0], path, &data, &size, err) < 0)
    return -1;
  sbx_resp_bytes(out, 200, data, size, "application/octet-stream");
  return 0;
}

int sbx_h_execution_cancel(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res;
  if (sbx_execution_cancel(r->core, &r->who, r->params[0], &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}
